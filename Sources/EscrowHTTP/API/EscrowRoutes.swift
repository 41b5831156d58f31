import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import Logging
import ProfileEscrow

/// `/v1/escrows…`: capture, status, replay, confirm, erase; each route's scope declared on its group.
struct EscrowRoutes: Sendable {
    let escrow: Escrow
    let apple: AppleVerifier?
    /// Whether a verified capture's `authorizationCode` is queued for its exchange here
    /// (``EscrowHTTPConfiguration/exchangesAppleCodes``).
    var exchangesCodes = false
    let maximumBodySize: Int

    static let identityTokenInvalid = Problem(
        .unauthorized,
        code: "identity_token_invalid",
        detail: "a valid Apple identity token for this user is required",
        headers: [.wwwAuthenticate: "Bearer realm=\"profile-escrow\""]
    )

    /// Said only once the identity token verified: it tells nothing of the token to whoever does not hold a valid one.
    static let authorizationCodeMismatch = Problem(
        .unauthorized,
        code: "authorization_code_mismatch",
        detail: "authorizationCode is not the code this identity token was issued with",
        field: "authorizationCode",
        headers: [.wwwAuthenticate: "Bearer realm=\"profile-escrow\""]
    )

    /// The routes relative to where they are mounted (`/v1` in `serve`), on a group whose ``BearerAuthentication``
    /// found the caller: each behind the scope it needs.
    func register<Context: CallerRequestContext>(on router: some RouterMethods<Context>) {
        router.group().add(middleware: RequireScope(.capture))
            .post("escrows") { request, context in try await capture(request, context) }
        router.group().add(middleware: RequireScope(.read))
            .get("escrows/:userIdentifier") { _, context in try await status(context) }
        router.group().add(middleware: RequireScope(.erase))
            .delete("escrows/:userIdentifier") { _, context in try await erase(context) }
        // Requeue schedules a delivery: `replay`'s, as the replay itself.
        router.group().add(middleware: RequireScope(.replay))
            .post("escrows/:userIdentifier/replay") { _, context in try await replay(context) }
            .post("escrows/:userIdentifier/requeue") { _, context in try await requeue(context) }
        router.group().add(middleware: RequireScope(.confirm))
            .post("escrows/:userIdentifier/confirm") { _, context in try await confirm(context) }
    }

    func capture(_ request: Request, _ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        try RequestBodyReader.requireJSON(request)
        var body = try await RequestBodyReader.read(request, limit: maximumBodySize)
        // Once parsed (and, below, sealed), the plaintext body is not kept in this buffer.
        defer { RequestBodyReader.zero(&body) }
        let input = try ProfileParser.parse(body, maximumBodySize: maximumBodySize)
        var verified: AppleVerifier.VerifiedCapture?
        if let apple {
            guard let token = input.identityToken else {
                context.logger.info("capture refused: verified capture needs an identityToken")
                throw Self.identityTokenInvalid
            }
            do {
                verified = try await apple.verifyIdentityToken(token, for: input, now: escrow.configuration.clock.now())
            } catch {
                context.logger.info("capture refused: \(error.reason)")
                throw Self.identityTokenInvalid
            }
        } else {
            try input.requireNoAuthorizationCode()
        }
        let exchange = try verified.flatMap { try appleExchange(input.authorizationCode, of: $0, context) }
        let receipt = try await escrow.capture(
            verified?.profile ?? input.profile,
            verified: verified != nil,
            emailVerified: verified?.emailVerified,
            appleExchange: exchange,
            actor: .http(token: caller.name)
        )
        let status: HTTPResponse.Status = receipt.outcome == .created ? .created : .ok
        var answer: [String: JSONValue] = [
            "escrowId": .string(receipt.escrowID.hex), "state": .string(receipt.state.rawValue),
            "expiresAt": .timestamp(receipt.expiresAt),
        ]
        // The code is redeemed here: the refresh token comes in the escrow's delivery.
        if exchange != nil { answer["appleTokens"] = "in-escrow" }
        return JSONResponse.make(status, answer)
    }

    /// The exchange of a verified capture's authorization code, for the client the token was issued to (an app's
    /// code: no `redirect_uri`). Refused, nothing stored, when the token's `c_hash` is not the code's. Nil without a
    /// code, and when codes are not exchanged here: the profile is captured all the same and the code dropped, never
    /// stored (the answer has no `appleTokens`; its sender still holds it, to redeem itself).
    private func appleExchange(
        _ code: String?,
        of verified: AppleVerifier.VerifiedCapture,
        _ context: some RequestContext
    ) throws -> AppleCodeExchange? {
        guard let code else { return nil }
        do {
            try AppleVerifier.checkCodeHash(verified.codeHash, code: code)
        } catch {
            context.logger.info("capture refused: \(error.reason)")
            throw Self.authorizationCodeMismatch
        }
        guard exchangesCodes else { return nil }
        guard let clientID = verified.audience else {
            context.logger.info("capture refused: a code needs an identity token of one audience")
            throw Self.identityTokenInvalid
        }
        return try escrow.appleExchange(
            code: code,
            clientID: clientID,
            redirectURI: nil,
            now: escrow.configuration.clock.now()
        )
    }

    func status(_ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let userIdentifier = try UserIdentifierParameter.require(context)
        guard let status = try await escrow.status(userIdentifier: userIdentifier, actor: .http(token: caller.name))
        else {
            throw Problem.notFound
        }
        return try JSONResponse.make(.ok, encoding: status)
    }

    func replay(_ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let userIdentifier = try UserIdentifierParameter.require(context)
        guard !escrow.isCaptureOnly else {
            throw Problem(
                .conflict,
                code: "capture_only",
                detail: "this node holds a public-only keyring: it captures but cannot open escrows"
            )
        }
        let (plaintext, appleTokens) = try await escrow.replayWithAppleTokens(
            userIdentifier: userIdentifier,
            actor: .http(token: caller.name)
        )
        return JSONResponse.make(.ok, bytes: plaintext.profileJSON(appleTokens: appleTokens))
    }

    func confirm(_ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let userIdentifier = try UserIdentifierParameter.require(context)
        let confirmed = try await escrow.confirmWithAppleTokens(
            userIdentifier: userIdentifier,
            actor: .http(token: caller.name)
        )
        return try JSONResponse.make(
            .ok,
            encoding: ConfirmAnswer(purged: confirmed.purged, appleTokens: confirmed.appleTokens)
        )
    }

    /// A dead escrow back to `pending` (scope `replay`: it schedules a delivery): `requeued` is false when the
    /// escrow is not dead; `404` when nothing is held.
    func requeue(_ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let userIdentifier = try UserIdentifierParameter.require(context)
        let requeued = try await escrow.requeue(userIdentifier: userIdentifier, actor: .http(token: caller.name))
        return JSONResponse.make(.ok, ["requeued": .bool(requeued)])
    }

    /// `204` whether or not an escrow was held: erasing is idempotent, and the answer does not tell
    /// whether the user had one.
    func erase(_ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        let userIdentifier = try UserIdentifierParameter.require(context)
        try await escrow.erase(userIdentifier: userIdentifier, reason: .erased, actor: .http(token: caller.name))
        return Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }
}

/// The answer of a confirmation: `appleTokens` only for an escrow whose sign-in's code was exchanged here (absent
/// otherwise), read before the purge.
private struct ConfirmAnswer: Encodable {
    let purged: Bool
    let appleTokens: AppleTokens?
}
