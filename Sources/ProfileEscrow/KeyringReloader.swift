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
/// and ``Escrow/custodyHealth`` says why (`/readyz`, the gauge `profile_escrow_custody_up`) until a reload succeeds
/// (tried again every `interval` while it fails).
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
                while !Task.isCancelled && !Task.isShuttingDownGracefully {
                    try? await cancelWhenGracefulShutdown { try await escrow.clock.sleep(for: interval) }
                    let now = Self.fingerprint(path)
                    if now != seen {
                        seen = now
                        await reload(because: "the file changed")
                    } else if escrow.custodyHealth.problem != nil {
                        // The custody engine failed: try again each interval, so the node recovers by itself.
                        await reload(because: "custody retry")
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
        }
    }

    /// Loads the file and puts it in place; logs what happened. Returns whether the keyring changed.
    @discardableResult
    public func reload(because reason: String) async -> Bool {
        let keyring: Keyring
        do {
            keyring = try await KeyringCustody.load(path: path, environment: environment)
        } catch  where [.custodyUnavailable, .custodyRefused, .wrappedKeyInvalid].contains(error.code) {
            escrow.custodyHealth.failed(error)
            logger.error(
                "keyring not reloaded: the custody engine did not unwrap it; the keys in use stay",
                metadata: ["reason": "\(reason)", "error.code": "\(error.code)", "error": "\(error.message)"]
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
            "keyring reloaded",
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
