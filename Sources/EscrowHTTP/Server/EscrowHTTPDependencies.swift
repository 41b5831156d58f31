public import ProfileEscrow

/// What the HTTP service uses that is built, not configured: objects with state, files read, services to run
/// beside the application. ``EscrowHTTPConfiguration`` stays plain values (what a help text or a test can write
/// down); these are passed beside it. ``EscrowServer`` builds them from ``EscrowServer/Configuration``'s `tls`,
/// `apple` and `forwarding`; an application of your own builds what it needs, and leaves the rest nil.
public struct EscrowHTTPDependencies: Sendable {
    /// Verified capture and Apple notifications (an identity token is required), and web sign-in's id_token;
    /// nil accepts captures without an identity token, refuses Apple's notifications and serves no web sign-in.
    public var apple: AppleVerifier?
    /// Verified Apple notifications are also forwarded to the backend through this, when set: run it as a service.
    public var notificationForwarder: NotificationForwarder?
    /// TLS on both listeners with this certificate and key, reloaded when the files change (run a ``TLSReloader``
    /// over the same value); nil serves plain HTTP (behind a TLS proxy). Not used by ``EscrowRouteCollection``:
    /// your server terminates TLS.
    public var tls: TLSCertificateFiles?
    /// The worker's delivery settings, for `POST /v1/admin/test-delivery`; nil answers it 409 `no_backend`.
    public var backend: ReplayWorker.Configuration?
    /// Redeems the authorization codes that sign-ins queue (``AppleSignInConfiguration/exchangesCodes``): run it as a
    /// service.
    public var appleTokenExchanger: AppleTokenExchanger?
    /// Sends the revocations queued at `POST /v1/apple/revocations` to Apple: run it as a service.
    public var appleRevoker: AppleRevoker?

    public init(
        apple: AppleVerifier? = nil,
        notificationForwarder: NotificationForwarder? = nil,
        tls: TLSCertificateFiles? = nil,
        backend: ReplayWorker.Configuration? = nil
    ) {
        self.apple = apple
        self.notificationForwarder = notificationForwarder
        self.tls = tls
        self.backend = backend
    }
}
