import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ProfileEscrow
import ServiceLifecycle
import Testing

@Suite("Key rotation")
struct KeyRotationTests {
    @Test func rotateRewrapRetireKeepsEveryEscrowOpenable() async throws {
        let directory = TemporaryDirectory()
        let keyringPath = directory.path + "/keyring"
        try Keyring.generate().write(path: keyringPath, overwrite: false)
        let harness = try EscrowFixture(keyring: try Keyring.load(path: keyringPath))
        for number in 0..<10 { _ = try await harness.escrow.capture(try Fake.profile(number)) }

        let rotated = try await harness.escrow.rotateKeys(keyringPath: keyringPath)
        #expect(rotated.activeVersion == 2)
        let escrow2 = Escrow(
            store: harness.store,
            keyring: try Keyring.load(path: keyringPath),
            logger: .init(label: "t")
        )
        for number in 10..<13 { _ = try await escrow2.capture(try Fake.profile(number)) }
        #expect(try await harness.store.keyVersionsInUse() == [1: 10, 2: 3])

        await #expect(throws: EscrowError.self) {
            _ = try await escrow2.retireKey(version: 1, keyringPath: keyringPath)  // 10 escrows still use it
        }
        #expect(throws: EscrowError.self) { try escrow2.checkRetirable(version: 2) }  // the active one
        #expect(try Keyring.load(path: keyringPath).keys.allSatisfy(\.hasSecretKey), "nothing was destroyed")

        let result = try await escrow2.rewrap()
        #expect(result.rewrapped == 10 && result.failed == 0)
        #expect(try await harness.store.keyVersionsInUse() == [2: 13])

        _ = try await escrow2.retireKey(version: 1, keyringPath: keyringPath)

        let reloaded = try Keyring.load(path: keyringPath)
        #expect(reloaded.keys.first { $0.version == 1 }?.hasSecretKey == false)
        let escrow3 = Escrow(store: harness.store, keyring: reloaded, logger: .init(label: "t"))
        for number in 0..<13 {
            #expect(
                try await escrow3.replay(userIdentifier: Fake.userIdentifier(number)).profile == Fake.profile(number)
            )
        }
        let report = try await PurgeReport.build(store: harness.store, verify: true)
        #expect(report.chain?.verified == true)
        let types = try await harness.store.auditEvents(after: 0, limit: 1000).map(\.draft.type)
        #expect(types.contains(.keysRotated) && types.contains(.keysRewrapped) && types.contains(.keysRetired))
    }

    @Test func aKeyringWithoutTheRowsVersionNeverMarksTheRowDead() async throws {
        let original = Keyring.generate()
        let rotated = try original.rotated(now: Date())
        let harness = try EscrowFixture(keyring: rotated)
        let receipt = try await harness.escrow.capture(try Fake.profile(1))  // sealed to version 2
        // An out-of-date keyring file (version 1 only) and a retired one: intact row, no key.
        for keyring in [original, try rotated.rotated(now: Date()).retiring(version: 2)] {
            let stale = Escrow(store: harness.store, keyring: keyring, logger: .init(label: "t"))
            do {
                _ = try await stale.replay(userIdentifier: Fake.userIdentifier(1))
                Issue.record("opened without the key")
            } catch let error as EscrowError {
                #expect(error.code == .keyUnavailable)
            }
            #expect(try await harness.store.record(id: receipt.escrowID)?.state == .pending)
        }
    }

    @Test func anOldBackupSealedOnlyToARetiredKeyCannotBeOpened() async throws {
        let original = Keyring.generate()
        let harness = try EscrowFixture(keyring: original)
        let receipt = try await harness.escrow.capture(try Fake.profile(1))
        let backupRow = try #require(try await harness.store.record(id: receipt.escrowID))
        let retired = try original.rotated(now: Date()).retiring(version: 1)
        #expect(throws: CryptoError.self) { _ = try retired.open(backupRow.sealed) }
    }

    /// A node whose keyring still seals to a retired version refuses to capture and stores nothing; once its
    /// keyring is reloaded it captures again. The store enforces it, whatever keyring the node holds.
    @Test func aCaptureNodeWithAnOutdatedKeyringRefusesUntilReloaded() async throws {
        let directory = TemporaryDirectory()
        let keyringPath = directory.path + "/keyring"
        try Keyring.generate().write(path: keyringPath, overwrite: false)
        let harness = try EscrowFixture(keyring: try Keyring.load(path: keyringPath))
        let captureNode = Escrow(store: harness.store, keyring: harness.keyring.publicOnly(), logger: .init(label: "t"))
        _ = try await captureNode.capture(try Fake.profile(1))

        let cycle = try await harness.escrow.cycleKeys(keyringPath: keyringPath)
        #expect(cycle.activeVersion == 2 && cycle.rewrapped == 1 && cycle.retired == [1] && cycle.kept.isEmpty)
        #expect(try await harness.store.retiredKeyVersions() == [1])

        do {
            _ = try await captureNode.capture(try Fake.profile(2))
            Issue.record("captured with a keyring sealing to a retired version")
        } catch let error as EscrowError {
            #expect(error.code == .keyringOutdated)
        }
        #expect(
            try await harness.store.record(
                blindIndex: harness.keyring.blindIndex(userIdentifier: Fake.userIdentifier(2))
            ) == nil
        )

        let reloader = KeyringReloader(escrow: captureNode, path: keyringPath, logger: .init(label: "t"))
        #expect(await reloader.reload(because: "test"))
        #expect(captureNode.keyring.activeVersion == 2)
        _ = try await captureNode.capture(try Fake.profile(2))
        #expect(try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(2)).profile == Fake.profile(2))
        #expect(try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1)).profile == Fake.profile(1))
    }

    /// A revocation still waiting for Apple has its token sealed to the version it was queued under: a cycle keeps
    /// that version (retiring it would leave the token unopenable and the user's grant unrevoked), and the token
    /// still opens after the cycle.
    @Test func aCycleKeepsTheVersionAQueuedRevocationIsSealedTo() async throws {
        let directory = TemporaryDirectory()
        let keyringPath = directory.path + "/keyring"
        try Keyring.generate().write(path: keyringPath, overwrite: false)
        let harness = try EscrowFixture(keyring: try Keyring.load(path: keyringPath))
        let token = "fake-refresh-token-not-apples"
        let id = try await harness.escrow.queueAppleRevocation(
            token: token,
            tokenTypeHint: "refresh_token",
            clientID: "com.example.invalid.app"
        )

        let cycle = try await harness.escrow.cycleKeys(keyringPath: keyringPath)
        #expect(cycle.activeVersion == 2 && cycle.retired.isEmpty && cycle.kept == [1: 1])
        #expect(try await harness.store.retiredKeyVersions().isEmpty)
        do {
            _ = try await harness.escrow.retireKey(version: 1, keyringPath: keyringPath)
            Issue.record("retired a version a queued revocation is sealed to")
        } catch let error as EscrowError {
            #expect(error.code == .keyInUse)
        }
        let revocation = try #require(try await harness.store.appleRevocation(id: id))
        #expect(try harness.escrow.openAppleRevocationToken(revocation) == token)
    }

    /// A reload is refused when the file holds another store's keyring: the keyring in use stays.
    @Test func aKeyringOfAnotherStoreIsNeverLoaded() async throws {
        let directory = TemporaryDirectory()
        let keyringPath = directory.path + "/keyring"
        let harness = try EscrowFixture()
        try Keyring.generate().write(path: keyringPath, overwrite: false)
        let reloader = KeyringReloader(escrow: harness.escrow, path: keyringPath, logger: .init(label: "t"))
        #expect(!(await reloader.reload(because: "test")))
        #expect(harness.escrow.keyring.sharesIndexAndRowKeys(with: harness.keyring))
        _ = try await harness.escrow.capture(try Fake.profile(1))
    }

    /// The reloader follows the file while it runs: a rotation written by another process is picked up.
    @Test func theReloaderFollowsTheFile() async throws {
        let directory = TemporaryDirectory()
        let keyringPath = directory.path + "/keyring"
        try Keyring.generate().write(path: keyringPath, overwrite: false)
        let harness = try EscrowFixture(keyring: try Keyring.load(path: keyringPath))
        let reloader = KeyringReloader(
            escrow: harness.escrow,
            path: keyringPath,
            interval: .milliseconds(50),
            logger: .init(label: "t")
        )
        let group = ServiceGroup(services: [reloader], logger: .init(label: "t"))
        let running = Task { try await group.run() }
        let other = Escrow(
            store: harness.store,
            keyring: try Keyring.load(path: keyringPath),
            logger: .init(label: "t")
        )
        _ = try await other.rotateKeys(keyringPath: keyringPath)
        // The interval is counted on the escrow's clock: moved here, one interval a poll, instead of waited for.
        try await eventually("the rotation is picked up") {
            harness.clock.advance(by: 0.05)
            return harness.escrow.keyring.activeVersion == 2
        }
        await group.triggerGracefulShutdown()
        try await running.value
    }
}
