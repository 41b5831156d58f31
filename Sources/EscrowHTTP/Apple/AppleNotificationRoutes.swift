import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import JWTKit
import Logging
import ProfileEscrow

/// `POST /v1/apple/notifications`: Apple's server-to-server notifications.
///
/// A notification whose signature or claims do not verify is answered `401` and changes nothing;
/// so is every notification when no JWKS and audience are configured. A verified one is answered
/// `200`: duplicates (same `jti`) and unknown types change nothing.
struct AppleNotificationRoutes: Sendable {
    let escrow: Escrow
    let apple: AppleVerifier?
    let log: any NotificationLog
    let maximumBodySize: Int
    /// No token: one shared bucket for the route, checked before the body is read.
    let anonymous: ClientRateLimiter
    /// Where verified notifications are forwarded to the backend, when set.
    var forwarder: NotificationForwarder? = nil

    static let invalid = Problem(
        .unauthorized,
        code: "notification_invalid",
        detail: "the notification did not verify",
        headers: [.wwwAuthenticate: "Bearer realm=\"profile-escrow\""]
    )

    /// The route relative to where it is mounted (`/v1` in `serve`).
    func register<Context: RequestContext>(on router: some RouterMethods<Context>) {
        router.post("apple/notifications") { request, context in try await receive(request, context) }
    }

    func receive(_ request: Request, _ context: some RequestContext) async throws -> Response {
        try anonymous.admit("apple-notifications", request, context)
        try RequestBodyReader.requireJSON(request)
        let body = try await RequestBodyReader.read(request, limit: maximumBodySize)
        guard let payload = (try? StrictJSON.parse(body))?["payload"]?.stringValue else {
            throw Problem(
                .badRequest,
                code: "invalid_notification",
                detail: "the body must be {\"payload\": \"<JWS>\"}",
                field: "payload"
            )
        }
        guard let apple else {
            context.logger.warning("Apple notification refused: no Apple audience and JWKS are configured")
            throw Self.invalid
        }
        let claims: AppleNotificationClaims
        do {
            claims = try await apple.verifyNotification(payload, now: escrow.configuration.clock.now())
        } catch {
            context.logger.info("Apple notification refused: \(error.reason)")
            throw Self.invalid
        }
        guard let event = AppleNotificationEvent(json: claims.events) else {
            throw Problem(
                .badRequest,
                code: "invalid_notification",
                detail: "the events claim is not a valid event",
                field: "payload.events"
            )
        }
        let idHash = Hashing.blake2b256(Array(claims.jti.value.utf8))
        guard try await !log.hasNotification(idHash: idHash) else {
            context.logger.info("Apple notification ignored: duplicate", metadata: ["event": "\(event.kind.name)"])
            await escrow.noteNotification(type: event.kind.name, outcome: "duplicate")
            return JSONResponse.make(.ok, ["outcome": "duplicate"])
        }
        // Apply, then record: a crash in between makes Apple's retry apply it again (idempotent),
        // never lose it.
        // Only an escrow captured before the event changes: a late or replayed notification never touches a
        // newer capture. Without an `event_time`, the notification's own `iat` bounds it.
        let outcome = try await apply(event, before: event.eventTime ?? claims.iat.value)
        let now = escrow.configuration.clock.now()
        if let forwarder {
            // Apple's signed payload as received, with what this service made of it: the backend can verify the JWS
            // against Apple's keys itself. Its webhook id is stable (a hash of the jti): a backend dedupes on it.
            // Recorded and queued (sealed) in one transaction, before Apple's answer: never recorded unforwarded.
            let id = "apple-" + Hex.encode(idHash.prefix(16))
            let body = JSONResponse.encode([
                "type": "apple-notification", "id": .string(id), "event": .string(event.kind.name),
                "events": .string(claims.events), "outcome": .string(outcome), "payload": .string(payload),
            ])
            try await forwarder.record(idHash: idHash, id: id, body: body, at: now)
        } else {
            _ = try await log.recordNotification(idHash: idHash, at: now)
        }
        context.logger.info(
            "Apple notification handled",
            metadata: ["event": "\(event.kind.name)", "outcome": "\(outcome)"]
        )
        await escrow.noteNotification(type: event.kind.name, outcome: outcome)
        return JSONResponse.make(.ok, ["outcome": .string(outcome)])
    }

    private func apply(_ event: AppleNotificationEvent, before eventTime: Date) async throws -> String {
        switch event.kind {
        case .consentRevoked:
            return try await escrow.erase(
                userIdentifier: event.subject,
                reason: .revoked,
                capturedBefore: eventTime,
                actor: .apple
            ).rawValue
        case .accountDeleted:
            return try await escrow.erase(
                userIdentifier: event.subject,
                reason: .accountDeleted,
                capturedBefore: eventTime,
                actor: .apple
            ).rawValue
        case .emailEnabled, .emailDisabled:
            // The user turned forwarding to the relay address on or off; the address itself stays (and
            // the event's `email`, when it differs, replaces it).
            return try Self.answer(
                try await escrow.updateEmailForwarding(
                    userIdentifier: event.subject,
                    forwarding: event.kind == .emailEnabled,
                    email: event.email,
                    isPrivateEmail: event.isPrivateEmail,
                    capturedBefore: eventTime,
                    actor: .apple
                )
            )
        case .unknown:
            return "ignored"
        }
    }

    /// A worker delivering the escrow right now: 503 with Retry-After, so that Apple retries the
    /// notification after the lease (it was not recorded as handled).
    private static func answer(_ update: Escrow.EmailUpdate) throws -> String {
        if update == .busy {
            throw Problem(
                .serviceUnavailable,
                code: "escrow_busy",
                detail: "the escrow is being delivered; retry later",
                headers: [.retryAfter: "30"]
            )
        }
        return update.rawValue
    }
}
