import EscrowCore
import EscrowCrypto
import Foundation
import Testing

/// The lifecycle state machine, without a database or a network.
@Suite("Escrow lifecycle")
struct LifecycleTests {
    static let keyring = Keyring.generate()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let lifecycle = EscrowLifecycle(policy: RetryPolicy(maxAttempts: 3, base: 2, cap: 60), confirmTimeout: 100)

    func record() throws -> EscrowRecord {
        let index = Self.keyring.blindIndex(userIdentifier: "000000.lifecycle0000000000000000000000.0001")
        let plaintext = SecretBytes(copying: Array("fake".utf8))
        let sealed = try Self.keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index)
        return EscrowRecord(sealed: sealed, contentTag: [1], createdAt: now, expiresAt: now.addingTimeInterval(1000))
    }

    func leased(_ record: EscrowRecord, at time: Date? = nil) throws -> EscrowRecord {
        guard
            case .update(let next, let events) = lifecycle.handle(
                .lease(owner: "w1", duration: 30),
                on: record,
                at: time ?? now,
                actor: .worker("w1")
            ).change
        else {
            throw LeaseFailed()
        }
        #expect(events.isEmpty)
        return next
    }

    struct LeaseFailed: Error {}

    @Test func leaseTakesADueEscrow() throws {
        let record = try record()
        let next = try leased(record)
        #expect(next.state == .leased)
        #expect(next.revision == record.revision + 1)
        #expect(next.attempts == 0, "a lease is not an attempt: a request sent is")
        #expect(next.leaseExpiresAt == now.addingTimeInterval(30))
        #expect(next.dueAt == now.addingTimeInterval(30))
    }

    @Test func leaseRefusesWhatIsNotDue() throws {
        var record = try record()
        record.nextAttemptAt = now.addingTimeInterval(10)
        #expect(
            lifecycle.handle(.lease(owner: "w", duration: 5), on: record, at: now, actor: .library).change
                == .ignore(.notDue)
        )
        let leased = try leased(try self.record())
        #expect(
            lifecycle.handle(
                .lease(owner: "w2", duration: 5),
                on: leased,
                at: now.addingTimeInterval(29),
                actor: .library
            ).change
                == .ignore(.notDue)
        )
        // After the lease ran out, another worker may take it, with a new fencing token.
        let taken = try self.leased(leased, at: now.addingTimeInterval(31))
        #expect(taken.revision == leased.revision + 1)
    }

    @Test(arguments: [200, 201, 204, 409])
    func confirmingStatusesPurge(status: Int) throws {
        let leased = try leased(try record())
        let action = lifecycle.handle(
            .delivered(.classify(status: status, retryAfter: nil), fencingToken: leased.revision, unitRandom: 0),
            on: leased,
            at: now.addingTimeInterval(3),
            actor: .worker("w1")
        ).change
        guard case .purge(.confirmed, let events) = action else {
            Issue.record("expected a confirmed purge, got \(action)")
            return
        }
        // One event: the purge, with the confirming delivery's status.
        #expect(events.map(\.type) == [.purged])
        #expect(events[0].httpStatus == status)
        #expect(events[0].detail == "confirmed")
        #expect(events[0].ageMilliseconds == 3000)
    }

    @Test func acceptedWaitsForConfirmation() throws {
        let leased = try leased(try record())
        let action = lifecycle.handle(
            .delivered(.classify(status: 202, retryAfter: nil), fencingToken: leased.revision, unitRandom: 0),
            on: leased,
            at: now,
            actor: .worker("w1")
        ).change
        guard case .update(let next, let events) = action else {
            Issue.record("expected update, got \(action)")
            return
        }
        #expect(next.state == .awaitingConfirmation)
        #expect(next.confirmDeadline == now.addingTimeInterval(100))
        #expect(next.leaseOwner == nil)
        #expect(events.map(\.type) == [.deliveryAttempted, .awaitingConfirmation])
        #expect(!next.isDue(at: now.addingTimeInterval(99)))
        #expect(next.isDue(at: now.addingTimeInterval(100)))
    }

    @Test(arguments: [408, 425, 429, 500, 502, 503, 599])
    func retryableStatusesBackOff(status: Int) throws {
        let leased = try leased(try record())
        let action = lifecycle.handle(
            .delivered(.classify(status: status, retryAfter: nil), fencingToken: leased.revision, unitRandom: 0.5),
            on: leased,
            at: now,
            actor: .worker("w1")
        ).change
        guard case .update(let next, let events) = action else {
            Issue.record("expected update, got \(action)")
            return
        }
        #expect(next.state == .pending)
        // First failure: ceiling = base = 2 s; full jitter at 0.5 → 1 s.
        #expect(next.nextAttemptAt == now.addingTimeInterval(1))
        #expect(events.map(\.type) == [.deliveryAttempted])
        #expect(events[0].detail == "retry")
        #expect(next.lastStatus == status)
    }

    @Test func retryAfterIsHonoured() throws {
        let leased = try leased(try record())
        let action = lifecycle.handle(
            .delivered(.retry(status: 503, retryAfter: 42), fencingToken: leased.revision, unitRandom: 0.9),
            on: leased,
            at: now,
            actor: .worker("w1")
        ).change
        guard case .update(let next, _) = action else {
            Issue.record("expected update")
            return
        }
        #expect(next.nextAttemptAt == now.addingTimeInterval(42))
    }

    @Test(arguments: [400, 410, 422])
    func permanentStatusesKill(status: Int) throws {
        let leased = try leased(try record())
        let action = lifecycle.handle(
            .delivered(.classify(status: status, retryAfter: nil), fencingToken: leased.revision, unitRandom: 0),
            on: leased,
            at: now,
            actor: .worker("w1")
        ).change
        guard case .update(let next, let events) = action else {
            Issue.record("expected update")
            return
        }
        #expect(next.state == .dead)
        #expect(next.deadCode == .rejected)
        #expect(next.dueAt == nil)
        #expect(events.map(\.type) == [.deliveryAttempted, .dead])
        #expect(events[1].httpStatus == status)
    }

    /// Giving up loses the profile for good: only the backend's explicit 400, 410 or 422 does it early.
    /// A secret mismatch during a rotation (401, 403), a wrong route (404), redirects and overload retry.
    @Test(arguments: [401, 403, 404, 408, 425, 429, 500, 503, 301, 302, 100])
    func otherStatusesRetry(status: Int) throws {
        let leased = try leased(try record())
        let action = lifecycle.handle(
            .delivered(.classify(status: status, retryAfter: nil), fencingToken: leased.revision, unitRandom: 0.5),
            on: leased,
            at: now,
            actor: .worker("w1")
        ).change
        guard case .update(let next, let events) = action else {
            Issue.record("expected update")
            return
        }
        #expect(next.state == .pending && next.attempts == 1 && next.lastStatus == status)
        #expect(events.map(\.type) == [.deliveryAttempted])
    }

    @Test func aTimeoutWaitsAtLeastTheDeliveryDeadline() throws {
        let leased = try leased(try record())
        // The backoff after the first attempt is at most 2 s; the backend may still be working for 30.
        let action = lifecycle.handle(
            .delivered(.timedOut(deadline: 30), fencingToken: leased.revision, unitRandom: 1),
            on: leased,
            at: now,
            actor: .worker("w1")
        ).change
        guard case .update(let next, let events) = action else {
            Issue.record("expected update")
            return
        }
        #expect(next.nextAttemptAt == now.addingTimeInterval(30))
        #expect(events.map(\.detail) == ["retry"] && events[0].httpStatus == nil)
    }

    @Test func aLeaseThatRanOutCountsItsLostAttemptAndAReleaseDoesNot() throws {
        let first = try leased(try record())
        // Given back unattempted: no attempt used.
        guard
            case .update(let released, _) = lifecycle.handle(
                .release(fencingToken: first.revision),
                on: first,
                at: now,
                actor: .worker("w1")
            ).change
        else {
            Issue.record("expected update")
            return
        }
        #expect(released.attempts == 0 && released.state == .pending && released.isDue(at: now))
        // Leased again and lost (the worker crashed): the next lease counts the unknown outcome.
        let lost = try leased(released)
        let takenOver = try leased(lost, at: now.addingTimeInterval(31))
        #expect(takenOver.attempts == 1 && takenOver.leaseOwner == "w1")
    }

    @Test func rewrapAndResealChangeOnlyTheirOwnEscrow() throws {
        let original = try record()
        let other = try record()
        #expect(
            lifecycle.handle(.rewrap(other.sealed), on: original, at: now, actor: .cli).change == .ignore(.otherEscrow)
        )
        var sealed = original.sealed
        sealed.keyVersion = 7
        guard
            case .update(let rewrapped, let events) = lifecycle.handle(
                .rewrap(sealed),
                on: original,
                at: now,
                actor: .cli
            ).change
        else {
            Issue.record("expected update")
            return
        }
        #expect(rewrapped.sealed.keyVersion == 7 && rewrapped.revision == original.revision + 1 && events.isEmpty)
        let reseal = LifecycleEvent.reseal(sealed, contentTag: [9], detail: "email")
        guard
            case .update(let resealed, let updated) = lifecycle.handle(reseal, on: original, at: now, actor: .apple)
                .change
        else {
            Issue.record("expected update")
            return
        }
        #expect(resealed.contentTag == [9] && updated.map(\.type) == [.updated] && updated[0].detail == "email")
    }

    @Test func replaceAuditsTheReplacementThenThePurge() throws {
        let old = try record()
        let replacement = EscrowID.random()
        guard
            case .purge(.replaced, let events) = lifecycle.handle(
                .replace(by: replacement),
                on: old,
                at: now,
                actor: .library
            ).change
        else {
            Issue.record("expected purge")
            return
        }
        #expect(events.map(\.type) == [.replaced, .purged])
        #expect(events[0].detail == replacement.hex && events[1].detail == "replaced")
    }

    @Test func attemptsExhaustedKill() throws {
        var record = try record()
        for attempt in 1...3 {
            record = try leased(record, at: record.nextAttemptAt)
            #expect(record.attempts == attempt - 1)
            let action = lifecycle.handle(
                .delivered(.retry(status: nil, retryAfter: nil), fencingToken: record.revision, unitRandom: 1),
                on: record,
                at: record.nextAttemptAt,
                actor: .worker("w1")
            ).change
            guard case .update(let next, _) = action else {
                Issue.record("expected update")
                return
            }
            record = next
        }
        #expect(record.state == .dead)
        #expect(record.deadCode == .attemptsExhausted)
    }

    @Test func staleFencingTokenChangesNothing() throws {
        let first = try leased(try record())
        let second = try leased(first, at: now.addingTimeInterval(31))
        for event in [
            LifecycleEvent.delivered(.confirmed(status: 200), fencingToken: first.revision, unitRandom: 0),
            .release(fencingToken: first.revision),
        ] {
            #expect(lifecycle.handle(event, on: second, at: now, actor: .worker("w1")).change == .ignore(.staleLease))
        }
    }

    @Test func releaseGivesTheAttemptBack() throws {
        let leased = try leased(try record())
        guard
            case .update(let next, let events) = lifecycle.handle(
                .release(fencingToken: leased.revision),
                on: leased,
                at: now.addingTimeInterval(2),
                actor: .worker("w1")
            ).change
        else {
            Issue.record("expected update")
            return
        }
        #expect(next.state == .pending && next.attempts == 0 && next.leaseOwner == nil)
        #expect(next.isDue(at: now.addingTimeInterval(2)))
        #expect(events.isEmpty)
    }

    @Test(arguments: PurgeReason.allCases)
    func purgeFromAnyLiveState(reason: PurgeReason) throws {
        let pending = try record()
        var dead = pending
        dead.phase = .dead(.rejected)
        for record in [pending, try leased(pending), dead] {
            guard
                case .purge(let got, let events) = lifecycle.handle(.purge(reason), on: record, at: now, actor: .cli)
                    .change
            else {
                Issue.record("expected purge from \(record.state)")
                continue
            }
            #expect(got == reason)
            #expect(events.last?.type == .purged)
            #expect(events.last?.detail == reason.rawValue)
            #expect(events.allSatisfy { $0.actor == .cli && $0.escrowID == record.id.hex })
        }
    }

    @Test func tamperedGoesDeadOnce() throws {
        guard
            case .update(let dead, let events) = lifecycle.handle(.tampered, on: try record(), at: now, actor: .library)
                .change
        else {
            Issue.record("expected update")
            return
        }
        #expect(dead.state == .dead && dead.deadCode == .ciphertextInvalid)
        #expect(events.map(\.detail) == ["ciphertext_invalid"])
        #expect(lifecycle.handle(.tampered, on: dead, at: now, actor: .library).change == .ignore(.notDue))
    }

    @Test func requeueOnlyFromDead() throws {
        let pending = try record()
        #expect(lifecycle.handle(.requeue, on: pending, at: now, actor: .cli).change == .ignore(.notDead))
        var dead = pending
        dead.phase = .dead(.rejected)
        dead.attempts = 3
        guard case .update(let next, let events) = lifecycle.handle(.requeue, on: dead, at: now, actor: .cli).change
        else {
            Issue.record("expected update")
            return
        }
        #expect(next.state == .pending && next.attempts == 0 && next.deadCode == nil && next.isDue(at: now))
        #expect(events.map(\.type) == [.requeued])
    }
}
