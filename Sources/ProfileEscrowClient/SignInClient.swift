public import Foundation

/// Native Sign in with Apple captured at the source, the keychain pattern done once: the app starts an attempt at the
/// escrow, asks Apple with its nonce, and hands Apple's answer here. The credential is kept in a
/// ``CredentialStore`` before anything is sent, captured by the escrow (`POST /v1/apple/native/capture`), and
/// deleted only once the escrow holds it and the app's ticket handler took the ticket. While the escrow cannot be
/// reached, it stays kept; ``resumePending()`` at the next launch tries again, and a capture the escrow already
/// made (its answer lost on the way) is answered with the same ticket, never a second capture.
///
/// Nothing personal is logged: no token, code, name, email or ticket, only outcome codes.
@available(iOS 16, macOS 13, tvOS 16, watchOS 9, visionOS 1, *)
public actor SignInClient {
    public struct Configuration: Sendable {
        /// The escrow's public address, such as `https://escrow.example.com`.
        public var escrowURL: URL
        /// The `--signin-return` name an attempt's web flow ends at; nil when the escrow has one (or the app only
        /// uses the native sheet).
        public var returnName: String?
        /// Every request's bound, from connecting to the answer's last byte.
        public var requestTimeout: Duration = .seconds(15)
        public var retry = RetryPolicy()
        /// How long a credential the escrow never took is kept at most: then it is dropped (and given back to the
        /// app) at the next resume, since the escrow would refuse its identity token by then anyway.
        public var keepAtMost: Duration = .seconds(24 * 60 * 60)

        public init(escrowURL: URL) {
            self.escrowURL = escrowURL
        }
    }

    /// Hands a ticket to the app's backend; throws when the backend did not take it (the credential is then kept and
    /// the ticket handed again on a later try).
    public typealias TicketHandler = @Sendable (SignInTicket) async throws -> Void

    public let configuration: Configuration
    private let store: any CredentialStore
    private let api: EscrowAPI
    private let handTicket: TicketHandler
    /// The sign-ins a round is delivering now: another round leaves them alone.
    private var inFlight: Set<String> = []

    public init(configuration: Configuration, store: any CredentialStore, ticketHandler: @escaping TicketHandler) {
        self.configuration = configuration
        self.store = store
        self.api = EscrowAPI(escrowURL: configuration.escrowURL, timeout: configuration.requestTimeout)
        self.handTicket = ticketHandler
    }

    deinit {
        api.finish()
    }

    /// Starts an attempt at the escrow (`POST /v1/apple/attempts`) and keeps its secret in the store. `appState`, at
    /// most 256 bytes, comes back to the app's backend in the redeem answer. Throws when the escrow cannot be
    /// reached or refuses, or the store fails: nothing was asked of Apple yet, the app may simply try again.
    public func startAttempt(appState: String? = nil) async throws(SignInClientError) -> StartedAttempt {
        let answer: EscrowAPI.AttemptAnswer
        switch await api.startAttempt(.init(return: configuration.returnName, appState: appState)) {
        case .answered(let answered): answer = answered
        case .refused(let error), .unavailable(let error, _): throw error
        }
        guard let authorizeURL = URL(string: answer.authorizeURL), let expiresAt = Self.date(answer.expiresAt) else {
            throw SignInClientError(.unreadableAnswer, status: 201)
        }
        let started = StartedAttempt(
            id: "signin-" + UUID().uuidString.lowercased(),
            state: answer.state,
            nonceSHA256: answer.nonceSHA256,
            authorizeURL: authorizeURL,
            expiresAt: expiresAt,
            attempt: answer.attempt
        )
        do {
            try store.save(
                PendingSignIn(attempt: answer.attempt, attemptExpiresAt: expiresAt).encoded(),
                as: started.id
            )
        } catch {
            throw SignInClientError(.storeFailed)
        }
        return started
    }

    /// Keeps Apple's answer to `started`, then captures it and hands the ticket to the app, retrying as
    /// ``Configuration/retry`` says. A credential the store could not keep is still sent; if it is not captured
    /// either, it comes back as ``SignInOutcome/dropped(_:_:)`` with ``SignInClientError/Code/storeFailed``.
    public func complete(_ started: StartedAttempt, with credential: AppleCredential) async -> SignInOutcome {
        let pending = PendingSignIn(
            attempt: started.attempt,
            attemptExpiresAt: started.expiresAt,
            keptAt: Date(),
            credential: credential
        )
        let kept = (try? store.save(pending.encoded(), as: started.id)) != nil
        let outcome = await deliver(attempt: started.attempt, credential, as: started.id)
        if !kept, case .kept = outcome { return .dropped(SignInClientError(.storeFailed), credential) }
        return outcome
    }

    /// Forgets an attempt Apple never answered (the user cancelled the sheet).
    public func abandon(_ started: StartedAttempt) {
        try? store.remove(started.id)
    }

    /// At launch: every credential a previous run kept is captured and its ticket handed to the app, or kept again
    /// (transient), or dropped (refused, or kept longer than ``Configuration/keepAtMost``). Attempts that expired
    /// before Apple answered are forgotten. One outcome per kept credential.
    public func resumePending() async -> [SignInOutcome] {
        guard let names = try? store.names() else {
            return []
        }
        var outcomes: [SignInOutcome] = []
        for name in names where !inFlight.contains(name) {
            guard let item = try? store.load(name) else { continue }
            guard let pending = try? PendingSignIn.decode(item) else {
                // Not an item this client wrote, or a torn one: nothing can be sent from it.
                try? store.remove(name)
                continue
            }
            guard let credential = pending.credential else {
                if pending.attemptExpiresAt < Date() { try? store.remove(name) }
                continue
            }
            if let keptAt = pending.keptAt,
                Duration.seconds(Date().timeIntervalSince(keptAt)) > configuration.keepAtMost
            {
                try? store.remove(name)
                outcomes.append(SignInLog.ended(.dropped(SignInClientError(.tooOld), credential)))
                continue
            }
            outcomes.append(await deliver(attempt: pending.attempt, credential, as: name))
        }
        return outcomes
    }

    /// One round: capture, hand the ticket over, delete; a refusal deletes too; a transient failure waits and tries
    /// again until the retry policy ends the round.
    private func deliver(attempt: String, _ credential: AppleCredential, as name: String) async -> SignInOutcome {
        inFlight.insert(name)
        defer { inFlight.remove(name) }
        let request = EscrowAPI.CaptureRequest(attempt: attempt, credential: credential)
        var failures = 0
        while true {
            let failure: SignInClientError
            var retryAfter: Duration?
            switch await api.capture(request) {
            case .answered(let answer):
                let ticket = SignInTicket(
                    ticket: answer.ticket,
                    attempt: attempt,
                    escrowID: answer.escrowId,
                    profileRefused: answer.profileRefused
                )
                do {
                    try await handTicket(ticket)
                    try? store.remove(name)
                    return SignInLog.ended(.delivered(ticket))
                } catch {
                    failure = SignInClientError(.ticketNotHandedOver)
                }
            case .refused(let refusal):
                try? store.remove(name)
                return SignInLog.ended(.dropped(refusal, credential))
            case .unavailable(let unavailable, let after):
                failure = unavailable
                retryAfter = after
            }
            failures += 1
            guard let delay = configuration.retry.delay(afterFailures: failures, retryAfter: retryAfter),
                (try? await Task.sleep(for: delay)) != nil
            else { return SignInLog.ended(.kept(failure)) }
        }
    }

    /// The escrow's timestamps: RFC 3339 with milliseconds (or without a fraction).
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
