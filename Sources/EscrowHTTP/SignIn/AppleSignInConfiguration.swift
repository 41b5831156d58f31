import Foundation

/// Web sign-in (`/v1/apple/signin…`): ProfileEscrow is the redirect URI registered with Apple, so Apple's one-time
/// `user` form field is escrowed where it lands. Needs ``EscrowHTTPConfiguration/apple`` for Apple's keys.
public struct AppleSignInConfiguration: Sendable {
    /// The defaults of every setting but the client id, the callback URL and the returns (empty here), for help texts
    /// and documentation.
    public static let `default` = AppleSignInConfiguration(clientID: "", callbackURL: "", returns: [:])

    /// The Services ID the web flow signs in with: the only audience the callback accepts.
    public var clientID: String
    /// The public URL of `POST /v1/apple/signin/callback`, as registered with Apple.
    public var callbackURL: String
    /// Return name → the app's URL the browser is sent to at the end (exact match: never an open redirect): a web page,
    /// an App Link, an app's own scheme or an Android `intent://` URL.
    public var returns: [String: String]
    /// Apple's authorize page (configurable for tests).
    public var authorizeURL = "https://appleid.apple.com/auth/authorize"
    /// How long an attempt lives (default 10 minutes).
    public var attemptLifetime: Duration = .seconds(600)
    /// How long a ticket may be redeemed (default 5 minutes: the authorization code's own life).
    public var ticketLifetime: Duration = .seconds(300)
    /// The largest `user` form field (4 KiB).
    public var maximumUserSize = 4 * 1024
    /// Whether a captured sign-in's authorization code is exchanged here (``AppleTokenExchanger``) instead of handed
    /// to the app's backend: its redeem answer then says `authorizationCode: null, appleTokens: "in-escrow"`.
    public var exchangesCodes = false

    public init(clientID: String, callbackURL: String, returns: [String: String]) {
        self.clientID = clientID
        self.callbackURL = callbackURL
        self.returns = returns
    }

    /// The return URLs as `form-action` sources, sorted: the 503 page's form posts may be redirected there. A web
    /// return's origin; an app's return (its own scheme, `intent:`) by its scheme, which has no origin.
    var returnOrigins: [String] {
        Set(
            returns.values.compactMap { url in
                guard let scheme = URLComponents(string: url)?.scheme?.lowercased() else { return nil }
                return scheme == "https" || scheme == "http" ? Self.origin(url) : scheme + ":"
            }
        ).sorted()
    }

    /// The origin of ``authorizeURL`` (`scheme://host[:port]`), the only `Origin` the callback accepts when one is
    /// sent.
    var authorizeOrigin: String? { Self.origin(authorizeURL) }

    static func origin(_ url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme,
            let host = components.host
        else { return nil }
        return components.port.map { "\(scheme)://\(host):\($0)" } ?? "\(scheme)://\(host)"
    }
}
