public import EscrowCore
public import EscrowCrypto
public import Foundation

extension OperatorActions {
    /// What ``OperatorActions/overview()`` answers: the published overview, and the custody engine when the keyring
    /// is in one.
    public struct Overview: Sendable, Equatable {
        public var overview: AdminOverview
        /// Nil when the keyring is not in custody.
        public var custody: Custody?
        /// The delivery switch and what expires while deliveries are paused, read live.
        public var deliveries: DeliveriesView
        /// Apple notifications over the overview's window, by type and outcome, read live.
        public var appleNotifications: [NotificationEventCount] = []
        /// Apple token revocations held by the store, by state, read live; nil when the store keeps none.
        public var appleRevocations: AppleRevocationCounts?
        /// Apple authorization codes whose exchange is running (queued or being retried), read live; nil when the store
        /// keeps no exchanges.
        public var appleExchangesRunning: Int?

        /// The keyring's custody engine: whether it unwrapped the keyring at the last start or reload and, when not,
        /// since when, whether this node opens nothing because of it, the error's code and its message (the engine's
        /// location and the cause, never a credential).
        public struct Custody: Sendable, Equatable {
            public var problem: KeyCustodyHealth.Problem?
        }
    }

    /// The keyring's master key versions, each beside the live escrows sealed to it: every version this keyring
    /// holds, every version still in use and every retired one, oldest first.
    public struct KeysView: Sendable, Equatable {
        public var activeVersion: UInt32
        /// The newest key rotation, rewrap or retirement.
        public var lastCycleAt: Date?
        public var versions: [Version]

        public struct Version: Sendable, Equatable {
            public var version: UInt32
            /// Nil when this keyring does not hold the version.
            public var key: KeyInfo?
            public var retired: Bool
            public var liveEscrows: Int
        }

        init(keyring: Keyring, overview: AdminOverview) {
            activeVersion = keyring.activeVersion
            lastCycleAt = overview.lastKeyCycleAt
            let numbers = Set(keyring.keys.map(\.version)).union(overview.keyVersionsInUse.keys)
                .union(overview.retiredKeyVersions)
            versions = numbers.sorted().map { version in
                Version(
                    version: version,
                    key: keyring.keys.first { $0.version == version },
                    retired: overview.retiredKeyVersions.contains(version),
                    liveEscrows: overview.keyVersionsInUse[version] ?? 0
                )
            }
        }
    }
}
