package import NIOCore

/// One timer for a connection's successive phases, each with its own end (a request's head, then its body; a
/// delivery's exchange, then the connection's idle time), used on the connection's event loop.
///
/// It is not moved at every phase: a phase that ends later than the timer fires leaves it where it is, and a timer
/// that fires before the current phase's end schedules itself again for the rest. So a connection under steady load
/// schedules a timer now and then instead of scheduling and cancelling one or two per request (in profiles, 2.6
/// points of a capture's CPU in `serve` and about 2% of `replay`'s).
package struct PhaseTimer {
    /// When the current phase ends; nil between phases (nothing to time).
    package private(set) var phaseEnds: NIODeadline?
    private var timer: Scheduled<Void>?
    private var firesAt: NIODeadline?
    /// What the owner runs when the timer fires; it calls ``fired(on:)`` to learn whether the phase ended.
    private var action: (@Sendable () -> Void)?

    package init() {}

    /// Starts a phase that ends at `end`. The action `makeAction` makes runs on `loop` when the timer fires: it
    /// holds what it needs (a `NIOLoopBound` of the handler and its context). It is made once, at the first phase,
    /// and kept until ``disarm()``, which the owner calls when the connection closes or the handler leaves it.
    package mutating func arm(
        until end: NIODeadline,
        on loop: any EventLoop,
        _ makeAction: () -> @Sendable () -> Void
    ) {
        phaseEnds = end
        if action == nil { action = makeAction() }
        if let firesAt, firesAt <= end { return }
        schedule(at: end, on: loop)
    }

    /// No phase to time until the next ``arm(until:on:_:)``; the timer, if it fires meanwhile, finds none.
    package mutating func pause() {
        phaseEnds = nil
    }

    /// Ends the timer for good.
    package mutating func disarm() {
        phaseEnds = nil
        timer?.cancel()
        timer = nil
        firesAt = nil
        action = nil
    }

    /// Called by the owner's action when the timer fires: true when the current phase has ended (it is then over),
    /// false when there is none or it ends later (the timer is then scheduled again for the rest).
    package mutating func fired(on loop: any EventLoop) -> Bool {
        timer = nil
        firesAt = nil
        guard let end = phaseEnds else { return false }
        guard NIODeadline.now() >= end else {
            schedule(at: end, on: loop)
            return false
        }
        phaseEnds = nil
        return true
    }

    private mutating func schedule(at end: NIODeadline, on loop: any EventLoop) {
        guard let action else { return }
        timer?.cancel()
        firesAt = end
        timer = loop.scheduleTask(deadline: end, action)
    }
}
