import Hummingbird

/// The `{userIdentifier}` path parameter, checked against SPEC §3 (`[0-9A-Za-z._-]{1,255}`) before
/// it goes anywhere; a bad one is a 400 problem that does not echo it.
enum UserIdentifierParameter {
    static func require(_ context: some RequestContext) throws -> String {
        guard let value = context.parameters.get("userIdentifier"), isValid(value) else {
            throw Problem.invalidUserIdentifier
        }
        return value
    }

    static func isValid(_ value: String) -> Bool {
        (1...255).contains(value.utf8.count)
            && value.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}
