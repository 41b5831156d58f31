import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import ProfileEscrow

/// `/v1/apple/revocations`: the app backend asks, at an account's deletion, that a user's token be revoked at Apple
/// (scope `revoke`). The token is queued sealed and durable before the `202`; any node's ``AppleRevoker`` sends it
/// with the team's client secret until Apple takes it. The backend needs no Apple key and no JWT library.
struct AppleRevocationRoutes: Sendable {
    let escrow: Escrow
    /// The client id a revocation names when the body gives none: the web sign-in's Services ID, when configured.
    let defaultClientID: String?
    let maximumBodySize: Int

    func register<Context: CallerRequestContext>(on router: some RouterMethods<Context>) {
        let group = router.group().add(middleware: RequireScope(.revoke))
        group.post("apple/revocations") { request, _ in try await queue(request) }
        group.get("apple/revocations/:id") { _, context in try await read(context) }
    }

    /// `202 {"revocationId"}` once queued; `400` for a body that is not `{token, tokenTypeHint, clientId?}`.
    func queue(_ request: Request) async throws -> Response {
        try RequestBodyReader.requireJSON(request)
        var body = try await RequestBodyReader.read(request, limit: maximumBodySize)
        defer { RequestBodyReader.zero(&body) }
        let object = try? StrictJSON.parse(body)
        guard let token = object?["token"]?.stringValue, !token.isEmpty, token.utf8.count <= 4096 else {
            throw Self.invalid("token", "the body must be {\"token\", \"tokenTypeHint\", \"clientId\"?}")
        }
        let hint = object?["tokenTypeHint"]?.stringValue ?? "refresh_token"
        guard hint == "refresh_token" || hint == "access_token" else {
            throw Self.invalid("tokenTypeHint", "tokenTypeHint is refresh_token or access_token")
        }
        guard let clientID = object?["clientId"]?.stringValue ?? defaultClientID, !clientID.isEmpty,
            clientID.utf8.count <= 255
        else {
            throw Self.invalid("clientId", "clientId names the app the token was issued to (no default here)")
        }
        let id = try await escrow.queueAppleRevocation(token: token, tokenTypeHint: hint, clientID: clientID)
        return JSONResponse.make(.accepted, ["revocationId": .string(id)])
    }

    /// The revocation's state: `pending` (with its attempts), `revoked`, or `failed` with Apple's error code.
    func read(_ context: some RequestContext) async throws -> Response {
        guard let id = context.parameters.get("id"), id.utf8.count <= 64,
            let store = escrow.signIns as? any AppleRevocationStore,
            let revocation = try await store.appleRevocation(id: id)
        else {
            throw Problem(.notFound, code: "revocation_not_found", detail: "no revocation has this id")
        }
        var answer: [String: JSONValue] = [
            "revocationId": .string(revocation.id), "clientId": .string(revocation.clientID),
            "attempts": .integer(revocation.attempts), "createdAt": .timestamp(revocation.createdAt),
            "endedAt": .timestamp(revocation.endedAt), "error": .null,
        ]
        switch revocation.outcome {
        case nil: answer["state"] = "pending"
        case .revoked: answer["state"] = "revoked"
        case .failed(let code):
            answer["state"] = "failed"
            answer["error"] = .string(code)
        }
        return JSONResponse.make(.ok, answer)
    }

    static func invalid(_ field: String, _ detail: String) -> Problem {
        Problem(.badRequest, code: "invalid_revocation", detail: detail, field: field)
    }
}
