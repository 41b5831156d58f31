import CSodium
import Foundation
import GRDBSQLite

/// The floor: the same work as an escrow operation with raw libsodium and raw SQLite C calls and
/// nothing else (no validation, no JSON, no state machine, no audit chain hashing beyond one
/// BLAKE2b, no Swift concurrency). What ProfileEscrow costs is measured against it.
final class Floor: @unchecked Sendable {
    let db: OpaquePointer
    private(set) var masterPublicKey = [UInt8](repeating: 0, count: 32)
    private var masterSecret = [UInt8](repeating: 0, count: 32)
    let rowKey = [UInt8](repeating: 7, count: 32)
    let indexKey = [UInt8](repeating: 9, count: 32)
    /// A representative profile plaintext (about what a two-part name and an email encode to).
    let plaintext = [UInt8](repeating: 0x61, count: 200)
    private var insertEscrow: OpaquePointer?
    private var insertAudit: OpaquePointer?
    private var deleteEscrow: OpaquePointer?
    private var selectEscrow: OpaquePointer?

    init(path: String) {
        _ = sodium_init()
        var handle: OpaquePointer?
        sqlite3_open(path, &handle)
        db = handle!
        exec("PRAGMA journal_mode=WAL")
        exec("PRAGMA synchronous=FULL")
        exec("PRAGMA secure_delete=ON")
        exec(
            """
            CREATE TABLE IF NOT EXISTS escrow (id BLOB PRIMARY KEY, blind_index BLOB UNIQUE, public_key BLOB,
              sealed_profile BLOB, sealed_key BLOB, mac BLOB);
            CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY, at INTEGER, type TEXT, escrow_id BLOB,
              hash BLOB);
            """
        )
        crypto_box_keypair(&masterPublicKey, &masterSecret)
        sqlite3_prepare_v2(db, "INSERT INTO escrow VALUES (?,?,?,?,?,?)", -1, &insertEscrow, nil)
        sqlite3_prepare_v2(db, "INSERT INTO audit (at, type, escrow_id, hash) VALUES (?,?,?,?)", -1, &insertAudit, nil)
        sqlite3_prepare_v2(db, "DELETE FROM escrow WHERE blind_index = ?", -1, &deleteEscrow, nil)
        sqlite3_prepare_v2(
            db,
            "SELECT public_key, sealed_profile, sealed_key, mac, id FROM escrow WHERE blind_index = ?",
            -1,
            &selectEscrow,
            nil
        )
    }

    deinit {
        for statement in [insertEscrow, insertAudit, deleteEscrow, selectEscrow] { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    func exec(_ sql: String) {
        sqlite3_exec(db, sql, nil, nil, nil)
    }

    struct Sealed: Sendable {
        var id: [UInt8]
        var blindIndex: [UInt8]
        var publicKey: [UInt8]
        var sealedProfile: [UInt8]
        var sealedKey: [UInt8]
        var mac: [UInt8]
    }

    func blindIndex(_ user: String) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let bytes = Array(user.utf8)
        crypto_generichash(&out, 32, bytes, UInt64(bytes.count), indexKey, 32)
        return out
    }

    /// Keypair, two seals, MAC, blind index.
    func seal(user: String) -> Sealed {
        var id = [UInt8](repeating: 0, count: 16)
        randombytes_buf(&id, 16)
        var pk = [UInt8](repeating: 0, count: 32)
        var sk = [UInt8](repeating: 0, count: 32)
        crypto_box_keypair(&pk, &sk)
        var padded = plaintext + [UInt8](repeating: 0, count: 64 + 64)
        var paddedLength = 0
        sodium_pad(&paddedLength, &padded, plaintext.count + 56, 64, padded.count)
        var sealedProfile = [UInt8](repeating: 0, count: paddedLength + 48)
        crypto_box_seal(&sealedProfile, padded, UInt64(paddedLength), pk)
        let keyBox = [UInt8](repeating: 1, count: 56) + sk
        var sealedKey = [UInt8](repeating: 0, count: keyBox.count + 48)
        crypto_box_seal(&sealedKey, keyBox, UInt64(keyBox.count), masterPublicKey)
        let macInput = id + pk + sealedProfile + sealedKey
        var mac = [UInt8](repeating: 0, count: 32)
        crypto_auth(&mac, macInput, UInt64(macInput.count), rowKey)
        return Sealed(
            id: id,
            blindIndex: blindIndex(user),
            publicKey: pk,
            sealedProfile: sealedProfile,
            sealedKey: sealedKey,
            mac: mac
        )
    }

    /// The crypto ceiling's unit of work: a key pair and the two sealed boxes, nothing else (no MAC, no blind
    /// index, no storage).
    func keypairAndTwoSeals() -> Int {
        var pk = [UInt8](repeating: 0, count: 32)
        var sk = [UInt8](repeating: 0, count: 32)
        crypto_box_keypair(&pk, &sk)
        let padded = plaintext + [UInt8](repeating: 0, count: 56)
        var sealedProfile = [UInt8](repeating: 0, count: padded.count + 48)
        crypto_box_seal(&sealedProfile, padded, UInt64(padded.count), pk)
        let keyBox = [UInt8](repeating: 1, count: 56) + sk
        var sealedKey = [UInt8](repeating: 0, count: keyBox.count + 48)
        crypto_box_seal(&sealedKey, keyBox, UInt64(keyBox.count), masterPublicKey)
        return sealedProfile.count + sealedKey.count
    }

    /// MAC check and the two opens.
    func open(_ sealed: Sealed) -> Bool {
        let macInput = sealed.id + sealed.publicKey + sealed.sealedProfile + sealed.sealedKey
        guard crypto_auth_verify(sealed.mac, macInput, UInt64(macInput.count), rowKey) == 0 else { return false }
        var keyBox = [UInt8](repeating: 0, count: sealed.sealedKey.count - 48)
        guard
            crypto_box_seal_open(
                &keyBox,
                sealed.sealedKey,
                UInt64(sealed.sealedKey.count),
                masterPublicKey,
                masterSecret
            ) == 0
        else { return false }
        var padded = [UInt8](repeating: 0, count: sealed.sealedProfile.count - 48)
        let sk = Array(keyBox[56...])
        return crypto_box_seal_open(
            &padded,
            sealed.sealedProfile,
            UInt64(sealed.sealedProfile.count),
            sealed.publicKey,
            sk
        ) == 0
    }

    /// Inserts rows and one audit row each, in one transaction (one fsync).
    func insert(_ rows: [Sealed]) {
        exec("BEGIN IMMEDIATE")
        for row in rows {
            bind(insertEscrow, [row.id, row.blindIndex, row.publicKey, row.sealedProfile, row.sealedKey, row.mac])
            sqlite3_step(insertEscrow)
            sqlite3_reset(insertEscrow)
            audit("captured", row.id)
        }
        exec("COMMIT")
    }

    /// Reads a row back by blind index.
    func load(user: String) -> Sealed? {
        let index = blindIndex(user)
        bind(selectEscrow, [index])
        defer { sqlite3_reset(selectEscrow) }
        guard sqlite3_step(selectEscrow) == SQLITE_ROW else { return nil }
        func blob(_ column: Int32) -> [UInt8] {
            let count = Int(sqlite3_column_bytes(selectEscrow, column))
            guard let base = sqlite3_column_blob(selectEscrow, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: base, count: count))
        }
        return Sealed(
            id: blob(4),
            blindIndex: index,
            publicKey: blob(0),
            sealedProfile: blob(1),
            sealedKey: blob(2),
            mac: blob(3)
        )
    }

    /// Delete + audit in one transaction, then (optionally) the WAL truncation.
    func purge(user: String, checkpoint: Bool) {
        exec("BEGIN IMMEDIATE")
        bind(deleteEscrow, [blindIndex(user)])
        sqlite3_step(deleteEscrow)
        sqlite3_reset(deleteEscrow)
        audit("purged", [])
        exec("COMMIT")
        if checkpoint { sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil) }
    }

    /// Deletes several rows, one audit row each, in one transaction (the replay floor's batch).
    func purge(users: [String]) {
        exec("BEGIN IMMEDIATE")
        for user in users {
            bind(deleteEscrow, [blindIndex(user)])
            sqlite3_step(deleteEscrow)
            sqlite3_reset(deleteEscrow)
            audit("purged", [])
        }
        exec("COMMIT")
    }

    private func audit(_ type: String, _ id: [UInt8]) {
        var hash = [UInt8](repeating: 0, count: 32)
        let input = Array(type.utf8) + id
        crypto_generichash(&hash, 32, input, UInt64(input.count), nil, 0)
        sqlite3_bind_int64(insertAudit, 1, Int64(Date().timeIntervalSince1970 * 1000))
        sqlite3_bind_text(insertAudit, 2, type, -1, SQLITE_TRANSIENT_FLOOR)
        bindBlob(insertAudit, 3, id)
        bindBlob(insertAudit, 4, hash)
        sqlite3_step(insertAudit)
        sqlite3_reset(insertAudit)
    }

    private func bind(_ statement: OpaquePointer?, _ blobs: [[UInt8]]) {
        for (index, blob) in blobs.enumerated() { bindBlob(statement, Int32(index + 1), blob) }
    }

    private func bindBlob(_ statement: OpaquePointer?, _ index: Int32, _ blob: [UInt8]) {
        _ = blob.withUnsafeBytes {
            sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), SQLITE_TRANSIENT_FLOOR)
        }
    }
}

/// `SQLITE_TRANSIENT` does not import into Swift.
let SQLITE_TRANSIENT_FLOOR = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
