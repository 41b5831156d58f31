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
        ),
        Check(
            name: "concurrent captures with and without codes: each code queued for the escrow that holds its profile",
            run: appleCodeCapturedConcurrently
        ),
    ]

    static func codeCaptureStore(_ subject: Subject) throws -> any AppleCodeCaptureStore {
        guard let store = subject.escrows as? any AppleCodeCaptureStore else {
            throw ConformanceFailure(
                "the subject's store is no AppleCodeCaptureStore: leave appleCodeCaptureChecks out"
            )
        }
        return store
    }

    static func appleCodeCapturedOnce(_ make: MakeSubject) async throws {
        let subject = try await make()
        let store = try codeCaptureStore(subject)
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

    /// Captures that may share a commit: for users 10 to 19 one with a code and one of other content without, for
    /// users 20 to 24 two of different content, each with its own code. Whichever capture of a user comes last holds
    /// the profile; the code of one it replaced went with it, and no code is left queued for an escrow that is gone.
    static func appleCodeCapturedConcurrently(_ make: MakeSubject) async throws {
        let subject = try await make()
        let store = try codeCaptureStore(subject)
        let fixture = AppleTokenFixture()
        let (_, tokens) = try fixture.stores(subject)
        var coded: [(user: Int, code: Int, record: EscrowRecord)] = []
        var plain: [EscrowRecord] = []
        for user in 10..<25 {
            var record = try fixture.records.record(user: user, content: "coded", at: fixture.now)
            record.nextAttemptAt = fixture.expiry
            coded.append((user, user, record))
            if user < 20 {
                plain.append(try fixture.records.record(user: user, content: "plain", at: fixture.now))
            } else {
                var other = try fixture.records.record(user: user, content: "coded again", at: fixture.now)
                other.nextAttemptAt = fixture.expiry
                coded.append((user, user + 100, other))
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (_, code, record) in coded {
                group.addTask {
                    _ = try await store.capture(
                        record,
                        queueing: { fixture.exchange(code, escrowID: $0) },
                        actor: .library,
                        lifecycle: EscrowLifecycle()
                    )
                }
            }
            for record in plain {
                group.addTask { _ = try await subject.escrows.capture(record, actor: .library) }
            }
            try await group.waitForAll()
        }
        var queued = 0
        for user in 10..<25 {
            let index = fixture.records.keyring.blindIndex(userIdentifier: fixture.records.user(user))
            guard let live = try await subject.escrows.record(blindIndex: index) else {
                throw ConformanceFailure("user \(user) has no escrow")
            }
            let exchanges = try await tokens.appleExchanges(escrowID: live.id)
            queued += exchanges.count
            if let (_, code, _) = coded.first(where: { $0.record.id == live.id }) {
                try expect(
                    exchanges == [fixture.exchange(code, escrowID: live.id)],
                    "user \(user): the code of the capture that holds the profile, alone: \(exchanges.count)"
                )
            } else {
                try expect(exchanges.isEmpty, "user \(user): a plain capture holds the profile, no code")
            }
        }
        try expect(
            try await tokens.runningAppleExchangeCount() == queued,
            "no code queued for an escrow that is gone: \(queued) held by live escrows"
        )
        try await Fixture().expectIntactChain(
            try fixture.records.allEvents(subject.escrows),
            of: subject.escrows,
            "the chain of concurrent captures"
        )
    }
}
