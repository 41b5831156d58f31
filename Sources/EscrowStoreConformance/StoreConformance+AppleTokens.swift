import EscrowCore
import EscrowCrypto
import Foundation

/// Apple token exchanges: queued with a sign-in's capture (never without one), once per code, holding the escrow's
/// first delivery; claimed with a lease (never by two claims at once); ended once, by the claim that holds them,
/// releasing the hold; deleted with the escrow.
extension StoreConformance {
    /// The checks of ``AppleTokenStore``, over a ``Subject`` whose sign-in store is also the Apple token store.
    public static let appleTokenChecks: [Check] = [
        Check(name: "an authorization code is queued once, with its sign-in's capture", run: appleExchangeQueuedOnce),
        Check(name: "Apple token exchanges are claimed with a lease and ended once", run: appleExchangeClaimAndEnd),
        Check(name: "concurrent Apple token exchange claims never share a code", run: appleExchangeConcurrentClaims),
        Check(
            name: "an escrow's Apple token exchanges are purged with it, and found by batch",
            run: appleExchangePurged
        ),
        Check(
            name: "Apple token revocations are claimed with a lease and ended once, audited, holding their key version",
            run: appleRevocations
        ),
    ]

    static func appleExchangeQueuedOnce(_ make: MakeSubject) async throws {
        let subject = try await make()
        let fixture = AppleTokenFixture()
        let (store, tokens) = try fixture.stores(subject)
        let record = try await fixture.signIn(1, store: store)
        let queued = try await tokens.appleExchanges(escrowID: record.id)
        try expect(queued.count == 1, "one exchange queued with the capture: \(queued.count)")
        try expect(queued.first == fixture.exchange(1, escrowID: record.id), "read back as stored")
        let held = try await subject.escrows.record(id: record.id)
        try expect(held?.nextAttemptAt == fixture.expiry, "the first delivery held until the code's expiry")
        try expect(try await tokens.runningAppleExchangeCount() == 1, "one running")
        // The same code again (another sign-in's capture of the same user): still one exchange.
        _ = try await fixture.signIn(1, attempt: 2, store: store)
        try expect(try await tokens.runningAppleExchangeCount() == 1, "one exchange a code")
        // A sign-in that captured nothing queues nothing.
        let attempt = fixture.signIns.attempt(3)
        try await store.createSignInAttempt(attempt)
        _ = try await store.completeSignIn(
            fixture.request(attempt, code: 3, ticket: 3),
            capture: nil,
            actor: .apple,
            lifecycle: EscrowLifecycle()
        )
        try expect(try await tokens.runningAppleExchangeCount() == 1, "no capture, no exchange")
    }

    static func appleExchangeClaimAndEnd(_ make: MakeSubject) async throws {
        let subject = try await make()
        let fixture = AppleTokenFixture()
        let (store, tokens) = try fixture.stores(subject)
        let record = try await fixture.signIn(1, store: store)
        let now = fixture.now
        let claimed = try await tokens.claimAppleExchanges(at: now, limit: 10, lease: 30)
        try expect(claimed.count == 1 && claimed[0].attempts == 1, "claimed, one attempt counted")
        try expect(claimed[0].nextAttemptAt == now.addingTimeInterval(30), "leased for 30 s")
        try expect(try await tokens.claimAppleExchanges(at: now, limit: 10, lease: 30).isEmpty, "not twice in a lease")
        let code = claimed[0].key
        let codeHash = fixture.exchange(1, escrowID: record.id).codeHash
        try expect(code == AppleTokenExchange.Key(escrowID: record.id, codeHash: codeHash), "named by escrow and code")
        try expect(
            try await !tokens.rescheduleAppleExchange(code, attempts: 0, at: now),
            "an earlier claim cannot reschedule it"
        )
        // The code's hash under another escrow names another exchange (none).
        let elsewhere = AppleTokenExchange.Key(escrowID: EscrowID.random(), codeHash: code.codeHash)
        try expect(
            try await !tokens.rescheduleAppleExchange(elsewhere, attempts: 1, at: now.addingTimeInterval(2)),
            "the code under another escrow reschedules nothing"
        )
        try expect(
            try await tokens.rescheduleAppleExchange(code, attempts: 1, at: now.addingTimeInterval(2)),
            "its claim reschedules it"
        )
        let again = try await tokens.claimAppleExchanges(at: now.addingTimeInterval(2), limit: 10, lease: 30)
        try expect(again.map(\.attempts) == [2], "due again when rescheduled: \(again.map(\.attempts))")
        let ended = fixture.now.addingTimeInterval(3)
        try expect(
            try await !tokens.endAppleExchange(code, attempts: 1, outcome: .refused("x"), at: ended),
            "a stale claim cannot end it"
        )
        try expect(
            try await !tokens.endAppleExchange(elsewhere, attempts: 2, outcome: .refused("x"), at: ended),
            "the code under another escrow ends nothing"
        )
        try expect(
            try await subject.escrows.record(id: record.id)?.nextAttemptAt == fixture.expiry,
            "nor releases the escrow's delivery"
        )
        let sealed: [UInt8] = Array(0..<90)
        try expect(
            try await tokens.endAppleExchange(code, attempts: 2, outcome: .tokens(sealed: sealed), at: ended),
            "its claim ends it"
        )
        try expect(
            try await !tokens.endAppleExchange(code, attempts: 2, outcome: .refused("x"), at: ended),
            "ended once"
        )
        let stored = try await tokens.appleExchanges(escrowID: record.id)
        try expect(stored.first?.outcome == .tokens(sealed: sealed), "the sealed tokens kept")
        try expect(stored.first?.sealedCode.isEmpty == true, "the sealed code erased")
        try expect(stored.first?.endedAt == ended, "ended at its time")
        try expect(try await tokens.runningAppleExchangeCount() == 0, "none running")
        let released = try await subject.escrows.record(id: record.id)
        try expect(released?.nextAttemptAt == ended && released?.state == .pending, "the escrow due at once")
        try expect(
            try await tokens.claimAppleExchanges(at: fixture.expiry.addingTimeInterval(60), limit: 10, lease: 30)
                .isEmpty,
            "an ended exchange is never claimed"
        )
        // An error code is kept as such.
        let other = try await fixture.signIn(2, store: store)
        let second = try await tokens.claimAppleExchanges(at: now, limit: 10, lease: 30)
        _ = try await tokens.endAppleExchange(
            second[0].key,
            attempts: 1,
            outcome: .refused("invalid_grant"),
            at: now
        )
        let refused = try await tokens.appleExchanges(escrowID: other.id)
        try expect(refused.first?.outcome == .refused("invalid_grant"), "Apple's code kept")
    }

    static func appleExchangeConcurrentClaims(_ make: MakeSubject) async throws {
        let subject = try await make()
        let fixture = AppleTokenFixture()
        let (store, tokens) = try fixture.stores(subject)
        for number in 1...6 { _ = try await fixture.signIn(number, store: store) }
        let claims = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await tokens.claimAppleExchanges(at: fixture.now, limit: 3, lease: 30).map(\.codeHash)
                }
            }
            return try await group.reduce(into: [[UInt8]]()) { $0 += $1 }
        }
        try expect(claims.count == 6 && Set(claims).count == 6, "each code claimed once: \(claims.count)")
    }

    static func appleExchangePurged(_ make: MakeSubject) async throws {
        let subject = try await make()
        let fixture = AppleTokenFixture()
        let (store, tokens) = try fixture.stores(subject)
        let record = try await fixture.signIn(1, store: store)
        let kept = try await fixture.signIn(2, store: store)
        guard let stored = try await subject.escrows.record(id: record.id) else {
            throw ConformanceFailure("the capture is stored")
        }
        try await purge(stored, at: fixture.now, in: subject.escrows)
        try expect(try await tokens.appleExchanges(escrowID: record.id).isEmpty, "purged with the escrow")
        try expect(try await tokens.appleExchanges(escrowID: kept.id).count == 1, "another escrow's kept")
        try expect(try await tokens.runningAppleExchangeCount() == 1, "one running left")
        let without = EscrowID.random()
        let exchanged = try await tokens.escrowIDsWithAppleExchanges(among: [record.id, kept.id, without, kept.id])
        try expect(exchanged == [kept.id], "of a batch, only the escrow with an exchange: \(exchanged.count)")
        try expect(try await tokens.escrowIDsWithAppleExchanges(among: []).isEmpty, "an empty batch, none")
    }
}

extension StoreConformance {
    static func appleRevocations(_ make: MakeSubject) async throws {
        let subject = try await make()
        guard let store = subject.signIns as? any AppleRevocationStore else {
            throw ConformanceFailure(
                "the subject's sign-in store is no AppleRevocationStore: leave appleTokenChecks out"
            )
        }
        let start = SignInFixture().start
        let revocation = AppleRevocation(
            id: "rev_0001",
            clientID: "com.example.web",
            tokenTypeHint: "refresh_token",
            keyVersion: 1,
            sealedToken: Array("sealed-token".utf8),
            nextAttemptAt: start,
            createdAt: start
        )
        try await store.queueAppleRevocation(revocation)
        try expect(try await store.appleRevocation(id: revocation.id) == revocation, "read back as stored")
        try expect(try await store.appleRevocationCounts() == AppleRevocationCounts(pending: 1), "one pending")
        // Its token is sealed to master key version 1: the version cannot be retired while it waits.
        try expect(try await subject.escrows.queuedItemsSealed() == [1: 1], "the queued token counted on its version")
        let retire = {
            try await subject.escrows.retireKeyVersion(
                1,
                audit: [AuditDraft(type: .keysRetired, at: start, detail: "version 1", actor: .cli)]
            )
        }
        do {
            try await retire()
            throw ConformanceFailure("a version a queued revocation is sealed to was retired")
        } catch let error as EscrowStoreError {
            try expect(error.code == .keyVersionInUse, "refused as in use: \(error.code)")
        }
        var failed = false
        do { try await store.queueAppleRevocation(revocation) } catch { failed = true }
        try expect(failed, "one revocation an id")
        let claimed = try await store.claimAppleRevocations(at: start, limit: 10, lease: 30)
        try expect(claimed.map(\.attempts) == [1], "claimed, an attempt counted")
        try expect(try await store.claimAppleRevocations(at: start, limit: 10, lease: 30).isEmpty, "leased")
        try expect(
            try await store.rescheduleAppleRevocation(id: revocation.id, attempts: 1, at: start),
            "rescheduled by its claim"
        )
        let again = try await store.claimAppleRevocations(at: start, limit: 10, lease: 30)
        try expect(again.map(\.attempts) == [2], "due again")
        try expect(
            try await !store.endAppleRevocation(
                id: revocation.id,
                attempts: 1,
                outcome: .revoked,
                at: start,
                actor: .apple
            ),
            "a stale claim cannot end it"
        )
        try expect(
            try await store.endAppleRevocation(
                id: revocation.id,
                attempts: 2,
                outcome: .revoked,
                at: start,
                actor: .apple
            ),
            "ended by its claim"
        )
        let ended = try await store.appleRevocation(id: revocation.id)
        try expect(ended?.outcome == .revoked && ended?.sealedToken.isEmpty == true, "revoked, its token erased")
        try expect(try await store.appleRevocationCounts() == AppleRevocationCounts(revoked: 1), "counted revoked")
        let events = try await subject.escrows.auditEvents(after: 0, limit: 10)
        try expect(
            events.map(\.draft.type) == [.appleTokenRevoked] && events[0].draft.detail == "revocation rev_0001",
            "one audit event naming the revocation"
        )
        try await Fixture().expectIntactChain(events, of: subject.escrows, "the chain with a revocation")
        try expect(try await subject.escrows.queuedItemsSealed().isEmpty, "an ended revocation holds no version")
        try await retire()
        try expect(try await subject.escrows.retiredKeyVersions() == [1], "retired once nothing queued needs it")
    }
}

/// Sign-ins of fake users whose codes (fake bytes, never sealed by a real keyring) are queued for their exchange.
struct AppleTokenFixture {
    let signIns = SignInFixture()
    let records = Fixture()
    var now: Date { signIns.start.addingTimeInterval(60) }
    var expiry: Date { now.addingTimeInterval(AppleTokenExchange.codeLifetime) }

    func stores(_ subject: StoreConformance.Subject) throws -> (any SignInStore, any AppleTokenStore) {
        let store = try subject.signInStore
        guard let tokens = store as? any AppleTokenStore else {
            throw ConformanceFailure(
                "the subject's sign-in store is no AppleTokenStore: leave StoreConformance.appleTokenChecks out"
            )
        }
        return (store, tokens)
    }

    func exchange(_ code: Int, escrowID: EscrowID) -> AppleTokenExchange {
        AppleTokenExchange(
            codeHash: signIns.hash("code-\(code)"),
            escrowID: escrowID,
            clientID: "com.example.web",
            redirectURI: "https://escrow.example/v1/apple/signin/callback",
            keyVersion: 1,
            sealedCode: Array("sealed-code-\(code)".utf8),
            nextAttemptAt: now,
            createdAt: now,
            expiresAt: expiry
        )
    }

    /// The completion of `attempt` (its ticket numbered `ticket`) queueing code `code`.
    func request(_ attempt: SignInAttempt, code: Int, ticket: Int) -> SignInCompletionRequest {
        var request = signIns.request(attempt, at: now, ticket: ticket)
        request.appleExchange = { exchange(code, escrowID: $0) }
        return request
    }

    /// User `user`'s sign-in with code `user` (attempt `attempt`, the user's number unless given), captured.
    func signIn(_ user: Int, attempt number: Int? = nil, store: any SignInStore) async throws -> EscrowRecord {
        let number = number ?? user
        let attempt = signIns.attempt(number)
        try await store.createSignInAttempt(attempt)
        var record = try records.record(user: user, at: signIns.start)
        record.nextAttemptAt = expiry
        let completion = try await store.completeSignIn(
            request(attempt, code: user, ticket: number),
            capture: record,
            actor: .apple,
            lifecycle: EscrowLifecycle()
        )
        guard case .completed(_, let outcome?) = completion else {
            throw ConformanceFailure("the sign-in completes and captures: \(completion)")
        }
        return outcome.record
    }
}
