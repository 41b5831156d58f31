public import EscrowCrypto
public import Foundation

/// What is sealed for an escrow: the profile and the facts of its capture.
///
/// ## Profile plaintext encoding (version 1)
///
/// The profile plaintext (the bytes that are padded with `sodium_pad` and sealed with `crypto_box_seal`) is
/// one JSON object (RFC 8259), UTF-8 without a byte order mark, with no whitespace outside strings, whose
/// members appear in exactly this order. A member whose value is absent is omitted (never `null`):
///
/// | # | member           | JSON value                                           | present           |
/// |---|------------------|------------------------------------------------------|-------------------|
/// | 1 | `v`              | the number `1` (the format version)                  | always            |
/// | 2 | `userIdentifier` | string                                               | always            |
/// | 3 | `fullName`       | object, see below                                    | when it has a component |
/// | 4 | `email`          | string                                               | when present      |
/// | 5 | `isPrivateEmail` | `true` or `false`                                    | always            |
/// | 6 | `realUserStatus` | `"unsupported"`, `"unknown"` or `"likelyReal"`       | when present      |
/// | 7 | `verified`       | `true` or `false` (captured with a verified Apple identity token) | always |
/// | 8 | `capturedAt`     | integer: Unix time in seconds (UTC), rounded down    | always            |
/// | 9 | `emailForwarding`| `true` or `false`: whether Apple's private relay forwards to `email` | when an Apple notification reported it |
/// | 10 | `emailVerified` | `true`: Apple signed `email` (an identity token's claim, or a notification); `false`: only the browser's or app's words gave it | when a sign-in or a notification recorded where `email` came from |
/// | 11 | `transferSub`   | string: Apple's `transfer_sub` claim (the user under the team the app was transferred from) | when a sign-in's token carried it |
///
/// `fullName` is an object whose members appear in the order `givenName`, `familyName`, `middleName`,
/// `namePrefix`, `nameSuffix`, `nickname`, each a string, each omitted when absent; it is never empty (a name
/// without components is omitted as a whole).
///
/// Strings: `"` is written `\"`, `\` is written `\\`, and every code point below U+0020 is written `\u00XX`
/// with two lowercase hexadecimal digits; every other code point (including `/`, U+007F and all non-ASCII)
/// is written as its raw UTF-8 bytes. No other escape is produced. Integers are decimal ASCII with a leading
/// `-` when negative, without leading zeros, fraction or exponent. Values are the validated profile of
/// The profile rules: name components NFC-normalized and trimmed, the email as given.
///
/// Example (one line, 262 bytes):
///
/// ```
/// {"v":1,"userIdentifier":"000000.test0000000000000000000000000000.0001","fullName":{"givenName":"Testy",
/// "familyName":"McTestface"},"email":"canary-0001@example.invalid","isPrivateEmail":false,
/// "realUserStatus":"likelyReal","verified":false,"capturedAt":1763719200}
/// ```
///
/// The encoding is deterministic: the same content always gives the same bytes, so the content tag computed
/// over them identifies a repeated capture. A decoder accepts only `"v":1`, refuses duplicate keys, unknown
/// members and wrong types, accepts members in any order, and validates the profile again.
///
/// `emailForwarding` was added without a version change: it is absent until an Apple `email-disabled` or
/// `email-enabled` notification sets it, so every plaintext written before it (and every capture's content
/// tag) is unchanged, and a decoder of this version reads both. `emailVerified` and `transferSub` were added the
/// same way.
public struct EscrowPlaintext: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The validated profile.
    public let profile: Profile
    /// Whether the capture was proven by an Apple identity token (verified capture).
    public let verified: Bool
    /// When the profile was captured, in whole seconds (the initializer rounds down, as the encoding does).
    public let capturedAt: Date
    /// Whether Apple's private relay forwards mail to `email` (`email-enabled` / `email-disabled`
    /// notifications); nil until a notification reports it.
    public let emailForwarding: Bool?
    /// Where `email` came from: `true` when Apple signed it (the identity token's `email` claim, or a verified
    /// notification), `false` when only the browser's `user` field or the app gave it; nil when not recorded (a
    /// capture without an identity token says nothing of its email's origin).
    public let emailVerified: Bool?
    /// Apple's `transfer_sub` claim of the sign-in that captured it: the user's identifier under the team the app was
    /// transferred from, for the backend to find its existing account; nil when the token had none.
    public let transferSub: String?

    /// - Parameter capturedAt: rounded down to a whole second, so that ``encoded()`` and
    ///   ``decode(_:)`` give back an equal value.
    public init(
        profile: Profile,
        verified: Bool,
        capturedAt: Date,
        emailForwarding: Bool? = nil,
        emailVerified: Bool? = nil,
        transferSub: String? = nil
    ) {
        self.profile = profile
        self.verified = verified
        self.capturedAt = Date(timeIntervalSince1970: TimeInterval(Self.unixSeconds(capturedAt)))
        self.emailForwarding = emailForwarding
        // Without an email there is no origin to tell.
        self.emailVerified = profile.email == nil ? nil : emailVerified
        self.transferSub = transferSub
    }

    /// The canonical encoding (see above), written straight into a `sodium_malloc`'ed buffer: the length
    /// is measured first, so no intermediate copy of the profile is left behind in ordinary memory.
    public func encoded() -> SecretBytes {
        let document = CanonicalPlaintext(plaintext: self)
        let secret = SecretBytes(count: CanonicalJSON.count(of: document))
        secret.withUnsafeMutableBytes { buffer in
            CanonicalJSON.write(document, into: buffer)
        }
        return secret
    }

    public var description: String { "EscrowPlaintext(redacted)" }
    public var debugDescription: String { "EscrowPlaintext(redacted)" }
    public var customMirror: Mirror { Mirror(self, children: EmptyCollection<Mirror.Child>()) }

    /// `capturedAt` as Unix seconds.
    var capturedAtUnixSeconds: Int64 {
        Self.unixSeconds(capturedAt)
    }

    /// Rounds down to whole seconds, clamped to the range of `Int64`.
    private static func unixSeconds(_ date: Date) -> Int64 {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite else { return seconds < 0 ? .min : .max }
        return Int64(exactly: seconds) ?? (seconds < 0 ? .min : .max)
    }
}

/// The canonical plaintext document, written the same way for measuring and for writing.
private struct CanonicalPlaintext: CanonicalJSONDocument {
    let plaintext: EscrowPlaintext

    func write<Sink: CanonicalJSONSink>(to writer: inout CanonicalJSONWriter<Sink>) {
        let profile = plaintext.profile
        writer.beginObject()
        writer.key("v")
        writer.integer(EscrowPlaintext.formatVersion)
        writer.key("userIdentifier")
        writer.string(profile.userIdentifier)
        if let fullName = profile.fullName {
            writer.key("fullName")
            writer.beginObject()
            for (key, component) in zip(PersonName.keys, fullName.components) {
                if let component {
                    writer.key(key)
                    writer.string(component)
                }
            }
            writer.endObject()
        }
        if let email = profile.email {
            writer.key("email")
            writer.string(email)
        }
        writer.key("isPrivateEmail")
        writer.bool(profile.isPrivateEmail)
        if let realUserStatus = profile.realUserStatus {
            writer.key("realUserStatus")
            writer.string(realUserStatus.rawValue)
        }
        writer.key("verified")
        writer.bool(plaintext.verified)
        writer.key("capturedAt")
        writer.integer(plaintext.capturedAtUnixSeconds)
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
        writer.endObject()
    }
}
