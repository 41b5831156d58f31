import EscrowCore
import NIOConcurrencyHelpers
import ServiceLifecycle

/// Whether the process is draining: set at graceful shutdown (SIGTERM), so that `/readyz` answers `503` and a load
/// balancer stops sending new requests while the requests in flight finish.
public final class DrainState: Sendable {
    private let value = NIOLockedValueBox(false)

    public init() {}

    public var isDraining: Bool { value.withLockedValue { $0 } }

    func startDraining() { value.withLockedValue { $0 = true } }
}

/// The service that notices graceful shutdown first (it comes after the HTTP application, and services stop in
/// reverse order): it marks the process as draining, then waits `delay` while the HTTP application still answers
/// (`/readyz` with `503`), then lets the shutdown go on. The delay is counted on the escrow's clock.
struct DrainService: Service {
    let state: DrainState
    let delay: Duration
    let clock: any WallClock

    func run() async throws {
        try? await gracefulShutdown()
        state.startDraining()
        if delay > .zero { try? await clock.sleep(for: delay) }
    }
}
