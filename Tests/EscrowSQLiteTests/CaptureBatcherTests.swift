import Dispatch
import EscrowCore
import EscrowCrypto
import Foundation
import Testing

@testable import EscrowSQLite

/// The group commit's contract, with a write step the test controls: who shares a commit, how many at most,
/// and that every caller gets its own answer (or its own batch's error).
@Suite("Group commit (CaptureBatcher)")
struct CaptureBatcherTests {
    /// What the write step saw: the ids of each batch, in order.
    final class Commits: @unchecked Sendable {
        private let lock = NSLock()
        private var batches: [[EscrowID]] = []
        var sizes: [Int] { lock.withLock { batches.map(\.count) } }
        var all: [EscrowID] { lock.withLock { batches.flatMap { $0 } } }
        func batch(_ number: Int) -> [EscrowID] { lock.withLock { batches[number - 1] } }
        func record(_ items: [CaptureBatcher.Item]) -> Int {
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

    static func created(_ items: [CaptureBatcher.Item]) -> [Result<CaptureOutcome, any Error>] {
        items.map { .success(.created($0.record)) }
    }

    @Test("one capture at a time: each is its own commit")
    func oneAtATime() async throws {
        let batcher = CaptureBatcher()
        let commits = Commits()
        for number in 0..<5 {
            let record = try Self.record(number)
            let outcome = try await batcher.submit(record, actor: .library) { items in
                _ = commits.record(items)
                return Self.created(items)
            }
            #expect(outcome.record.id == record.id)
        }
        #expect(commits.sizes == [1, 1, 1, 1, 1])
        #expect(batcher.queuedCount == 0)
    }

    @Test("a burst queued during a commit shares the next commits, at most maximumBatch each; each caller its answer")
    func burst() async throws {
        let batcher = CaptureBatcher(maximumBatch: 16)
        let commits = Commits()
        let firstCommitMayFinish = DispatchSemaphore(value: 0)
        let write: @Sendable ([CaptureBatcher.Item]) throws -> [Result<CaptureOutcome, any Error>] = { items in
            if commits.record(items) == 1 { firstCommitMayFinish.wait() }
            return Self.created(items)
        }
        let records = try (0...100).map(Self.record)
        try await withThrowingTaskGroup(of: (EscrowID, EscrowID).self) { group in
            group.addTask {
                (records[0].id, try await batcher.submit(records[0], actor: .library, write: write).record.id)
            }
            // The first commit is under way (and held): everything submitted now queues behind it.
            while commits.sizes.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
            for record in records.dropFirst() {
                group.addTask { (record.id, try await batcher.submit(record, actor: .library, write: write).record.id) }
            }
            while batcher.queuedCount < 100 { try await Task.sleep(for: .milliseconds(1)) }
            firstCommitMayFinish.signal()
            for try await (submitted, answered) in group {
                #expect(submitted == answered)
            }
        }
        #expect(commits.sizes == [1, 16, 16, 16, 16, 16, 16, 4])
        #expect(Set(commits.all) == Set(records.map(\.id)) && commits.all.count == 101)
        #expect(batcher.queuedCount == 0)
    }

    @Test("a commit that fails fails its own callers only; the next commit goes on")
    func failingCommit() async throws {
        let batcher = CaptureBatcher(maximumBatch: 8)
        let commits = Commits()
        let firstCommitMayFinish = DispatchSemaphore(value: 0)
        let write: @Sendable ([CaptureBatcher.Item]) throws -> [Result<CaptureOutcome, any Error>] = { items in
            let number = commits.record(items)
            if number == 1 { firstCommitMayFinish.wait() }
            if number == 2 { throw WriteFailed() }
            return Self.created(items)
        }
        let records = try (0..<13).map(Self.record)
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            group.addTask { (0, (try? await batcher.submit(records[0], actor: .library, write: write)) != nil) }
            while commits.sizes.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
            for (position, record) in records.enumerated().dropFirst() {
                group.addTask { (position, (try? await batcher.submit(record, actor: .library, write: write)) != nil) }
            }
            while batcher.queuedCount < 12 { try await Task.sleep(for: .milliseconds(1)) }
            firstCommitMayFinish.signal()
            var outcomes: [EscrowID: Bool] = [:]
            for try await (position, succeeded) in group { outcomes[records[position].id] = succeeded }
            return outcomes
        }
        #expect(commits.sizes == [1, 8, 4])
        let failed = Set(outcomes.filter { !$0.value }.keys)
        #expect(failed == Set(commits.batch(2)), "exactly the second commit's callers fail")
        #expect(outcomes.count == 13)
    }
}
