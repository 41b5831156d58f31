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

    private struct State {
        var attempts: [[UInt8]: SignInAttempt] = [:]
        /// When a full map was last cleared of the attempts past any use: at most once a second, so that a flood
        /// of starts does not walk the whole map at each one.
        var lastClearing = Date.distantPast
    }

    private let state = NIOLockedValueBox(State())

    /// Holds `attempt`, when there is room (after the attempts past any use at `now` left, at most once a second).
    func insert(_ attempt: SignInAttempt, now: Date) {
        state.withLockedValue { state in
            if state.attempts.count >= Self.capacity, state.lastClearing <= now.addingTimeInterval(-1) {
                state.lastClearing = now
                state.attempts = state.attempts.filter { !Self.isOver($0.value, at: now) }
            }
            if state.attempts.count < Self.capacity { state.attempts[attempt.stateHash] = attempt }
        }
    }

    /// The attempt, unless it is past any use at `now` (the store's sweep may have deleted it: the store says).
    func attempt(stateHash: [UInt8], now: Date) -> SignInAttempt? {
        state.withLockedValue { state in
            guard let attempt = state.attempts[stateHash] else { return nil }
            guard !Self.isOver(attempt, at: now) else {
                state.attempts[stateHash] = nil
                return nil
            }
            return attempt
        }
    }

    /// The attempt's callback completed, or ended it for good.
    func remove(stateHash: [UInt8]) {
        _ = state.withLockedValue { $0.attempts.removeValue(forKey: stateHash) }
    }

    /// Past its expiry and the resubmission grace after it: no callback can complete it any more.
    private static func isOver(_ attempt: SignInAttempt, at now: Date) -> Bool {
        now >= attempt.expiresAt.addingTimeInterval(SignInAttempt.resubmissionGrace)
    }
}
