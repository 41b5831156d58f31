import Hummingbird

/// The fields of a console form (`application/x-www-form-urlencoded`, at most ``limit`` bytes), decoded by
/// Hummingbird's `URLEncodedFormDecoder`. Every form carries the session's CSRF token; each form reads the fields it
/// has (a token, a reason, a user identifier, the escrow list's filter carried into a bulk requeue) and ignores others.
struct ConsoleForm: Decodable, Sendable {
    static let limit = 8 * 1024

    var csrf: String?
    var token: String?
    var reason: String?
    var userIdentifier: String?
    var state: String?
    var minAgeSeconds: String?
    var keyVersion: String?
    var deadCode: String?
    var minAttempts: String?

    /// The escrow list's filter as the form carries it (``OperatorActions/Query/filterNames``), each field given.
    var filter: [(String, String)] {
        let fields = [
            ("state", state), ("minAgeSeconds", minAgeSeconds), ("keyVersion", keyVersion), ("deadCode", deadCode),
            ("minAttempts", minAttempts),
        ]
        return fields.compactMap { name, value in value.map { (name, $0) } }
    }

    /// The request's form; a `415` problem when the body is not a form, `413` past ``limit``, `400` when malformed.
    static func read(_ request: Request) async throws -> ConsoleForm {
        let type = request.headers[.contentType]?.split(separator: ";").first.map { $0.trimmingSpaces().lowercased() }
        guard type == "application/x-www-form-urlencoded" else {
            throw Problem(.unsupportedMediaType, code: "unsupported_media_type", detail: "a form was expected")
        }
        let body = try await RequestBodyReader.read(request, limit: limit)
        do {
            return try URLEncodedFormDecoder().decode(ConsoleForm.self, from: String(decoding: body, as: UTF8.self))
        } catch {
            throw Problem(.badRequest, code: "invalid_form", detail: "the form is malformed")
        }
    }
}
