import EscrowCore
import EscrowCrypto
import Foundation
import Testing

@testable import EscrowHTTP

/// The attempts a node started, held until their callback: bounded, and never an attempt past any use.
@Suite("Started sign-in attempts")
struct StartedSignInAttemptsTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func attempt(_ number: Int, expiresAt: Date = start.addingTimeInterval(600)) -> SignInAttempt {
        let hash = { (secret: String) in Hashing.blake2b256(Array("\(secret)-\(number)".utf8)) }
        return SignInAttempt(
            stateHash: hash("state"),
            nonceHash: hash("nonce"),
            bindingHash: hash("binding"),
            returnName: "app",
            createdAt: start,
            expiresAt: expiresAt
        )
    }

    @Test("held until removed, and not past its expiry and the resubmission grace")
    func heldThenGone() {
        let started = StartedSignInAttempts()
        let attempt = Self.attempt(1)
        started.insert(attempt, now: Self.start)
        #expect(started.attempt(stateHash: attempt.stateHash, now: Self.start) == attempt)
        let graceEnd = attempt.expiresAt.addingTimeInterval(SignInAttempt.resubmissionGrace)
        #expect(started.attempt(stateHash: attempt.stateHash, now: graceEnd.addingTimeInterval(-1)) == attempt)
        #expect(started.attempt(stateHash: attempt.stateHash, now: graceEnd) == nil, "over: the store says")
        let other = Self.attempt(2)
        started.insert(other, now: Self.start)
        started.remove(stateHash: other.stateHash)
        #expect(started.attempt(stateHash: other.stateHash, now: Self.start) == nil)
    }

    @Test("full of live attempts, a new one is not held; once they are over, it is")
    func bounded() {
        let started = StartedSignInAttempts()
        for number in 0..<StartedSignInAttempts.capacity { started.insert(Self.attempt(number), now: Self.start) }
        let late = Self.attempt(-1, expiresAt: Self.start.addingTimeInterval(7_200))
        started.insert(late, now: Self.start)
        #expect(started.attempt(stateHash: late.stateHash, now: Self.start) == nil, "no room: read from the store")
        #expect(started.attempt(stateHash: Self.attempt(0).stateHash, now: Self.start) != nil)
        let over = Self.start.addingTimeInterval(600 + SignInAttempt.resubmissionGrace)
        started.insert(late, now: over)
        #expect(started.attempt(stateHash: late.stateHash, now: over) == late, "the others left, it is held")
    }
}
