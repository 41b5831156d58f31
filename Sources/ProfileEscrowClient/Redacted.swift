/// A credential or a ticket printed by mistake (`print(outcome)`, string interpolation, `dump`, a debugger's summary)
/// shows which fields are set, never their values.
extension AppleCredential: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "AppleCredential(redacted; code: \(authorizationCode != nil), name: \(fullName != nil), email: \(email != nil))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension SignInTicket: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "SignInTicket(redacted; escrow: \(escrowID != nil), profileRefused: \(profileRefused ?? "none"))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
