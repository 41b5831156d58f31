/// Waits `duration` of real time. This is the one real-time wait of the test support, and the tests wait
/// nowhere else: ``eventually(_:within:every:_:)`` polls through it, ``bounded(_:within:_:)`` times out
/// through it, and a test that paces a real process, socket or server (a slow client's bytes, a fault
/// schedule, a kill at a random moment) calls it with the reason beside the call. Whatever the escrow's
/// clock decides (leases, retries, deadlines) moves with a ``TestClock`` instead.
public func pause(for duration: Duration) async throws {
    // Real time on purpose: the other side is a real process, socket, server or thread that no test clock moves.
    try await Task.sleep(for: duration)
}
