import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import GRDB
import Logging
import ProfileEscrow

/// Holds one benchmark's state between its setup, iterations and teardown.
final class Box<Value>: @unchecked Sendable {
    var value: Value?
    var counter = 0
}

enum Fixtures {
    /// Cached large databases (100k/1M audit events, 1M live escrows): built once, reused by later runs.
    static let cacheDirectory = FileManager.default.currentDirectoryPath + "/.benchmarkData"
    static let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }

    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "escrow-bench-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func userIdentifier(_ number: Int) -> String {
        "000000.bench\(String(format: "%027d", number)).0001"
    }

    /// An obviously fake profile, validated as a real one would be.
    static func profile(_ number: Int) throws -> Profile {
        try Profile(
            userIdentifier: userIdentifier(number),
            fullName: PersonName(givenName: "Testy", familyName: "McTestface\(number)"),
            email: "bench\(number)@example.invalid",
            realUserStatus: .likelyReal
        )
    }

    static func escrow(
        path: String,
        checkpointAfterPurge: Bool = true,
        keyring: Keyring = Keyring.generate()
    )
        throws -> Escrow
    {
        var configuration = SQLiteEscrowStore.Configuration()
        configuration.checkpointAfterPurge = checkpointAfterPurge
        let store = try SQLiteEscrowStore(path: path, configuration: configuration, logger: logger)
        return Escrow(store: store, keyring: keyring, logger: logger)
    }

    /// A store with `count` audit events forming a valid chain (half captures, half purges).
    static func auditDatabase(events count: Int) throws -> String {
        let path = cacheDirectory + "/audit-\(count).sqlite"
        if FileManager.default.fileExists(atPath: path) { return path }
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)
        try (try SQLiteEscrowStore(path: path, logger: logger)).close()
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            let statement = try db.makeStatement(
                sql: """
                    INSERT INTO audit_event (seq, at, type, escrow_id, index_prefix, detail, http_status, actor,
                        age_ms, hash) VALUES (?, ?, ?, ?, ?, ?, NULL, 'library', ?, ?)
                    """
            )
            var previous = AuditChain.genesis
            let start = Date().addingTimeInterval(-86400)
            for sequence in 1...Int64(count) {
                let purge = sequence % 2 == 0
                let draft = AuditDraft(
                    type: purge ? .purged : .captured,
                    at: start.addingTimeInterval(Double(sequence) / 100),
                    escrowID: String(format: "%032x", sequence / 2),
                    indexPrefix: "0011223344556677",
                    detail: purge ? "confirmed" : nil,
                    actor: .library,
                    ageMilliseconds: purge ? sequence % 5000 : nil
                )
                let hash = AuditChain.hash(previous: previous, sequence: sequence, draft: draft)
                previous = hash
                try statement.execute(arguments: [
                    sequence, Timestamp.unixMilliseconds(draft.at), draft.type.rawValue, draft.escrowID,
                    draft.indexPrefix, draft.detail, draft.ageMilliseconds, Data(hash),
                ])
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO audit_head (singleton, seq, hash) VALUES (1, ?, ?)",
                arguments: [Int64(count), Data(previous)]
            )
        }
        try queue.close()
        return path
    }

    /// A store holding `count` live escrows (rows of realistic sizes, not due), for capture at scale.
    static func liveDatabase(escrows count: Int) throws -> String {
        let path = cacheDirectory + "/live-\(count).sqlite"
        if FileManager.default.fileExists(atPath: path) { return path }
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)
        try (try SQLiteEscrowStore(path: path, logger: logger)).close()
        let queue = try DatabaseQueue(path: path)
        let now = Timestamp.unixMilliseconds(Date())
        let far = now + 30 * 86_400_000
        try queue.write { db in
            let statement = try db.makeStatement(
                sql: """
                    INSERT INTO escrow (id, blind_index, key_version, public_key, sealed_profile, sealed_key, mac,
                        content_tag, state, revision, attempts, next_attempt_at, due_at, created_at, expires_at,
                        updated_at) VALUES (?, ?, 1, ?, ?, ?, ?, ?, 'pending', 1, 0, ?, ?, ?, ?, ?)
                    """
            )
            for _ in 0..<count {
                try statement.execute(arguments: [
                    Data(Hashing.randomBytes(count: 16)), Data(Hashing.randomBytes(count: 32)),
                    Data(Hashing.randomBytes(count: 32)), Data(Hashing.randomBytes(count: 304)),
                    Data(Hashing.randomBytes(count: 136)), Data(Hashing.randomBytes(count: 32)),
                    Data(Hashing.randomBytes(count: 32)), far, far, now, far, now,
                ])
            }
        }
        try queue.close()
        return path
    }
}
