import EscrowCrypto
package import Foundation

/// The statements a store runs for web sign-in attempts, inside an ``EscrowWriteTransaction``.
package protocol SignInWriteTransaction: EscrowWriteTransaction {
    func insertSignInAttempt(_ attempt: SignInAttempt) async throws
    /// The attempt with this state hash, locked until the transaction ends where the store locks rows.
    func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt?
    /// Marks a live attempt used and stores its ticket; returns false when it was used already.
    func useSignInAttempt(stateHash: [UInt8], at now: Date, ticket: SignInTicket) async throws -> Bool
    /// Erases and returns an unredeemed ticket's result when it is not past its expiry at `now`.
    func redeemSignInTicket(ticketHash: [UInt8], at now: Date) async throws -> SignInRedemption?
    /// Deletes attempts past their expiry, and past their ticket's when used; returns how many.
    func deleteSignInAttempts(expiredAt now: Date) async throws -> Int
}

extension StoreEngine {
    /// A callback's completion in the caller's transaction: the attempt is read locked, checked, marked used with
    /// its ticket, and only then the profile captured, so two callbacks with one state never both capture.
    package static func completeSignIn(
        _ request: SignInCompletionRequest,
        capture item: CaptureItem?,
        in transaction: some SignInWriteTransaction
    ) async throws -> SignInCompletion {
        guard let attempt = try await transaction.signInAttempt(stateHash: request.stateHash) else { return .unknown }
        guard attempt.isLive(at: request.now) else { return .expired(attempt) }
        guard Hashing.constantTimeEqual(attempt.bindingHash, request.bindingHash) else { return .bindingMismatch(attempt) }
        guard try await transaction.useSignInAttempt(stateHash: attempt.stateHash, at: request.now, ticket: request.ticket)
        else { return .expired(attempt) }
        var used = attempt
        used.usedAt = request.now
        guard let item else { return .completed(used, nil) }
        return .completed(used, try await capture([item], in: transaction).first)
    }

}
