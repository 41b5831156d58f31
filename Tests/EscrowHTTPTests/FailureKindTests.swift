import EscrowCore
import EscrowCrypto
import HTTPTypes
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// One kind per failure: the HTTP answer's status is the kind's, whatever the error type, and the kinds the CLI exits
/// with are the documented ones (1 a problem, 2 bad input, 3 not found, 4 unavailable).
@Suite("Failures classified once: HTTP status and CLI exit by kind")
struct FailureKindTests {
    static let errors: [(any Error, FailureKind)] = [
        (ProfileValidationError(code: .invalidValue, field: "email", message: "email must be an address"), .badInput),
        (ProfileValidationError(code: .bodyTooLarge, field: nil, message: "the body is over 16384 bytes"), .tooLarge),
        (OperatorActions.InputError.invalidReason, .badInput),
        (EscrowError(.notFound, "no escrow with this id"), .notFound),
        (EscrowError(.conflict, "the escrow kept changing; try again"), .conflict),
        (EscrowError(.captureOnly, "this node cannot open escrows"), .conflict),
        (EscrowError(.ciphertextInvalid, "the stored escrow failed its integrity check"), .damaged),
        (EscrowError(.keyringOutdated, "reload the keyring"), .unavailable),
        (EscrowStoreError(.malformedRow, "column key_version out of range"), .damaged),
        (EscrowStoreError(.busy, "the write lock was held"), .unavailable),
        (EscrowStoreError(.tokenExists, "a token with this name is active"), .badInput),
        (CryptoError(code: .unknownKeyVersion, message: "master key version 9 is not in this keyring"), .notFound),
        (CryptoError(code: .custodyUnavailable, message: "the engine did not answer"), .unavailable),
        (CryptoError(code: .keyringRefused, message: "rotating a public-only keyring"), .badInput),
        (CancellationError(), .internal),
    ]

    @Test("every library error has its kind, and the API answers the kind's status")
    func statusByKind() {
        for (error, kind) in Self.errors {
            #expect(FailureKind(of: error) == kind, "\(error)")
            let problem = ProblemMiddleware<EscrowRequestContext>.problem(for: error, kind: kind)
            #expect(Int(problem.status.code) == kind.httpStatus, "\(error)")
        }
    }

    @Test("a conflict is 409 with Retry-After only when a retry helps; a damaged row 409 ciphertext_invalid")
    func conflicts() {
        let retry = ProblemMiddleware<EscrowRequestContext>.problem(
            for: EscrowError(.conflict, "the escrow kept changing; try again"),
            kind: .conflict
        )
        #expect(retry.status == .conflict && retry.code == "conflict" && retry.headers[.retryAfter] == "1")
        let captureOnly = ProblemMiddleware<EscrowRequestContext>.problem(
            for: EscrowError(.captureOnly, "this node cannot open escrows"),
            kind: .conflict
        )
        #expect(captureOnly.code == "capture_only" && captureOnly.headers[.retryAfter] == nil)
        let malformed = ProblemMiddleware<EscrowRequestContext>.problem(
            for: EscrowStoreError(.malformedRow, "column key_version out of range"),
            kind: .damaged
        )
        #expect(malformed.status == .conflict && malformed.code == "ciphertext_invalid")
        #expect(!malformed.detail.contains("key_version"), "a store's message is not an HTTP detail")
    }

    @Test("exit codes: 1 a problem, 2 bad input, 3 not found, 4 unavailable or a conflict")
    func exitCodes() {
        let expected: [FailureKind: Int32] = [
            .badInput: 2, .tooLarge: 2, .unauthorized: 2, .forbidden: 2, .notFound: 3, .conflict: 4, .damaged: 1,
            .unavailable: 4, .internal: 1,
        ]
        for kind in FailureKind.allCases { #expect(kind.exitCode == expected[kind], "\(kind)") }
    }

    @Test("a problem made in the HTTP module has the kind of its status (the console's page)")
    func problemKind() {
        #expect(Problem.unauthorized().failureKind == .unauthorized)
        #expect(Problem.forbidden("read").failureKind == .forbidden)
        #expect(Problem.invalidUserIdentifier.failureKind == .badInput)
        #expect(Problem(.unsupportedMediaType, code: "unsupported_media_type", detail: "json").failureKind == .badInput)
        #expect(Problem(.internalServerError, code: "internal_error", detail: "x").failureKind == .internal)
    }
}
