import Dispatch
import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import Testing

/// The group commit's contract, with a write step the test controls: who shares a commit, how many at most,
/// and that every caller gets its own answer (or its own batch's error). Run with both kinds of writer: blocking on
/// the drain's own queue (as SQLite writes) and asynchronous in the drain's task (as PostgreSQL writes).
@Suite("Group commit")
struct GroupCommitTests {
    enum Mode: String, CaseIterable, Sendable {
        case blocking
        case async
    }

    /// Holds the first commit until the test opens it, from a blocking writer or an asynchronous one.
    final class Gate: @unchecked Sendable {
        private let lock = NSLock()
        private let semaphore = DispatchSemaphore(value: 0)
        private var isOpen = false
        private var waiters: [CheckedContinuation<Void, Never>] = []

        func waitBlocking() { semaphore.wait() }

        func waitAsync() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let openAlready = lock.withLock {
                    if !isOpen { waiters.append(continuation) }
                    return isOpen
                }
                if openAlready { continuation.resume() }
            }
        }

        func open() {
            semaphore.signal()
            let waiting = lock.withLock {
                isOpen = true
                defer { waiters = [] }
                return waiters
            }
            for waiter in waiting { waiter.resume() }
        }
    }

    /// True the first time only.
    final class LockedFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var first = true

        func takeFirst() -> Bool {
            lock.withLock {
                defer { first = false }
                return first
            }
        }
    }

    /// A group commit whose writer runs `write` and, for the first commit, waits for `gate` first when given.
    static func batcher(
        _ mode: Mode,
        maximumBatch: Int = 256,
        gate: Gate? = nil,
        write: @escaping @Sendable ([CaptureItem]) -> [Result<CaptureOutcome, any Error>]
    ) -> CaptureBatcher {
        switch mode {
        case .blocking:
            return CaptureBatcher(
                maximumBatch: maximumBatch,
                writer: .blocking(label: "test.group-commit") { items in write(items) }
            )
        case .async:
            let firstCommit = LockedFlag()
            return CaptureBatcher(
                maximumBatch: maximumBatch,
                writer: .async { items, _ in
                    let results = write(items)
                    let isFirst = firstCommit.takeFirst()
                    if let gate, isFirst { await gate.waitAsync() }
                    return results
                }
            )
        }
    }
    /// What the write step saw: the ids of each batch, in order.
    final class Commits: @unchecked Sendable {
        private let lock = NSLock()
        private var batches: [[EscrowID]] = []
        var sizes: [Int] { lock.withLock { batches.map(\.count) } }
        var all: [EscrowID] { lock.withLock { batches.flatMap { $0 } } }
        func batch(_ number: Int) -> [EscrowID] { lock.withLock { batches[number - 1] } }
        func record(_ items: [CaptureItem]) -> Int {
            lock.withLock {
                batches.append(items.map(\.record.id))
                return batches.count
            }
        }
    }

    struct WriteFailed: Error {}

    static let keyring = Keyring.generate()

    static func record(_ number: Int) throws -> EscrowRecord {
        let index = keyring.blindIndex(userIdentifier: "000000.batcher\(String(format: "%012d", number)).0001")
        let plaintext = SecretBytes(copying: Array("fake-profile-\(number)".utf8))
        let sealed = try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        return EscrowRecord(
            sealed: sealed,
            contentTag: keyring.contentTag(blindIndex: index, plaintext: plaintext),
            createdAt: now,
            expiresAt: now.addingTimeInterval(3_600)
        )
    }

    static func item(_ record: EscrowRecord) -> CaptureItem {
        CaptureItem(record: record, actor: .library, lifecycle: EscrowLifecycle())
    }

    static func created(_ items: [CaptureItem]) -> [Result<CaptureOutcome, any Error>] {
        items.map { .success(.created($0.record)) }
    }

    @Test("one capture at a time: each is its own commit", arguments: Mode.allCases)
    func oneAtATime(mode: Mode) async throws {
        let commits = Commits()
        let batcher = Self.batcher(mode) { items in
            _ = commits.record(items)
            return Self.created(items)
        }
        for number in 0..<5 {
            let record = try Self.record(number)
            let outcome = try await batcher.submit(Self.item(record))
            #expect(outcome.record.id == record.id)
        }
        #expect(commits.sizes == [1, 1, 1, 1, 1])
        #expect(batcher.queuedCount == 0)
    }

    /// Submits `records[0]`, holds its commit until every other record is queued behind it, then lets it finish.
    /// Commit number `failing` (from 1), if given, throws. Returns what each caller got back: the id of the record
    /// in its outcome, or nil when its commit failed.
    static func burst(
        _ records: [EscrowRecord],
        mode: Mode,
        maximumBatch: Int,
        failing: Int? = nil
    ) async throws -> (commits: Commits, answers: [EscrowID: EscrowID?]) {
        let commits = Commits()
        let firstCommitMayFinish = Gate()
        // The asynchronous writer waits at the gate itself (a blocked task would hold a thread of the pool the test
        // runs on); the blocking writer waits on its own queue.
        let batcher = Self.batcher(mode, maximumBatch: maximumBatch, gate: firstCommitMayFinish) { items in
            let number = commits.record(items)
            if number == 1, mode == .blocking { firstCommitMayFinish.waitBlocking() }
            if number == failing { return items.map { _ in .failure(WriteFailed()) } }
            return Self.created(items)
        }
        let answers = try await withThrowingTaskGroup(of: (EscrowID, EscrowID?).self) { group in
            func submit(_ record: EscrowRecord) {
                group.addTask {
                    (record.id, try? await batcher.submit(Self.item(record)).record.id)
                }
            }
            submit(records[0])
            // The first commit is under way (and held): everything submitted now queues behind it.
            try await eventually("the first commit", every: .milliseconds(1)) { !commits.sizes.isEmpty }
            records.dropFirst().forEach(submit)
            try await eventually("the burst queued", every: .milliseconds(1)) {
                batcher.queuedCount >= records.count - 1
            }
            firstCommitMayFinish.open()
            var answers: [EscrowID: EscrowID?] = [:]
            for try await (submitted, answered) in group { answers[submitted] = answered }
            return answers
        }
        #expect(batcher.queuedCount == 0)
        return (commits, answers)
    }

    @Test(
        "a burst queued during a commit shares the next commits, at most maximumBatch each; each caller its answer",
        arguments: Mode.allCases
    )
    func burst(mode: Mode) async throws {
        let records = try (0...100).map(Self.record)
        let (commits, answers) = try await Self.burst(records, mode: mode, maximumBatch: 16)
        #expect(commits.sizes == [1, 16, 16, 16, 16, 16, 16, 4])
        #expect(Set(commits.all) == Set(records.map(\.id)) && commits.all.count == 101)
        #expect(answers.count == 101 && answers.allSatisfy { $0.key == $0.value })
    }

    @Test("a commit that fails fails its own callers only; the next commit goes on", arguments: Mode.allCases)
    func failingCommit(mode: Mode) async throws {
        let records = try (0..<13).map(Self.record)
        let (commits, answers) = try await Self.burst(records, mode: mode, maximumBatch: 8, failing: 2)
        #expect(commits.sizes == [1, 8, 4])
        let failed = Set(answers.filter { $0.value == nil }.keys)
        #expect(failed == Set(commits.batch(2)), "exactly the second commit's callers fail")
        #expect(answers.count == 13 && answers.allSatisfy { $0.value == nil || $0.key == $0.value })
    }
}
