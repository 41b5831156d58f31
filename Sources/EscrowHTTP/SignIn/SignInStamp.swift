import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

/// The service's stamp on a callback it could not complete (the store did not take it): when it first received the
/// form, whether the id_token verified then, bound to the state and a hash of the form under the deployment's
/// keyring. A resubmission carrying it (the `503` page's `pe_stamp` field) is judged by that time for
/// ``window``, so a store that is down longer than an attempt's life loses nothing the browser holds.
struct SignInStamp: Equatable {
    static let field = "pe_stamp"
    /// How long a stamp is honoured (seconds): the attempts' ``SignInAttempt/resubmissionGrace``.
    static let window = SignInAttempt.resubmissionGrace

    let receivedAt: Date
    /// Whether the id_token verified when the form was first received (then its `exp` is judged at that time too).
    let tokenVerified: Bool

    /// `1.<milliseconds>.<0|1>.<MAC in base64url>`.
    func encoded(_ escrow: Escrow, stateHash: [UInt8], form: SignInForm) -> String {
        let milliseconds = Timestamp.unixMilliseconds(receivedAt)
        let mac = escrow.serviceStamp(Self.message(stateHash, form, milliseconds, tokenVerified))
        return "1.\(milliseconds).\(tokenVerified ? 1 : 0).\(Base64URL.encode(mac))"
    }

    /// The stamp `text` carries when the service made it for this state and form and it is still honoured at
    /// `now`; nil otherwise (a forged, changed or old stamp counts as none).
    static func verify(
        _ text: String,
        _ escrow: Escrow,
        stateHash: [UInt8],
        form: SignInForm,
        now: Date
    )
        -> SignInStamp?
    {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "1", let milliseconds = Int64(parts[1]), parts[2] == "0" || parts[2] == "1"
        else { return nil }
        let tokenVerified = parts[2] == "1"
        let expected = Base64URL.encode(
            escrow.serviceStamp(message(stateHash, form, milliseconds, tokenVerified))
        )
        guard Hashing.constantTimeEqual(Array(expected.utf8), Array(parts[3].utf8)) else { return nil }
        let receivedAt = Timestamp.date(unixMilliseconds: milliseconds)
        let age = now.timeIntervalSince(receivedAt)
        guard age >= -60, age <= window else { return nil }
        return SignInStamp(receivedAt: receivedAt, tokenVerified: tokenVerified)
    }

    /// What the MAC covers: the state's hash, a hash of every field but the stamp (in order), the time, the flag.
    static func message(_ stateHash: [UInt8], _ form: SignInForm, _ milliseconds: Int64, _ verified: Bool) -> [UInt8] {
        var fields: [UInt8] = []
        for field in form.fields where field.name != Self.field {
            fields += Array(field.name.utf8) + [0] + Array(field.value.utf8) + [0]
        }
        var message = Array("pe-signin-stamp-1".utf8) + [0] + stateHash + Hashing.blake2b256(fields)
        withUnsafeBytes(of: milliseconds.bigEndian) { message += $0 }
        message.append(verified ? 1 : 0)
        return message
    }
}
