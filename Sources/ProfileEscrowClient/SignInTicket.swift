public import Foundation

/// What the app's backend needs to finish the sign-in: the escrow's single-use ticket and the attempt secret its
/// redeem requires (`POST /v1/apple/signin/tickets/redeem` with `{"ticket", "attempt"}`). Send both to your backend
/// over TLS, at once; never log them or put them in a URL.
public struct SignInTicket: Sendable, Hashable {
    public var ticket: String
    public var attempt: String
    /// The escrow that holds the profile; nil when nothing was captured (a returning user, whom Apple sent no name or
    /// email, or a profile the escrow refused: see ``profileRefused``).
    public var escrowID: String?
    /// Why the escrow refused the profile (a rule's code), the sign-in going on without it.
    public var profileRefused: String?
}

/// An attempt started for one sign-in: pass ``nonceSHA256`` to `ASAuthorizationAppleIDRequest.nonce` (and, if you
/// like, ``state`` to its `state`), then hand Apple's answer to ``SignInClient/complete(_:with:)``.
public struct StartedAttempt: Sendable, Hashable {
    /// The name under which the client keeps this sign-in.
    public let id: String
    public let state: String
    /// The hex SHA-256 of the attempt's nonce: what Apple must sign into the identity token.
    public let nonceSHA256: String
    /// Apple's authorize page for this attempt's web flow (a browser tab, where no native sheet exists).
    public let authorizeURL: URL
    public let expiresAt: Date
    /// The attempt secret (kept in the credential store too).
    let attempt: String
}

/// How one sign-in ended for now.
public enum SignInOutcome: Sendable {
    /// Captured (or known to the escrow already), the ticket taken by the app's handler, the kept credential
    /// deleted.
    case delivered(SignInTicket)
    /// Not captured yet for a transient reason: the credential stays in the store for ``SignInClient/resumePending()``.
    case kept(SignInClientError)
    /// Refused for good (or kept too long): deleted from the store, and given back once here, so that the app can
    /// ask the user to sign in again or use the name itself. Never log it.
    case dropped(SignInClientError, AppleCredential)
}
