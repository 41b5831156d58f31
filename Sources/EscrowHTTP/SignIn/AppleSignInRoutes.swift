import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import Logging
import ProfileEscrow

/// `/v1/apple/signin…`: the web flow with Apple's `form_post`. The service is the redirect URI registered with
/// Apple: it verifies the callback, escrows the one-time `user` field durably, and only then sends the browser on to
/// the app with a single-use ticket, which the app's backend redeems server to server.
///
/// No code, id_token, state, nonce, binding or ticket is ever logged; the ticket appears in one URL only, the final
/// redirect's.
struct AppleSignInRoutes: Sendable {
    let escrow: Escrow
    let signIns: any SignInStore
    let apple: AppleVerifier
    let configuration: AppleSignInConfiguration
    let auth: BearerAuthenticator
    let maximumBodySize: Int
    /// No token for the browser's routes: a bucket per route and client, and one per route for all clients.
    let anonymous: ClientRateLimiter
    /// The attempts started here, read by their callback without a store read.
    let started = StartedSignInAttempts()

    /// The browser binding's cookie is one per attempt: `__Host-pe-signin-<tag>`, the tag derived from the attempt's
    /// state (``cookieName(state:)``), so that answering one attempt (a used state posted again by someone else, say)
    /// can only ever clear that attempt's cookie, never the one of a live attempt in the same browser.
    static let cookiePrefix = "__Host-pe-signin-"
    /// The one name of every attempt's cookie before it was one per attempt: still read, for attempts started then.
    static let legacyCookieName = "__Host-pe-signin"

    static let ticketGone = Problem(
        .gone,
        code: "ticket_gone",
        detail: "the ticket is unknown, already redeemed or expired"
    )

    /// The routes relative to where they are mounted (`/v1` in `serve`): the browser's (start, callback), the app
    /// backend's (the token-guarded redeem), or both.
    func register<Context: RequestContext>(
        on router: some RouterMethods<Context>,
        surface: EscrowRouteCollection.Surface = .all
    ) {
        if surface != .internalAPI {
            router.get("apple/signin") { request, context in try await start(request, context) }
            router.post("apple/signin/callback") { request, context in try await callback(request, context) }
            router.post("apple/attempts") { request, context in try await startFromApp(request, context) }
            router.post("apple/native/capture") { request, context in try await nativeCapture(request, context) }
            // The 503 page's script, beside the callback that answers with the page (which names it relatively).
            router.get("apple/signin/\(SignInPages.scriptName)") { _, _ in SignInPages.script() }
        }
        if surface != .publicAPI {
            router.post("apple/signin/tickets/redeem") { request, context in try await redeem(request, context) }
        }
    }

    // MARK: - Start

    func start(_ request: Request, _ context: some RequestContext) async throws -> Response {
        try anonymous.admit("apple-signin", request, context)
        let requested = request.uri.queryParameters["return"].map(String.init)
        guard let returnName = resolveReturn(requested) else {
            return SignInPages.badRequest("The sign-in names no return URL this service knows.")
        }
        let appState = request.uri.queryParameters["appState"].map(String.init)
        if let appState, appState.utf8.count > SignInAttempt.maximumAppStateSize {
            return SignInPages.badRequest(
                "The app's state (appState) is longer than \(SignInAttempt.maximumAppStateSize) bytes."
            )
        }
        let now = escrow.configuration.clock.now()
        let state = Self.secret()
        let nonce = Self.secret()
        let binding = Self.secret()
        let attempt = SignInAttempt(
            stateHash: Self.hash(state),
            nonceHash: Self.hash(nonce),
            bindingHash: Self.hash(binding),
            returnName: returnName,
            createdAt: now,
            expiresAt: now.addingTimeInterval(configuration.attemptLifetime.inSeconds),
            sealedAppState: appState.map { Self.sealAppState($0, state: state) }
        )
        do {
            try await signIns.createSignInAttempt(attempt)
            started.insert(attempt, now: now)
        } catch {
            context.logger.error("a sign-in attempt could not be stored", metadata: ["error": "\(error)"])
            return SignInPages.unavailable()
        }
        var headers: HTTPFields = [
            .location: authorizeURL(state: state, nonce: nonce), .cacheControl: "no-store",
            .referrerPolicy: "no-referrer",
        ]
        // The cookie outlives the attempt by the resubmission grace: a form first received in time, posted again from
        // the 503 page later, still carries it.
        let cookieLife = configuration.attemptLifetime.inSeconds + SignInAttempt.resubmissionGrace
        headers[.setCookie] = Self.bindingCookie(Self.cookieName(state: state), binding, maxAge: Int(cookieLife))
        SignInMetrics.signIn("started")
        return Response(status: .found, headers: headers)
    }

    /// Apple's authorize URL for the web flow with this state and nonce.
    func authorizeURL(state: String, nonce: String) -> String {
        let query = [
            ("client_id", configuration.clientID), ("redirect_uri", configuration.callbackURL),
            ("response_type", "code id_token"), ("response_mode", "form_post"), ("scope", "name email"),
            ("state", state), ("nonce", nonce),
        ]
        .map { "\($0.0)=\(SignInForm.encode($0.1))" }.joined(separator: "&")
        let separator = configuration.authorizeURL.contains("?") ? "&" : "?"
        return configuration.authorizeURL + separator + query
    }

    /// The registered return name asked for; without one, the only one registered.
    func resolveReturn(_ requested: String?) -> String? {
        guard let requested else { return configuration.returns.count == 1 ? configuration.returns.keys.first : nil }
        return configuration.returns[requested] == nil ? nil : requested
    }

    // MARK: - Callback

    func callback(_ request: Request, _ context: some RequestContext) async throws -> Response {
        // Checked before the body is read. One client over its own limit is refused (a browser posts one callback per
        // sign-in: a client that posts many is not one person's browser). All clients together over the route's limit
        // are not refused but answered with the page that posts the form again: a 429 would lose the profile it holds.
        let verdict = anonymous.acquire("apple-signin-callback", request, context)
        if case .clientLimited(let wait) = verdict { return SignInPages.tooManyRequests(retryAfter: wait) }
        let admitted = verdict == .admitted
        guard Self.isForm(request.headers[.contentType]) else {
            throw Problem(
                .unsupportedMediaType,
                code: "unsupported_media_type",
                detail: "the body must be application/x-www-form-urlencoded",
                headers: [.accept: "application/x-www-form-urlencoded"]
            )
        }
        if let origin = request.headers[.origin], origin != "null", let expected = configuration.authorizeOrigin,
            origin != expected, !configuration.callbackURL.hasPrefix(origin + "/")
        {
            return SignInPages.badRequest("The sign-in came from an unexpected origin.")
        }
        var body = try await RequestBodyReader.read(request, limit: maximumBodySize)
        defer { RequestBodyReader.zero(&body) }
        guard let form = SignInForm(body), let state = form["state"], !state.isEmpty else {
            return SignInPages.badRequest("The sign-in form is malformed.")
        }
        let now = escrow.configuration.clock.now()
        let stateHash = Self.hash(state)
        // A resubmission from the 503 page is judged by when the service first received the form.
        let stamp = form[SignInStamp.field].flatMap {
            SignInStamp.verify($0, escrow, stateHash: stateHash, form: form, now: now)
        }
        let receivedAt = stamp?.receivedAt ?? now
        guard admitted else {
            return retryPage(
                form,
                stateHash: stateHash,
                stamp: stamp ?? SignInStamp(receivedAt: now, tokenVerified: false)
            )
        }
        let attempt: SignInAttempt?
        do {
            attempt = try await self.attempt(stateHash: stateHash, now: now)
        } catch {
            context.logger.error("a sign-in callback could not read its attempt", metadata: ["error": "\(error)"])
            // Whether the id_token is valid now (all but its nonce, which does not age): the resubmission is then
            // judged by this time for the token too.
            var tokenVerified = false
            if stamp == nil, let idToken = form["id_token"] {
                let valid = try? await apple.verifySignInToken(
                    idToken,
                    audiences: [configuration.clientID],
                    nonceHash: nil,
                    authorizationCode: form["code"],
                    now: now
                )
                tokenVerified = valid != nil
            }
            return retryPage(
                form,
                stateHash: stateHash,
                stamp: stamp ?? SignInStamp(receivedAt: now, tokenVerified: tokenVerified)
            )
        }
        guard let attempt, let returnURL = configuration.returns[attempt.returnName] else {
            context.logger.info("sign-in callback refused: unknown state")
            SignInMetrics.signIn("unknown_state")
            return SignInPages.unknownAttempt()
        }
        // This attempt's own cookie: answering it clears that one only, never another attempt's in the same browser.
        // An app's attempt has none: Apple's form_post comes from a Custom Tab, not from the app that started it.
        let ownCookie = attempt.startedByApp ? nil : Self.cookieName(state: state)
        guard attempt.isLive(at: receivedAt) else {
            started.remove(stateHash: stateHash)
            return Self.redirect(returnURL, ["error": "signin_expired"], clearCookie: ownCookie)
        }
        let bindingHash = ownCookie.map { name in
            (request.cookieValue(name) ?? request.cookieValue(Self.legacyCookieName)).map(Self.hash) ?? []
        }
        guard attempt.accepts(bindingHash: bindingHash) else {
            // Never cleared here: the cookie may be the real user's, for a live attempt of their own.
            context.logger.info("sign-in callback refused: browser binding does not match")
            return Self.redirect(returnURL, ["error": "signin_invalid"], clearCookie: nil)
        }
        if let error = form["error"] {
            let code = error == "user_cancelled_authorize" ? error : "signin_invalid"
            context.logger.info("sign-in ended at Apple", metadata: ["signin.error": "\(code)"])
            return Self.redirect(returnURL, ["error": code], clearCookie: ownCookie)
        }
        guard let idToken = form["id_token"], let code = form["code"], !code.isEmpty else {
            return Self.redirect(returnURL, ["error": "signin_invalid"], clearCookie: ownCookie)
        }
        let identity: AppleSignInIdentity
        do {
            identity = try await apple.verifySignInToken(
                idToken,
                audiences: [configuration.clientID],
                nonceHash: attempt.nonceHash,
                authorizationCode: code,
                now: stamp?.tokenVerified == true ? receivedAt : now
            )
        } catch {
            context.logger.info("sign-in callback refused: \(error.reason)")
            return Self.redirect(returnURL, ["error": "signin_invalid"], clearCookie: ownCookie)
        }
        let (profile, refusal) = profile(form["user"], identity)
        let signIn = VerifiedSignIn(identity: identity, authorizationCode: code, profile: profile, refusal: refusal)
        let ticket = SignInTicketText.random(stateHash: stateHash)
        let completion: SignInCompletion
        do {
            completion = try await captureAndIssue(
                signIn,
                attempt: attempt,
                state: state,
                bindingHash: bindingHash,
                ticket: ticket,
                now: now,
                receivedAt: receivedAt
            )
        } catch {
            // Nothing acknowledged: the browser keeps the form and posts it again, stamped with this first receipt.
            context.logger.error(
                "a sign-in could not be escrowed; the browser will retry",
                metadata: ["error": "\(error)"]
            )
            return retryPage(
                form,
                stateHash: stateHash,
                stamp: stamp ?? SignInStamp(receivedAt: now, tokenVerified: true)
            )
        }
        // The attempt is over, except after a binding that did not match: the real user's callback may still come.
        switch completion {
        case .completed:
            started.remove(stateHash: stateHash)
            // Debug, as a capture's own line: the access log and the sign-in metric count every completion.
            context.logger.debug(
                "sign-in completed",
                metadata: ["signin.profile": "\(profile == nil ? "none" : "escrowed")"]
            )
            return Self.redirect(returnURL, ["ticket": ticket], clearCookie: ownCookie)
        case .expired:
            started.remove(stateHash: stateHash)
            return Self.redirect(returnURL, ["error": "signin_expired"], clearCookie: ownCookie)
        case .bindingMismatch:
            return Self.redirect(returnURL, ["error": "signin_invalid"], clearCookie: nil)
        case .unknown:
            started.remove(stateHash: stateHash)
            SignInMetrics.signIn("unknown_state")
            return SignInPages.unknownAttempt()
        }
    }

    /// The attempt of this state hash: as started here when this process holds it, else as the store has it.
    func attempt(stateHash: [UInt8], now: Date) async throws -> SignInAttempt? {
        if let held = started.attempt(stateHash: stateHash, now: now) { return held }
        return try await signIns.signInAttempt(stateHash: stateHash)
    }

    /// A verified sign-in's capture and ticket, for Apple's callback and an app's native capture alike (the one place
    /// a sign-in's authorization code passes through): in one transaction the attempt is used, `signIn`'s profile
    /// captured and the ticket stored, its result (the redeem answer) sealed under the ticket and naming the escrow
    /// that holds the profile. Durable before it returns. When codes are exchanged here, the code is queued for its
    /// exchange in the same transaction, for the web flow's Services ID or, for an app, `appClientID` (its bundle id).
    func captureAndIssue(
        _ signIn: VerifiedSignIn,
        attempt: SignInAttempt,
        state: String,
        bindingHash: [UInt8]?,
        ticket: String,
        now: Date,
        receivedAt: Date,
        appClientID: String? = nil
    ) async throws -> SignInCompletion {
        var appState = attempt.sealedAppState.flatMap { Self.openAppState($0, state: state) }
        defer { if appState != nil { RequestBodyReader.zero(&appState!) } }
        let result = signIn.result(
            returnName: attempt.returnName,
            appState: appState.map { String(decoding: $0, as: UTF8.self) }
        )
        let expiresAt = now.addingTimeInterval(configuration.ticketLifetime.inSeconds)
        let exchange = try signIn.authorizationCode.flatMap { code in
            try configuration.exchangesCodes
                ? escrow.appleExchange(
                    code: code,
                    clientID: appClientID ?? configuration.clientID,
                    redirectURI: appClientID == nil ? configuration.callbackURL : nil,
                    now: now
                ) : nil
        }
        let exchanging = exchange != nil
        let request = SignInCompletionRequest(
            stateHash: attempt.stateHash,
            bindingHash: bindingHash,
            now: now,
            receivedAt: receivedAt,
            attempt: attempt
        ) { id in
            var result = result
            result["escrowId"] = .string(id?.hex)
            // Captured with its code queued: the refresh token reaches the backend in the escrow's delivery.
            if id != nil, exchanging {
                result["authorizationCode"] = .null
                result["appleTokens"] = "in-escrow"
            }
            var plaintext = JSONResponse.encode(result)
            defer { RequestBodyReader.zero(&plaintext) }
            return SignInTicket(
                ticketHash: Self.hash(ticket),
                sealedResult: TicketSeal.seal(plaintext, ticket: Array(ticket.utf8)),
                expiresAt: expiresAt
            )
        }
        return try await escrow.completeSignIn(
            request,
            profile: signIn.profile,
            emailVerified: signIn.email.verified,
            transferSub: signIn.identity.transferSub,
            appleExchange: exchange,
            in: signIns,
            actor: .apple
        )
    }

    /// The 503 page: the form as received, with the service's stamp of its first receipt in place of any other.
    private func retryPage(_ form: SignInForm, stateHash: [UInt8], stamp: SignInStamp) -> Response {
        SignInMetrics.signIn("retry_page")
        let fields = form.fields.filter { $0.name != SignInStamp.field }
        let encoded = stamp.encoded(escrow, stateHash: stateHash, form: SignInForm(fields: fields))
        return SignInPages.retry(
            SignInForm(fields: fields + [(SignInStamp.field, encoded)]),
            action: configuration.callbackURL,
            returnOrigins: configuration.returnOrigins
        )
    }

    /// The profile to escrow from Apple's `user` field (untrusted: at most 4 KiB, parsed strictly), with the
    /// id_token's `sub` and its `email`, which wins over the field's; or the code why none is, when a field was sent.
    func profile(_ user: String?, _ identity: AppleSignInIdentity) -> (Profile?, String?) {
        guard let user else { return (nil, nil) }
        guard user.utf8.count <= configuration.maximumUserSize else { return (nil, "user_too_large") }
        guard let value = try? StrictJSON.parse(Array(user.utf8)), case .object(let members) = value else {
            return (nil, "user_invalid_json")
        }
        var given: String?
        var family: String?
        var email: String?
        for member in members {
            switch member.key {
            case "name":
                guard case .object(let parts) = member.value else { return (nil, "user_invalid") }
                for part in parts {
                    guard let text = part.value.stringValue else { return (nil, "user_invalid") }
                    switch part.key {
                    case "firstName": given = text
                    case "lastName": family = text
                    default: return (nil, "user_invalid")
                    }
                }
            case "email":
                guard let text = member.value.stringValue else { return (nil, "user_invalid") }
                email = text
            default: return (nil, "user_invalid")
            }
        }
        let name = given == nil && family == nil ? nil : PersonName(givenName: given, familyName: family)
        do {
            let profile = try Profile(
                userIdentifier: identity.userIdentifier,
                fullName: name,
                email: identity.email ?? email,
                isPrivateEmail: identity.email == nil ? nil : identity.isPrivateEmail,
                realUserStatus: identity.realUserStatus.flatMap(AppleVerifier.realUserStatus)
            )
            return (profile, nil)
        } catch {
            return (nil, error.code.rawValue)
        }
    }

    // MARK: - Redeem

    func redeem(_ request: Request, _ context: some RequestContext) async throws -> Response {
        _ = try await auth.authorize(request, context, scope: .signin)
        try RequestBodyReader.requireJSON(request)
        let body = try await RequestBodyReader.read(request, limit: maximumBodySize)
        let fields = try? StrictJSON.parse(body)
        guard let ticket = fields?["ticket"]?.stringValue, !ticket.isEmpty, ticket.utf8.count <= 256 else {
            throw Problem(
                .badRequest,
                code: "invalid_ticket",
                detail: "the body must be {\"ticket\": \"…\"}, with \"attempt\" for an app's sign-in",
                field: "ticket"
            )
        }
        // An app's ticket redeems only with its attempt's secret: a ticket copied out of a redirect is useless alone.
        let starterHash = fields?["attempt"]?.stringValue.flatMap(AppAttemptSecret.init)?.bindingHash
        let now = escrow.configuration.clock.now()
        guard
            let redemption = try await signIns.redeemSignInTicket(
                SignInTicketText.key(ticket),
                starterHash: starterHash,
                at: now
            ),
            var plaintext = TicketSeal.open(redemption.sealedResult, ticket: Array(ticket.utf8))
        else {
            SignInMetrics.redeem("gone")
            throw Self.ticketGone
        }
        defer { RequestBodyReader.zero(&plaintext) }
        SignInMetrics.redeem("redeemed")
        return JSONResponse.make(.ok, bytes: plaintext)
    }

    // MARK: - Helpers

    /// 32 random bytes in base64url: 256 bits.
    static func secret() -> String { Base64URL.encode(Hashing.randomBytes(count: 32)) }

    static func hash(_ secret: String) -> [UInt8] { Hashing.blake2b256(Array(secret.utf8)) }

    /// Whether a `Content-Type` names `application/x-www-form-urlencoded` (ASCII case-insensitively, parameters
    /// ignored), without a Unicode `lowercased()`.
    static func isForm(_ contentType: String?) -> Bool {
        guard let mediaType = contentType?.split(separator: ";", maxSplits: 1).first else { return false }
        return AppleVerifier.asciiCaseInsensitiveEqual(
            mediaType.trimmingSpaces(),
            "application/x-www-form-urlencoded"
        )
    }

    /// The binding cookie's name for the attempt of `state`: a tag of 64 bits derived from the state (apart from the
    /// hash the store keeps, so the cookie's name says nothing of it).
    static func cookieName(state: String) -> String {
        let tag = Hashing.blake2b256(Array("profile-escrow signin cookie v1 \(state)".utf8)).prefix(8)
        return cookiePrefix + Base64URL.encode(Array(tag))
    }

    static func bindingCookie(_ name: String, _ value: String, maxAge: Int) -> String {
        "\(name)=\(value); Max-Age=\(maxAge); Path=/; Secure; HttpOnly; SameSite=None"
    }

    /// The app's `appState`, sealed under a key only the attempt's `state` gives: a copy of the database reveals it
    /// no more than the state.
    static func sealAppState(_ appState: String, state: String) -> [UInt8] {
        TicketSeal.seal(Array(appState.utf8), ticket: Array("app-state \(state)".utf8))
    }

    static func openAppState(_ sealed: [UInt8], state: String) -> [UInt8]? {
        TicketSeal.open(sealed, ticket: Array("app-state \(state)".utf8))
    }

    /// `303` to the registered return URL with one parameter (the ticket, or an error code).
    static func redirect(
        _ returnURL: String,
        _ parameters: KeyValuePairs<String, String>,
        clearCookie: String?
    ) -> Response {
        let separator = returnURL.prefix { $0 != "#" }.contains("?") ? "&" : "?"
        let query = parameters.map { "\($0.key)=\(SignInForm.encode($0.value))" }.joined(separator: "&")
        // The outcome: `completed` for a ticket, else the error code (never the ticket).
        SignInMetrics.signIn(parameters.first?.key == "ticket" ? "completed" : parameters.first?.value ?? "completed")
        // The query goes before a fragment: an Android return (`intent://callback#Intent;…;end`) keeps its own.
        let fragmentStart = returnURL.firstIndex(of: "#") ?? returnURL.endIndex
        let location = returnURL[..<fragmentStart] + separator + query + returnURL[fragmentStart...]
        var headers: HTTPFields = [
            .location: String(location), .cacheControl: "no-store", .referrerPolicy: "no-referrer",
        ]
        if let clearCookie { headers[.setCookie] = bindingCookie(clearCookie, "", maxAge: 0) }
        return Response(status: .seeOther, headers: headers)
    }
}
