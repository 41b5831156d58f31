import Foundation
import Testing

@testable import EscrowCrypto

/// Sealing keys made ahead of captures on a thread of their own: each set is used once, made for the master key it is
/// asked for, and what it seals opens.
@Suite("Sealing key reserve")
struct SealingKeyReserveTests {
    /// Waits (at most 20 s) until `condition` holds. The reserve's thread is a real one that no test clock moves: this
    /// polls it, every 5 ms of real time.
    func eventually(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            try #require(ContinuousClock.now < deadline, "the reserve did not get there in 20 s")
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func masterPublicKey(_ keyring: Keyring) -> [UInt8] {
        keyring.masterKey(version: keyring.activeVersion)!.publicKey
    }

    @Test(arguments: SealedBox.X25519.allCases)
    func itFillsToItsCapacityWithKeysUsedOnceAndWhatTheySealOpens(x25519: SealedBox.X25519) async throws {
        let keyring = Keyring.generate()
        let reserve = SealingKeyReserve(capacity: 6, idlePriority: false, x25519)
        defer { reserve.stop() }
        #expect(reserve.count == 0)
        reserve.prepare(for: keyring)
        reserve.start()
        // Full, the thread parks until captures take half: it makes no seventh set.
        try await eventually { reserve.count == 6 && reserve.isSleeping }
        #expect(reserve.count == 6)

        // Escrows sealed with the reserve take its keys (the thread sleeps until half are taken) and open with
        // libsodium's opening.
        let kept = reserve.keptPublicKeys
        #expect(Set(kept).count == 6)
        let plaintext = SecretBytes(copying: Array(#"{"givenName":"Testy","email":"t@example.invalid"}"#.utf8))
        let index = keyring.blindIndex(userIdentifier: "000000.reserve.invalid")
        var sealed: [SealedEscrow] = []
        for _ in 0..<3 {
            sealed.append(
                try keyring.seal(
                    plaintext: plaintext,
                    id: .random(),
                    blindIndex: index,
                    x25519: x25519,
                    reserve: reserve
                )
            )
        }
        #expect(Set(sealed.map(\.publicKey)).count == 3)
        #expect(sealed.allSatisfy { kept.contains($0.publicKey) })
        #expect(reserve.keptPublicKeys.allSatisfy { key in !sealed.contains { $0.publicKey == key } })
        for escrow in sealed {
            #expect(keyring.verify(escrow))
            #expect(try keyring.open(escrow, x25519: .libsodium) == plaintext)
        }

        // Every set is taken once: twelve takes (the thread refills meanwhile) give twelve different key pairs and
        // ephemeral keys, each made for the master key asked for.
        var taken: [SealingKeys] = []
        while taken.count < 12 {
            try await eventually { reserve.count > 0 }
            if let keys = reserve.take(for: masterPublicKey(keyring)) { taken.append(keys) }
        }
        #expect(Set(taken.map(\.publicKey) + sealed.map(\.publicKey)).count == 15)
        #expect(Set(taken.map(\.profileBox.publicKey) + taken.map(\.keyBox.publicKey)).count == 24)
        #expect(taken.allSatisfy { $0.masterPublicKey == masterPublicKey(keyring) })
        #expect(taken.allSatisfy { SealedBox.publicKey(of: $0.secretKey, .libsodium) == $0.publicKey })
    }

    /// After a reload to another master key, keys made for the old one are dropped, never used to seal to the new one.
    @Test func keysForAnotherMasterKeyAreDroppedAndMadeAgainForTheNewOne() async throws {
        let old = Keyring.generate()
        let new = Keyring.generate()
        let reserve = SealingKeyReserve(capacity: 4, idlePriority: false, .libsodium)
        defer { reserve.stop() }
        reserve.prepare(for: old)
        reserve.start()
        try await eventually { reserve.count == 4 }

        // Asking for the new master key drops the old keys: the first answer is nothing.
        #expect(reserve.take(for: masterPublicKey(new)) == nil)
        try await eventually { reserve.count == 4 }
        let keys = try #require(reserve.take(for: masterPublicKey(new)))
        #expect(keys.masterPublicKey == masterPublicKey(new))

        let plaintext = SecretBytes(copying: Array(#"{"email":"t@example.invalid"}"#.utf8))
        let index = new.blindIndex(userIdentifier: "000000.reload.invalid")
        let kept = reserve.keptPublicKeys
        #expect(kept.count == 3)
        let sealed = try new.seal(
            plaintext: plaintext,
            id: .random(),
            blindIndex: index,
            x25519: .libsodium,
            reserve: reserve
        )
        #expect(kept.contains(sealed.publicKey))
        #expect(try new.open(sealed, x25519: .libsodium) == plaintext)
        #expect(throws: CryptoError.self) { try old.open(sealed) }
    }

    @Test func stopEndsTheThreadAndDropsItsKeys() async throws {
        let keyring = Keyring.generate()
        let reserve = SealingKeyReserve(capacity: 4, idlePriority: false, .libsodium)
        reserve.prepare(for: keyring)
        reserve.start()
        try await eventually { reserve.count == 4 }
        reserve.stop()
        #expect(reserve.count == 0)
        #expect(reserve.take(for: masterPublicKey(keyring)) == nil)
        try await eventually { !reserve.isThreadRunning }
        #expect(reserve.count == 0)
        // Started again after a stop, it stays stopped (no thread); sealing makes its own keys.
        reserve.start()
        #expect(!reserve.isThreadRunning)
        #expect(reserve.count == 0)
        let plaintext = SecretBytes(copying: Array(#"{"email":"t@example.invalid"}"#.utf8))
        let index = keyring.blindIndex(userIdentifier: "000000.stopped.invalid")
        let sealed = try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index, reserve: reserve)
        #expect(try keyring.open(sealed) == plaintext)
    }

    /// A master key of small order: no keys can be made for it (sealing refuses it), none are kept, and the thread goes
    /// on to make keys for a usable one asked for next.
    @Test func aMasterKeyOfSmallOrderGetsNoKeysAndTheThreadGoesOn() async throws {
        let reserve = SealingKeyReserve(capacity: 4, idlePriority: false, .libsodium)
        defer { reserve.stop() }
        reserve.start()
        let smallOrder = [UInt8](repeating: 0, count: 32)
        #expect(reserve.take(for: smallOrder) == nil)
        // The thread tried, made nothing, forgot the key and parked again.
        try await eventually { reserve.isSleeping }
        #expect(reserve.count == 0)
        #expect(reserve.take(for: smallOrder) == nil)

        let keyring = Keyring.generate()
        #expect(reserve.take(for: masterPublicKey(keyring)) == nil)
        try await eventually { reserve.count == 4 }
        let keys = try #require(reserve.take(for: masterPublicKey(keyring)))
        #expect(keys.masterPublicKey == masterPublicKey(keyring))
    }
}
