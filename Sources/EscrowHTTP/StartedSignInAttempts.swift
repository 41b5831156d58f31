import EscrowCore
import Foundation
import NIOConcurrencyHelpers

/// The sign-in attempts this process started and whose callback has not come yet, by state hash: the callback's
/// first checks (binding, nonce, return URL) read the attempt here instead of from the store. The store still decides
/// the attempt's use, in the transaction that captures (a callback for an attempt completed meanwhile, here or on
/// another node, is answered as expired there). An attempt started on another node, or not held because the table
/// was full of live attempts, is read from the store as before.
///
/// Holds hashes and times only, never a state, nonce or binding. Bounded by ``capacity``; an attempt leaves when its
/// callback completes or when it could no longer be completed (expired, resubmission grace included).
final class StartedSignInAttempts: Sendable {
    static let capacity = 10_000

    private let attempts = NIOLockedValueBox<[[UInt8]: SignInAttempt]>([:])

    /// Holds `attempt`, when there is room after the attempts past any use at `now` left.
    func insert(_ attempt: SignInAttempt, now: Date) {
        attempts.withLockedValue { attempts in
            if attempts.count >= Self.capacity {
                let grace = SignInAttempt.resubmissionGrace
                attempts = attempts.filter { now < $0.value.expiresAt.addingTimeInterval(grace) }
            }
            if attempts.count < Self.capacity { attempts[attempt.stateHash] = attempt }
        }
    }

    /// The attempt, unless it is past any use at `now` (the store's sweep may have deleted it: the store says).
    func attempt(stateHash: [UInt8], now: Date) -> SignInAttempt? {
        attempts.withLockedValue { attempts in
            guard let attempt = attempts[stateHash] else { return nil }
            guard now < attempt.expiresAt.addingTimeInterval(SignInAttempt.resubmissionGrace) else {
                attempts[stateHash] = nil
                return nil
            }
            return attempt
        }
    }

    /// The attempt's callback completed, or ended it for good.
    func remove(stateHash: [UInt8]) {
        _ = attempts.withLockedValue { $0.removeValue(forKey: stateHash) }
    }
}
