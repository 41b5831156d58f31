import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

/// Exit codes and PII-free messages for every error the CLI can meet: the code is the error's ``FailureKind``'s, as
/// the library decides it for the HTTP API and the console too.
enum CLIFailure {
    /// The command ran and found a problem (a broken chain, an overdue escrow): exits as a damaged row does.
    static let problem = FailureKind.damaged.exitCode
    static let badInput = FailureKind.badInput.exitCode

    static func exitCode(for error: any Error) -> Int32 {
        if error is any ClassifiedFailure { return FailureKind(of: error).exitCode }
        // argument-parser's usage and validation errors.
        let code = ProfileEscrowCommand.exitCode(for: error)
        return code == .success ? 0 : badInput
    }

    static func message(for error: any Error) -> String {
        switch error {
        case let error as ProfileValidationError:
            "error: invalid input [\(error.code)]\(error.field.map { " at \($0)" } ?? ""): \(error.message)"
        case let error as CryptoError: "error: \(error.message)"
        case let error as EscrowStoreError: "error: \(error.message)"
        case let error as EscrowError: "error: \(error.message)"
        case let error as OperatorActions.InputError: "error: \(error.message)"
        case let error as NothingHeld: error.message
        default: ProfileEscrowCommand.fullMessage(for: error)
        }
    }
}

/// Nothing is held (no escrow for this user, no such token): exit 3 with a message that names no
/// identifier.
struct NothingHeld: ClassifiedFailure {
    var message: String

    init(_ message: String) { self.message = message }

    var failureKind: FailureKind { .notFound }
}
