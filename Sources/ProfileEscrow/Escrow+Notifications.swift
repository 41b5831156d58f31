public import EscrowCore
import EscrowCrypto
public import Foundation
import Logging

extension Escrow {
    /// What an email change did. Raw values in kebab-case, as states and reasons (`not-held`), the `outcome` of
    /// `POST /v1/apple/notifications`.
    public enum EmailUpdate: String, Sendable, Equatable {
        /// The escrow was re-sealed with the new email.
        case updated
        /// No live escrow for this user.
        case notHeld = "not-held"
        /// The escrow already held this email: nothing changed.
        case unchanged
        /// This node holds a public-only keyring and cannot open the escrow: nothing changed.
        case captureOnly = "capture-only"
        /// The change would leave nothing to escrow (no name, no email): nothing changed.
        case nothingLeft = "nothing-left"
        /// A worker is delivering the escrow right now: nothing changed; try again after the lease.
        case busy
        /// The escrow is dead (its row may not even open): nothing changed.
        case dead
        /// The escrow was captured at or after the notification's event time: a late or replayed
        /// notification never changes a newer capture. Nothing changed.
        case newer
    }

    /// What an Apple purge notification (`consent-revoked`, `account-delete`) did.
    public enum NotificationPurge: String, Sendable, Equatable {
        case purged
        case notHeld = "not-held"
        /// Captured at or after the event: nothing changed.
        case newer
    }

    /// Purges the user's escrow for `reason`, only when it was captured before `eventTime` (Apple
    /// notifications: a late or replayed one never purges a newer capture).
    public func erase(
        userIdentifier: String,
        reason: PurgeReason,
        capturedBefore eventTime: Date,
        actor: AuditActor
    ) async throws -> NotificationPurge {
        let index = blindIndex(userIdentifier)
        for _ in 0..<8 {
            // A malformed row can never be delivered, and its capture time cannot be trusted: it is purged.
            let row = try await userRecord(index, ifMalformed: .purge(reason), actor: actor)
            if case .purgedMalformed = row { return .purged }
            guard let record = row.record else { return .notHeld }
            guard record.createdAt < eventTime else { return .newer }
            switch try await apply(.purge(reason), to: record, actor: actor) {
            case .applied: return .purged
            case .ignored: return .notHeld
            case .stale: continue
            }
        }
        throw EscrowError(.conflict, "the escrow kept changing; try again")
    }

    /// Applies Apple's `email-enabled` / `email-disabled` to the user's live escrow captured before
    /// `eventTime`: sets ``EscrowPlaintext/emailForwarding`` (the address itself stays), and takes `email`
    /// when given and different (with `isPrivateEmail`, nil to derive it from the domain). Re-sealed through
    /// the lifecycle as ``updateEmail(userIdentifier:email:isPrivateEmail:actor:)`` is.
    public func updateEmailForwarding(
        userIdentifier: String,
        forwarding: Bool,
        email: String?,
        isPrivateEmail: Bool?,
        capturedBefore eventTime: Date,
        actor: AuditActor
    ) async throws -> EmailUpdate {
        try await reseal(userIdentifier: userIdentifier, capturedBefore: eventTime, actor: actor) { old in
            var profile = old.profile
            if let email, email != profile.email || isPrivateEmail.map({ $0 != profile.isPrivateEmail }) == true {
                guard let changed = try Self.changingEmail(of: profile, to: email, isPrivateEmail: isPrivateEmail)
                else { return nil }
                profile = changed
            }
            return EscrowPlaintext(
                profile: profile,
                verified: old.verified,
                capturedAt: old.capturedAt,
                emailForwarding: forwarding,
                // A changed email comes from Apple's signed notification.
                emailVerified: profile.email == old.profile.email ? old.emailVerified : true,
                transferSub: old.transferSub
            )
        }
    }

    /// Changes the email of the user's live escrow: opens it, changes `email` and `isPrivateEmail`, seals the result under the
    /// same escrow id with a new per-escrow key pair, and commits it with compare-and-set and an
    /// `updated` audit event. The capture time, `verified` and the retention are kept.
    ///
    /// - Parameters:
    ///   - email: the new email, or nil to remove it.
    ///   - isPrivateEmail: nil derives it from the email's domain.
    public func updateEmail(
        userIdentifier: String,
        email: String?,
        isPrivateEmail: Bool?,
        actor: AuditActor
    ) async throws -> EmailUpdate {
        try await reseal(userIdentifier: userIdentifier, capturedBefore: nil, actor: actor) { old in
            guard let profile = try Self.changingEmail(of: old.profile, to: email, isPrivateEmail: isPrivateEmail)
            else { return nil }
            return EscrowPlaintext(
                profile: profile,
                verified: old.verified,
                capturedAt: old.capturedAt,
                emailForwarding: old.emailForwarding,
                // An email changed by hand has no recorded origin.
                emailVerified: profile.email == old.profile.email ? old.emailVerified : nil,
                transferSub: old.transferSub
            )
        }
    }

    /// Opens the user's live escrow, lets `change` build the new plaintext (nil: nothing would be left to
    /// escrow), seals it under the same escrow id with a new per-escrow key pair, and commits it through
    /// the lifecycle (`LifecycleEvent.reseal`) with compare-and-set and an `updated` audit event.
    private func reseal(
        userIdentifier: String,
        capturedBefore eventTime: Date?,
        actor: AuditActor,
        change: (EscrowPlaintext) throws -> EscrowPlaintext?
    ) async throws -> EmailUpdate {
        guard !isCaptureOnly else {
            logger.warning("email change skipped: this node holds a public-only keyring and cannot re-seal")
            return .captureOnly
        }
        let index = blindIndex(userIdentifier)
        for _ in 0..<8 {
            let row: UserRow
            do {
                row = try await userRecord(index, ifMalformed: .quarantine, actor: actor)
            } catch let error as EscrowError where error.code == .ciphertextInvalid {
                return .dead
            }
            guard let record = row.record else { return .notHeld }
            if let eventTime, record.createdAt >= eventTime { return .newer }
            // Changing a row that a worker is delivering would fence out the worker's outcome, and a
            // confirmation would be lost (the escrow delivered again): wait for the lease instead.
            if let lease = record.lease, lease.expiresAt > clock.now() { return .busy }
            if record.state == .dead { return .dead }
            let old: EscrowPlaintext
            do {
                old = try await open(record, actor: actor)
            } catch let error as EscrowError where error.code == .keyUnavailable {
                logger.warning(
                    "email change skipped: this keyring cannot open the escrow",
                    metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
                )
                return .captureOnly
            }
            guard let plaintext = try change(old) else {
                logger.info(
                    "email change skipped: nothing would be left to escrow",
                    metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
                )
                return .nothingLeft
            }
            guard plaintext != old else { return .unchanged }
            // The escrow's key pair is kept: Apple's tokens, sealed to it beside the profile, still open.
            let sealed = try keyring.reseal(plaintext: plaintext.encoded(), of: record.sealed)
            let contentTag = keyring.contentTag(
                blindIndex: index,
                plaintext: Self.contentPlaintext(plaintext.profile, old.verified, plaintext.emailVerified)
            )
            let event = LifecycleEvent.reseal(sealed, contentTag: contentTag, detail: "email")
            guard try await apply(event, to: record, actor: actor) == .applied else {
                continue  // it changed under us: read it again
            }
            logger.info(
                "escrow email updated",
                metadata: ["escrow.id": "\(record.id)", "escrow.index": "\(record.blindIndex.prefixHex)"]
            )
            return .updated
        }
        throw EscrowError(.conflict, "the escrow kept changing; try again")
    }

    /// The profile with another email; nil when that would leave nothing to escrow.
    static func changingEmail(of profile: Profile, to email: String?, isPrivateEmail: Bool?) throws -> Profile? {
        do {
            return try Profile(
                userIdentifier: profile.userIdentifier,
                fullName: profile.fullName,
                email: email,
                isPrivateEmail: isPrivateEmail,
                realUserStatus: profile.realUserStatus
            )
        } catch {
            if error.code == .nothingToEscrow { return nil }
            throw error
        }
    }
}
