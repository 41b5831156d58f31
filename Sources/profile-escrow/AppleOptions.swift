import ArgumentParser
import EscrowHTTP
import Foundation
import ProfileEscrow

/// `serve`'s Apple options: the client ids identity tokens are verified for, where Apple's keys come from, and where
/// verified notifications are forwarded. Each also from its `PROFILE_ESCROW_…` variable.
struct AppleOptions: ParsableArguments {
    @Option(
        name: .customLong("apple-audience"),
        help: """
            Apple client ids (bundle ID, Services ID), repeated or comma-separated (env PROFILE_ESCROW_APPLE_AUDIENCE, \
            comma-separated).
            """
    )
    var audience: [String] = []
    @Option(
        name: .customLong("apple-jwks"),
        help: "Apple's keys from this JWKS file instead of the URL (env PROFILE_ESCROW_APPLE_JWKS)."
    )
    var jwks: String?
    @Option(
        name: .customLong("apple-jwks-url"),
        help: """
            Where Apple's keys are fetched, cached per Cache-Control and fetched again on an unknown kid \
            (env PROFILE_ESCROW_APPLE_JWKS_URL; default \(AppleKeyFetcher.appleURL.absoluteString)).
            """
    )
    var jwksURL: String?
    @Option(
        name: .customLong("forward-notifications"),
        help: """
            Forward verified Apple notifications to this backend URL, signed like deliveries with the webhook secret; \
            repeated or comma-separated, each URL gets its own copy, retried on its own \
            (env PROFILE_ESCROW_FORWARD_NOTIFICATIONS, comma-separated).
            """
    )
    var forwardNotifications: [String] = []

    /// The audiences and the source of Apple's keys; nil without an audience.
    func keys(_ environment: OptionEnvironment) throws -> EscrowServer.AppleKeys? {
        let audiences = Set(environment.list(audience, "apple-audience"))
        let path = try environment.value(jwks, "apple-jwks")
        let urlText = try environment.value(jwksURL, "apple-jwks-url")
        guard !audiences.isEmpty else {
            guard path == nil, urlText == nil else {
                throw ValidationError(
                    "--apple-jwks and --apple-jwks-url need --apple-audience (PROFILE_ESCROW_APPLE_AUDIENCE): the client ids"
                )
            }
            return nil
        }
        var keys = EscrowServer.AppleKeys(audiences: audiences)
        switch (path, urlText) {
        case (let path?, nil): keys.source = .file(path)
        case (nil, let urlText?):
            try SignInOptions.requireWebURL(urlText, "--apple-jwks-url")
            keys.source = .url(URL(string: urlText) ?? AppleKeyFetcher.appleURL)
        case (nil, nil): break
        case (_?, _?): throw ValidationError("give Apple's keys as --apple-jwks (a file) or --apple-jwks-url, not both")
        }
        return keys
    }

    /// `--forward-notifications`: the URLs, signed with the deliveries' webhook secrets and over their TLS; nil when
    /// not asked for.
    func forwarding(
        _ environment: OptionEnvironment,
        apple: EscrowServer.AppleKeys?,
        signedBy worker: WorkerOptions
    ) throws -> NotificationForwarder.Configuration? {
        let texts = environment.list(forwardNotifications, "forward-notifications")
        guard !texts.isEmpty else { return nil }
        let urls = try texts.map { text in
            guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
                url.host != nil
            else { throw ValidationError("--forward-notifications: each must be an absolute http(s) URL") }
            return url
        }
        guard Set(urls).count == urls.count else {
            throw ValidationError("--forward-notifications: a URL is given twice")
        }
        guard apple != nil else {
            throw ValidationError("--forward-notifications forwards verified notifications: it needs --apple-audience")
        }
        let secrets: [WebhookSecret]
        do {
            secrets = try worker.workerConfiguration(environment).webhookSecrets
        } catch let error as ValidationError {
            throw ValidationError("--forward-notifications signs like deliveries: \(error.message)")
        }
        var forwarding = NotificationForwarder.Configuration(urls: urls, secrets: secrets)
        forwarding.tls = try worker.backendTLS(environment)
        return forwarding
    }
}
