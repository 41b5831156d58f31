import EscrowCore
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The token store's lookups, kept between requests for as long as the file has not changed: every request of the
/// HTTP API checks its bearer token, and a read through GRDB costs a hop to the reader's thread and back and a query,
/// for a table that changes a few times a year.
///
/// Whether the file changed is read from the file itself, with no lock and no SQLite call: the 4-byte change counter
/// at offset 24 of a SQLite file's header, which SQLite increments with every transaction that writes, in
/// rollback-journal mode (the token store's mode), whatever process writes. A lookup reads the counter (one `pread`
/// on a descriptor opened once, so it reads the same file as the store's own connection); when it differs from the
/// one the cached entries were read under, the cache is dropped and the store is read again. An entry is tagged with
/// the counter read *before* its query, so a write racing the query only makes the next lookup read again. Nothing
/// is cached when the header says WAL mode (bytes 18 and 19: 2), in which writes do not touch the counter, nor for a
/// hash no token has (a guess must not fill memory). So a token added, revoked or removed by any process is seen by
/// the next request, as without the cache.
///
/// Written by hand: GRDB's `DatabaseRegionObservation` sees only this process's writes, and `PRAGMA data_version`
/// is itself a query on the reader's thread.
final class TokenLookupCache: Sendable {
    /// The file's change counter the entries were read under.
    typealias Version = UInt32

    private struct State: Sendable {
        var version: Version?
        var entries: [[UInt8]: AccessTokenRecord] = [:]
        /// The file, opened at the first lookup to read its header.
        var descriptor: Int32 = -1
    }

    /// The most entries kept (tokens in use at once); beyond it the cache starts over.
    static let capacity = 1_024

    private let path: String
    private let state = NIOLockedValueBox(State())

    init(path: String) {
        self.path = path
    }

    deinit {
        state.withLockedValue { if $0.descriptor >= 0 { close($0.descriptor) } }
    }

    /// The file's change counter now; nil when it cannot be read or the file is in WAL mode.
    func currentVersion() -> Version? {
        // The descriptor is opened once and closed only by deinit: the read itself needs no lock.
        let descriptor = state.withLockedValue { state -> Int32 in
            if state.descriptor < 0 { state.descriptor = open(path, O_RDONLY | O_CLOEXEC) }
            return state.descriptor
        }
        guard descriptor >= 0 else { return nil }
        var header = [UInt8](repeating: 0, count: 28)
        guard pread(descriptor, &header, header.count, 0) == header.count else { return nil }
        guard header[18] == 1, header[19] == 1 else { return nil }  // not a rollback-journal file
        return header[24..<28].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// The cached record for `hash` when the file is as it was when it was read; nil otherwise.
    func record(hash: [UInt8], at version: Version?) -> AccessTokenRecord? {
        guard let version else { return nil }
        return state.withLockedValue { state in
            guard state.version == version else {
                state.version = nil
                state.entries = [:]
                return nil
            }
            return state.entries[hash]
        }
    }

    /// Keeps `record`, read under `version` (read before the query).
    func keep(_ record: AccessTokenRecord, hash: [UInt8], readUnder version: Version?) {
        guard let version else { return }
        state.withLockedValue { state in
            if state.version != version || state.entries.count >= Self.capacity {
                state.version = version
                state.entries = [:]
            }
            state.entries[hash] = record
        }
    }
}
