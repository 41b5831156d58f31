import EscrowCore
import EscrowCrypto
import Foundation
import GRDB
import Testing

@testable import EscrowSQLite
@testable import ProfileEscrow

/// The checked-in fuzz corpus (Fuzz/Corpus, see docs/fuzzing.md) through the decoders the fuzz targets
/// call, in the normal suite: every input is refused or accepted, none crashes, and the seeds that are
/// valid on purpose still decode.
@Suite("Fuzz corpus replay")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/Corpus")

    static func inputs(_ target: String) throws -> [(name: String, bytes: [UInt8])] {
        let directory = corpus.appendingPathComponent(target)
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted().map { name in
            (name, [UInt8](try Data(contentsOf: directory.appendingPathComponent(name))))
        }
    }

    @Test func profileJSON() throws {
        let inputs = try Self.inputs("FuzzProfileJSON")
        #expect(inputs.count >= 5)
        var accepted = 0
        for input in inputs {
            _ = try? StrictJSON.parse(input.bytes)
            if let parsed = try? ProfileParser.parse(input.bytes) {
                accepted += 1
                let plaintext = EscrowPlaintext(profile: parsed.profile, verified: false, capturedAt: Date())
                #expect(try EscrowPlaintext.decode(plaintext.encoded()) == plaintext, "\(input.name)")
            }
            let secret = SecretBytes(count: input.bytes.count)
            secret.withUnsafeMutableBytes { $0.copyBytes(from: input.bytes) }
            _ = try? EscrowPlaintext.decode(secret)
        }
        #expect(accepted >= 2, "the valid profile seeds still parse")
    }

    @Test func keyringFile() throws {
        var parsed = 0
        for input in try Self.inputs("FuzzKeyringFile") {
            let keyring = input.bytes.withUnsafeBytes { try? KeyringFileParser(buffer: $0, path: "corpus").parse() }
            if keyring != nil { parsed += 1 }
        }
        #expect(parsed >= 1, "the public-only seed keyring parses")
    }

    @Test func storedRow() throws {
        let keyring = Keyring.generate()
        let inputs = try Self.inputs("FuzzStoredRow")
        #expect(!inputs.isEmpty)
        for input in inputs {
            // The fuzz target's shape: one column value per input chunk; here every column gets the input.
            let row = Row([
                "rowid": 1, "id": Data(input.bytes), "blind_index": Data(input.bytes), "key_version": 1,
                "public_key": Data(input.bytes), "sealed_profile": Data(input.bytes), "sealed_key": Data(input.bytes),
                "mac": Data(input.bytes), "content_tag": Data(input.bytes), "state": "pending", "revision": 1,
                "attempts": 0, "next_attempt_at": 0, "created_at": 0, "expires_at": 0, "updated_at": 0,
            ])
            if let record = try? SQLiteEscrowStore.record(from: row) {
                #expect(!keyring.verify(record.sealed), "a corpus row never verifies under a fresh keyring")
            }
        }
    }

    @Test func retryAfter() throws {
        let now = Date(timeIntervalSince1970: 1_763_719_200)
        var read = 0
        for input in try Self.inputs("FuzzRetryAfter") {
            if let seconds = RetryAfter.seconds(String(decoding: input.bytes, as: UTF8.self), now: now) {
                #expect(seconds >= 0 && seconds.isFinite)
                read += 1
            }
        }
        #expect(read >= 4, "the delta-seconds and the three HTTP-date seeds are read")
    }
}
