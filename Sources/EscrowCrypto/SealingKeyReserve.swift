import Dispatch
import Synchronization

/// The key material of one escrow's sealing that does not depend on its profile: the escrow's own key pair, and the
/// ephemeral halves of its two sealed boxes (the profile's, to the escrow's public key; the escrow secret key's, to
/// the master public key). Three public keys and two shared secrets: all of a capture's X25519 work.
struct SealingKeys: Sendable {
    let publicKey: [UInt8]
    let secretKey: SecretBytes
    let profileBox: SealedBox.Ephemeral
    let keyBox: SealedBox.Ephemeral
    /// The master public key ``keyBox`` was made for.
    let masterPublicKey: [UInt8]

    /// Fresh keys for a box to `masterPublicKey`, for a new escrow key pair or for `keyPair`; `nil` when that key is of
    /// small order.
    static func make(
        masterPublicKey: [UInt8],
        _ x25519: SealedBox.X25519,
        keyPair: (publicKey: [UInt8], secretKey: SecretBytes)? = nil
    ) -> SealingKeys? {
        let (publicKey, secretKey) = keyPair ?? SealedBox.keyPair(x25519)
        guard let profileBox = SealedBox.ephemeral(to: publicKey, recipientSecretKey: secretKey, x25519),
            let keyBox = SealedBox.ephemeral(to: masterPublicKey, recipientSecretKey: nil, x25519)
        else { return nil }
        return SealingKeys(
            publicKey: publicKey,
            secretKey: secretKey,
            profileBox: profileBox,
            keyBox: keyBox,
            masterPublicKey: masterPublicKey
        )
    }
}

/// Sealing keys made ahead of captures, on a thread of their own that runs only when a core would otherwise idle.
///
/// A capture's X25519 work (its key pair, and the ephemeral key and shared key of each of its two sealed boxes: about
/// 55 µs in an optimised build) does not depend on the profile, only on the active master public key. Under load a
/// service's cores are idle at moments (every capture in flight waiting for its group commit), and a capture that
/// finds keys here seals in the rest of the time. The total work is the same; it moves to cores that had none.
///
/// What it keeps: at most ``capacity`` sets of keys, each in `sodium_malloc`'ed memory (``SecretBytes``), each taken
/// by one capture and never used again (taken under a lock, then owned by that capture). Keys are made for one master
/// public key: when a capture asks for another (the keyring was reloaded after a rotation), those made for the old one
/// are dropped, zeroed, and the thread makes keys for the new one. A capture never waits for this type: when its lock is
/// held, or nothing is kept, the capture makes its keys itself.
///
/// Not started by default: a library user's process gets no thread it did not ask for. `serve` starts one
/// (`docs/operations.md`). Its thread runs under Linux's `SCHED_IDLE` when asked to (``init(capacity:idlePriority:)``),
/// so that it never takes a core from a request; a process that may not change its threads' policy leaves it as it is.
public final class SealingKeyReserve: Sendable {
    /// The sets of keys kept by default: about 13 ms of captures at 10,000 a second.
    public static let defaultCapacity = 128

    /// The most sets of keys kept.
    public let capacity: Int
    private let idlePriority: Bool
    private let x25519: SealedBox.X25519
    private let state = Mutex(State())
    /// Where the thread sleeps while there is nothing to make (full, or no master key asked for yet).
    private let wakeup = DispatchSemaphore(value: 0)

    private struct State: Sendable {
        var keys: [SealingKeys] = []
        var masterPublicKey: [UInt8]?
        var started = false
        var stopped = false
        var sleeping = false
        var threadRunning = false
    }

    /// A reserve of at most `capacity` sets of keys. `idlePriority`: its thread moves itself to Linux's `SCHED_IDLE`
    /// (only for a process that may change its threads' scheduling policy; a seccomp filter such as systemd's
    /// `SystemCallFilter=~@resources` kills a process that tries).
    public convenience init(capacity: Int = defaultCapacity, idlePriority: Bool) {
        self.init(capacity: capacity, idlePriority: idlePriority, SealedBox.defaultX25519)
    }

    init(capacity: Int, idlePriority: Bool, _ x25519: SealedBox.X25519) {
        precondition(capacity > 0, "a sealing key reserve keeps at least one set of keys")
        self.capacity = capacity
        self.idlePriority = idlePriority
        self.x25519 = x25519
    }

    /// Sets of keys kept now.
    public var count: Int { state.withLock { $0.keys.count } }

    /// The escrow public keys of the sets kept now (tests).
    var keptPublicKeys: [[UInt8]] { state.withLock { $0.keys.map(\.publicKey) } }

    /// Whether the thread is parked, making nothing until woken (tests: a full reserve stays full without a wait).
    var isSleeping: Bool { state.withLock { $0.sleeping } }

    /// Whether the thread is running (tests: a stopped reserve's thread has ended, and does not start again).
    var isThreadRunning: Bool { state.withLock { $0.threadRunning } }

    /// Starts the thread that makes keys. Once; a stopped reserve does not start again.
    public func start() {
        let starting = state.withLock { state -> Bool in
            guard !state.started, !state.stopped else { return false }
            state.started = true
            state.threadRunning = true
            return true
        }
        guard starting else { return }
        IdleThread.start(name: "sealing-keys", idlePriority: idlePriority) { [self] in run() }
    }

    /// Ends the thread and drops every set of keys kept (zeroed as they are released).
    public func stop() {
        let (dropped, wake) = state.withLock { state -> ([SealingKeys], Bool) in
            state.stopped = true
            let wake = state.sleeping
            state.sleeping = false
            return (state.keys.take(), wake)
        }
        if wake { wakeup.signal() }
        _ = dropped
    }

    /// Makes keys for the active master key of `keyring` from now on (those made for another are dropped).
    public func prepare(for keyring: Keyring) {
        guard let master = keyring.masterKey(version: keyring.activeVersion) else { return }
        let (dropped, wake) = state.withLock { state -> ([SealingKeys], Bool) in
            retarget(&state, to: master.publicKey)
        }
        if wake { wakeup.signal() }
        _ = dropped
    }

    /// One set of keys made for `masterPublicKey`, owned by the caller from now on; `nil` when none is kept or the
    /// reserve's lock is held at this moment. Never waits.
    func take(for masterPublicKey: [UInt8]) -> SealingKeys? {
        guard
            let (keys, dropped, wake) = state.withLockIfAvailable({ state -> (SealingKeys?, [SealingKeys], Bool) in
                var (dropped, wake) = retarget(&state, to: masterPublicKey)
                let keys = state.keys.popLast()
                if state.sleeping, !state.stopped, state.keys.count <= capacity / 2 {
                    state.sleeping = false
                    wake = true
                }
                return (keys, dropped, wake)
            })
        else { return nil }
        if wake { wakeup.signal() }
        _ = dropped
        return keys
    }

    /// Points the reserve at `masterPublicKey`: keys made for another are handed back to be dropped outside the lock,
    /// and a sleeping thread is to be woken.
    private func retarget(_ state: inout State, to masterPublicKey: [UInt8]) -> ([SealingKeys], Bool) {
        guard state.masterPublicKey != masterPublicKey, masterPublicKey.count == Sodium.boxPublicKeyBytes else {
            return ([], false)
        }
        state.masterPublicKey = masterPublicKey
        let wake = state.sleeping && !state.stopped
        if wake { state.sleeping = false }
        return (state.keys.take(), wake)
    }

    private enum Next {
        case stop
        case sleep
        case make([UInt8])
    }

    /// The thread: makes keys while fewer than ``capacity`` are kept, sleeps when full until captures have taken half.
    private func run() {
        while true {
            let next = state.withLock { state -> Next in
                if state.stopped { return .stop }
                guard let master = state.masterPublicKey, state.keys.count < capacity else {
                    state.sleeping = true
                    return .sleep
                }
                return .make(master)
            }
            switch next {
            case .stop:
                state.withLock { $0.threadRunning = false }
                return
            case .sleep:
                wakeup.wait()
            case .make(let master):
                guard let keys = SealingKeys.make(masterPublicKey: master, x25519) else {
                    // A master key of small order: no keys can be made for it (sealing refuses it too).
                    let dropped = state.withLock { state -> [SealingKeys] in
                        if state.masterPublicKey == master { state.masterPublicKey = nil }
                        return state.keys.take()
                    }
                    _ = dropped
                    continue
                }
                let surplus = state.withLock { state -> SealingKeys? in
                    guard !state.stopped, state.masterPublicKey == master, state.keys.count < capacity else {
                        return keys
                    }
                    state.keys.append(keys)
                    return nil
                }
                _ = surplus
            }
        }
    }
}

extension Array {
    /// The elements, leaving the array empty: a way to release them after a lock is let go.
    fileprivate mutating func take() -> [Element] {
        var taken: [Element] = []
        swap(&self, &taken)
        return taken
    }
}
