#if canImport(os)
import os
#endif

/// The client's one log line per round: its outcome's code and status, never anything of the credential or the
/// ticket. In the unified log on Apple platforms; nowhere elsewhere.
@available(iOS 16, macOS 13, tvOS 16, watchOS 9, visionOS 1, *)
enum SignInLog {
    #if canImport(os)
    private static let logger = Logger(subsystem: "ProfileEscrowClient", category: "signin")
    #endif

    /// Logs how a round ended and returns it.
    static func ended(_ outcome: SignInOutcome) -> SignInOutcome {
        #if canImport(os)
        switch outcome {
        case .delivered: logger.info("sign-in captured and its ticket handed over")
        case .kept(let error): logger.notice("sign-in kept for a later try: \(error.description, privacy: .public)")
        case .dropped(let error, _): logger.error("sign-in dropped: \(error.description, privacy: .public)")
        }
        #endif
        return outcome
    }
}
