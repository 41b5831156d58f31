import EscrowCore
import Hummingbird

/// The `{userIdentifier}` path parameter, checked against ``UserIdentifier`` before it goes
/// anywhere; a bad one is a 400 problem that does not echo it.
enum UserIdentifierParameter {
    static func require(_ context: some RequestContext) throws -> String {
        guard let value = context.parameters.get("userIdentifier"), UserIdentifier.isValid(value) else {
            throw Problem.invalidUserIdentifier
        }
        return value
    }
}
