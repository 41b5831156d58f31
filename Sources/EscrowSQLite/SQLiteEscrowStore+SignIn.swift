public import EscrowCore
public import Foundation
import GRDB

extension SQLiteEscrowStore: SignInStore {
    /// Not waiting for the disk (see `write(durable:)`): an attempt lost in a power cut only makes its callback
    /// unknown, and the user signs in again; nothing was acknowledged yet. The callback's own commit is durable, and
    /// syncs the WAL with every attempt before it. Concurrent attempts share one transaction (a group commit of
    /// their own): a burst of starts writes the ends of the table and of its purge index once, not once each.
    public func createSignInAttempt(_ attempt: SignInAttempt) async throws {
        try requireWritable()
        try await attemptCommitter.submit(attempt)
    }

    public func signInAttempt(stateHash: [UInt8]) async throws -> SignInAttempt? {
        try await read { db in try SQLiteWriteTransaction.signInAttempt(db, stateHash: stateHash) }
    }

    /// Through a group commit of its own (``SignInBatcher``): concurrent callbacks share one transaction and one
    /// fsync, each attempt's use and capture still committed together, and each answered only once durable.
    public func completeSignIn(
        _ request: SignInCompletionRequest,
        capture record: EscrowRecord?,
        actor: AuditActor,
        lifecycle: EscrowLifecycle
    ) async throws -> SignInCompletion {
        try requireWritable()
        let item = record.map { CaptureItem(record: $0, actor: actor, lifecycle: lifecycle) }
        let completion = try await signInCommitter.submit(SignInCompletionItem(request: request, capture: item))
        // A replaced escrow's bytes leave the WAL as after any purge.
        if case .completed(_, .replaced?) = completion { try await purgedOne() }
        return completion
    }

    public func redeemSignInTicket(
        _ key: SignInTicketKey,
        starterHash: [UInt8]?,
        at now: Date
    ) async throws -> SignInRedemption? {
        try await write { try $0.redeemSignInTicket(key, starterHash: starterHash, at: now) }
    }

    public func unredeemedSignInTicket(_ key: SignInTicketKey, at now: Date) async throws -> [UInt8]? {
        try await read { db in try SQLiteWriteTransaction.unredeemedSignInTicket(db, key, at: now) }
    }

    public func sweepSignInAttempts(at now: Date) async throws -> Int {
        try await write { try $0.deleteSignInAttempts(expiredAt: now) }
    }
}
