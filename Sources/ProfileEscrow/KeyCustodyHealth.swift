public import EscrowCrypto
public import Foundation
import Metrics
import NIOConcurrencyHelpers

/// What a running process knows of its keyring's custody engine: the last unwrap's failure, if any. While it is
/// set, the process keeps the keys it unwrapped before (nothing falls back to a plain key), or, when the engine was
/// down at start, holds the secret keys only wrapped: it captures (sealing needs only public keys) and opens nothing.
/// `/readyz` then answers 503 with ``publicDetail`` (nothing about the engine), the gauge
/// `profile_escrow_custody_up` is 0, and the ``KeyringReloader`` logs the engine and the cause at each retry.
public final class KeyCustodyHealth: Sendable {
    private let state = NIOLockedValueBox<Problem?>(nil)

    /// A failed unwrap: the error's code and its PII-free, secret-free message (it names the engine: for logs and
    /// operators, never for an unauthenticated answer).
    public struct Problem: Sendable, Equatable {
        public var code: String
        public var message: String
        public var since: Date
        /// True while the process holds no unwrapped secret key: it opens nothing (the engine was down at start).
        public var keysUnavailable: Bool
    }

    public init() {}

    /// The failure of the last unwrap, nil when it succeeded (or the keyring is plain).
    public var problem: Problem? { state.withLockedValue { $0 } }

    /// What `/readyz` tells anyone who asks: whether escrows can be opened here, and nothing about the engine (its
    /// address, mount, key name and error are for the logs).
    public var publicDetail: String {
        guard let problem else { return "the keyring's custody engine answers" }
        return problem.keysUnavailable
            ? "the keyring's custody engine is not available: this node captures, but opens no escrow until it answers"
            : "the keyring's custody engine is not available: the keys in use still work"
    }

    /// Records a failed unwrap (the first failure's time is kept while it lasts). `keysUnavailable`: the process
    /// holds no unwrapped secret key because of it.
    public func failed(_ error: CryptoError, keysUnavailable: Bool = false, at now: Date = Date()) {
        state.withLockedValue {
            $0 = Problem(
                code: error.code.rawValue,
                message: error.message,
                since: $0?.since ?? now,
                keysUnavailable: keysUnavailable
            )
        }
        Gauge(label: "profile_escrow_custody_up").record(0)
        Counter(label: "profile_escrow_custody_failures_total", dimensions: [("code", error.code.rawValue)]).increment()
    }

    /// Records a successful unwrap.
    public func succeeded() {
        state.withLockedValue { $0 = nil }
        Gauge(label: "profile_escrow_custody_up").record(1)
    }
}
