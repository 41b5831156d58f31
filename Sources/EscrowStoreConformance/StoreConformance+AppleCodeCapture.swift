import EscrowCore
import EscrowCrypto
import Foundation

/// A verified capture with Apple's authorization code: the escrow and its code's exchange written together, once per
/// code, the first delivery held as the record says.
extension StoreConformance {
    /// The checks of ``AppleCodeCaptureStore``, over a ``Subject`` whose escrow store is one and whose sign-in store is
    /// the Apple token store.
    public static let appleCodeCaptureChecks: [Check] = [
        Check(
            name: "a capture with an authorization code queues its exchange, once, holding the first delivery",
            run: appleCodeCapturedOnce
        )
    ]

    static func appleCodeCapturedOnce(_ make: MakeSubject) async throws {
        let subject = try await make()
        guard let store = subject.escrows as? any AppleCodeCaptureStore else {
            throw ConformanceFailure("the subject's store is no AppleCodeCaptureStore: leave appleCodeCaptureChecks out")
        }
        let fixture = AppleTokenFixture()
        let (_, tokens) = try fixture.stores(subject)
        var record = try fixture.records.record(user: 1, at: fixture.now)
        record.nextAttemptAt = fixture.expiry
        let outcome = try await store.capture(
            record,
            queueing: { fixture.exchange(1, escrowID: $0) },
            actor: .library,
            lifecycle: EscrowLifecycle()
        )
        try expect(outcome == .created(record), "captured: \(outcome)")
        try expect(
            try await tokens.appleExchanges(escrowID: record.id) == [fixture.exchange(1, escrowID: record.id)],
            "its code queued for the escrow that holds the profile"
        )
        try expect(
            try await subject.escrows.record(id: record.id)?.nextAttemptAt == fixture.expiry,
            "the first delivery held until the code's expiry"
        )
        // The same request again (its answer lost): the same escrow, still one exchange.
        let again = try await store.capture(
            try fixture.records.record(user: 1, at: fixture.now),
            queueing: { fixture.exchange(1, escrowID: $0) },
            actor: .library,
            lifecycle: EscrowLifecycle()
        )
        try expect(again.record.id == record.id, "the same content kept: \(again)")
        try expect(try await tokens.runningAppleExchangeCount() == 1, "one exchange a code")
        // A plain capture queues nothing.
        _ = try await subject.escrows.capture(try fixture.records.record(user: 2), actor: .library)
        try expect(try await tokens.runningAppleExchangeCount() == 1, "no code, no exchange")
        // An escrow captured without a code, still waiting for its first delivery, captured again (the same content)
        // with one: its delivery is held for the new code's exchange, as a new escrow's is.
        let plain = try fixture.records.record(user: 3)
        _ = try await subject.escrows.capture(plain, actor: .library)
        let kept = try await store.capture(
            try fixture.records.record(user: 3),
            queueing: { fixture.exchange(3, escrowID: $0) },
            actor: .library,
            lifecycle: EscrowLifecycle()
        )
        try expect(kept == .unchanged(plain), "the same content kept: \(kept)")
        let held = try await subject.escrows.record(id: plain.id)
        try expect(held?.nextAttemptAt == fixture.expiry, "the kept escrow's first delivery held for the new code")
        try expect(held?.revision == plain.revision + 1, "a change like any other: its revision bumped")
        try expect(try await tokens.runningAppleExchangeCount() == 2, "the new code queued")
        let events = try await subject.escrows.auditEvents(after: 0, limit: 10)
        try expect(events.map(\.draft.type) == [.captured, .captured, .captured], "one captured event each")
        try await Fixture().expectIntactChain(events, of: subject.escrows, "the chain with a code's capture")
    }
}
