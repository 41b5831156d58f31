import EscrowCore
import EscrowCrypto
import EscrowPostgres
import EscrowTestSupport
import Foundation
import PostgresNIO
import Testing

/// `keys cycle` on a `postgres://` store, through the real CLI: rotate, rewrap every escrow, retire the old version;
/// the store then refuses anything sealed to it, and the escrows still open and deliver.
@Suite("PostgreSQL: keys cycle")
struct KeyCycleTests {
    @Test func cycleRewrapsRetiresAndRefusesTheOldVersion() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            let environment = [
                "PROFILE_ESCROW_DATABASE": database.url, "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
            ]
            func cli(_ arguments: [String], stdin: String = "") async throws -> ProfileEscrowCLI.Result {
                try await ProfileEscrowCLI.run(arguments, stdin: stdin, environment: environment, in: directory.path)
            }
            #expect(try await cli(["keys", "init"]).status == 0)
            // An old copy of the keyring, as a backup or a capture node that missed the rotation would hold it.
            let oldKeyring = directory.path + "/keyring.old"
            try FileManager.default.copyItem(atPath: directory.path + "/keyring", toPath: oldKeyring)
            for number in 0..<3 {
                let captured = try await cli(["capture"], stdin: ServeKillTests.body(number))
                #expect(captured.status == 0, "\(captured.stderr)")
            }

            let cycle = try await cli(["keys", "cycle", "--grace", "0s"])
            #expect(cycle.status == 0, "\(cycle.stderr)")
            #expect(cycle.stdout.contains("active version 2; rewrapped 3, 0 failed; retired v1"), "\(cycle.stdout)")
            let versions = try await database.rows("SELECT DISTINCT key_version FROM escrow")
            #expect(try versions.map { try $0.decode(Int64.self) } == [2], "every escrow now sealed to v2")
            let retired = try await database.rows("SELECT version FROM retired_key_version")
            #expect(try retired.map { try $0.decode(Int64.self) } == [1])

            // Every escrow still opens with the cycled keyring (its blind index is unchanged).
            for number in 0..<3 {
                let status = try await cli(["status", "000000.pgtest\(String(format: "%020d", number)).0002"])
                #expect(status.status == 0, "\(status.stderr)")
            }
            // A capture sealed with the old keyring (version 1) is refused by the store, from any node.
            var old = environment
            old["PROFILE_ESCROW_KEYRING"] = oldKeyring
            let refused = try await ProfileEscrowCLI.run(
                ["capture"],
                stdin: ServeKillTests.body(10),
                environment: old,
                in: directory.path
            )
            #expect(refused.status == 4 && refused.stderr.contains("retired"), "\(refused.status) \(refused.stderr)")

            let report = try await cli(["purge-report", "--verify"])
            #expect(report.status == 0, "\(report.stdout)\(report.stderr)")
        }
    }
}
