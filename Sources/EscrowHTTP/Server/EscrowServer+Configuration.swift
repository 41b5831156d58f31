public import EscrowCore
import EscrowCrypto
public import Foundation
public import ProfileEscrow

extension EscrowServer {
    /// Everything `profile-escrow serve` runs, as values: no file is read, no client made, no thread started until
    /// ``EscrowServer/run(_:stores:keyring:unwrapFailure:registry:telemetry:metadata:logger:)`` builds the services from it. Every default
    /// is the one written on the property (or on the nested configuration's), and nowhere else.
    public struct Configuration: Sendable {
        /// The defaults, for help texts and documentation.
        public static let `default` = Configuration()

        /// The listeners, their limits, web sign-in, `/metrics`, the drain delay and the console. What the HTTP
        /// application is given besides (``EscrowHTTPDependencies``) the server builds from ``tls``, ``apple`` and
        /// ``forwarding``; it also sets ``EscrowHTTPConfiguration/tlsClientCA`` from ``tls``.
        public var http = EscrowHTTPConfiguration()
        /// HTTPS on both listeners from these files; nil serves plain HTTP (behind a TLS proxy).
        public var tls: TLSFiles?
        /// Verified capture and Apple notifications, and web sign-in's id_token: Apple's client ids and where its keys
        /// come from; nil accepts captures without an identity token.
        public var apple: AppleKeys?
        /// Verified Apple notifications forwarded to the backend (signed like deliveries), when set; needs ``apple``.
        public var forwarding: NotificationForwarder.Configuration?
        /// Sign-ins' authorization codes redeemed here at Apple's token endpoint (needs ``apple`` and a store that
        /// keeps Apple token exchanges); nil hands each code to the app's backend in the ticket's redeem answer.
        public var appleTokens: AppleTokenExchangeSettings?
        /// Retention, the retry schedule, the confirmation timeout, the clock and the tracer of the escrow the server
        /// builds (its ``EscrowConfiguration/sealingKeys`` are the server's own, see ``sealingKeyCapacity``).
        public var escrow = EscrowConfiguration()
        /// The replay worker's settings; nil runs the HTTP API alone.
        public var worker: ReplayWorker.Configuration?
        /// The keyring file to follow (reloaded on SIGHUP and when it changes); nil keeps the keyring given.
        public var keyringPath: String?
        /// How many captures' sealing keys are made ahead, on a thread of their own (``SealingKeyReserve``); nil makes
        /// each capture's keys when it seals.
        public var sealingKeyCapacity: Int? = SealingKeyReserve.defaultCapacity

        public init() {}
    }

    /// The server's certificate chain and key (PEM), and the CA a client of the internal listener must present a
    /// certificate from (mutual TLS; the public listener never asks).
    public struct TLSFiles: Sendable, Equatable {
        public var certificatePath: String
        public var keyPath: String
        public var clientCAPath: String?

        public init(certificatePath: String, keyPath: String, clientCAPath: String? = nil) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
            self.clientCAPath = clientCAPath
        }

        /// Reads the pair; throws naming the file that does not load, or saying the key is not the certificate's.
        public func load() throws -> TLSCertificateFiles {
            try TLSCertificateFiles(certificatePath: certificatePath, keyPath: keyPath)
        }
    }

    /// Apple's client ids (the identity tokens' accepted audiences) and where Apple's keys come from.
    public struct AppleKeys: Sendable, Equatable {
        /// Where the JWKS is read.
        public enum Source: Sendable, Equatable {
            /// A file, read once at start.
            case file(String)
            /// A URL, fetched at start and then as its `Cache-Control` says (``AppleKeyFetcher``).
            case url(URL)
        }

        /// The bundle IDs and Services IDs accepted as an identity token's audience; never empty.
        public var audiences: Set<String>
        public var source: Source

        /// `source` defaults to Apple's own URL.
        public init(audiences: Set<String>, source: Source = .url(AppleKeyFetcher.appleURL)) {
            self.audiences = audiences
            self.source = source
        }
    }

    /// The stores the server runs on, opened by the caller and closed by the server once every service stopped,
    /// whether serving ended well or threw.
    public struct Stores: Sendable {
        public var escrows: any EscrowStore
        public var notifications: any NotificationOutbox
        /// Web sign-in attempts (the escrow store's own); the sign-in routes are served when this and
        /// ``EscrowHTTPConfiguration/signIn`` are set.
        public var signIns: (any SignInStore)?
        public var tokens: any AccessTokenStore
        /// Where the tokens live, for the logs (a file path, or "the database").
        public var tokensPlace: String
        /// Closes the token store; called first (nothing to do when the tokens are the escrow store's own).
        public var closeTokens: @Sendable () async throws -> Void
        /// Closes the escrow store; called last.
        public var closeEscrows: @Sendable () async throws -> Void

        public init(
            escrows: any EscrowStore,
            notifications: any NotificationOutbox,
            signIns: (any SignInStore)?,
            tokens: any AccessTokenStore,
            tokensPlace: String,
            closeTokens: @escaping @Sendable () async throws -> Void,
            closeEscrows: @escaping @Sendable () async throws -> Void
        ) {
            self.escrows = escrows
            self.notifications = notifications
            self.signIns = signIns
            self.tokens = tokens
            self.tokensPlace = tokensPlace
            self.closeTokens = closeTokens
            self.closeEscrows = closeEscrows
        }
    }
}
