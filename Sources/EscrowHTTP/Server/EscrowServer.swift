import AsyncHTTPClient
import EscrowCore
public import EscrowCrypto
import Foundation
public import Logging
import ProfileEscrow
public import Prometheus
public import ServiceLifecycle

/// The whole HTTP service of one process, as `profile-escrow serve` runs it: the PurgeFlusher, the replay worker
/// (unless there is none), the notification forwarder, the HTTP application and its public listener, started and
/// stopped in the right order (see ``EscrowServiceGroup``). Built from plain values (``Configuration``) by
/// ``run(_:stores:keyring:unwrapFailure:registry:telemetry:metadata:logger:)``, which also shuts down everything it
/// built, as Hummingbird applications share their `buildApplication`.
///
/// ```swift
/// var configuration = EscrowServer.Configuration()
/// configuration.http.port = 8443
/// configuration.worker = try ReplayWorker.Configuration(backendURL: url, webhookSecret: secret)
/// let stores = EscrowServer.Stores(
///     escrows: store, notifications: store, signIns: store, tokens: tokenStore, tokensPlace: tokenPath,
///     closeTokens: { try tokenStore.close() }, closeEscrows: { try store.close() }
/// )
/// try await EscrowServer.run(configuration, stores: stores, keyring: keyring, registry: registry, logger: logger)
/// ```
public struct EscrowServer: Sendable {
    let escrow: Escrow
    let stores: Stores
    let registry: PrometheusCollectorRegistry
    /// The HTTP application's configuration (the client CA of ``Configuration/tls`` in place).
    let http: EscrowHTTPConfiguration
    /// What the server built for it: the TLS pair, Apple's verifier, the forwarder.
    let dependencies: EscrowHTTPDependencies
    let worker: ReplayWorker.Configuration?
    let keyringPath: String?
    /// Services started before all others and stopped after them, such as a tracing exporter (so that the spans of
    /// the last requests and deliveries are still sent).
    let telemetry: [any Service]
    let logger: Logger

    /// Builds every service of `configuration` over `stores` and `keyring`, serves until SIGTERM or SIGINT, then
    /// shuts down gracefully within ``shutdownBound``. Whatever it built is shut down as it ends, and the stores are
    /// closed (the tokens first), also when a service fails (a port already bound, say): the sealing-key reserve's
    /// thread, the HTTP client of Apple's keys.
    ///
    /// - Parameters:
    ///   - unwrapFailure: the custody engine's failure when the keyring is still wrapped: the server captures and
    ///     opens nothing until its ``KeyringReloader`` unwraps it (needs ``Configuration/keyringPath``).
    ///   - registry: where `/metrics` reads (bootstrap the metrics system over it first).
    ///   - telemetry: services started first and stopped last, such as a tracing exporter.
    ///   - metadata: what the start-up line says besides the listeners, the keyring and the tokens: the store
    ///     (never a password), the traces.
    public static func run(
        _ configuration: Configuration,
        stores: Stores,
        keyring: Keyring,
        unwrapFailure: CryptoError? = nil,
        registry: PrometheusCollectorRegistry,
        telemetry: [any Service] = [],
        metadata: Logger.Metadata = [:],
        logger: Logger
    ) async throws {
        try await Teardown.run { teardown in
            teardown.add(stores.closeEscrows)
            teardown.add(stores.closeTokens)
            let escrow = makeEscrow(
                configuration,
                stores: stores,
                keyring: keyring,
                teardown: &teardown,
                logger: logger
            )
            logStart(configuration, stores: stores, escrow: escrow, unwrapFailure: unwrapFailure, metadata, logger)
            var http = configuration.http
            http.tlsClientCA = configuration.tls?.clientCAPath
            var dependencies = EscrowHTTPDependencies(
                tls: try configuration.tls?.load(),
                backend: configuration.worker
            )
            if let apple = configuration.apple {
                dependencies.apple = try await verifier(apple, teardown: &teardown, logger: logger)
            }
            if let forwarding = configuration.forwarding {
                dependencies.notificationForwarder = NotificationForwarder(
                    forwarding,
                    outbox: stores.notifications,
                    keyring: { escrow.keyring },
                    clock: escrow.configuration.clock,
                    logger: logger
                )
                logger.notice(
                    "Apple notifications are forwarded to the backend (queued sealed in the store until taken)",
                    metadata: ["forward.urls": "\(forwarding.urls.map(\.absoluteString).joined(separator: " "))"]
                )
            }
            if let tokens = configuration.appleTokens {
                dependencies.appleTokenExchanger = try exchanger(
                    tokens,
                    escrow: escrow,
                    verifier: dependencies.apple,
                    teardown: &teardown,
                    revoker: &dependencies.appleRevoker,
                    logger: logger
                )
                http.signIn?.exchangesCodes = true
                http.exchangesAppleCodes = true
            }
            if let signIn = http.signIn {
                logger.notice(
                    "web sign-in on: /v1/apple/signin",
                    metadata: ["signin.returns": "\(signIn.returns.keys.sorted().joined(separator: ","))"]
                )
            }
            if try await stores.tokens.tokens().allSatisfy(\.isRevoked) {
                logger.warning(
                    "no active bearer token: every API request will answer 401 until `profile-escrow tokens add`",
                    metadata: ["tokens.path": "\(stores.tokensPlace)"]
                )
            }
            let server = EscrowServer(
                escrow: escrow,
                stores: stores,
                registry: registry,
                http: http,
                dependencies: dependencies,
                worker: configuration.worker,
                keyringPath: configuration.keyringPath,
                telemetry: telemetry,
                logger: logger
            )
            try await EscrowServiceGroup.run(try server.services(), shutdownBound: server.shutdownBound, logger: logger)
        }
        logger.notice("stopped")
    }

    /// The escrow over the store and the keyring, with its sealing keys made ahead on a thread of their own (at idle
    /// priority when this process moves its threads between scheduling policies, as `--scheduling batch` does).
    private static func makeEscrow(
        _ configuration: Configuration,
        stores: Stores,
        keyring: Keyring,
        teardown: inout Teardown,
        logger: Logger
    ) -> Escrow {
        var escrowConfiguration = configuration.escrow
        if let capacity = configuration.sealingKeyCapacity {
            let reserve = SealingKeyReserve(capacity: capacity, idlePriority: DrainScheduling.isOn)
            reserve.start()
            teardown.add { reserve.stop() }
            escrowConfiguration.sealingKeys = reserve
        }
        let escrow = Escrow(
            store: stores.escrows,
            signIns: stores.signIns,
            notifications: stores.notifications,
            keyring: keyring,
            configuration: escrowConfiguration,
            logger: logger
        )
        // A keyring in custody was unwrapped to get here (or its failure is reported next).
        if keyring.custody != nil { escrow.custodyHealth.succeeded() }
        return escrow
    }

    /// The start-up line: the keyring, the listeners, the tokens, and the caller's `metadata`.
    private static func logStart(
        _ configuration: Configuration,
        stores: Stores,
        escrow: Escrow,
        unwrapFailure: CryptoError?,
        _ metadata: Logger.Metadata,
        _ logger: Logger
    ) {
        var keyringMode = "full"
        if let unwrapFailure {
            keyringMode = "full, still wrapped (capture only until the custody engine answers)"
            escrow.custodyHealth.failed(unwrapFailure, keysUnavailable: true)
            logger.error(
                "the custody engine did not unwrap the keyring: this node captures, and opens nothing until it answers",
                metadata: ["error.code": "\(unwrapFailure.code)", "error": "\(unwrapFailure.message)"]
            )
        }
        let http = configuration.http
        let listeners: Logger.Metadata = [
            "keyring":
                "\(escrow.keyring.isPublicOnly ? "public-only (capture-only node: replay answers 409)" : keyringMode)",
            "address": "\(http.host):\(http.port)",
            "public.address": "\(http.publicPort.map { "\(http.publicHost ?? http.host):\($0)" } ?? "none")",
            "tokens.path": "\(stores.tokensPlace)",
        ]
        logger.notice("starting profile-escrow serve", metadata: metadata.merging(listeners, uniquingKeysWith: { $1 }))
    }

    /// Apple's keys: a file, or fetched from a URL over an HTTP client shut down when the server ends.
    private static func verifier(
        _ apple: AppleKeys,
        teardown: inout Teardown,
        logger: Logger
    ) async throws -> AppleVerifier {
        switch apple.source {
        case .file(let path):
            let verifier = try await AppleVerifier.load(jwksPath: path, audiences: apple.audiences)
            logger.notice("verified capture on: identity tokens are required", metadata: ["apple.jwks": "\(path)"])
            return verifier
        case .url(let url):
            let client = AppleKeyFetcher.makeClient(logger: logger)
            teardown.add { try await client.shutdown() }
            let fetcher = AppleKeyFetcher(AppleKeyFetcher.Configuration(url: url), client: client, logger: logger)
            // Not fatal: without keys every token is refused until a later fetch succeeds (logged).
            await fetcher.refresh()
            logger.notice(
                "verified capture on: identity tokens are required",
                metadata: ["apple.jwks.url": "\(url.absoluteString)"]
            )
            return AppleVerifier(fetcher: fetcher, audiences: apple.audiences)
        }
    }

    /// The services in start order: telemetry, flusher, keyring reloader, worker (or, without one, the live-gauge
    /// refresher), notification forwarder, TLS reloader, the admin overview publisher, HTTP application (and its
    /// public listener), drain marker.
    func services() throws -> [any Service] {
        let draining = DrainState()
        let overview = AdminOverviewPublisher(escrow: escrow, logger: logger)
        let app = try EscrowHTTPApplication.build(
            escrow: escrow,
            tokens: stores.tokens,
            notifications: stores.notifications,
            signIns: stores.signIns,
            registry: registry,
            configuration: http,
            dependencies: dependencies,
            draining: draining,
            overview: overview,
            logger: logger
        )
        let services = try EscrowServiceGroup.replayServices(
            escrow: escrow,
            worker: worker,
            keyringPath: keyringPath,
            logger: logger
        )
        // The worker publishes the live gauges after each sweep; without it, a refresher does, so that
        // `/metrics` never has to query the store.
        let gauges: [any Service] =
            worker == nil
            ? [
                LiveGaugeRefresher(
                    escrow: escrow,
                    factory: EscrowPrometheus.factory(registry: registry),
                    logger: logger
                )
            ]
            : []
        // The public listener, when there is one: the browser's and Apple's routes apart from the token-guarded API.
        let publicApp: [any Service] =
            http.publicPort == nil
            ? []
            : [
                try EscrowHTTPApplication.buildPublic(
                    escrow: escrow,
                    tokens: stores.tokens,
                    notifications: stores.notifications,
                    signIns: stores.signIns,
                    configuration: http,
                    dependencies: dependencies,
                    logger: logger
                )
            ]
        // Last, so it hears SIGTERM first: /readyz answers 503 from then on.
        let drain = DrainService(state: draining, delay: http.drainDelay, clock: escrow.configuration.clock)
        let forwarder: [any Service] =
            (dependencies.notificationForwarder.map { [$0] } ?? [])
            + (dependencies.appleTokenExchanger.map { [$0] } ?? [])
            + (dependencies.appleRevoker.map { [$0] } ?? [])
        let tlsReloader: [any Service] = dependencies.tls.map { [TLSReloader(files: $0, logger: logger)] } ?? []
        return telemetry + services + gauges + forwarder + tlsReloader + [overview, app] + publicApp + [drain]
    }

    /// How long graceful shutdown may take: the drain delay, then the worker's bound (its delivery timeout +
    /// 10 s, 40 s with the defaults), or 10 s for the HTTP API alone.
    var shutdownBound: Duration { http.drainDelay + (worker?.gracefulShutdownBound ?? .seconds(10)) }
}
