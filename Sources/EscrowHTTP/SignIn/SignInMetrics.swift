import CoreMetrics

/// Web sign-in's counters. Labels are outcomes and error codes only: never a state, code, token or ticket.
enum SignInMetrics {
    /// `profile_escrow_signins_total{outcome}`: `started`, `completed`, `retry_page`, `unknown_state`, and the
    /// error codes of the final redirect (`signin_expired`, `signin_invalid`, `user_cancelled_authorize`); from apps,
    /// `app_started`, `native_captured` and `native_answered_again` (a capture sent again, given its ticket again).
    static func signIn(_ outcome: String) {
        Counter(label: "profile_escrow_signins_total", dimensions: [("outcome", outcome)]).increment()
    }

    /// `profile_escrow_signin_redeems_total{outcome}`: `redeemed` or `gone`.
    static func redeem(_ outcome: String) {
        Counter(label: "profile_escrow_signin_redeems_total", dimensions: [("outcome", outcome)]).increment()
    }
}
