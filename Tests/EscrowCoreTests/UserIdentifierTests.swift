import Testing

@testable import EscrowCore

@Suite("UserIdentifier")
struct UserIdentifierTests {
    @Test(arguments: [
        "a", "000000.test0000000000000000000000000000.0001", "A-Z_a.z-09", String(repeating: "x", count: 255),
    ])
    func accepts(_ value: String) throws {
        #expect(UserIdentifier.isValid(value))
        try UserIdentifier.validate(value)
    }

    @Test(arguments: ["", String(repeating: "x", count: 256), "has space", "slash/", "é", "semi;colon", "nul\u{0}"])
    func refusesWithoutEchoing(_ value: String) {
        #expect(!UserIdentifier.isValid(value))
        #expect(throws: ProfileValidationError.self) { try UserIdentifier.validate(value) }
        do {
            try UserIdentifier.validate(value)
        } catch {
            #expect(error.code == .invalidValue && error.field == "userIdentifier")
            #expect(value.isEmpty || !error.message.contains(value) && !error.description.contains(value))
        }
    }
}
