import NIOConcurrencyHelpers

/// Whether this node could sign Apple client secrets at its last try: the team's key in custody (an HSM, OpenBao or
/// a file) may be out of reach while the node still captures. Exchanges and revocations then wait and retry;
/// `/readyz` says so in its body without failing readiness, so a load balancer keeps sending sign-ins.
public final class AppleSigningHealth: Sendable {
    /// What the last try gave.
    public enum State: String, Sendable {
        /// No client secret was asked for yet.
        case unknown
        case ok
        case failing
    }

    private let current = NIOLockedValueBox(State.unknown)

    public init() {}

    public var state: State { current.withLockedValue { $0 } }

    /// The client secret `mint` gives, recording whether there was one: its error is rethrown as it came (it names
    /// the custody engine, for the log; `/readyz` tells only the state).
    func recording(_ mint: () async throws -> String) async throws -> String {
        do {
            let secret = try await mint()
            current.withLockedValue { $0 = .ok }
            return secret
        } catch {
            current.withLockedValue { $0 = .failing }
            throw error
        }
    }
}
