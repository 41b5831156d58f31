#if canImport(AuthenticationServices)
public import AuthenticationServices

@available(iOS 13, macOS 10.15, tvOS 13, watchOS 6, visionOS 1, *)
extension AppleCredential {
    /// The fields of Apple's answer to an `ASAuthorizationAppleIDRequest`; nil without an identity token (which
    /// Apple sends with every successful authorization).
    public init?(_ credential: ASAuthorizationAppleIDCredential) {
        guard let token = credential.identityToken.flatMap({ String(data: $0, encoding: .utf8) }) else { return nil }
        let name = credential.fullName.map { Name($0) }
        self.init(
            user: credential.user,
            identityToken: token,
            authorizationCode: credential.authorizationCode.flatMap { String(data: $0, encoding: .utf8) },
            fullName: name?.isEmpty == false ? name : nil,
            email: credential.email,
            realUserStatus: Self.realUserStatus(credential.realUserStatus)
        )
    }

    private static func realUserStatus(_ status: ASUserDetectionStatus) -> String? {
        switch status {
        case .likelyReal: "likelyReal"
        case .unknown: "unknown"
        case .unsupported: "unsupported"
        @unknown default: nil
        }
    }
}
#endif
