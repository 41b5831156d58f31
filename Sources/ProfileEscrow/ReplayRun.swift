import EscrowCore
import Foundation
import NIOConcurrencyHelpers

/// The shared state of one ``ReplayWorker`` run: the shutdown flag, deliveries in flight, the
/// summary so far, and the doorbell the run loop sleeps on.
final class ReplayRun: Sendable {
    private struct State {
        var shuttingDown = false
        var inFlight = 0
        var summary = ReplaySummary()
    }

    private let state = NIOLockedValueBox(State())
    let wakeup = Wakeup()

    var isShuttingDown: Bool { state.withLockedValue { $0.shuttingDown } }
    var inFlight: Int { state.withLockedValue { $0.inFlight } }
    var summary: ReplaySummary { state.withLockedValue { $0.summary } }

    /// Graceful shutdown: claim nothing more, let what is in flight finish.
    func shutDown() {
        state.withLockedValue { $0.shuttingDown = true }
        wakeup.signal()
    }

    func started() {
        state.withLockedValue { $0.inFlight += 1 }
    }

    func finished() {
        state.withLockedValue { $0.inFlight -= 1 }
        wakeup.signal()
    }

    func update(_ change: (inout ReplaySummary) -> Void) {
        state.withLockedValue { change(&$0.summary) }
    }
}
