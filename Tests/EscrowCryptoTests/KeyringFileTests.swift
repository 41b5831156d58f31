import Foundation
import Testing

@testable import EscrowCrypto

@Suite("Keyring file")
struct KeyringFileTests {
    /// Through a symbolic link (a mounted secret, configuration management), a rotation and a retirement write
    /// the real file; the link stays; no file keeps the retired secret.
    @Test func writesThroughASymbolicLinkAndLeavesNoOldSecret() throws {
        try withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/real", withIntermediateDirectories: true)
            let real = directory + "/real/keyring"
            let link = directory + "/keyring"
            let original = Keyring.generate()
            try original.write(path: real, overwrite: false)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "real/keyring")
            let oldSecret = base64(try #require(original.masterKeys[0].secretKey))

            let retired = try original.rotated(now: Date()).retiring(version: 1)
            try retired.write(path: link, overwrite: true)

            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "real/keyring")
            #expect(try Keyring.load(path: link).keys.map(\.hasSecretKey) == [false, true])
            #expect(try fileMode(real) == 0o600)
            for name in try FileManager.default.subpathsOfDirectory(atPath: directory) {
                let data = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
                #expect(!String(decoding: data, as: UTF8.self).contains(oldSecret), "\(name) keeps the old secret")
            }
        }
    }

    /// A hard link would keep the old secrets under its other name: refused, nothing changed.
    @Test func refusesAFileWithOtherHardLinks() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            let original = Keyring.generate()
            try original.write(path: path, overwrite: false)
            try FileManager.default.linkItem(atPath: path, toPath: directory + "/backup-link")
            let before = try String(contentsOfFile: path, encoding: .utf8)
            #expect(
                cryptoErrorCode { try original.rotated(now: Date()).write(path: path, overwrite: true) }
                    == .keyringRefused
            )
            #expect(try String(contentsOfFile: path, encoding: .utf8) == before)
        }
    }

    /// A FIFO at the keyring path is refused at once instead of blocking the open forever.
    @Test func aFIFOIsRefusedWithoutHanging() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            #expect(mkfifo(path, 0o600) == 0)
            #expect(cryptoErrorCode { _ = try Keyring.load(path: path) } == .keyringMalformed)
        }
    }

    /// The highest version cannot be rotated past, and a public-only keyring cannot be rotated: errors, not traps.
    @Test func rotationRefusesWhatItCannotDo() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            try Keyring.generate().write(path: path, overwrite: false)
            var lines = try String(contentsOfFile: path, encoding: .utf8).components(separatedBy: "\n")
            lines[2] = "active 4294967295"
            lines[5] = lines[5].replacingOccurrences(of: "key 1 ", with: "key 4294967295 ")
            try lines.joined(separator: "\n").write(toFile: path, atomically: false, encoding: .utf8)
            let highest = try Keyring.load(path: path)
            #expect(highest.activeVersion == UInt32.max)
            #expect(cryptoErrorCode { _ = try highest.rotated(now: Date()) } == .keyringRefused)
            #expect(cryptoErrorCode { _ = try Keyring.generate().publicOnly().rotated(now: Date()) } == .keyringRefused)
        }
    }

    @Test func writeLoadRoundTrip() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keys/keyring"
            let keyring = try Keyring.generate(now: Date(timeIntervalSince1970: 1_700_000_000.75)).rotated(
                now: Date(timeIntervalSince1970: 1_800_000_000)
            )
            try keyring.write(path: path, overwrite: false)
            #expect(try fileMode(path) == 0o600)
            #expect(try fileMode(directory + "/keys") == 0o700)

            let loaded = try Keyring.load(path: path)
            #expect(loaded.activeVersion == 2)
            #expect(!loaded.isPublicOnly)
            #expect(loaded.keys == keyring.keys)
            #expect(
                loaded.keys.map(\.createdAt) == [
                    Date(timeIntervalSince1970: 1_700_000_000), Date(timeIntervalSince1970: 1_800_000_000),
                ]
            )
            #expect(loaded.indexKey == keyring.indexKey)
            #expect(loaded.rowKey == keyring.rowKey)
            #expect(loaded.masterKeys.map { $0.secretKey! } == keyring.masterKeys.map { $0.secretKey! })

            // Rows sealed by one open with the other.
            let index = keyring.blindIndex(userIdentifier: FakeUser.first)
            let sealed = try keyring.seal(plaintext: secret("round trip"), id: .random(), blindIndex: index)
            #expect(string(try loaded.open(sealed)) == "round trip")
            // No temporary file is left behind.
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/keys") == ["keyring"])
        }
    }

    @Test func fileLayout() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            let keyring = Keyring.generate(now: Date(timeIntervalSince1970: 1_700_000_000))
            try keyring.write(path: path, overwrite: false)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.count == 7)
            #expect(lines[0] == "profile-escrow-keyring 1")
            #expect(lines[1] == "mode full")
            #expect(lines[2] == "active 1")
            #expect(lines[3] == "index-key " + base64(keyring.indexKey))
            #expect(lines[4] == "row-key " + base64(keyring.rowKey))
            let publicKey = Data(keyring.keys[0].publicKey).base64EncodedString()
            #expect(lines[5] == "key 1 1700000000 \(publicKey) \(base64(keyring.masterKeys[0].secretKey!))")
            #expect(lines[6] == "")
        }
    }

    @Test func publicOnlyFileHoldsNoSecretKey() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/public-keyring"
            let full = try Keyring.generate().rotated(now: Date())
            try full.publicOnly().write(path: path, overwrite: false)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.contains("\nmode public-only\n"))
            for key in full.masterKeys {
                #expect(!text.contains(base64(key.secretKey!)))
            }
            let keyLines = text.split(separator: "\n").filter { $0.hasPrefix("key ") }
            #expect(keyLines.count == 2)
            #expect(keyLines.allSatisfy { $0.hasSuffix(" -") })

            let loaded = try Keyring.load(path: path)
            #expect(loaded.isPublicOnly)
            #expect(loaded.keys.allSatisfy { !$0.hasSecretKey })
            let sealed = try loaded.seal(
                plaintext: secret("capture only"),
                id: .random(),
                blindIndex: loaded.blindIndex(userIdentifier: FakeUser.first)
            )
            #expect(cryptoErrorCode { try loaded.open(sealed) } == .secretKeyUnavailable)
            #expect(string(try full.open(sealed)) == "capture only")
        }
    }

    @Test func refusesToOverwriteUnlessAsked() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            let first = Keyring.generate()
            try first.write(path: path, overwrite: false)
            let second = Keyring.generate()
            #expect(cryptoErrorCode { try second.write(path: path, overwrite: false) } == .keyringExists)
            #expect(try Keyring.load(path: path).rowKey == first.rowKey)
            try second.write(path: path, overwrite: true)
            #expect(try Keyring.load(path: path).rowKey == second.rowKey)
            #expect(try fileMode(path) == 0o600)
        }
    }

    @Test(arguments: [0o640, 0o604, 0o644, 0o660, 0o606, 0o601, 0o610])
    func refusesGroupOrWorldAccess(mode: Int) throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            try Keyring.generate().write(path: path, overwrite: false)
            try setFileMode(path, mode)
            let error = try #require(cryptoError { try Keyring.load(path: path) })
            #expect(error.code == .keyringPermissions)
            #expect(error.message.contains(path))
            #expect(error.message.contains("0" + String(mode, radix: 8)))
            #expect(error.message.contains("chmod 600"))
        }
    }

    @Test(arguments: [0o600, 0o400])
    func acceptsOwnerOnlyModes(mode: Int) throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            try Keyring.generate().write(path: path, overwrite: false)
            try setFileMode(path, mode)
            #expect(try Keyring.load(path: path).activeVersion == 1)
        }
    }

    @Test func missingFile() throws {
        try withTemporaryDirectory { directory in
            #expect(cryptoErrorCode { try Keyring.load(path: directory + "/nothing-here") } == .keyringNotFound)
            #expect(cryptoErrorCode { try Keyring.load(path: directory + "/no-dir/keyring") } == .keyringNotFound)
        }
    }

    @Test func directoryIsNotAKeyring() throws {
        try withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/dir", withIntermediateDirectories: false)
            try setFileMode(directory + "/dir", 0o700)
            #expect(cryptoErrorCode { try Keyring.load(path: directory + "/dir") } == .keyringMalformed)
        }
    }

    /// A valid two-version file, then one edit each; the error names the expected line and never its content.
    @Test(arguments: MalformedCase.all)
    func rejectsMalformedFiles(testCase: MalformedCase) throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/keyring"
            let keyring = try Keyring.generate(now: Date(timeIntervalSince1970: 1_700_000_000))
                .rotated(now: Date(timeIntervalSince1970: 1_700_000_100))
            try keyring.write(path: path, overwrite: false)
            let original = try String(contentsOfFile: path, encoding: .utf8)
            var lines = original.components(separatedBy: "\n")
            lines.removeLast()  // the empty string after the final newline
            let edited = testCase.edit(lines)
            try Data(edited.utf8).write(to: URL(fileURLWithPath: path))
            try setFileMode(path, 0o600)

            let error = try #require(cryptoError { try Keyring.load(path: path) }, "\(testCase.name)")
            #expect(error.code == .keyringMalformed, "\(testCase.name)")
            #expect(error.message.contains("line \(testCase.line) "), "\(testCase.name): \(error.message)")
            #expect(!error.message.contains(base64(keyring.indexKey)))
            #expect(!error.message.contains(base64(keyring.rowKey)))
            for key in keyring.masterKeys {
                #expect(!error.message.contains(base64(key.secretKey!)))
                #expect(!error.message.contains(Data(key.publicKey).base64EncodedString()))
            }
        }
    }
}

/// One way to break a keyring file (lines 1-5 are the header; 6 and 7 are keys 1 and 2).
struct MalformedCase: Sendable, CustomTestStringConvertible {
    let name: String
    let line: Int
    let edit: @Sendable ([String]) -> String

    var testDescription: String { name }

    static func lines(_ name: String, line: Int, _ change: @escaping @Sendable (inout [String]) -> Void) -> Self {
        MalformedCase(name: name, line: line) { original in
            var lines = original
            change(&lines)
            return lines.map { $0 + "\n" }.joined()
        }
    }

    static func field(_ lines: [String], _ line: Int, _ index: Int) -> String {
        String(lines[line - 1].split(separator: " ")[index])
    }

    static let zeroKey = Data(count: 32).base64EncodedString()
    static let shortKey = Data(count: 31).base64EncodedString()

    static let all: [MalformedCase] = [
        MalformedCase(name: "empty file", line: 1) { _ in "" },
        lines("wrong format version", line: 1) { $0[0] = "profile-escrow-keyring 9" },
        lines("unknown mode", line: 2) { $0[1] = "mode partial" },
        lines("active not a number", line: 3) { $0[2] = "active two" },
        lines("active zero", line: 3) { $0[2] = "active 0" },
        lines("active leading zero", line: 3) { $0[2] = "active 02" },
        lines("active version absent", line: 3) { $0[2] = "active 9" },
        lines("active version retired", line: 3) {
            $0[6] = $0[6].split(separator: " ").dropLast().joined(separator: " ") + " -"
        },
        lines("index key not base64", line: 4) { $0[3] = "index-key !!!!" },
        lines("index key 31 bytes", line: 4) { $0[3] = "index-key " + shortKey },
        lines("index key without padding", line: 4) { $0[3] = String($0[3].dropLast()) },
        lines("row key line missing", line: 5) { $0.remove(at: 4) },
        lines("trailing space", line: 5) { $0[4] += " " },
        lines("double space", line: 6) { $0[5] = $0[5].replacingOccurrences(of: " ", with: "  ") },
        lines("no key line", line: 6) { $0.removeSubrange(5...) },
        lines("key line extra field", line: 6) { $0[5] += " extra" },
        lines("key line missing field", line: 7) {
            $0[6] = $0[6].split(separator: " ").dropLast().joined(separator: " ")
        },
        lines("negative created time", line: 6) {
            $0[5] = $0[5].replacingOccurrences(of: " 1700000000 ", with: " -1 ")
        },
        lines("created time past year 9999", line: 6) {
            $0[5] = $0[5].replacingOccurrences(of: " 1700000000 ", with: " 9223372036854775807 ")
        },
        lines("public key mismatch", line: 6) { lines in
            lines[5] = "key 1 1700000000 \(zeroKey) \(field(lines, 6, 4))"
        },
        lines("versions not ascending", line: 7) { $0.swapAt(5, 6) },
        lines("duplicate version", line: 7) { $0[6] = $0[5] },
        lines("public-only with a secret", line: 6) { $0[1] = "mode public-only" },
        lines("carriage return", line: 1) { $0[0] += "\r" },
        lines("empty line", line: 6) { $0.insert("", at: 5) },
        MalformedCase(name: "no final newline", line: 7) { $0.joined(separator: "\n") },
    ]
}
