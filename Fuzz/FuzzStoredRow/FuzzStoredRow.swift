import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import GRDB

/// A stored `escrow` row's decoding and opening: every column of a valid sealed row is kept, replaced
/// (NULL, an integer, a blob or a text of any length) or swapped from the fuzz input, then decoded
/// (``SQLiteEscrowStore/record(from:)``), its MAC verified and, when it verifies, opened and its
/// plaintext decoded. Each step may refuse; none may crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStoredRow(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(UnsafeBufferPointer(start: data, count: count))
    var values: [String: (any DatabaseValueConvertible)?] = [:]
    for (column, template) in Template.shared.columns {
        // `updateValue`, not a subscript: assigning nil through the subscript would remove the column, and a
        // row from `SELECT *` always has every column (NULL or not).
        switch input.byte() % 6 {
        case 0: values.updateValue(template, forKey: column)
        case 1: values.updateValue(nil, forKey: column)
        case 2: values.updateValue(input.int64(), forKey: column)
        case 3: values.updateValue(Data(input.chunk()), forKey: column)
        case 4: values.updateValue(String(decoding: input.chunk(), as: UTF8.self), forKey: column)
        default:
            // Another column's valid value: a swap.
            let other = Template.shared.columns[Int(input.byte()) % Template.shared.columns.count]
            values.updateValue(other.1, forKey: column)
        }
    }
    let row = Row(["rowid": 1].merging(values) { $1 })
    guard let record = try? SQLiteEscrowStore.record(from: row) else { return 0 }
    let keyring = Template.shared.keyring
    guard keyring.verify(record.sealed), let plaintext = try? keyring.open(record.sealed) else { return 0 }
    _ = try? EscrowPlaintext.decode(plaintext)
    return 0
}

/// A valid sealed row, made once.
final class Template: Sendable {
    static let shared = Template()

    let keyring = Keyring.generate()
    let columns: [(String, (any DatabaseValueConvertible & Sendable)?)]

    init() {
        let profile = try! Profile(
            userIdentifier: "000000.fuzz00000000000000000000000000000.0001",
            fullName: nil,
            email: "testy@example.invalid",
            realUserStatus: .likelyReal
        )
        let index = keyring.blindIndex(userIdentifier: profile.userIdentifier)
        let plaintext = EscrowPlaintext(profile: profile, verified: false, capturedAt: Date(timeIntervalSince1970: 0))
        let sealed = try! keyring.seal(plaintext: plaintext.encoded(), id: .random(), blindIndex: index)
        let now: Int64 = 1_700_000_000_000
        columns = [
            ("id", Bytes(sealed.id.bytes)), ("blind_index", Bytes(sealed.blindIndex.bytes)),
            ("key_version", Int64(sealed.keyVersion)), ("public_key", Bytes(sealed.publicKey)),
            ("sealed_profile", Bytes(sealed.sealedProfile)), ("sealed_key", Bytes(sealed.sealedKey)),
            ("mac", Bytes(sealed.mac)), ("content_tag", Bytes(Array(repeating: 7, count: 32))), ("state", "pending"),
            ("revision", Int64(1)), ("attempts", Int64(0)), ("next_attempt_at", now), ("lease_owner", nil),
            ("lease_expires_at", nil), ("confirm_deadline", nil), ("due_at", now), ("created_at", now),
            ("expires_at", now + 86_400_000), ("updated_at", now), ("dead_code", nil), ("last_status", nil),
        ]
    }
}

/// A blob kept as `[UInt8]` and made a `Data` for each row. A `Data` held for the whole run (in the template)
/// keeps its storage behind a pointer whose spare bits carry the enum case, which LeakSanitizer does not
/// recognise: it reported the template's blobs as leaked at exit.
struct Bytes: DatabaseValueConvertible, Sendable {
    let bytes: [UInt8]
    init<S: Sequence<UInt8>>(_ bytes: S) { self.bytes = Array(bytes) }
    var databaseValue: DatabaseValue { Data(bytes).databaseValue }
    static func fromDatabaseValue(_ value: DatabaseValue) -> Bytes? { Data.fromDatabaseValue(value).map(Bytes.init) }
}

/// Reads the fuzz input front to back; past its end, zeros.
struct FuzzInput {
    let bytes: UnsafeBufferPointer<UInt8>
    var offset = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func int64() -> Int64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte()) }
        return Int64(bitPattern: value)
    }

    mutating func chunk() -> [UInt8] {
        let length = min(Int(byte()), bytes.count - min(offset, bytes.count))
        defer { offset += length }
        return Array(bytes[offset..<offset + length])
    }
}
