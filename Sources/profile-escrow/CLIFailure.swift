import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

/// Exit codes and PII-free messages for every error the CLI can meet.
enum CLIFailure {
    static let problem: Int32 = 1
    static let badInput: Int32 = 2
    static let notFound: Int32 = 3
    static let unavailable: Int32 = 4

    static func exitCode(for error: any Error) -> Int32 {
        switch error {
        case is ProfileValidationError: return badInput
        case let error as CryptoError:
            switch error.code {
            case .keyringNotFound, .keyringPermissions, .keyringMalformed, .keyringIO, .keyringNotDurable,
                .secretKeyUnavailable, .unknownKeyVersion, .custodyUnavailable, .custodyRefused, .wrappedKeyInvalid:
                return unavailable
            case .ciphertextInvalid: return problem
            default: return badInput
            }
        case let error as EscrowStoreError:
            // A malformed row is a problem found in a store that answers, not an unavailable store.
            return error.code == .malformedRow ? problem : unavailable
        case let error as EscrowError:
            switch error.code {
            case .notFound: return notFound
            case .captureOnly, .keyUnavailable, .keyringOutdated: return unavailable
            case .ciphertextInvalid: return problem
            default: return badInput
            }
        case is NothingHeld: return notFound
        default:
            // argument-parser's usage and validation errors.
            let code = ProfileEscrowCommand.exitCode(for: error)
            return code == .success ? 0 : badInput
        }
    }

    static func message(for error: any Error) -> String {
        switch error {
        case let error as ProfileValidationError:
            "error: invalid input [\(error.code)]\(error.field.map { " at \($0)" } ?? ""): \(error.message)"
        case let error as CryptoError: "error: \(error.message)"
        case let error as EscrowStoreError: "error: \(error.message)"
        case let error as EscrowError: "error: \(error.message)"
        case let error as NothingHeld: error.message
        default: ProfileEscrowCommand.fullMessage(for: error)
        }
    }
}

/// Nothing is held (no escrow for this user, no such token): exit 3 with a message that names no
/// identifier.
struct NothingHeld: Error {
    var message: String

    init(_ message: String) { self.message = message }
}
