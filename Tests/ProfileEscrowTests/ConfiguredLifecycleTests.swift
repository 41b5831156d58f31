import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import GRDB
import Testing

@testable import ProfileEscrow

/// Every change a store applies is decided by the escrow's own lifecycle, the one its configuration makes: no path
/// builds a default one of its own (the malformed rows' purge at retention did, in the store engine).
@Suite("The configured lifecycle reaches every store path")
struct ConfiguredLifecycleTests {
    @Test func theSweepPurgesMalformedRowsWithTheConfiguredLifecycle() async throws {
        let fixture = try await ReplayFixture(maxAttempts: 3, confirmTimeout: 120, retention: 60)
        defer { Task { await fixture.stub.stop() } }
        let ids = try await fixture.capture(0..<2, ago: 120)
        try await fixture.harness.tamper("UPDATE escrow SET attempts = -5 WHERE id = ?", [Data(ids[0].bytes)])
        let observed = ObservedStore(fixture.store)

        #expect(try await fixture.escrow(over: observed).sweep() == 2, "the intact escrow and the malformed row")

        let given = observed.purgeLifecycles
        #expect(given.count == 1)
        #expect(given.map(\.policy) == [ReplayFixture.retryPolicy(maxAttempts: 3)], "not the default 50 attempts")
        #expect(given.map(\.confirmTimeout) == [120], "not the default hour")
        let purged = try await fixture.allEvents().filter { $0.type == .purged }
        #expect(purged.compactMap(\.detail) == ["expired", "expired"])
    }
}
