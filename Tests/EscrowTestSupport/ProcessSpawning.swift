public import Foundation
import NIOConcurrencyHelpers

extension Process {
    /// One child started at a time across the test process. swift-corelibs-foundation's `Process.run()` crashed twice
    /// in a full suite (a `memcpy` past mapped memory inside it) while parallel tests started children at once; a
    /// start takes a few milliseconds, so serializing them costs nothing measurable and keeps the runs apart.
    public func runSerialized() throws {
        try Self.spawning.withLock { try run() }
    }

    private static let spawning = NIOLock()
}
