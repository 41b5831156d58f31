import EscrowCore
import Foundation
import Synchronization

/// The shared state of one ``ReplayWorker`` run: the shutdown flag, deliveries in flight, the
/// summary so far, and the doorbell the run loop sleeps on.
final class ReplayRun: Sendable {
    private struct State {
        var shuttingDown = false
        var inFlight = 0
        var summary = ReplaySummary()
        var purgedSinceFlush = 0
    }

    private let state = Mutex(State())
    let wakeup = Wakeup()

    var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }
    var inFlight: Int { state.withLock { $0.inFlight } }
    var summary: ReplaySummary { state.withLock { $0.summary } }

    /// Graceful shutdown: claim nothing more, let what is in flight finish.
    func shutDown() {
        state.withLock { $0.shuttingDown = true }
        wakeup.signal()
    }

    func started() {
        state.withLock { $0.inFlight += 1 }
    }

    func finished() {
        state.withLock { $0.inFlight -= 1 }
        wakeup.signal()
    }

    func update(_ change: (inout ReplaySummary) -> Void) {
        state.withLock { change(&$0.summary) }
    }

    func purged(_ count: Int = 1) {
        state.withLock { $0.purgedSinceFlush += count }
    }

    /// How many purges happened since the last call (and resets the count).
    func takePurgedSinceFlush() -> Int {
        state.withLock { state in
            defer { state.purgedSinceFlush = 0 }
            return state.purgedSinceFlush
        }
    }
}
