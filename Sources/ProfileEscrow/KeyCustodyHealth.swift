public import EscrowCrypto
public import Foundation
import Metrics
import NIOConcurrencyHelpers

/// What a running process knows of its keyring's custody engine: the last reload's failure, if any. While it is
/// set, the process keeps the keys it unwrapped before (nothing falls back to a plain key), `/readyz` answers 503
/// with the reason, and the gauge `profile_escrow_custody_up` is 0.
public final class KeyCustodyHealth: Sendable {
    private let state = NIOLockedValueBox<Problem?>(nil)

    /// A failed unwrap: the error's code and its PII-free, secret-free message (it names the engine).
    public struct Problem: Sendable, Equatable {
        public var code: String
        public var message: String
        public var since: Date
    }

    public init() {}

    /// The failure of the last unwrap, nil when it succeeded (or the keyring is plain).
    public var problem: Problem? { state.withLockedValue { $0 } }

    /// Records a failed unwrap (the first failure's time is kept while it lasts).
    public func failed(_ error: CryptoError, at now: Date = Date()) {
        state.withLockedValue {
            $0 = Problem(code: error.code.rawValue, message: error.message, since: $0?.since ?? now)
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
