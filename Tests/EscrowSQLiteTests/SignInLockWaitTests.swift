import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import Logging
import Testing

@testable import EscrowSQLite
@testable import EscrowStoreConformance

#if canImport(Glibc)
import Glibc
#endif

/// A web sign-in's callback on a store whose write lock another process holds: it fails as busy within its own few
/// seconds (so the browser gets the page that posts the form again), writes nothing, and completes once the lock is
/// free; the other writes keep their longer wait.
@Suite("SQLite: a sign-in's wait for the write lock")
struct SignInLockWaitTests {
    /// Holds `<database>.write-lock` through a descriptor of its own, as another process's writer does (`flock` locks
    /// belong to the open file, so a second open conflicts within one process too).
    final class HeldLock {
        let descriptor: Int32

        init(_ databasePath: String) throws {
            descriptor = open(databasePath + ".write-lock", O_RDWR | O_CLOEXEC)
            guard descriptor >= 0, flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                throw EscrowStoreError(.unavailable, "the test could not take the write lock")
            }
        }

        func release() {
            _ = flock(descriptor, LOCK_UN)
            close(descriptor)
        }
    }

    @Test("busy after about signInWriteLockTimeout (not the 30 s of other writes), nothing written; then completes")
    func boundedWait() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        var configuration = SQLiteEscrowStore.Configuration()
        #expect(configuration.signInWriteLockTimeout == 3, "the default: a few seconds")
        #expect(configuration.writeLockTimeout == 30, "the default of other writes")
        // Bounds far apart, so that a test process whose other tests hold up this one's task for seconds (all of them
        // share a few threads) cannot blur which bound applied.
        configuration.signInWriteLockTimeout = 1
        configuration.writeLockTimeout = 120
        let store = try SQLiteEscrowStore(path: path, configuration: configuration, logger: Logger(label: "test"))
        let fixture = SignInFixture()
        let attempt = fixture.attempt(1)
        try await store.createSignInAttempt(attempt)
        let record = try Fixture().record(user: 1, at: fixture.start)
        let now = fixture.start.addingTimeInterval(60)

        let held = try HeldLock(path)
        let started = ContinuousClock.now
        do {
            let completion = try await store.completeSignIn(
                fixture.request(attempt, at: now, ticket: 1),
                capture: record,
                actor: .http(token: "signin"),
                lifecycle: EscrowLifecycle()
            )
            Issue.record("completed while another process held the write lock: \(completion)")
        } catch let error as EscrowStoreError {
            #expect(error.code == .busy, "\(error)")
        }
        let waited = ContinuousClock.now - started
        held.release()
        // Its own bound (1 s), not the 120 s other writes wait here; generous for a loaded machine.
        #expect(waited >= .milliseconds(900) && waited < .seconds(60), "waited \(waited)")
        #expect(try await store.record(id: record.id) == nil, "nothing was written")
        #expect(try await store.signInAttempt(stateHash: attempt.stateHash)?.usedAt == nil, "the attempt is unused")

        // The lock is free: the same callback (the browser's resubmission) completes and captures.
        let completion = try await store.completeSignIn(
            fixture.request(attempt, at: now, ticket: 1),
            capture: record,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        guard case .completed(_, .created?) = completion else {
            Issue.record("the resubmission completes and captures: \(completion)")
            return
        }
        #expect(try await store.record(id: record.id)?.id == record.id)
    }

    @Test("not held up by a capture of its own process that waits for another process's lock")
    func notBehindAWaitingCapture() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/escrow.sqlite"
        var configuration = SQLiteEscrowStore.Configuration()
        configuration.signInWriteLockTimeout = 1
        configuration.writeLockTimeout = 120
        let store = try SQLiteEscrowStore(path: path, configuration: configuration, logger: Logger(label: "test"))
        let fixture = SignInFixture()
        let attempt = fixture.attempt(1)
        try await store.createSignInAttempt(attempt)
        let captured = try Fixture().record(user: 2, at: fixture.start)

        let held = try HeldLock(path)
        // A capture of this process waits for the lock (up to its 120 s), ahead of the sign-in on the store's writer.
        let capture = Task { try await store.capture(captured, actor: .library, lifecycle: EscrowLifecycle()) }
        // Real time on purpose: time for the capture to reach the writer and wait in SQLite for the other process's
        // lock (nothing marks that moment); if it has not, the sign-in goes first and is bounded all the same.
        try await pause(for: .milliseconds(300))
        let started = ContinuousClock.now
        do {
            _ = try await store.completeSignIn(
                fixture.request(attempt, at: fixture.start.addingTimeInterval(60), ticket: 1),
                capture: try Fixture().record(user: 1, at: fixture.start),
                actor: .http(token: "signin"),
                lifecycle: EscrowLifecycle()
            )
            Issue.record("completed while another process held the write lock")
        } catch let error as EscrowStoreError {
            #expect(error.code == .busy, "\(error)")
        }
        let waited = ContinuousClock.now - started
        held.release()
        #expect(waited < .seconds(60), "the sign-in gave up after \(waited), not behind the capture's 120 s")
        // The capture, still within its own bound, commits once the lock is free.
        _ = try await capture.value
        #expect(try await store.record(id: captured.id)?.id == captured.id)
    }
}
