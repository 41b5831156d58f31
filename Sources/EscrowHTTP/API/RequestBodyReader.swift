import Foundation
import Hummingbird

#if canImport(Glibc)
import Glibc
#endif

/// Reads a request body up to a limit while it streams: a larger body is refused with `413` as soon as
/// it is known to be too large (from `Content-Length`, or after the limit is passed), never buffered.
enum RequestBodyReader {
    static func read(_ request: Request, limit: Int) async throws -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw tooLarge(limit)
        }
        var bytes: [UInt8] = []
        for try await buffer in request.body {
            guard bytes.count + buffer.readableBytes <= limit else { throw tooLarge(limit) }
            bytes.append(contentsOf: buffer.readableBytesView)
        }
        return bytes
    }

    /// Zeroes a body once it has been parsed and sealed, in a way the optimizer may not drop. The NIO
    /// buffers it was copied from, and the Swift strings parsed out of it, cannot be zeroed (see
    /// docs/threat_model.md).
    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            explicit_bzero(base, buffer.count)
        }
    }

    static func tooLarge(_ limit: Int) -> Problem {
        Problem(.contentTooLarge, code: "body_too_large", detail: "the request body must be at most \(limit) bytes")
    }

    /// Refuses a body whose media type is not `application/json` (parameters such as `charset` allowed).
    static func requireJSON(_ request: Request) throws {
        guard isJSON(request.headers[.contentType]) else {
            throw Problem(
                .unsupportedMediaType,
                code: "unsupported_media_type",
                detail: "the body must be application/json",
                headers: [.accept: "application/json"]
            )
        }
    }

    /// Whether a `Content-Type` value's media type, before any parameter, is `application/json` (any case, optional
    /// white space around it). On the UTF-8 bytes, with no string made: every capture checks it.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let bytes = contentType.utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let mediaType = bytes[..<(bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.endIndex)]
        guard let first = mediaType.firstIndex(where: { !isSpace($0) }),
            let last = mediaType.lastIndex(where: { !isSpace($0) })
        else { return false }
        // ASCII letters only are folded: `| 0x20` maps A-Z to a-z, and leaves "/" (0x2F) as it is.
        return mediaType[first...last].elementsEqual("application/json".utf8) { given, expected in
            given | (given >= UInt8(ascii: "A") && given <= UInt8(ascii: "Z") ? 0x20 : 0) == expected
        }
    }
}
