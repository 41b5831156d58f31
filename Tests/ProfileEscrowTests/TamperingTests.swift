import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import ProfileEscrow
import Testing

/// Someone with database access but without the keyring changes rows: every change is caught
/// before anything is decrypted, the escrow moves to dead with `ciphertext_invalid`, and the error
/// names no personal data.
@Suite("Tampering")
struct TamperingTests {
    static let blobColumns = ["public_key", "sealed_profile", "sealed_key", "mac"]

    @Test(arguments: blobColumns)
    func everyByteFlipIsDetected(column: String) async throws {
        let harness = try EscrowFixture()
        let profile = try Fake.profile(7)
        let receipt = try await harness.escrow.capture(profile)
        let original = try #require(try await harness.store.record(id: receipt.escrowID))
        let length: Int =
            switch column {
            case "public_key": original.sealed.publicKey.count
            case "sealed_profile": original.sealed.sealedProfile.count
            case "sealed_key": original.sealed.sealedKey.count
            default: original.sealed.mac.count
            }
        // Every position of the short fields; a spread of positions in the ciphertexts.
        let positions = length <= 48 ? Array(0..<length) : Array(Set((0..<24).map { $0 * length / 24 } + [length - 1]))
        for position in positions {
            try await harness.tamper("DELETE FROM escrow")
            var row = original
            switch column {
            case "public_key": row.sealed.publicKey[position] ^= 0x01
            case "sealed_profile": row.sealed.sealedProfile[position] ^= 0x01
            case "sealed_key": row.sealed.sealedKey[position] ^= 0x01
            default: row.sealed.mac[position] ^= 0x80
            }
            _ = try await harness.store.capture(row, actor: .library, lifecycle: EscrowLifecycle())
            await expectDetected(harness, profile: profile, id: receipt.escrowID)
        }
    }

    @Test func changedKeyVersionOrTruncationIsDetected() async throws {
        let harness = try EscrowFixture()
        let profile = try Fake.profile(8)
        let receipt = try await harness.escrow.capture(profile)
        let id = Data(receipt.escrowID.bytes)
        try await harness.tamper("UPDATE escrow SET sealed_profile = substr(sealed_profile, 1, 80) WHERE id = ?", [id])
        await expectDetected(harness, profile: profile, id: receipt.escrowID)

        let harness2 = try EscrowFixture()
        let receipt2 = try await harness2.escrow.capture(profile)
        try await harness2.tamper("UPDATE escrow SET key_version = 2 WHERE id = ?", [Data(receipt2.escrowID.bytes)])
        await expectDetected(harness2, profile: profile, id: receipt2.escrowID)
    }

    @Test func rowsSwappedBetweenUsersAreDetected() async throws {
        let harness = try EscrowFixture()
        let alice = try Fake.profile(1)
        let bob = try Fake.profile(2)
        let a = try await harness.escrow.capture(alice)
        let b = try await harness.escrow.capture(bob)
        // Move Bob's sealed payload, key and MAC under Alice's row, and the reverse.
        let rowA = try #require(try await harness.store.record(id: a.escrowID))
        let rowB = try #require(try await harness.store.record(id: b.escrowID))
        for (target, source) in [(rowA, rowB), (rowB, rowA)] {
            try await harness.tamper(
                "UPDATE escrow SET public_key = ?, sealed_profile = ?, sealed_key = ?, mac = ? WHERE id = ?",
                [
                    Data(source.sealed.publicKey), Data(source.sealed.sealedProfile), Data(source.sealed.sealedKey),
                    Data(source.sealed.mac), Data(target.id.bytes),
                ]
            )
        }
        await expectDetected(harness, profile: alice, id: a.escrowID)
        await expectDetected(harness, profile: bob, id: b.escrowID)
    }

    @Test func aRowForgedWithAnotherKeyringIsDetected() async throws {
        let harness = try EscrowFixture()
        let profile = try Fake.profile(3)
        let receipt = try await harness.escrow.capture(profile)
        // An attacker with a keyring of their own seals a profile of their choosing.
        let attacker = Keyring.generate()
        let forged = try attacker.seal(
            plaintext: EscrowPlaintext(profile: try Fake.profile(99), verified: true, capturedAt: Date()).encoded(),
            id: receipt.escrowID,
            blindIndex: harness.keyring.blindIndex(userIdentifier: profile.userIdentifier)
        )
        try await harness.tamper(
            "UPDATE escrow SET public_key = ?, sealed_profile = ?, sealed_key = ?, mac = ? WHERE id = ?",
            [
                Data(forged.publicKey), Data(forged.sealedProfile), Data(forged.sealedKey), Data(forged.mac),
                Data(receipt.escrowID.bytes),
            ]
        )
        await expectDetected(harness, profile: profile, id: receipt.escrowID)
    }

    func expectDetected(_ harness: EscrowFixture, profile: Profile, id: EscrowID) async {
        do {
            let opened = try await harness.escrow.replay(userIdentifier: profile.userIdentifier)
            Issue.record("a tampered row opened (same profile: \(opened.profile == profile))")
        } catch let error as EscrowError {
            #expect(error.code == .ciphertextInvalid)
            for token in Fake.tokens { #expect(!String(describing: error).contains(token)) }
        } catch {
            Issue.record("unexpected error type \(type(of: error))")
        }
        let record = try? await harness.store.record(id: id)
        #expect(record?.state == .dead)
        #expect(record?.deadCode == .ciphertextInvalid)
        for token in Fake.tokens { #expect(!harness.loggedText().contains(token)) }
    }
}
