import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
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
    static func run(
        _ arguments: [String],
        environment: [String: String] = [:],
        in directory: String
    ) async throws
        -> ProfileEscrowCLI.Result
    {
        try await ProfileEscrowCLI.run(arguments, environment: environment, in: directory)
    }

    @Test("tokens add and revoke succeed beside the writer; the running app accepts, then refuses, the token")
    func addAndRevokeWhileServing() async throws {
        // The harness keeps the escrow database open for writing, as `serve` does.
        let harness = try await HTTPHarness()
        let directory = harness.directory.path
        let keyring = directory + "/keyring"
        try harness.keyring.write(path: keyring, overwrite: false)

        // A command that writes the escrow database runs beside the writer too.
        let sweep = try await Self.run(["sweep", "--database", harness.databasePath, "--keyring", keyring], in: directory)
        #expect(sweep.status == 0, "\(sweep.stderr)")

        // `--tokens` explicitly.
        let add = try await Self.run(
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
        let list = try await Self.run(["tokens", "list", "--database", harness.databasePath], in: directory)
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
            let revoke = try await Self.run(
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

        let again = try await Self.run(
            ["tokens", "revoke", "leaky", "--database", harness.databasePath],
            in: directory
        )
        #expect(again.status == 3, "nothing active to revoke any more")
        let after = try await Self.run(["tokens", "list", "--database", harness.databasePath], in: directory)
        #expect(after.stdout.contains("leaky") && after.stdout.contains("revoked"))
    }

    @Test("--tokens may not name the database file")
    func tokensIsNotTheDatabase() async throws {
        let harness = try await HTTPHarness()
        let result = try await Self.run(
            ["tokens", "list", "--database", harness.databasePath, "--tokens", harness.databasePath],
            in: harness.directory.path
        )
        #expect(result.status == 2)
        #expect(result.stderr.contains("must not be the database"))
    }
}
