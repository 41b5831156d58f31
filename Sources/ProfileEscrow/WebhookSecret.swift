import EscrowCrypto
import Foundation

/// A Standard Webhooks signing secret, configured as `whsec_<base64>`.
///
/// The key bytes live in a ``SecretBytes`` buffer (zeroed when released) and never reach a
/// `description`, a log or an error.
public struct WebhookSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The shortest key accepted, in bytes (Standard Webhooks' own secrets are 24 to 64 bytes).
    public static let minimumKeyBytes = 16
    /// The longest key accepted, in bytes.
    public static let maximumKeyBytes = 64

    let key: SecretBytes

    /// Parses `whsec_<base64>`. The error names what is wrong, never the secret.
    public init(_ text: String) throws(EscrowError) {
        let prefix = "whsec_"
        guard text.hasPrefix(prefix) else {
            throw EscrowError(.invalidConfiguration, "the webhook secret must start with 'whsec_' (whsec_<base64>)")
        }
        guard let decoded = Data(base64Encoded: String(text.dropFirst(prefix.count))) else {
            throw EscrowError(.invalidConfiguration, "the webhook secret is not valid base64 after 'whsec_'")
        }
        guard (Self.minimumKeyBytes...Self.maximumKeyBytes).contains(decoded.count) else {
            throw EscrowError(
                .invalidConfiguration,
                "the webhook secret must decode to \(Self.minimumKeyBytes) to \(Self.maximumKeyBytes) bytes"
            )
        }
        var bytes = [UInt8](decoded)
        key = SecretBytes(copying: bytes)
        for index in bytes.indices { bytes[index] = 0 }
    }

    /// The most secrets configured at once (during a rotation: the new one first, then the old ones).
    public static let maximumCount = 8

    /// Parses one or more space-separated `whsec_<base64>` secrets, the first one new: each delivery then
    /// carries one signature per secret, so a backend can rotate its secret without a failed delivery.
    /// The error names which secret is wrong (by position), never a secret.
    public static func list(_ text: String) throws(EscrowError) -> [WebhookSecret] {
        let items = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
        guard !items.isEmpty else {
            throw EscrowError(.invalidConfiguration, "no webhook secret: give whsec_<base64>")
        }
        guard items.count <= maximumCount else {
            throw EscrowError(
                .invalidConfiguration,
                "at most \(maximumCount) webhook secrets may be configured at once"
            )
        }
        var secrets: [WebhookSecret] = []
        for (index, item) in items.enumerated() {
            do {
                secrets.append(try WebhookSecret(String(item)))
            } catch {
                guard items.count > 1 else { throw error }
                throw EscrowError(
                    .invalidConfiguration,
                    "webhook secret \(index + 1) of \(items.count): \(error.message)"
                )
            }
        }
        return secrets
    }

    /// A fresh random secret in the `whsec_` form, for `profile-escrow` setup and tests.
    public static func generateText(byteCount: Int = 32) -> String {
        "whsec_" + Data(Hashing.randomBytes(count: byteCount)).base64EncodedString()
    }

    public var description: String { "WebhookSecret(redacted)" }
    public var debugDescription: String { description }
}
