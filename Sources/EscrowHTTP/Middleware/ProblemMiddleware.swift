import EscrowCore
import EscrowCrypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ProfileEscrow

/// Turns every error into an `application/problem+json` response (RFC 9457) with a stable `code`:
/// never a stack trace, never an error's own text unless it is one of ours (PII-free by design).
/// Also answers `405` (with `Allow`) for a known path with another method.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The router's routes, for `405` answers; nil answers every unrouted request `404` (routes mounted in another
    /// application, whose router is not ours to read).
    var allowedMethods: AllowedMethods? = nil

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let problem = problem(for: error, request: request, context: context)
            if problem.status.code >= 500 {
                context.logger.error(
                    "request failed",
                    metadata: ["code": "\(problem.code)", "error": "\(Self.describe(error))"]
                )
            }
            return try problem.response(from: request, context: context)
        }
    }

    func problem(for error: any Error, request: Request, context: Context) -> Problem {
        switch error {
        case let problem as Problem:
            return problem
        case let error as NIOTooManyBytesError:
            guard let limit = error.maxBytes else {
                return Problem(.contentTooLarge, code: "body_too_large", detail: "the request body is too large")
            }
            return RequestBodyReader.tooLarge(limit)
        case is HTTPParserError:
            // Malformed HTTP in a body (a `Transfer-Encoding` such as `xchunked`, a bad chunk): the client's fault.
            return Problem(.badRequest, code: "malformed_request", detail: "the request is not valid HTTP/1.1")
        case is ConnectionDeadlineExceeded:
            return Problem(
                .requestTimeout,
                code: "request_timeout",
                detail: "the request did not arrive within its deadline",
                headers: [.connection: "close"]
            )
        case let error as HTTPError where error.status == .notFound:
            if let allowed = allowedMethods?.methods(path: request.uri.path), !allowed.contains(request.method) {
                return Problem(
                    .methodNotAllowed,
                    code: "method_not_allowed",
                    detail: "this path does not answer this method",
                    headers: [.allow: allowed.map(\.rawValue).joined(separator: ", ")]
                )
            }
            return Problem(.notFound, code: "route_not_found", detail: "no such route")
        case let error as any HTTPResponseError:
            let code = error.status.reasonPhrase.lowercased().replacingOccurrences(of: " ", with: "_")
            return Problem(error.status, code: code, detail: error.status.reasonPhrase)
        default:
            return Self.problem(for: error, kind: FailureKind(of: error))
        }
    }

    /// The library's errors: the status is their kind's (``FailureKind/httpStatus``), the code and the detail their
    /// own, PII-free by design. Anything else is a `500` that says nothing of it.
    static func problem(for error: any Error, kind: FailureKind) -> Problem {
        let status = HTTPResponse.Status(code: kind.httpStatus)
        switch (error, kind) {
        case (_, .internal):
            return Problem(.internalServerError, code: "internal_error", detail: "the request failed")
        case (let error as OperatorActions.InputError, _):
            return Problem(error)
        case (let error as ProfileValidationError, _):
            // The parser's message names the limit it applied (the configured one), never a constant.
            return Problem(status, code: error.code.rawValue, detail: error.message, field: error.field)
        case (let error as EscrowError, .damaged):
            // The user's escrow is dead for good (moved there now, or before): a conflict with its state that no
            // retry resolves, not a server fault. Say what a client can do about it.
            return Problem(
                status,
                code: "ciphertext_invalid",
                detail: error.message + "; retrying does not help: erase it (DELETE) and capture the profile again"
            )
        case (let error as EscrowError, _):
            // This node's keyring cannot do it now (out of date, or without that version): another node, or this one
            // once its keyring is reloaded, can; a concurrent writer: the next attempt can. Nothing was lost.
            let retryAfter = kind == .unavailable ? "5" : error.code == .conflict ? "1" : nil
            return Problem(
                status,
                code: error.code.rawValue,
                detail: error.message,
                headers: retryAfter.map { [.retryAfter: $0] } ?? [:]
            )
        case (_ as EscrowStoreError, .damaged):
            // A stored row that does not decode: the store answers, the row is broken. Never "unavailable".
            return Problem(
                status,
                code: "ciphertext_invalid",
                detail: "the stored escrow is malformed; it is moved to dead when a worker or a read meets it"
            )
        case (let error as EscrowStoreError, .unavailable):
            return Problem(
                status,
                code: "store_unavailable",
                detail: "the store is unavailable (\(error.code))",
                headers: [.retryAfter: "1"]
            )
        default:
            // A keyring's or a store's own error met on a request: its code, never its message (it may name a path).
            return Problem(status, code: kind.rawValue, detail: HTTPResponse.Status(code: kind.httpStatus).reasonPhrase)
        }
    }

    /// Our errors' descriptions name their code only; their operator messages are PII-free by design and
    /// logged with it. Anything else is named by its type only.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as EscrowStoreError: "\(error): \(error.message)"
        case let error as EscrowError: "\(error): \(error.message)"
        case let error as CryptoError: "\(error): \(error.message)"
        case let error as Problem: "\(error)"
        default: String(reflecting: type(of: error))
        }
    }
}
