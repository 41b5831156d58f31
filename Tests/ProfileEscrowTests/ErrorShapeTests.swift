import EscrowCrypto
import ProfileEscrow
import Testing

@testable import EscrowCore

/// The public errors share CryptoError's shape: a description built from the code alone (logging an error
/// never leaks data), a separate operator message, a stable code.
@Suite("Error shape")
struct ErrorShapeTests {
    static let secret = "Testy McTestface testy@example.invalid 000000.fake.0001"

    @Test func descriptionsNameTheCodeOnly() throws {
        let store = EscrowStoreError(.busy, "held by pid 1 \(Self.secret)")
        let escrow = EscrowError(.notFound, "nothing for \(Self.secret)")
        let profile = ProfileValidationError(code: .invalidValue, field: "email", message: Self.secret)
        let json = try #require(Self.strictJSONError(#"{"a":1,"a":2}"#))
        #expect(store.description == "EscrowStoreError(store_busy)")
        #expect(escrow.description == "EscrowError(not_found)")
        #expect(profile.description == "ProfileValidationError(invalid_value)")
        #expect(json.description == "StrictJSONError(duplicate_key)")
        for error in [store, escrow, profile, json] as [any Error] {
            #expect(!"\(error)".contains("Testy") && !String(reflecting: error).contains("Testy"))
        }
        #expect(store.message.contains("pid 1"), "the operator's message is kept apart")
        #expect(json.message == "malformed JSON: duplicate key <key> at byte offset 7")
    }

    @Test func codesAreStable() {
        #expect(EscrowStoreError.Code.tokenExists.rawValue == "token_exists")
        #expect(EscrowError.Code.invalidConfiguration.rawValue == "invalid_configuration")
        #expect(ProfileValidationError.Code.bodyTooLarge.description == "body_too_large")
        #expect(StrictJSONError.Code.tooDeep.rawValue == "too_deep")
    }

    static func strictJSONError(_ text: String) -> StrictJSONError? {
        do {
            _ = try StrictJSON.parse(Array(text.utf8))
            return nil
        } catch {
            return error
        }
    }
}
