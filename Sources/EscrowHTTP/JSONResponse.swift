import Foundation
import Hummingbird

/// JSON responses of the API: sorted keys, `Cache-Control: no-store` (some carry personal data).
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ object: [String: Any]) throws -> Response {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return make(status, bytes: [UInt8](data))
    }

    static func make(_ status: HTTPResponse.Status, bytes: [UInt8]) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-12-21T10:00:00.000Z`.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
