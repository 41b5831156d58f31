extension EscrowPlaintext {
    /// The body POSTed to the registration backend:
    ///
    /// `{"escrowId":…,"userIdentifier":…,"fullName":{…}|null,"email":…|null,"isPrivateEmail":…,`
    /// `"realUserStatus":…|null,"capturedAt":"2026-11-21T10:00:00Z","verified":…,"attempt":3}`
    ///
    /// with `"emailForwarding":true|false` after `verified` once an Apple notification has reported it
    /// (absent before, so bodies of escrows without one are unchanged), then `"emailVerified":true|false` when the
    /// capture recorded whether Apple signed the email (a web or app sign-in; absent otherwise), then
    /// `"transferSub":…` when the sign-in's token carried Apple's `transfer_sub` (absent otherwise), then
    /// `"appleTokens":{"refreshToken":…}` or `{"error":…}` when the sign-in's authorization code was exchanged here
    /// (absent otherwise);
    /// in that order, without whitespace; `fullName`, when present, has all six members (`null` for an
    /// absent component); `capturedAt` is ISO 8601 in UTC with seconds precision. The bytes are signed
    /// (Standard Webhooks) exactly as returned.
    public func backendJSON(escrowId: String, attempt: Int, appleTokens: AppleTokens? = nil) -> [UInt8] {
        CanonicalJSON.bytes(
            of: ReplayBody(plaintext: self, escrowId: escrowId, attempt: attempt, appleTokens: appleTokens)
        )
    }

    /// The decrypted profile answered by `POST /v1/escrows/{userIdentifier}/replay`: the members
    /// of ``backendJSON(escrowId:attempt:)`` without `escrowId` and `attempt`, in the same style.
    public func profileJSON(appleTokens: AppleTokens? = nil) -> [UInt8] {
        CanonicalJSON.bytes(of: ReplayBody(plaintext: self, escrowId: nil, attempt: nil, appleTokens: appleTokens))
    }
}

/// The `appleTokens` member of a replay body: what the exchange of the sign-in's authorization code gave.
public enum AppleTokens: Sendable, Equatable, Encodable {
    /// `{"refreshToken":…}`: the credential the backend keeps to revoke the user's authorization at Apple.
    case refreshToken(String)
    /// `{"error":…}`: Apple's error code, or `exchange_timed_out`.
    case error(String)

    private enum Member: String, CodingKey { case refreshToken, error }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Member.self)
        switch self {
        case .refreshToken(let token): try container.encode(token, forKey: .refreshToken)
        case .error(let code): try container.encode(code, forKey: .error)
        }
    }
}

/// The replay bodies: the backend body with `escrowId` and `attempt`, the HTTP profile body without.
private struct ReplayBody: CanonicalJSONDocument {
    let plaintext: EscrowPlaintext
    let escrowId: String?
    let attempt: Int?
    let appleTokens: AppleTokens?

    func write<Sink: CanonicalJSONSink>(to writer: inout CanonicalJSONWriter<Sink>) {
        let profile = plaintext.profile
        writer.beginObject()
        if let escrowId {
            writer.key("escrowId")
            writer.string(escrowId)
        }
        writer.key("userIdentifier")
        writer.string(profile.userIdentifier)
        writer.key("fullName")
        if let fullName = profile.fullName {
            writer.beginObject()
            for (key, component) in zip(PersonName.keys, fullName.components) {
                writer.key(key)
                writer.stringOrNull(component)
            }
            writer.endObject()
        } else {
            writer.null()
        }
        writer.key("email")
        writer.stringOrNull(profile.email)
        writer.key("isPrivateEmail")
        writer.bool(profile.isPrivateEmail)
        writer.key("realUserStatus")
        writer.stringOrNull(profile.realUserStatus?.rawValue)
        writer.key("capturedAt")
        writer.string(Timestamp.seconds(unixSeconds: plaintext.capturedAtUnixSeconds))
        writer.key("verified")
        writer.bool(plaintext.verified)
        if let emailForwarding = plaintext.emailForwarding {
            writer.key("emailForwarding")
            writer.bool(emailForwarding)
        }
        if let emailVerified = plaintext.emailVerified {
            writer.key("emailVerified")
            writer.bool(emailVerified)
        }
        if let transferSub = plaintext.transferSub {
            writer.key("transferSub")
            writer.string(transferSub)
        }
        if let appleTokens {
            writer.key("appleTokens")
            writer.beginObject()
            switch appleTokens {
            case .refreshToken(let token):
                writer.key("refreshToken")
                writer.string(token)
            case .error(let code):
                writer.key("error")
                writer.string(code)
            }
            writer.endObject()
        }
        if let attempt {
            writer.key("attempt")
            writer.integer(Int64(attempt))
        }
        writer.endObject()
    }
}
