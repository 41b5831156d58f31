import EscrowCore
import Foundation

/// What a sign-in whose id_token was verified gives, the same from Apple's callback and from an app's native capture:
/// who signed in (the token's claims alone), the authorization code, the profile to escrow or why none is.
struct VerifiedSignIn {
    let identity: AppleSignInIdentity
    let authorizationCode: String?
    /// Nil for a returning user (Apple gives the name once) or when `refusal` says why the profile was not taken.
    let profile: Profile?
    /// The profile rule the given name or email broke: the sign-in goes on, the app's backend is told.
    let refusal: String?

    /// The email the sign-in gives and whether Apple signed it: the id_token's `email` (verified, unless the token
    /// itself says `email_verified: false`) wins; an email only the browser's `user` field or the app gave is never
    /// verified.
    var email: (address: String?, verified: Bool?) {
        if let email = identity.email { return (email, identity.emailVerified ?? true) }
        guard let email = profile?.email else { return (nil, nil) }
        return (email, false)
    }

    /// The redeem answer but its `escrowId` (known once captured): sealed under the ticket, given to the app's
    /// backend once.
    func result(returnName: String, appState: String?) -> [String: JSONValue] {
        let email = self.email
        return [
            "userIdentifier": .string(identity.userIdentifier), "authorizationCode": .string(authorizationCode),
            "email": .string(email.address), "emailVerified": email.verified.map { .bool($0) } ?? .null,
            "isPrivateEmail": (identity.email == nil ? profile?.isPrivateEmail : identity.isPrivateEmail)
                .map { .bool($0) } ?? .null,
            "realUserStatus": .string(identity.realUserStatus.flatMap(AppleVerifier.realUserStatus)?.rawValue),
            "return": .string(returnName.isEmpty ? nil : returnName), "profileRefused": .string(refusal),
            "appState": .string(appState), "transferSub": .string(identity.transferSub),
        ]
    }
}
