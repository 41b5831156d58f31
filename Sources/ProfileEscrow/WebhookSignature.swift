import EscrowCrypto
import Foundation

/// Standard Webhooks signatures (SPEC §7):
/// `webhook-signature: v1,<base64 HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`.
public enum WebhookSignature {
    /// The `webhook-signature` header value for one delivery.
    public static func header(secret: WebhookSecret, id: String, timestamp: Int64, body: [UInt8]) -> String {
        "v1," + Data(mac(secret: secret, id: id, timestamp: timestamp, body: body)).base64EncodedString()
    }

    /// Whether `header` (possibly several space-separated `v1,<sig>` entries) holds a valid
    /// signature of this delivery. Compares in constant time. Does not check the timestamp's age.
    public static func verify(
        header: String,
        secret: WebhookSecret,
        id: String,
        timestamp: Int64,
        body: [UInt8]
    ) -> Bool {
        let expected = mac(secret: secret, id: id, timestamp: timestamp, body: body)
        for entry in header.split(separator: " ") where entry.hasPrefix("v1,") {
            if let given = Data(base64Encoded: String(entry.dropFirst(3))),
                Hashing.constantTimeEqual([UInt8](given), expected)
            {
                return true
            }
        }
        return false
    }

    static func mac(secret: WebhookSecret, id: String, timestamp: Int64, body: [UInt8]) -> [UInt8] {
        let message = Array("\(id).\(timestamp).".utf8) + body
        return secret.key.withUnsafeBytes { key in Hashing.hmacSHA256(key: key, message: message) }
    }
}
