import Dispatch
import EscrowCore
import Glibc
import NIOConcurrencyHelpers

/// Group commit for captures: concurrent captures share one write transaction (and so one fsync),
/// while every caller still gets its answer only after that transaction is durable.
///
/// The first caller to find no batch in progress starts a drain; the drain takes everything queued,
/// writes it in one transaction (each capture in its own savepoint, so one failing capture does not
/// fail the others), resumes every caller, and repeats until the queue is empty. Callers seal their
/// profiles before they queue, so sealing runs in parallel with the writer.
///
/// The drain runs on its own serial dispatch queue, blocking in SQLite there: as a Swift task it would
/// wait in the cooperative pool behind every capture still sealing, and commits would start only once
/// the sealing was done (measured: 1.1 of 2 cores busy under 1,000 concurrent captures).
final class CaptureBatcher: Sendable {
    struct Item: Sendable {
        let record: EscrowRecord
        let actor: AuditActor
        let continuation: CheckedContinuation<CaptureOutcome, any Error>
    }

    private struct State {
        var pending: [Item] = []
        var draining = false
    }

    /// The most captures written in one transaction.
    let maximumBatch: Int
    /// How long a drain under load waits for more captures before its next commit.
    let gatherMicroseconds: UInt32 = 200
    private let state = NIOLockedValueBox(State())
    private let queue = DispatchQueue(label: "profile-escrow.group-commit")

    init(maximumBatch: Int = 256) {
        self.maximumBatch = maximumBatch
    }

    /// Queues one capture and waits until the batch that holds it is committed.
    /// - Parameter write: writes one batch in one transaction; returns one result per item, in order.
    func submit(
        _ record: EscrowRecord,
        actor: AuditActor,
        write: @escaping @Sendable ([Item]) throws -> [Result<CaptureOutcome, any Error>]
    ) async throws -> CaptureOutcome {
        try await withCheckedThrowingContinuation { continuation in
            let startDrain = state.withLockedValue { state -> Bool in
                state.pending.append(Item(record: record, actor: actor, continuation: continuation))
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            if startDrain {
                queue.async { self.drain(write) }
            }
        }
    }

    private func drain(_ write: @Sendable ([Item]) throws -> [Result<CaptureOutcome, any Error>]) {
        var round = 0
        while true {
            // After the first round, captures that arrived during a commit show load: wait a moment so the
            // next commit carries more of them (one fsync each). A lone capture never waits.
            if round > 0, state.withLockedValue({ $0.pending.count }) < maximumBatch / 4 {
                usleep(gatherMicroseconds)
            }
            round += 1
            let batch = state.withLockedValue { state -> [Item] in
                let batch = Array(state.pending.prefix(maximumBatch))
                state.pending.removeFirst(batch.count)
                if batch.isEmpty { state.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            do {
                let results = try write(batch)
                for (item, result) in zip(batch, results) { item.continuation.resume(with: result) }
            } catch {
                for item in batch { item.continuation.resume(throwing: error) }
            }
        }
    }
}
