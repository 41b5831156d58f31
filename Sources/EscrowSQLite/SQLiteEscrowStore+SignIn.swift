public import EscrowCore
public import Foundation
import GRDB

extension SQLiteEscrowStore: SignInStore {
    public func createSignInAttempt(_ attempt: SignInAttempt) async throws {
        try await write { try $0.insertSignInAttempt(attempt) }
    }

    public func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt? {
        try await read { db in try SQLiteWriteTransaction.signInAttempt(db, stateHash: stateHash) }
    }

    /// One transaction of its own, outside the group commit: the attempt's use and the capture commit together.
    public func completeSignIn(
        _ request: SignInCompletionRequest,
        capture record: EscrowRecord?,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> SignInCompletion {
        let item = record.map { CaptureItem(record: $0, actor: actor, lifecycle: lifecycle) }
        let completion = try await write { try await StoreEngine.completeSignIn(request, capture: item, in: $0) }
        // A replaced escrow's bytes leave the WAL as after any purge.
        if case .completed(_, .replaced?) = completion { try await purgedOne() }
        return completion
    }

    public func redeemSignInTicket(ticketHash: [UInt8], at now: Date) async throws -> SignInRedemption? {
        try await write { try $0.redeemSignInTicket(ticketHash: ticketHash, at: now) }
    }

    public func sweepSignInAttempts(at now: Date) async throws -> Int {
        try await write { try $0.deleteSignInAttempts(expiredAt: now) }
    }
}
