import ArgumentParser
import EscrowHTTP
import Foundation

/// `serve`'s web sign-in options: ProfileEscrow as the redirect URI of Sign in with Apple on the web. Each also comes
/// from the environment (`PROFILE_ESCROW_SIGNIN_CLIENT_ID`, …; `PROFILE_ESCROW_SIGNIN_RETURN` holds the
/// `NAME=URL` pairs separated by commas or spaces).
struct SignInOptions: ParsableArguments {
    static let defaults = AppleSignInConfiguration.default

    @Option(
        name: .customLong("signin-client-id"),
        help: "The Services ID of the web sign-in: the only id_token audience its callback accepts."
    )
    var clientID: String?
    @Option(
        name: .customLong("signin-callback-url"),
        help: "The public URL of /v1/apple/signin/callback, as registered with Apple (https)."
    )
    var callbackURL: String?
    @Option(
        name: .customLong("signin-return"),
        help: """
            NAME=URL: a URL the sign-in may end at (exact match; repeat for several): https (a page or an App Link), \
            an app's own scheme, or an Android intent:// URL.
            """
    )
    var returns: [String] = []
    @Option(
        name: .customLong("apple-authorize-url"),
        help: "Apple's authorize page (default \(defaults.authorizeURL))."
    )
    var authorizeURL: String?
    @Option(
        name: .customLong("signin-ttl"),
        help: "How long a sign-in attempt lives (default \(DefaultText.duration(defaults.attemptLifetime)))."
    )
    var ttl: String?

    /// The sign-in's configuration; nil when no sign-in option is set. Throws a usage error naming what is missing or
    /// malformed.
    func configuration(_ environment: OptionEnvironment) throws -> AppleSignInConfiguration? {
        let clientID = try environment.value(clientID, "signin-client-id")
        let callbackURL = try environment.value(callbackURL, "signin-callback-url")
        let pairs =
            returns.isEmpty
            ? (environment.text("signin-return") ?? "").split(whereSeparator: { $0 == "," || $0 == " " }).map(
                String.init
            )
            : returns
        let authorizeURL = try environment.value(authorizeURL, "apple-authorize-url")
        let anyTTL = ttl != nil || environment.text("signin-ttl") != nil
        guard clientID != nil || callbackURL != nil || !pairs.isEmpty || authorizeURL != nil || anyTTL else {
            return nil
        }
        guard let clientID, !clientID.isEmpty, let callbackURL, !pairs.isEmpty else {
            throw ValidationError(
                "web sign-in needs --signin-client-id, --signin-callback-url and at least one --signin-return NAME=URL"
            )
        }
        try Self.requireWebURL(callbackURL, "--signin-callback-url")
        var named: [String: String] = [:]
        for pair in pairs {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty,
                parts[0].allSatisfy({ $0.isLetter || $0.isNumber || "._-".contains($0) })
            else { throw ValidationError("--signin-return: each value must be NAME=URL, NAME of [A-Za-z0-9._-]") }
            guard named[parts[0]] == nil else {
                throw ValidationError("--signin-return: the name \(parts[0]) is given twice")
            }
            try Self.requireReturnURL(parts[1], "--signin-return \(parts[0])")
            named[parts[0]] = parts[1]
        }
        var configuration = AppleSignInConfiguration(clientID: clientID, callbackURL: callbackURL, returns: named)
        if let authorizeURL {
            try Self.requireWebURL(authorizeURL, "--apple-authorize-url")
            configuration.authorizeURL = authorizeURL
        }
        if let lifetime = try WorkerOptions.duration(ttl, "signin-ttl", environment) {
            configuration.attemptLifetime = .milliseconds(Int64(lifetime * 1000))
        }
        return configuration
    }

    /// A return URL: a web one (``requireWebURL(_:_:)``: a page, or an App Link / universal link), an Android
    /// `intent://…#Intent;…;end` URL, or an app's own scheme (`com.example.app:/signed-in`). Never a scheme a browser
    /// gives a meaning of its own (`javascript:`, `data:`, `file:`, …): the sign-in's `303` goes there.
    static func requireReturnURL(_ text: String, _ option: String) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw ValidationError("\(option): must be an absolute URL")
        }
        switch scheme {
        case "https", "http": try requireWebURL(text, option)
        case "intent":
            guard components.host?.isEmpty == false, let fragment = components.fragment,
                fragment.hasPrefix("Intent;"), fragment.hasSuffix(";end")
            else { throw ValidationError("\(option): an intent:// URL must end with #Intent;…;end") }
        default:
            guard !browserSchemes.contains(scheme), components.fragment == nil else {
                throw ValidationError("\(option): must be https, intent:// or an app's own scheme, without a fragment")
            }
        }
    }

    /// Schemes a browser acts on itself: never an app's return.
    static let browserSchemes: Set<String> = [
        "about", "blob", "chrome", "data", "file", "filesystem", "ftp", "javascript", "mailto", "sms", "tel",
        "vbscript", "view-source", "ws", "wss",
    ]

    /// An absolute `https` URL without a fragment; `http` only on a loopback host (development).
    static func requireWebURL(_ text: String, _ option: String) throws {
        guard let components = URLComponents(string: text), let host = components.host, !host.isEmpty,
            components.fragment == nil
        else { throw ValidationError("\(option): must be an absolute URL without a fragment") }
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host)
        guard components.scheme == "https" || (components.scheme == "http" && loopback) else {
            throw ValidationError("\(option): must be an https URL (http only on localhost)")
        }
    }
}
