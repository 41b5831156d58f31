import EscrowCrypto
import EscrowSQLite
import Logging
import ProfileEscrow
import Vapor

@main
enum Entrypoint {
    static func main() async throws {
        var environment = try Environment.detect()
        try LoggingSystem.bootstrap(from: &environment)
        let app = try await Application.make(environment)
        let directory = Environment.get("ESCROW_DIRECTORY") ?? "escrow-data"
        // The keyring: `profile-escrow keys init --keyring escrow-data/keyring` (back it up offline).
        let keyring = try Keyring.load(path: directory + "/keyring")
        let store = try SQLiteEscrowStore(path: directory + "/escrow.sqlite", logger: app.logger)
        let registration = Registration(
            escrow: Escrow(store: store, keyring: keyring, logger: app.logger),
            accounts: Accounts(failing: Environment.get("ACCOUNTS_FAILING") == "1")
        )
        app.post("register") { try await registration.register($0) }
        app.post("register", ":userIdentifier", "retry") { try await registration.retry($0) }
        do {
            try await app.execute()
        } catch {
            app.logger.report(error: error)
            try? await app.asyncShutdown()
            throw error
        }
        try await app.asyncShutdown()
        try store.close()
    }
}
