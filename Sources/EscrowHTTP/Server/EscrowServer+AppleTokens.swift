import AsyncHTTPClient
import EscrowCore
import Logging
import ProfileEscrow

/// What `serve` needs to redeem sign-ins' authorization codes and revoke tokens at Apple: the endpoints and timing,
/// and the team's client secrets (minted with the key in custody, cached an hour per client id).
public struct AppleTokenExchangeSettings: Sendable {
    public var exchange: AppleTokenExchanger.Configuration
    public var revoke = AppleRevoker.Configuration()
    /// The client secret (the JWT) for a client id.
    public var clientSecret: @Sendable (String) async throws -> String

    public init(
        exchange: AppleTokenExchanger.Configuration,
        clientSecret: @escaping @Sendable (String) async throws -> String
    ) {
        self.exchange = exchange
        self.clientSecret = clientSecret
    }
}

extension EscrowServer {
    /// The exchanger of `settings` over the escrow's store, with an HTTP client shut down when the server ends, and the
    /// revoker beside it (in `revoker`). Refused without Apple's keys (the answer's id_token is verified) or a store
    /// that keeps the exchanges.
    static func exchanger(
        _ settings: AppleTokenExchangeSettings,
        escrow: Escrow,
        verifier: AppleVerifier?,
        teardown: inout Teardown,
        revoker: inout AppleRevoker?,
        logger: Logger
    ) throws -> AppleTokenExchanger {
        guard let verifier else {
            throw EscrowError(
                .invalidConfiguration,
                "exchanging Apple's authorization codes verifies Apple's id_token: it needs --apple-audience too"
            )
        }
        guard let store = escrow.appleTokenStore else {
            throw EscrowError(.invalidConfiguration, "this store keeps no Apple token exchanges")
        }
        let client = AppleKeyFetcher.makeClient(logger: logger)
        teardown.add { try await client.shutdown() }
        logger.notice(
            "Apple's authorization codes are redeemed here; the refresh token is delivered in the escrow",
            metadata: ["apple.token.url": "\(settings.exchange.tokenURL)"]
        )
        let exchanger = AppleTokenExchanger(
            settings.exchange,
            store: store,
            escrow: escrow,
            verifier: verifier,
            clientSecret: settings.clientSecret,
            client: client,
            logger: logger
        )
        if let store = escrow.signIns as? any AppleRevocationStore {
            revoker = AppleRevoker(
                settings.revoke,
                store: store,
                escrow: escrow,
                // Through the exchanger's: one signing state for `/readyz`.
                clientSecret: exchanger.clientSecret,
                client: client,
                logger: logger
            )
        }
        return exchanger
    }
}
