import Testing

@testable import EscrowCrypto

@Suite("CryptoError")
struct CryptoErrorTests {
    @Test(arguments: [
        (CryptoError.Code.keyringNotFound, "keyring_not_found"),
        (.keyringPermissions, "keyring_permissions"),
        (.keyringMalformed, "keyring_malformed"),
        (.keyringExists, "keyring_exists"),
        (.keyringIO, "keyring_io"),
        (.unknownKeyVersion, "unknown_key_version"),
        (.secretKeyUnavailable, "secret_key_unavailable"),
        (.keyVersionActive, "key_version_active"),
        (.ciphertextInvalid, "ciphertext_invalid"),
    ])
    func stableCodes(code: CryptoError.Code, rawValue: String) {
        #expect(code.rawValue == rawValue)
        #expect(code.description == rawValue)
    }

    @Test func descriptionIsGenericAndCodeBased() {
        let error = CryptoError(code: .keyVersionActive, message: "version 3 still wraps 12 escrows")
        #expect(error.description == "CryptoError(key_version_active)")
        #expect(!String(describing: error).contains("version 3"))
        #expect(error.message == "version 3 still wraps 12 escrows")
    }
}
