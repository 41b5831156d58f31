import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The escrow's two public routes of native sign-in, over an ephemeral `URLSession` (no cookie, no cache, nothing of
/// a request on disk), each request bounded by the configuration's timeout.
@available(iOS 16, macOS 13, tvOS 16, watchOS 9, visionOS 1, *)
struct EscrowAPI: Sendable {
    let escrowURL: URL
    let session: URLSession
    let timeout: Duration

    init(escrowURL: URL, timeout: Duration) {
        let configuration = URLSessionConfiguration.ephemeral
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        configuration.timeoutIntervalForRequest = seconds
        configuration.timeoutIntervalForResource = seconds
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        self.escrowURL = escrowURL
        self.session = URLSession(configuration: configuration)
        self.timeout = timeout
    }

    /// Lets the requests under way end, then releases the session.
    func finish() {
        session.finishTasksAndInvalidate()
    }

    /// `POST /v1/apple/attempts`.
    struct AttemptRequest: Encodable {
        var `return`: String?
        var appState: String?
    }

    /// `201` of `POST /v1/apple/attempts`.
    struct AttemptAnswer: Decodable {
        var attempt: String
        var state: String
        var nonceSHA256: String
        var authorizeURL: String
        var expiresAt: String
    }

    /// `POST /v1/apple/native/capture`: the credential's own fields and the attempt secret.
    struct CaptureRequest: Encodable {
        var attempt: String
        var identityToken: String
        var authorizationCode: String?
        var fullName: AppleCredential.Name?
        var email: String?
        var realUserStatus: String?

        init(attempt: String, credential: AppleCredential) {
            self.attempt = attempt
            identityToken = credential.identityToken
            authorizationCode = credential.authorizationCode
            fullName = credential.fullName
            email = credential.email
            realUserStatus = credential.realUserStatus
        }
    }

    /// `201` (or `200` for a retry) of `POST /v1/apple/native/capture`.
    struct CaptureAnswer: Decodable {
        var ticket: String
        var escrowId: String?
        var profileRefused: String?
    }

    /// What one request came to.
    enum Outcome<Answer> {
        case answered(Answer)
        /// Definitive: the same request will be refused again.
        case refused(SignInClientError)
        /// Worth another try, after `retryAfter` when the escrow said so.
        case unavailable(SignInClientError, retryAfter: Duration?)
    }

    func startAttempt(_ request: AttemptRequest) async -> Outcome<AttemptAnswer> {
        await post("v1/apple/attempts", request)
    }

    func capture(_ request: CaptureRequest) async -> Outcome<CaptureAnswer> {
        await post("v1/apple/native/capture", request)
    }

    private func post<Answer: Decodable>(_ path: String, _ body: some Encodable) async -> Outcome<Answer> {
        var request = URLRequest(url: escrowURL.appendingPathComponent(path))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let data: Data
        let response: URLResponse
        do {
            request.httpBody = try JSONEncoder().encode(body)
            (data, response) = try await session.data(for: request)
        } catch {
            return .unavailable(SignInClientError(.unavailable), retryAfter: nil)
        }
        guard let http = response as? HTTPURLResponse else {
            return .unavailable(SignInClientError(.unreadableAnswer), retryAfter: nil)
        }
        switch Self.classify(http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After")) {
        case .answered:
            guard let answer = try? JSONDecoder().decode(Answer.self, from: data) else {
                return .unavailable(SignInClientError(.unreadableAnswer, status: http.statusCode), retryAfter: nil)
            }
            return .answered(answer)
        case .refused(let error): return .refused(error)
        case .unavailable(let error, let retryAfter): return .unavailable(error, retryAfter: retryAfter)
        }
    }

    /// What a status means for the request that got it: `2xx` answered; `401`, `410`, `400`, `413`, `415` refused
    /// for good; anything else (`429`, `5xx`, a `404` of an escrow being redeployed) worth another try.
    static func classify(_ status: Int, retryAfter: String?) -> Outcome<Void> {
        switch status {
        case 200..<300: .answered(())
        case 401: .refused(SignInClientError(.tokenRefused, status: status))
        case 410: .refused(SignInClientError(.attemptGone, status: status))
        case 400, 413, 415, 422: .refused(SignInClientError(.requestRefused, status: status))
        default:
            .unavailable(
                SignInClientError(.unavailable, status: status),
                retryAfter: retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map {
                    .seconds(max(0, $0))
                }
            )
        }
    }
}
