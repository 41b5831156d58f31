import EscrowCore
import ProfileEscrow
import Vapor

/// The registration: capture the one-time profile, create the account, confirm. A failed account creation leaves
/// the profile escrowed; `retry` reads it back and tries again.
struct Registration: Sendable {
    let escrow: Escrow
    let accounts: Accounts

    /// `POST /register` with the Sign in with Apple profile JSON.
    func register(_ request: Request) async throws -> Response {
        guard let body = request.body.data else { throw Abort(.badRequest, reason: "a profile JSON body is required") }
        let profile: Profile
        do {
            profile = try ProfileParser.parse(body.readableBytesView).profile
        } catch {
            // The field and the rule, never the value.
            throw Abort(.badRequest, reason: "\(error.field ?? "body"): \(error.message)")
        }
        let receipt = try await escrow.capture(profile)  // durable before the account is tried
        do {
            try await accounts.create(profile)
        } catch {
            request.logger.warning(
                "registration failed; the profile stays escrowed",
                metadata: ["escrow.id": "\(receipt.escrowID.hex)"]
            )
            return try await Self.json(.accepted, ["escrowId": receipt.escrowID.hex, "registered": "false"])
        }
        _ = try await escrow.confirm(userIdentifier: profile.userIdentifier)  // success, then purge
        return try await Self.json(.created, ["escrowId": receipt.escrowID.hex, "registered": "true"])
    }

    /// `POST /register/:userIdentifier/retry`: the escrowed profile, registered again.
    func retry(_ request: Request) async throws -> Response {
        guard let userIdentifier = request.parameters.get("userIdentifier") else { throw Abort(.badRequest) }
        let held: EscrowPlaintext
        do {
            held = try await escrow.replay(userIdentifier: userIdentifier)
        } catch let error as EscrowError where error.code == .notFound {
            throw Abort(.notFound, reason: "nothing is held for this user")
        }
        try await accounts.create(held.profile)
        _ = try await escrow.confirm(userIdentifier: userIdentifier)
        return try await Self.json(.ok, ["registered": "true"])
    }

    static func json(_ status: HTTPResponseStatus, _ object: [String: String]) async throws -> Response {
        let response = Response(status: status)
        try response.content.encode(object, as: .json)
        return response
    }
}

/// Stands for your user database: fails while `failing` is set, to show the retry.
actor Accounts {
    var failing: Bool
    private(set) var created: Set<String> = []

    init(failing: Bool) { self.failing = failing }

    func create(_ profile: Profile) throws {
        if failing { throw Abort(.serviceUnavailable, reason: "the user database is down") }
        created.insert(profile.userIdentifier)
    }
}
