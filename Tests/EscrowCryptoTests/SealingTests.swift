import Testing

@testable import EscrowCrypto

@Suite("Sealing and opening")
struct SealingTests {
    let keyring = Keyring.generate()

    func seal(_ text: String, user: String = FakeUser.first, with keyring: Keyring? = nil) throws -> SealedEscrow {
        let keyring = keyring ?? self.keyring
        return try keyring.seal(
            plaintext: secret(text),
            id: .random(),
            blindIndex: keyring.blindIndex(userIdentifier: user)
        )
    }

    @Test func roundTrip() throws {
        let sealed = try seal("{\"givenName\":\"Test\"}")
        #expect(sealed.keyVersion == 1)
        #expect(sealed.publicKey.count == 32)
        #expect(sealed.sealedKey.count == 56 + 32 + 48)
        #expect(sealed.mac.count == 32)
        #expect(keyring.verify(sealed))
        #expect(string(try keyring.open(sealed)) == "{\"givenName\":\"Test\"}")
    }

    @Test(arguments: [0, 1, 7, 8, 63, 64, 1000, 16 * 1024])
    func roundTripAndPaddedLength(plaintextCount: Int) throws {
        let plaintext = SecretBytes.random(count: plaintextCount)
        let id = EscrowID.random()
        let sealed = try keyring.seal(
            plaintext: plaintext,
            id: id,
            blindIndex: keyring.blindIndex(userIdentifier: FakeUser.first)
        )
        // 56 binding bytes + plaintext, padded with at least one byte to a multiple of 64, plus the seal overhead.
        #expect(sealed.sealedProfile.count == ((56 + plaintextCount) / 64 + 1) * 64 + 48)
        #expect(try keyring.open(sealed) == plaintext)
    }

    @Test func lengthIsHiddenWithinABlock() throws {
        // With the 56 binding bytes, payloads of 8...71 bytes all pad to 128 bytes; 72 takes a third block.
        #expect(
            try seal(String(repeating: "a", count: 8)).sealedProfile.count
                == seal(String(repeating: "b", count: 71)).sealedProfile.count
        )
        #expect(
            try seal(String(repeating: "a", count: 1)).sealedProfile.count
                == seal(String(repeating: "b", count: 7)).sealedProfile.count
        )
        #expect(
            try seal(String(repeating: "a", count: 71)).sealedProfile.count
                < seal(String(repeating: "b", count: 72)).sealedProfile.count
        )
    }

    @Test func sealsDifferEachTime() throws {
        let id = EscrowID.random()
        let index = keyring.blindIndex(userIdentifier: FakeUser.first)
        let first = try keyring.seal(plaintext: secret("x"), id: id, blindIndex: index)
        let second = try keyring.seal(plaintext: secret("x"), id: id, blindIndex: index)
        #expect(first.publicKey != second.publicKey)
        #expect(first.sealedProfile != second.sealedProfile)
    }

    /// Flips every bit 0 of every byte of every stored byte field, one at a time.
    @Test(arguments: RowField.allCases)
    func everyByteFlipIsDetected(field: RowField) throws {
        let field = field.keyPath
        let sealed = try seal("")
        for position in sealed[keyPath: field].indices {
            var tampered = sealed
            tampered[keyPath: field][position] ^= 0x01
            #expect(!keyring.verify(tampered))
            #expect(cryptoErrorCode { try keyring.open(tampered) } == .ciphertextInvalid, "byte \(position)")
        }
    }

    @Test(arguments: RowField.allCases)
    func truncationAndExtensionAreDetected(field: RowField) throws {
        let field = field.keyPath
        let sealed = try seal("x")
        var truncated = sealed
        truncated[keyPath: field].removeLast()
        #expect(cryptoErrorCode { try keyring.open(truncated) } == .ciphertextInvalid)
        var extended = sealed
        extended[keyPath: field].append(0)
        #expect(cryptoErrorCode { try keyring.open(extended) } == .ciphertextInvalid)
        var emptied = sealed
        emptied[keyPath: field] = []
        #expect(cryptoErrorCode { try keyring.open(emptied) } == .ciphertextInvalid)
    }

    @Test func changedBindingsAreDetected() throws {
        let sealed = try seal("x")
        var otherID = sealed
        otherID.id = .random()
        var otherIndex = sealed
        otherIndex.blindIndex = keyring.blindIndex(userIdentifier: FakeUser.second)
        var otherVersion = sealed
        otherVersion.keyVersion = 2
        var zeroVersion = sealed
        zeroVersion.keyVersion = 0
        for tampered in [otherID, otherIndex, otherVersion, zeroVersion] {
            #expect(!keyring.verify(tampered))
            #expect(cryptoErrorCode { try keyring.open(tampered) } == .ciphertextInvalid)
        }
    }

    /// An attacker who holds the row key (but no master secret) moves ciphertexts between rows and fixes the MAC:
    /// the bindings inside the sealed plaintexts still catch it.
    @Test func swappedCiphertextsWithValidMACAreDetected() throws {
        let victim = try seal("victim profile")
        let other = try seal("other profile", user: FakeUser.second)
        let sameUser = try seal("same user, other escrow")

        func forged(_ row: SealedEscrow) -> SealedEscrow {
            var row = row
            row.mac = keyring.rowMAC(row)
            #expect(keyring.verify(row))
            return row
        }
        var wholeBoxes = victim  // another user's key, profile and public key under the victim's id and index
        wholeBoxes.publicKey = other.publicKey
        wholeBoxes.sealedProfile = other.sealedProfile
        wholeBoxes.sealedKey = other.sealedKey
        var profileOnly = victim
        profileOnly.sealedProfile = other.sealedProfile
        var keyOnly = victim
        keyOnly.sealedKey = other.sealedKey
        var swappedBoxes = victim
        swappedBoxes.sealedProfile = victim.sealedKey
        swappedBoxes.sealedKey = victim.sealedProfile
        var sameUserOtherEscrow = victim  // same blind index, different escrow id
        sameUserOtherEscrow.publicKey = sameUser.publicKey
        sameUserOtherEscrow.sealedProfile = sameUser.sealedProfile
        sameUserOtherEscrow.sealedKey = sameUser.sealedKey
        var otherIdentity = other  // the other row's boxes relabelled with the victim's id, index kept
        otherIdentity.id = victim.id

        for row in [wholeBoxes, profileOnly, keyOnly, swappedBoxes, sameUserOtherEscrow, otherIdentity] {
            let error = cryptoError { try keyring.open(forged(row)) }
            #expect(error?.code == .ciphertextInvalid)
            #expect(error.map { !$0.message.contains(victim.id.hex) && !$0.message.contains(other.id.hex) } == true)
        }
        // The originals still open.
        #expect(string(try keyring.open(victim)) == "victim profile")
        #expect(string(try keyring.open(other)) == "other profile")
    }

    @Test func wrongKeyringIsRejected() throws {
        let sealed = try seal("x")
        let stranger = Keyring.generate()
        #expect(!stranger.verify(sealed))
        #expect(cryptoErrorCode { try stranger.open(sealed) } == .ciphertextInvalid)
    }

    @Test func publicOnlyKeyringSealsButCannotOpen() throws {
        let capture = keyring.publicOnly()
        #expect(capture.isPublicOnly)
        #expect(!keyring.isPublicOnly)
        #expect(capture.keys.allSatisfy { !$0.hasSecretKey })
        #expect(capture.keys.map(\.publicKey) == keyring.keys.map(\.publicKey))
        #expect(
            capture.blindIndex(userIdentifier: FakeUser.first) == keyring.blindIndex(userIdentifier: FakeUser.first)
        )

        let sealed = try seal("captured on a capture-only node", with: capture)
        #expect(capture.verify(sealed))
        #expect(cryptoErrorCode { try capture.open(sealed) } == .secretKeyUnavailable)
        #expect(string(try keyring.open(sealed)) == "captured on a capture-only node")
        // A tampered row is still reported as tampered, not as a missing key.
        var tampered = sealed
        tampered.mac[0] ^= 1
        #expect(cryptoErrorCode { try capture.open(tampered) } == .ciphertextInvalid)
    }

    @Test func errorsAreGeneric() throws {
        var sealed = try seal("x")
        sealed.sealedProfile[10] ^= 1
        let error = try #require(cryptoError { try keyring.open(sealed) })
        #expect(String(describing: error) == "CryptoError(ciphertext_invalid)")
        #expect(!error.message.contains(sealed.id.hex))
        #expect(!error.message.contains(sealed.blindIndex.prefixHex))
    }

    /// Expected MAC computed once in Python: HMAC-SHA-512 truncated to 32 bytes (crypto_auth) over the documented
    /// MAC input, key bytes(range(32, 64)).
    @Test func macKnownAnswer() throws {
        let keyring = fixedKeyKeyring()
        let row = SealedEscrow(
            id: try #require(EscrowID(bytes: Array(0..<16))),
            blindIndex: keyring.blindIndex(userIdentifier: FakeUser.first),
            keyVersion: 1,
            publicKey: Array(0x40..<0x60),
            sealedProfile: Array(0..<112),
            sealedKey: Array(repeating: 0xaa, count: 136),
            mac: []
        )
        let expected = bytes(hex: "a664a603c70d2ae2f03054f0300dc4c99ca2316492e04ee35235222738e18930")
        #expect(keyring.rowMAC(row) == expected)
        var withMAC = row
        withMAC.mac = expected
        #expect(keyring.verify(withMAC))
    }
}
