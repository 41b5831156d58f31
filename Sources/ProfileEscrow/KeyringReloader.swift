import EscrowCore
import EscrowCrypto
import EscrowCustody
import Foundation
public import Logging
public import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// Picks up a changed keyring file without a restart: on SIGHUP, and when the file changes (checked every
/// `interval` of the escrow's clock: its device, inode, size, modification and change times, after following symbolic links, so a
/// Kubernetes secret's symlink swap counts). So `keys rotate`, `rewrap`, `retire` and `cycle` run while a
/// service captures and delivers, and every node follows within one interval.
///
/// A file that does not load (a half-written copy, a wrong mode) or that belongs to another store (another
/// index or row key) is logged and ignored: the keyring in use stays. A keyring in custody is unwrapped through its
/// engine at each reload (never per escrow); when the engine cannot be reached or refuses, the keys in use stay,
/// and ``Escrow/custodyHealth`` says why (`/readyz`, the gauge `profile_escrow_custody_up`) until a reload succeeds.
/// While it fails the unwrap is tried again with a backoff on the escrow's clock: `interval`, doubling up to
/// ``retryLimit``. A process that started while the engine was down (``KeyringCustody/loadForService(path:environment:)``)
/// holds its secret keys only wrapped: it captures, its worker claims nothing, and this service unwraps them as soon
/// as the engine answers; it ends at graceful shutdown.
public struct KeyringReloader: Service {
    let escrow: Escrow
    let path: String
    let interval: Duration
    let logger: Logger
    /// The file as it was when the reloader was made (about when the escrow's keyring was loaded): a change
    /// before ``run()`` starts is picked up too.
    let initial: [Int]?

    /// Where custody credentials come from (by default, the process's environment).
    let environment: [String: String]

    /// The longest wait between two unwraps tried while the custody engine fails.
    public static let retryLimit: Duration = .seconds(30)

    public init(
        escrow: Escrow,
        path: String,
        interval: Duration = .seconds(2),
        environment: [String: String]? = nil,
        logger: Logger
    ) {
        self.escrow = escrow
        self.path = path
        self.interval = interval
        self.environment = environment ?? ProcessInfo.processInfo.environment
        self.logger = logger
        self.initial = Self.fingerprint(path)
    }

    /// The wait before the next unwrap after `failures` failed ones in a row: `interval` doubled each time, at most
    /// ``retryLimit`` (and never less than `interval`).
    func retryDelay(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return interval }
        let doubled = interval * (1 << min(failures - 1, 16))
        return max(interval, min(doubled, Self.retryLimit))
    }

    /// How many waits of `interval` make `delay` (at least one).
    func waits(for delay: Duration) -> Int {
        max(1, Int((delay / interval).rounded(.up)))
    }

    public func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        var seen = initial
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in signals {
                        await reload(because: "SIGHUP")
                    }
                }
                // Failed unwraps in a row, and how many more waits of `interval` (on the escrow's clock) before the
                // next: counted in waits, not read off the clock, so the time a slow unwrap itself takes does not
                // shorten the backoff.
                var failures = escrow.custodyHealth.problem == nil ? 0 : 1
                var waitsLeft = waits(for: retryDelay(afterFailures: failures))
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    try? await cancelWhenGracefulShutdown { try await escrow.clock.sleep(for: interval) }
                    guard !Task.isCancelled && !Task.isShuttingDownGracefully else { break }
                    waitsLeft -= 1
                    let now = Self.fingerprint(path)
                    if now != seen {
                        seen = now
                        await reload(because: "the file changed")
                    } else if escrow.custodyHealth.problem != nil, waitsLeft <= 0 {
                        // The custody engine failed: try again after a backoff, so the node recovers by itself.
                        await reload(because: "custody retry")
                    } else {
                        continue
                    }
                    failures = escrow.custodyHealth.problem == nil ? 0 : failures + 1
                    waitsLeft = waits(for: retryDelay(afterFailures: failures))
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
        }
    }

    /// Loads the file and puts it in place; logs what happened. Returns whether the keyring changed to an unwrapped
    /// (or plain) one.
    @discardableResult
    public func reload(because reason: String) async -> Bool {
        let keyring: Keyring
        let wasWrapped = escrow.keyring.isWrapped
        do {
            keyring = try await KeyringCustody.load(path: path, environment: environment)
        } catch  where KeyringCustody.isEngineFailure(error) {
            // A process holding no unwrapped key (the engine was down at its start) still follows the file's public
            // part: a rotation while the engine is down moves its captures to the new active version. Never a plain
            // key in place of a wrapped one: the file's keyring, still wrapped.
            var followed = false
            if wasWrapped, let wrapped = try? Keyring.load(path: path), wrapped.custody != nil, wrapped.isWrapped {
                followed = (try? escrow.replaceKeyring(wrapped)) != nil
            }
            escrow.custodyHealth.failed(error, keysUnavailable: escrow.keyring.isWrapped)
            logger.error(
                wasWrapped
                    ? "keys still wrapped: the custody engine did not unwrap them; this node captures but opens nothing"
                    : "keyring not reloaded: the custody engine did not unwrap it; the keys in use stay",
                metadata: [
                    "reason": "\(reason)", "error.code": "\(error.code)", "error": "\(error.message)",
                    "keyring.followed": "\(followed)",
                ]
            )
            return false
        } catch {
            logger.error(
                "keyring not reloaded: the file does not load; the keyring in use stays",
                metadata: ["reason": "\(reason)", "error": "\(error.message)"]
            )
            return false
        }
        do {
            try escrow.replaceKeyring(keyring)
        } catch {
            logger.error("keyring not reloaded", metadata: ["reason": "\(reason)", "error": "\(error.message)"])
            return false
        }
        if keyring.custody != nil { escrow.custodyHealth.succeeded() }
        logger.notice(
            wasWrapped ? "keyring unwrapped: the custody engine answered; escrows open again" : "keyring reloaded",
            metadata: [
                "reason": "\(reason)", "key.active": "\(keyring.activeVersion)",
                "key.versions":
                    "\(keyring.keys.map { "\($0.version)\($0.hasSecretKey ? "" : "-")" }.joined(separator: ","))",
            ]
        )
        return true
    }

    /// What identifies the file's current content without reading it; nil when it cannot be read.
    static func fingerprint(_ path: String) -> [Int]? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return [
            Int(info.st_dev), Int(info.st_ino), Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec),
            Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec),
        ]
    }
}

extension KeyringReloader: CustomStringConvertible {
    /// What service-lifecycle logs (at debug) when it starts and stops the service: never `environment`, which holds
    /// the process's whole environment, the webhook secret and custody credentials included.
    public var description: String { "KeyringReloader(path: \(path), interval: \(interval))" }
}
