import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import Logging
import ProfileEscrow

/// Sign-in from apps, on the public listener with no bearer token: Apple's signed identity token and a single-use
/// attempt are the credentials. An app starts an attempt (`POST /v1/apple/attempts`), then either captures the
/// credential it got natively (`POST /v1/apple/native/capture`, iOS and macOS) or runs Apple's web flow in a Custom Tab
/// whose form_post ends at the callback (Android, Flutter); either way the profile is escrowed at the source and a
/// ticket issued that redeems only with the attempt's secret.
///
/// No attempt secret, token, code, nonce or ticket is logged; refusals say no more than which of the two went wrong
/// (the token: 401; the attempt: 410).
extension AppleSignInRoutes {
    static let attemptGone = Problem(
        .gone,
        code: "attempt_gone",
        detail: "the sign-in attempt is unknown, expired or already used"
    )

    static let signInTokenInvalid = Problem(
        .unauthorized,
        code: "identity_token_invalid",
        detail: "a valid Apple identity token for this sign-in attempt is required",
        headers: [.wwwAuthenticate: "Bearer realm=\"profile-escrow\""]
    )

    /// The largest native capture body (16 KiB), whatever larger body the API allows.
    static let maximumCredentialSize = 16 * 1024

    /// The audiences an app's identity token may have: every configured one but the web flow's Services ID.
    var nativeAudiences: Set<String> { apple.audiences.subtracting([configuration.clientID]) }

    // MARK: - Start

    func startFromApp(_ request: Request, _ context: some RequestContext) async throws -> Response {
        try anonymous.admit("apple-attempts", request, context)
        try RequestBodyReader.requireJSON(request)
        let body = try await RequestBodyReader.read(request, limit: maximumBodySize)
        let (requested, appState) = try Self.attemptRequest(body)
        // An app that only captures natively needs no return: without one named and with no single one registered,
        // the attempt has none, and only a native capture can complete it.
        let returnName: String
        if let requested {
            guard configuration.returns[requested] != nil else {
                throw Problem(
                    .badRequest,
                    code: "unknown_return",
                    detail: "no return URL of that name is registered",
                    field: "return"
                )
            }
            returnName = requested
        } else {
            returnName = resolveReturn(nil) ?? ""
        }
        let now = escrow.configuration.clock.now()
        let secret = AppAttemptSecret.random()
        let state = secret.state
        let nonce = secret.nonce
        let attempt = SignInAttempt(
            stateHash: Self.hash(state),
            nonceHash: Self.hash(nonce),
            bindingHash: secret.bindingHash,
            returnName: returnName,
            createdAt: now,
            expiresAt: now.addingTimeInterval(configuration.attemptLifetime.inSeconds),
            sealedAppState: appState.map { Self.sealAppState($0, state: state) },
            startedByApp: true
        )
        try await signIns.createSignInAttempt(attempt)
        started.insert(attempt, now: now)
        SignInMetrics.signIn("app_started")
        return JSONResponse.make(
            .created,
            [
                "attempt": .string(secret.secret), "state": .string(state), "nonce": .string(nonce),
                "nonceSHA256": .string(secret.nonceSHA256),
                "authorizeURL": .string(authorizeURL(state: state, nonce: nonce)),
                "expiresAt": .timestamp(attempt.expiresAt),
            ]
        )
    }

    /// `{"return"?, "appState"?}`, both strings or null, nothing else; `appState` at most 256 bytes.
    static func attemptRequest(_ body: [UInt8]) throws -> (returnName: String?, appState: String?) {
        guard !body.isEmpty else { return (nil, nil) }
        var returnName: String?
        var appState: String?
        for member in try ProfileParser.topLevelMembers(body) {
            switch member.key {
            case "return": returnName = try ProfileParser.string(member.value, field: "return")
            case "appState": appState = try ProfileParser.string(member.value, field: "appState")
            default:
                throw Problem(
                    .badRequest,
                    code: "unknown_field",
                    detail: "the body may hold only return and appState"
                )
            }
        }
        if let appState, appState.utf8.count > SignInAttempt.maximumAppStateSize {
            throw Problem(
                .badRequest,
                code: "app_state_too_long",
                detail: "appState must be at most \(SignInAttempt.maximumAppStateSize) bytes",
                field: "appState"
            )
        }
        return (returnName, appState)
    }

    // MARK: - Native capture

    func nativeCapture(_ request: Request, _ context: some RequestContext) async throws -> Response {
        try anonymous.admit("apple-native-capture", request, context)
        try RequestBodyReader.requireJSON(request)
        var body = try await RequestBodyReader.read(
            request,
            limit: min(maximumBodySize, Self.maximumCredentialSize)
        )
        // Once parsed, the name and email are not kept in this buffer.
        defer { RequestBodyReader.zero(&body) }
        let credential = try NativeCredential(body)
        guard let secret = AppAttemptSecret(credential.attempt) else { throw Self.attemptGone }
        let state = secret.state
        let stateHash = Self.hash(state)
        let now = escrow.configuration.clock.now()
        guard let attempt = try await attempt(stateHash: stateHash, now: now), attempt.startedByApp,
            attempt.accepts(bindingHash: secret.bindingHash)
        else {
            context.logger.info("native capture refused: unknown attempt")
            throw Self.attemptGone
        }
        let ticket = secret.ticket(
            stateHash: stateHash,
            identityToken: credential.identityToken,
            authorizationCode: credential.authorizationCode
        )
        guard attempt.isLive(at: now) else {
            return try await answerAgain(ticket, now: now, context)
        }
        let identity: AppleSignInIdentity
        do {
            identity = try await apple.verifySignInToken(
                credential.identityToken,
                audiences: nativeAudiences,
                nonceHash: Self.hash(secret.nonceSHA256),
                authorizationCode: credential.authorizationCode,
                now: now
            )
        } catch {
            context.logger.info("native capture refused: \(error.reason)")
            throw Self.signInTokenInvalid
        }
        let (profile, refusal) = credential.profile(identity)
        let signIn = VerifiedSignIn(
            identity: identity,
            authorizationCode: credential.authorizationCode,
            profile: profile,
            refusal: refusal
        )
        // A store that fails here acknowledges nothing (503): the app keeps the credential and sends it again.
        let completion = try await captureAndIssue(
            signIn,
            attempt: attempt,
            state: state,
            bindingHash: secret.bindingHash,
            ticket: ticket,
            now: now,
            receivedAt: now,
            appClientID: identity.audience
        )
        switch completion {
        case .completed(_, let outcome):
            started.remove(stateHash: stateHash)
            SignInMetrics.signIn("native_captured")
            return Self.captureAnswer(.created, ticket: ticket, escrowID: outcome?.record.id.hex, refusal: refusal)
        case .expired:
            // Used meanwhile: by this same capture sent twice at once, or by another.
            started.remove(stateHash: stateHash)
            return try await answerAgain(ticket, now: now, context)
        case .unknown, .bindingMismatch:
            throw Self.attemptGone
        }
    }

    /// The answer to a capture whose attempt is used or expired: the same `200` with the same ticket when this very
    /// capture used it and the ticket is unredeemed (the app lost the first answer), else `410`.
    private func answerAgain(_ ticket: String, now: Date, _ context: some RequestContext) async throws -> Response {
        guard let sealed = try await signIns.unredeemedSignInTicket(SignInTicketText.key(ticket), at: now),
            var plaintext = TicketSeal.open(sealed, ticket: Array(ticket.utf8))
        else {
            context.logger.info("native capture refused: attempt expired or used")
            throw Self.attemptGone
        }
        defer { RequestBodyReader.zero(&plaintext) }
        let result = try? StrictJSON.parse(plaintext)
        SignInMetrics.signIn("native_answered_again")
        return Self.captureAnswer(
            .ok,
            ticket: ticket,
            escrowID: result?["escrowId"]?.stringValue,
            refusal: result?["profileRefused"]?.stringValue
        )
    }

    private static func captureAnswer(
        _ status: HTTPResponse.Status,
        ticket: String,
        escrowID: String?,
        refusal: String?
    ) -> Response {
        var members: [String: JSONValue] = ["ticket": .string(ticket), "escrowId": .string(escrowID)]
        if let refusal { members["profileRefused"] = .string(refusal) }
        return JSONResponse.make(status, members)
    }
}
