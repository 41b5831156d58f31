import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ProfileEscrow
import Testing

@Suite("Key rotation")
struct KeyRotationTests {
    @Test func rotateRewrapRetireKeepsEveryEscrowOpenable() async throws {
        let directory = TemporaryDirectory()
        let keyringPath = directory.path + "/keyring"
        try Keyring.generate().write(path: keyringPath, overwrite: false)
        let harness = try Harness(keyring: try Keyring.load(path: keyringPath))
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

        await #expect(throws: EscrowError.self) { try await escrow2.checkRetirable(version: 1) }
        await #expect(throws: EscrowError.self) { try await escrow2.checkRetirable(version: 2) }

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
        let rotated = original.rotated(now: Date())
        let harness = try Harness(keyring: rotated)
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
        let harness = try Harness(keyring: original)
        let receipt = try await harness.escrow.capture(try Fake.profile(1))
        let backupRow = try #require(try await harness.store.record(id: receipt.escrowID))
        let retired = try original.rotated(now: Date()).retiring(version: 1)
        #expect(throws: CryptoError.self) { _ = try retired.open(backupRow.sealed) }
    }
}
