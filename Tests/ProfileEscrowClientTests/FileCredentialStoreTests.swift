import EscrowTestSupport
import Foundation
import Testing

@testable import ProfileEscrowClient

#if canImport(Glibc)
import Glibc
#endif

@Suite("ProfileEscrowClient: the file credential store")
struct FileCredentialStoreTests {
    @Test("an item is a 0600 file in a 0700 directory, replaced whole, listed, removed; a second remove is nothing")
    func itemsAndModes() throws {
        let temporary = TemporaryDirectory()
        let directory = temporary.path + "/nested/credentials"
        let store = try FileCredentialStore(directory: directory)
        #expect(Self.mode(directory) == 0o700)

        try store.save(Data("first".utf8), as: "signin-a")
        try store.save(Data("second, longer than the first".utf8), as: "signin-a")
        try store.save(Data("other".utf8), as: "signin-b")
        #expect(Self.mode(directory + "/signin-a.item") == 0o600)
        #expect(try store.load("signin-a") == Data("second, longer than the first".utf8))
        #expect(try store.names() == ["signin-a", "signin-b"])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == [
                "signin-a.item", "signin-b.item",
            ],
            "no temporary file left behind"
        )

        try store.remove("signin-a")
        try store.remove("signin-a")
        #expect(try store.load("signin-a") == nil)
        #expect(try store.names() == ["signin-b"])
    }

    @Test("an existing directory open to others is narrowed to 0700; a crash's temporary files are removed")
    func existingDirectory() throws {
        let temporary = TemporaryDirectory()
        let directory = temporary.path + "/credentials"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        _ = FileManager.default.createFile(atPath: directory + "/.signin-a-torn.tmp", contents: Data("torn".utf8))

        let store = try FileCredentialStore(directory: directory)
        #expect(Self.mode(directory) == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        #expect(try store.names().isEmpty)
    }

    @Test("a name that could make a path is refused before any file is touched")
    func malformedNames() throws {
        let temporary = TemporaryDirectory()
        let store = try FileCredentialStore(directory: temporary.path + "/credentials")
        for name in ["", "../escape", "a/b", ".hidden", "é", String(repeating: "a", count: 65)] {
            #expect(throws: CredentialStoreError.self) { try store.save(Data("x".utf8), as: name) }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).sorted() == ["credentials"])
    }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return info.st_mode & 0o777
    }
}
