import EscrowCrypto
import Foundation

/// Standard Webhooks signatures:
/// `webhook-signature: v1,` then base64 of HMAC-SHA256(key, webhook id `.` webhook timestamp `.` body), one
/// space-separated entry per configured secret (several during a secret rotation).
public enum WebhookSignature {
    /// The `webhook-signature` header value for one delivery.
    public static func header(secret: WebhookSecret, id: String, timestamp: Int64, body: [UInt8]) -> String {
        header(secrets: [secret], id: id, timestamp: timestamp, body: body)
    }

    /// The `webhook-signature` header value for one delivery, one `v1,` entry per secret, in order.
    public static func header(secrets: [WebhookSecret], id: String, timestamp: Int64, body: [UInt8]) -> String {
        secrets.map {
            "v1," + Data(mac(secret: $0, id: id, timestamp: timestamp, body: body)).base64EncodedString()
        }.joined(separator: " ")
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
