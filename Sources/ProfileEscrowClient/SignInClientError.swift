/// Why a sign-in did not reach the app: a code the app can branch on and show, the HTTP status when the escrow
/// answered, and a generic description. Never a token, a name, an email or the escrow's problem text.
public struct SignInClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case tokenRefused, attemptGone, requestRefused, tooOld, unavailable, ticketNotHandedOver,
                unreadableAnswer, storeFailed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The escrow refused Apple's identity token (`401`): signature, audience, nonce or expiry. Definitive.
        public static let tokenRefused = Code(.tokenRefused)
        /// The attempt is unknown, expired or used, and its ticket gone (`410`). Definitive.
        public static let attemptGone = Code(.attemptGone)
        /// The escrow refused the request itself (`400`, `413`, `415`): the same bytes would be refused again.
        /// Definitive.
        public static let requestRefused = Code(.requestRefused)
        /// Kept longer than ``SignInClient/Configuration/keepAtMost`` without the escrow taking it. Definitive.
        public static let tooOld = Code(.tooOld)
        /// The escrow could not be reached or answered that it cannot take the request now (no answer, a timeout,
        /// `429`, `5xx`). Transient: the credential is kept.
        public static let unavailable = Code(.unavailable)
        /// The app's ticket handler threw (its backend could not take the ticket). Transient: the credential is kept,
        /// and the next try is given the same ticket while it is unredeemed.
        public static let ticketNotHandedOver = Code(.ticketNotHandedOver)
        /// The escrow's answer could not be read (not the JSON it should be). Transient.
        public static let unreadableAnswer = Code(.unreadableAnswer)
        /// The credential store failed; nothing could be kept.
        public static let storeFailed = Code(.storeFailed)

        public var description: String { base.rawValue }
    }

    public var code: Code
    /// The escrow's HTTP status, when it answered.
    public var status: Int?

    public init(_ code: Code, status: Int? = nil) {
        self.code = code
        self.status = status
    }

    public var description: String {
        "sign-in through the escrow: \(code)" + (status.map { " (HTTP \($0))" } ?? "")
    }
}
