import EscrowCore
import EscrowCrypto
import Foundation

/// Web sign-in attempts: created and read back as hashes, used once (with the callback's capture in the same
/// transaction), refused past their expiry or from another browser, their tickets redeemed once, and swept.
extension StoreConformance {
    /// The checks of ``SignInStore``.
    public static let signInChecks: [Check] = [
        Check(name: "sign-in attempt is created and read back, with its sealed app state", run: signInCreated),
        Check(name: "sign-in attempt is used once, with its capture", run: signInUsedOnce),
        Check(name: "sign-in attempt refuses another browser and its expiry", run: signInRefusals),
        Check(name: "concurrent callbacks of one attempt capture once", run: signInConcurrentCallbacks),
        Check(name: "concurrent callbacks of many attempts each answer as alone", run: signInConcurrentAttempts),
        Check(name: "a sign-in's capture replaces the user's held escrow", run: signInReplaces),
        Check(name: "a sign-in of the content already held issues its ticket for that escrow", run: signInUnchanged),
        Check(name: "an attempt read before, used or gone since, is refused as if read", run: signInHeldStale),
        Check(name: "an attempt not read before is read, used once, with its capture", run: signInNotHeld),
        Check(name: "an attempt read before but stored otherwise is refused as stored", run: signInHeldOtherwise),
        Check(name: "a completion that fails leaves its attempt unused", run: signInFailedCompletion),
        Check(name: "sign-in ticket is redeemed once, before its expiry", run: signInTicketOnce),
        Check(name: "expired sign-in attempts are swept", run: signInSweep),
        Check(name: "an app's attempt is completed without a cookie, a browser's never", run: signInStartedByApp),
        Check(name: "an app's ticket redeems only with its attempt secret", run: signInAppTicketBound),
    ]

    static func signInCreated(_ make: MakeSubject) async throws {
        let store = try await make().signInStore
        let fixture = SignInFixture()
        let attempt = fixture.attempt(1)
        try await store.createSignInAttempt(attempt)
        try expect(try await store.signInAttempt(stateHash: attempt.stateHash) == attempt, "read back as stored")
        try expect(try await store.signInAttempt(stateHash: fixture.hash("state-0")) == nil, "an unknown state: nil")
        var withAppState = fixture.attempt(2)
        withAppState.sealedAppState = Array(0..<80)
        try await store.createSignInAttempt(withAppState)
        try expect(
            try await store.signInAttempt(stateHash: withAppState.stateHash)?.sealedAppState == Array(0..<80),
            "the app's sealed state is read back as stored"
        )
        var failed = false
        do { try await store.createSignInAttempt(attempt) } catch { failed = true }
        try expect(failed, "a second attempt with the same state hash is refused")
    }

    static func signInUsedOnce(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (subject, store, attempt) = try await fixture.started(make)
        let record = try Fixture().record(user: 1, at: fixture.start)
        let now = fixture.start.addingTimeInterval(60)
        let first = try await store.completeSignIn(
            fixture.request(attempt, at: now, ticket: 1),
            capture: record,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        guard case .completed(let used, .created(let captured)) = first else {
            throw ConformanceFailure("the first callback completes and captures: \(first)")
        }
        try expect(used.usedAt == now && captured.id == record.id, "used at the callback's time, the record captured")
        try expect(try await subject.escrows.record(id: record.id)?.id == record.id, "the capture is stored")
        try expect(try await store.signInAttempt(stateHash: attempt.stateHash)?.usedAt == now, "stored as used")
        let other = try Fixture().record(user: 2, at: fixture.start)
        let second = try await store.completeSignIn(
            fixture.request(attempt, at: now, ticket: 2),
            capture: other,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        guard case .expired = second else { throw ConformanceFailure("a second use is refused: \(second)") }
        try expect(try await subject.escrows.record(id: other.id) == nil, "a second use captures nothing")
        let events = try await subject.escrows.auditEvents(after: 0, limit: 100)
        try expect(events.filter { $0.draft.type == .captured }.count == 1, "one capture audited")
        try expect(
            events.map(\.draft.type) == [.captured] && events[0].draft.escrowID == record.id.hex
                && events[0].draft.detail == CaptureItem.webSignIn,
            "one captured event of that escrow, detail web-signin: \(events.map(\.draft.type))"
        )
        try await Fixture().expectIntactChain(events, of: subject.escrows, "the chain with sign-in events")
        let unknown = try await store.completeSignIn(
            fixture.request(fixture.attempt(9), at: now, ticket: 3),
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        try expect(unknown == .unknown, "an unknown state: \(unknown)")
    }

    static func signInConcurrentCallbacks(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (subject, store, attempt) = try await fixture.started(make)
        let records = try (0..<8).map { try Fixture().record(user: $0, at: fixture.start) }
        let completions = try await withThrowingTaskGroup(of: SignInCompletion.self) { group in
            for (number, record) in records.enumerated() {
                // Half bring the attempt as read before (used with one statement), half do not (read, then used).
                var request = fixture.request(attempt, at: fixture.start, ticket: number)
                if number.isMultiple(of: 2) { request.attempt = nil }
                group.addTask { [request] in
                    try await store.completeSignIn(
                        request,
                        capture: record,
                        actor: .http(token: "signin"),
                        lifecycle: EscrowLifecycle()
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let completed = completions.filter { if case .completed = $0 { true } else { false } }
        try expect(completed.count == 1, "one callback completes: \(completions)")
        try expect(completions.count - completed.count == 7, "the others find it used")
        let events = try await subject.escrows.auditEvents(after: 0, limit: 100)
        try expect(events.filter { $0.draft.type == .captured }.count == 1, "one capture")
    }

    /// Callbacks of distinct attempts at once (a store may complete them in one transaction): each answers as it
    /// would alone (live ones capture, an unknown, an expired and another browser's are refused), and of two
    /// callbacks of one attempt among them one captures.
    static func signInConcurrentAttempts(_ make: MakeSubject) async throws {
        let subject = try await make()
        let store = try subject.signInStore
        let fixture = SignInFixture()
        let records = Fixture()
        let attempts = (1...9).map { fixture.attempt($0) }
        for attempt in attempts { try await store.createSignInAttempt(attempt) }
        var otherBrowser = fixture.request(attempts[7], at: fixture.start, ticket: 8)
        otherBrowser.bindingHash = fixture.hash("binding-other")
        // Attempts 1 to 6 live, attempt 7 twice, an unknown state, attempt 8 from another browser, 9 at its expiry.
        var calls = (0..<6).map { (fixture.request(attempts[$0], at: fixture.start, ticket: $0 + 1), $0 + 1) }
        calls += [
            (fixture.request(attempts[6], at: fixture.start, ticket: 7), 7),
            (fixture.request(attempts[6], at: fixture.start, ticket: 17), 17),
            (fixture.request(fixture.attempt(10), at: fixture.start, ticket: 10), 10),
            (otherBrowser, 8),
            (fixture.request(attempts[8], at: attempts[8].expiresAt, ticket: 9), 9),
        ]
        let captures = try calls.map { try records.record(user: $0.1, at: fixture.start) }
        let answers = try await withThrowingTaskGroup(of: (Int, SignInCompletion).self) { group in
            for (position, call) in calls.enumerated() {
                let record = captures[position]
                group.addTask {
                    let completion = try await store.completeSignIn(
                        call.0,
                        capture: record,
                        actor: .http(token: "signin"),
                        lifecycle: EscrowLifecycle()
                    )
                    return (position, completion)
                }
            }
            return try await group.reduce(into: [Int: SignInCompletion]()) { $0[$1.0] = $1.1 }
        }
        for position in 0..<6 {
            guard case .completed(let used, .created(let stored)) = answers[position] else {
                throw ConformanceFailure(
                    "live attempt \(position + 1) completes and captures: \(String(describing: answers[position]))"
                )
            }
            try expect(
                used.stateHash == attempts[position].stateHash && stored.id == captures[position].id,
                "attempt \(position + 1) answers its own state and capture"
            )
        }
        let twice = [answers[6], answers[7]]
        let completedTwice = twice.compactMap { answer -> EscrowRecord? in
            guard case .completed(_, .created(let stored)) = answer else { return nil }
            return stored
        }
        try expect(completedTwice.count == 1, "of two callbacks of one attempt, one captures: \(twice)")
        try expect(
            twice.contains { if case .expired = $0 { true } else { false } },
            "the other finds the attempt used: \(twice)"
        )
        try expect(answers[8] == .unknown, "an unknown state: \(String(describing: answers[8]))")
        try expect(answers[9] == .bindingMismatch(attempts[7]), "another browser's binding is refused")
        try expect(answers[10] == .expired(attempts[8]), "an attempt at its expiry is refused")
        try expect(try await store.signInAttempt(stateHash: attempts[7].stateHash)?.usedAt == nil, "8 stays live")
        for position in 6..<11 where completedTwice.first?.id != captures[position].id {
            try expect(
                try await subject.escrows.record(id: captures[position].id) == nil,
                "a refused callback stores nothing"
            )
        }
        let events = try await subject.escrows.auditEvents(after: 0, limit: 100)
        try expect(events.filter { $0.draft.type == .captured }.count == 7, "seven captures audited")
        try expect(
            events.filter { $0.draft.type == .captured && $0.draft.detail == CaptureItem.webSignIn }.count == 7,
            "each with the detail web-signin"
        )
        try await records.expectIntactChain(events, of: subject.escrows, "the chain of concurrent sign-ins")
    }

    static func signInReplaces(_ make: MakeSubject) async throws {
        let subject = try await make()
        let fixture = SignInFixture()
        let records = Fixture()  // one keyring: the same user's blind index
        let held = try records.record(user: 1, content: "old", at: fixture.start)
        _ = try await subject.escrows.capture(held, actor: .library)
        let attempt = fixture.attempt(1)
        try await subject.signInStore.createSignInAttempt(attempt)
        let record = try records.record(user: 1, content: "new", at: fixture.start)
        let completion = try await subject.signInStore.completeSignIn(
            fixture.request(attempt, at: fixture.start, ticket: 1),
            capture: record,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        guard case .completed(_, .replaced(let stored, let previous)) = completion else {
            throw ConformanceFailure("the held escrow is replaced")
        }
        try expect(stored.id == record.id && previous == held.id, "the new escrow replaces the held one")
        try expect(try await subject.escrows.record(id: held.id) == nil, "the held one is purged")
        try expect(try await subject.escrows.record(blindIndex: record.blindIndex)?.id == record.id, "one live escrow")
    }

    static func signInUnchanged(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (subject, store, attempt) = try await fixture.started(make)
        let records = Fixture()
        let held = try records.record(user: 1, content: "same", at: fixture.start)
        _ = try await subject.escrows.capture(held, actor: .library)
        var again = try records.record(user: 1, content: "same", at: fixture.start)
        again.contentTag = held.contentTag
        var request = fixture.request(attempt, at: fixture.start, ticket: 1)
        // The ticket's result names the escrow it is issued for.
        request.ticket = { id in
            SignInTicket(
                ticketHash: fixture.hash("ticket-1"),
                sealedResult: Array("result-of-\(id?.hex ?? "none")".utf8),
                expiresAt: fixture.start.addingTimeInterval(300)
            )
        }
        let completion = try await fixture.complete(store, request, capture: again)
        guard case .completed(_, .unchanged(let kept)) = completion, kept.id == held.id else {
            throw ConformanceFailure("the held escrow is kept: \(completion)")
        }
        let result = try await store.unredeemedSignInTicket(fixture.key(1), at: fixture.start)
        try expect(
            result == Array("result-of-\(held.id.hex)".utf8),
            "the ticket names the escrow that holds the profile, not the one not stored"
        )
        try expect(try await subject.escrows.record(id: again.id) == nil, "the duplicate was not stored")
    }

    /// A completion that brings the attempt as read before (live, unused) is refused as the store has it now.
    static func signInHeldStale(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (subject, store, attempt) = try await fixture.started(make)
        let first = try await fixture.complete(store, fixture.request(attempt, at: fixture.start, ticket: 1))
        guard case .completed = first else { throw ConformanceFailure("the first completes: \(first)") }
        let record = try Fixture().record(user: 1, at: fixture.start)
        let used = try await fixture.complete(store, fixture.request(attempt, at: fixture.start, ticket: 2), capture: record)
        guard case .expired(let stored) = used, stored.usedAt == fixture.start else {
            throw ConformanceFailure("an attempt used since it was read is refused as used: \(used)")
        }
        let gone = try await fixture.complete(
            store,
            fixture.request(fixture.attempt(2), at: fixture.start, ticket: 3),
            capture: record
        )
        try expect(gone == .unknown, "an attempt not stored (swept since it was read) is unknown: \(gone)")
        try expect(try await subject.escrows.record(id: record.id) == nil, "neither captured anything")
        let tickets = (
            first: try await store.unredeemedSignInTicket(fixture.key(1), at: fixture.start),
            second: try await store.unredeemedSignInTicket(fixture.key(2, attempt: 1), at: fixture.start)
        )
        try expect(tickets.first != nil && tickets.second == nil, "the first ticket stays, no other was issued")
    }

    static func signInNotHeld(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (subject, store, attempt) = try await fixture.started(make)
        let records = try (1...2).map { try Fixture().record(user: $0, at: fixture.start) }
        var request = fixture.request(attempt, at: fixture.start, ticket: 1)
        request.attempt = nil
        let first = try await fixture.complete(store, request, capture: records[0])
        guard case .completed(let used, .created(let captured)) = first, used.usedAt == fixture.start,
            captured.id == records[0].id
        else { throw ConformanceFailure("read, used and captured: \(first)") }
        request.ticket = { _ in fixture.ticket(2, at: fixture.start) }
        let second = try await fixture.complete(store, request, capture: records[1])
        guard case .expired = second else { throw ConformanceFailure("read, found used: \(second)") }
        try expect(try await subject.escrows.record(id: records[1].id) == nil, "the second captured nothing")
    }

    /// A copy of the attempt that differs from the stored row (a caller's mistake) does not use it: the store reads
    /// the row and judges by it.
    static func signInHeldOtherwise(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (_, store, attempt) = try await fixture.started(make)
        var otherBinding = fixture.request(attempt, at: fixture.start, ticket: 1)
        otherBinding.attempt?.bindingHash = fixture.hash("binding-other")
        otherBinding.bindingHash = fixture.hash("binding-other")
        let mismatch = try await fixture.complete(store, otherBinding)
        guard case .bindingMismatch = mismatch else {
            throw ConformanceFailure("another binding than the stored one is refused: \(mismatch)")
        }
        var byApp = fixture.request(attempt, at: fixture.start, ticket: 2)
        byApp.attempt?.startedByApp = true
        byApp.bindingHash = nil
        let noCookie = try await fixture.complete(store, byApp)
        guard case .bindingMismatch = noCookie else {
            throw ConformanceFailure("a browser's attempt said to be an app's is refused without a cookie: \(noCookie)")
        }
        let late = attempt.expiresAt.addingTimeInterval(60)
        var longer = fixture.request(attempt, at: late, ticket: 3)
        longer.attempt?.expiresAt = late.addingTimeInterval(60)
        let expired = try await fixture.complete(store, longer)
        guard case .expired = expired else {
            throw ConformanceFailure("a copy with a later expiry is judged by the stored one: \(expired)")
        }
        try expect(try await store.signInAttempt(stateHash: attempt.stateHash)?.usedAt == nil, "still unused")
    }

    /// A completion whose transaction fails (its capture is sealed to a retired key version) leaves the attempt
    /// unused and issues no ticket: the attempt's use is rolled back with the capture.
    static func signInFailedCompletion(_ make: MakeSubject) async throws {
        let fixture = SignInFixture()
        let (subject, store, attempt) = try await fixture.started(make)
        let record = try Fixture().record(user: 1, at: fixture.start)
        let version = record.sealed.keyVersion
        try await subject.escrows.retireKeyVersion(
            version,
            audit: [AuditDraft(type: .keysRetired, at: fixture.start, detail: "version \(version)", actor: .cli)]
        )
        var failed = false
        do {
            _ = try await fixture.complete(store, fixture.request(attempt, at: fixture.start, ticket: 1), capture: record)
        } catch {
            failed = true
        }
        try expect(failed, "a capture sealed to a retired version fails its completion")
        try expect(try await store.signInAttempt(stateHash: attempt.stateHash)?.usedAt == nil, "the attempt is unused")
        try expect(
            try await store.unredeemedSignInTicket(fixture.key(1), at: fixture.start) == nil,
            "no ticket was issued"
        )
        let again = try await fixture.complete(store, fixture.request(attempt, at: fixture.start, ticket: 2))
        guard case .completed = again else { throw ConformanceFailure("it completes afterwards: \(again)") }
    }

    static func signInRefusals(_ make: MakeSubject) async throws {
        let store = try await make().signInStore
        let fixture = SignInFixture()
        let attempt = fixture.attempt(1)
        try await store.createSignInAttempt(attempt)
        var otherBrowser = fixture.request(attempt, at: fixture.start, ticket: 1)
        otherBrowser.bindingHash = fixture.hash("binding-other")
        let mismatch = try await store.completeSignIn(
            otherBrowser,
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        try expect(mismatch == .bindingMismatch(attempt), "another browser's binding is refused: \(mismatch)")
        try expect(try await store.signInAttempt(stateHash: attempt.stateHash)?.usedAt == nil, "and it stays live")
        let late = try await store.completeSignIn(
            fixture.request(attempt, at: attempt.expiresAt, ticket: 1),
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        try expect(late == .expired(attempt), "at its expiry the attempt is refused: \(late)")
        let inTime = try await store.completeSignIn(
            fixture.request(attempt, at: attempt.expiresAt.addingTimeInterval(-1), ticket: 1),
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        guard case .completed(_, nil) = inTime else {
            throw ConformanceFailure("a second before its expiry, without a profile, it completes: \(inTime)")
        }
    }

    static func signInTicketOnce(_ make: MakeSubject) async throws {
        let store = try await make().signInStore
        let fixture = SignInFixture()
        for number in 1...2 {
            let attempt = fixture.attempt(number)
            try await store.createSignInAttempt(attempt)
            let request = fixture.request(attempt, at: fixture.start, ticket: number)
            _ = try await store.completeSignIn(
                request,
                capture: nil,
                actor: .http(token: "signin"),
                lifecycle: EscrowLifecycle()
            )
        }
        let ticket = fixture.ticket(1, at: fixture.start)
        try expect(
            try await store.redeemSignInTicket(fixture.key(2, attempt: 1), at: fixture.start) == nil,
            "a ticket is checked in its attempt's row: another attempt's ticket with this state hash gives nothing"
        )
        try expect(
            try await store.redeemSignInTicket(SignInTicketKey(ticketHash: ticket.ticketHash), at: fixture.start)
                == nil,
            "nor does its hash alone, which only finds tickets stored before tickets named their attempt"
        )
        let redeemed = try await store.redeemSignInTicket(fixture.key(1), at: fixture.start)
        try expect(
            redeemed == SignInRedemption(sealedResult: ticket.sealedResult, returnName: "app"),
            "the first redeem gives the sealed result, the refusals having left it: \(String(describing: redeemed))"
        )
        let again = try await store.redeemSignInTicket(fixture.key(1), at: fixture.start)
        try expect(again == nil, "a second redeem gives nothing")
        let unknown = try await store.redeemSignInTicket(fixture.key(0), at: fixture.start)
        try expect(unknown == nil, "an unknown ticket gives nothing")
        let late = fixture.ticket(2, at: fixture.start)
        try expect(
            try await store.redeemSignInTicket(fixture.key(2), at: late.expiresAt) == nil,
            "a ticket at its expiry gives nothing"
        )
        try expect(
            try await store.unredeemedSignInTicket(fixture.key(2), at: fixture.start) == late.sealedResult,
            "the other attempt's ticket is untouched"
        )
    }

    static func signInSweep(_ make: MakeSubject) async throws {
        let store = try await make().signInStore
        let fixture = SignInFixture()
        let unused = fixture.attempt(1)
        let used = fixture.attempt(2)
        try await store.createSignInAttempt(unused)
        try await store.createSignInAttempt(used)
        // Used at the last second of its life: its ticket outlives it by 299 seconds.
        let usedAt = used.expiresAt.addingTimeInterval(-1)
        _ = try await store.completeSignIn(
            fixture.request(used, at: usedAt, ticket: 2),
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        // Used early: its ticket expires before the attempt, which keeps the row until its own expiry.
        let early = fixture.attempt(3)
        try await store.createSignInAttempt(early)
        let earlyTicket = fixture.ticket(3, at: fixture.start)
        _ = try await store.completeSignIn(
            fixture.request(early, at: fixture.start, ticket: 3),
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        try expect(try await store.sweepSignInAttempts(at: earlyTicket.expiresAt) == 0, "none at the early ticket's")
        try expect(try await store.sweepSignInAttempts(at: unused.expiresAt.addingTimeInterval(-1)) == 0, "none yet")
        try expect(
            try await store.sweepSignInAttempts(at: unused.expiresAt) == 2,
            "the unused one and the early one at their expiry"
        )
        try expect(try await store.signInAttempt(stateHash: unused.stateHash) == nil, "gone")
        try expect(try await store.signInAttempt(stateHash: early.stateHash) == nil, "gone as well")
        try expect(try await store.signInAttempt(stateHash: used.stateHash) != nil, "the used one waits for its ticket")
        let ticketExpiry = fixture.ticket(2, at: usedAt).expiresAt
        try expect(try await store.sweepSignInAttempts(at: ticketExpiry) == 1, "the used one at its ticket's expiry")
        try expect(try await store.signInAttempt(stateHash: used.stateHash) == nil, "gone too")
    }
}

extension StoreConformance {
    static func signInStartedByApp(_ make: MakeSubject) async throws {
        let subject = try await make()
        let store = try subject.signInStore
        let fixture = SignInFixture()
        var app = fixture.attempt(1)
        app.startedByApp = true
        let browser = fixture.attempt(2)
        try await store.createSignInAttempt(app)
        try await store.createSignInAttempt(browser)
        try expect(try await store.signInAttempt(stateHash: app.stateHash) == app, "read back as started by an app")
        try expect(
            try await store.signInAttempt(stateHash: browser.stateHash)?.startedByApp == false,
            "a browser's attempt is not"
        )
        var noCookie = fixture.request(browser, at: fixture.start, ticket: 2)
        noCookie.bindingHash = nil
        let refused = try await fixture.complete(store, noCookie)
        try expect(refused == .bindingMismatch(browser), "a browser's attempt needs its cookie: \(refused)")
        var otherSecret = fixture.request(app, at: fixture.start, ticket: 1)
        otherSecret.bindingHash = fixture.hash("binding-other")
        let mismatch = try await fixture.complete(store, otherSecret)
        try expect(mismatch == .bindingMismatch(app), "an app's attempt refuses another secret: \(mismatch)")
        var callback = fixture.request(app, at: fixture.start, ticket: 1)
        callback.bindingHash = nil
        let record = try Fixture().record(user: 1, at: fixture.start)
        let completion = try await fixture.complete(store, callback, capture: record)
        guard case .completed(let used, .created) = completion, used.startedByApp else {
            throw ConformanceFailure("Apple's callback of an app's attempt completes without a cookie: \(completion)")
        }
        try expect(try await subject.escrows.record(id: record.id) != nil, "and captures")
    }

    static func signInAppTicketBound(_ make: MakeSubject) async throws {
        let store = try await make().signInStore
        let fixture = SignInFixture()
        var app = fixture.attempt(1)
        app.startedByApp = true
        try await store.createSignInAttempt(app)
        _ = try await fixture.complete(store, fixture.request(app, at: fixture.start, ticket: 1))
        let ticket = fixture.ticket(1, at: fixture.start)
        try expect(
            try await store.unredeemedSignInTicket(fixture.key(1), at: fixture.start) == ticket.sealedResult,
            "an unredeemed ticket's result is read"
        )
        try expect(
            try await store.unredeemedSignInTicket(fixture.key(0), at: fixture.start) == nil,
            "an unknown ticket reads nothing"
        )
        try expect(
            try await store.unredeemedSignInTicket(fixture.key(1), at: ticket.expiresAt) == nil,
            "a ticket at its expiry reads nothing"
        )
        try expect(
            try await store.redeemSignInTicket(fixture.key(1), at: fixture.start) == nil,
            "without the attempt secret the ticket does not redeem"
        )
        try expect(
            try await store.redeemSignInTicket(
                fixture.key(1),
                starterHash: fixture.hash("binding-2"),
                at: fixture.start
            ) == nil,
            "nor with another attempt's secret"
        )
        let redeemed = try await store.redeemSignInTicket(
            fixture.key(1),
            starterHash: app.bindingHash,
            at: fixture.start
        )
        try expect(
            redeemed == SignInRedemption(sealedResult: ticket.sealedResult, returnName: "app"),
            "with its attempt secret it redeems, refusals having left it unredeemed"
        )
        try expect(
            try await store.unredeemedSignInTicket(fixture.key(1), at: fixture.start) == nil,
            "a redeemed ticket reads nothing"
        )
    }
}

/// Attempts and tickets with hashes of fake secrets, at whole milliseconds.
struct SignInFixture {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func hash(_ secret: String) -> [UInt8] { Hashing.blake2b256(Array(secret.utf8)) }

    func attempt(_ number: Int) -> SignInAttempt {
        SignInAttempt(
            stateHash: hash("state-\(number)"),
            nonceHash: hash("nonce-\(number)"),
            bindingHash: hash("binding-\(number)"),
            returnName: "app",
            createdAt: start,
            expiresAt: start.addingTimeInterval(600)
        )
    }

    /// A new store with attempt 1 created in it.
    func started(
        _ make: StoreConformance.MakeSubject
    ) async throws -> (StoreConformance.Subject, any SignInStore, SignInAttempt) {
        let subject = try await make()
        let store = try subject.signInStore
        let attempt = attempt(1)
        try await store.createSignInAttempt(attempt)
        return (subject, store, attempt)
    }

    func ticket(_ number: Int, at now: Date) -> SignInTicket {
        SignInTicket(
            ticketHash: hash("ticket-\(number)"),
            sealedResult: Array("sealed-result-\(number)".utf8),
            expiresAt: now.addingTimeInterval(300)
        )
    }

    /// What finds ticket `number` of attempt `attempt` (its own number unless given).
    func key(_ number: Int, attempt: Int? = nil) -> SignInTicketKey {
        SignInTicketKey(stateHash: hash("state-\(attempt ?? number)"), ticketHash: hash("ticket-\(number)"))
    }

    /// Completes `request` as a callback does, capturing `record` when given.
    func complete(
        _ store: any SignInStore,
        _ request: SignInCompletionRequest,
        capture record: EscrowRecord? = nil
    ) async throws -> SignInCompletion {
        try await store.completeSignIn(
            request,
            capture: record,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
    }

    /// A completion as a callback brings it: with the attempt as it read it before (at its start).
    func request(_ attempt: SignInAttempt, at now: Date, ticket number: Int) -> SignInCompletionRequest {
        SignInCompletionRequest(
            stateHash: attempt.stateHash,
            bindingHash: attempt.bindingHash,
            now: now,
            attempt: attempt,
            ticket: { _ in ticket(number, at: now) }
        )
    }
}
