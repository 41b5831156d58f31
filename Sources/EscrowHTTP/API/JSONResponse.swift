import EscrowCore
import Foundation
import Hummingbird

/// A member value of a JSON response: every response of the API is one flat object.
enum JSONValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case null

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .integer(Int64(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    /// `value`, or `null` when it is `nil`.
    static func string(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    static func integer(_ value: Int?) -> JSONValue { value.map { .integer(Int64($0)) } ?? .null }
    /// A time as RFC 3339 in UTC with milliseconds, e.g. `2026-12-21T10:00:00.000Z`, or `null`.
    static func timestamp(_ date: Date?) -> JSONValue { .string(date.map(Timestamp.milliseconds)) }
}

/// JSON responses of the API: sorted keys, `Cache-Control: no-store` (some carry personal data).
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ members: [String: JSONValue]) -> Response {
        make(status, bytes: encode(members))
    }

    /// A response shared with the CLI (an `Encodable` such as `EscrowStatus`): compact, keys sorted.
    static func make(_ status: HTTPResponse.Status, encoding value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return make(status, bytes: Array(try encoder.encode(value)))
    }

    static func make(_ status: HTTPResponse.Status, bytes: [UInt8]) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    /// One flat object, keys sorted, no whitespace (written by hand: `JSONSerialization` cost more than
    /// the rest of a capture's response).
    static func encode(_ members: [String: JSONValue]) -> [UInt8] {
        var writer = CanonicalJSONWriter(sink: CanonicalJSONArraySink())
        writer.beginObject()
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            writer.key(name)
            switch value {
            case .string(let string): writer.string(string)
            case .integer(let integer): writer.integer(integer)
            case .bool(let bool): writer.bool(bool)
            case .null: writer.null()
            }
        }
        writer.endObject()
        return writer.sink.bytes
    }
}
