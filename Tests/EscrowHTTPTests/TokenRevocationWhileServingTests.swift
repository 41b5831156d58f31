import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

/// The operator's case: the service runs (it holds the database's single writer slot) and a leaked
/// token must be revoked now, without a restart. The real `profile-escrow` binary changes the token
/// file; the application built in this process, over the same files, sees it at the next request.
@Suite("Tokens change while the service runs")
struct TokenRevocationWhileServingTests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The `profile-escrow` binary built beside the tests (as `CLITests.binary` finds it).
    static var binary: URL {
        let bundle = Bundle.main.bundleURL
        let candidates = [
            bundle.appendingPathComponent("profile-escrow"),
            bundle.deletingLastPathComponent().appendingPathComponent("profile-escrow"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("profile-escrow"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }

    static func run(_ arguments: [String], environment: [String: String] = [:], in directory: String) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var env = ProcessInfo.processInfo.environment
        for key in ["PROFILE_ESCROW_DATABASE", "PROFILE_ESCROW_KEYRING", "PROFILE_ESCROW_TOKENS"] { env[key] = nil }
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self)
        )
    }

    @Test("tokens add and revoke succeed beside the writer; the running app accepts, then refuses, the token")
    func addAndRevokeWhileServing() async throws {
        // The harness keeps the escrow database open for writing, as `serve` does.
        let harness = try await HTTPHarness()
        #expect(harness.store.holdsWriterSlot || harness.store.sqliteVersion >= SQLiteEscrowStore.walResetFixedVersion)
        let directory = harness.directory.path
        let keyring = directory + "/keyring"
        try harness.keyring.write(path: keyring, overwrite: false)

        // Control: a command that writes the escrow database is refused while the writer runs, so
        // what follows is not passing by accident.
        if harness.store.holdsWriterSlot {
            let sweep = try Self.run(
                ["sweep", "--database", harness.databasePath, "--keyring", keyring],
                in: directory
            )
            #expect(sweep.status == 4, "\(sweep.stderr)")
            #expect(sweep.stderr.contains("open for writing by another process"))
        }

        // `--tokens` explicitly.
        let add = try Self.run(
            [
                "tokens", "add", "leaky", "--scope", "read", "--database", harness.databasePath, "--tokens",
                harness.tokensPath,
            ],
            in: directory
        )
        #expect(add.status == 0, "\(add.stderr)")
        let token = add.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.hasPrefix(AccessTokens.prefix))

        // The default: tokens.sqlite beside the database.
        let list = try Self.run(["tokens", "list", "--database", harness.databasePath], in: directory)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("leaky") && list.stdout.contains("active"))
        #expect(!list.stdout.contains(token))

        let uri = "/v1/escrows/\(Fake.userIdentifier(1))"
        let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
        try await harness.app().test(.router) { client async throws in
            // Accepted: authenticated and authorized; nothing is held for this user.
            let accepted = try await client.execute(uri: uri, method: .get, headers: bearer)
            #expect(accepted.status == .notFound)

            // The environment variable names the token file too.
            let revoke = try Self.run(
                ["tokens", "revoke", "leaky"],
                environment: [
                    "PROFILE_ESCROW_DATABASE": harness.databasePath, "PROFILE_ESCROW_TOKENS": harness.tokensPath,
                ],
                in: directory
            )
            #expect(revoke.status == 0, "\(revoke.stderr)")
            #expect(revoke.stdout.contains("revoked leaky"))

            // The same running application, next request: 401.
            let refused = try await client.execute(uri: uri, method: .get, headers: bearer)
            #expect(refused.status == .unauthorized)
            #expect(refused.json["code"] as? String == "unauthorized")
            // Other tokens are untouched.
            let other = try await client.execute(uri: uri, method: .get, headers: harness.headers("read"))
            #expect(other.status == .notFound)
        }

        let again = try Self.run(
            ["tokens", "revoke", "leaky", "--database", harness.databasePath],
            in: directory
        )
        #expect(again.status == 3, "nothing active to revoke any more")
        let after = try Self.run(["tokens", "list", "--database", harness.databasePath], in: directory)
        #expect(after.stdout.contains("leaky") && after.stdout.contains("revoked"))
    }

    @Test("--tokens may not name the database file")
    func tokensIsNotTheDatabase() async throws {
        let harness = try await HTTPHarness()
        let result = try Self.run(
            ["tokens", "list", "--database", harness.databasePath, "--tokens", harness.databasePath],
            in: harness.directory.path
        )
        #expect(result.status == 2)
        #expect(result.stderr.contains("must not be the database"))
    }
}
