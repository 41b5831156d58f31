public import EscrowCore
import Foundation
public import Hummingbird
import ProfileEscrow

/// An RFC 9457 problem: every error of the HTTP API is answered as `application/problem+json` with
/// `type`, `title`, `status`, `detail`, a stable `code` and, for validation, the `field` path.
///
/// `detail` is written by this module and never holds a name, email, user identifier or token.
public struct Problem: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    /// Stable, machine-readable, snake_case.
    public var code: String
    public var detail: String
    /// The JSON path of the offending member, for validation errors.
    public var field: String?
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`, `Allow`).
    public var headers: HTTPFields

    public init(
        _ status: HTTPResponse.Status,
        code: String,
        detail: String,
        field: String? = nil,
        headers: HTTPFields = [:]
    ) {
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.headers = headers
    }

    public var description: String { "Problem(\(status.code) \(code))" }

    /// `urn:profile-escrow:problem:<code>`: one URI per code, documented in `docs/openapi.yaml`.
    public var type: String { "urn:profile-escrow:problem:\(code)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var members: [String: JSONValue] = [
            "type": .string(type), "title": .string(status.reasonPhrase), "status": .integer(status.code),
            "detail": .string(detail), "code": .string(code),
        ]
        if let field { members["field"] = .string(field) }
        let data = JSONResponse.encode(members)
        var headers = headers
        headers[.contentType] = "application/problem+json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension Problem {
    /// An operator's input refused: `400` naming the field, never the value.
    init(_ error: OperatorActions.InputError) {
        self.init(.badRequest, code: error.code, detail: error.message, field: error.field)
    }

    static func unauthorized(_ detail: String = "a valid bearer token is required") -> Problem {
        Problem(
            .unauthorized,
            code: "unauthorized",
            detail: detail,
            headers: [.wwwAuthenticate: "Bearer realm=\"profile-escrow\""]
        )
    }

    static func forbidden(_ scope: String) -> Problem {
        Problem(.forbidden, code: "forbidden", detail: "this token lacks the \(scope) scope")
    }

    static let notFound = Problem(.notFound, code: "not_found", detail: "no escrow is held for this user")

    static let invalidUserIdentifier = Problem(
        .badRequest,
        code: "invalid_user_identifier",
        detail: "userIdentifier must be 1-255 bytes of [0-9A-Za-z._-]",
        field: "userIdentifier"
    )
}

extension Problem: ClassifiedFailure {
    /// A problem made here already has its status; its kind is the one of that status, for the console's page.
    public var failureKind: FailureKind {
        switch status.code {
        case 401: .unauthorized
        case 403: .forbidden
        case 404: .notFound
        case 409: .conflict
        case 413: .tooLarge
        case 503: .unavailable
        case 400..<500: .badInput
        default: .internal
        }
    }
}
