import EscrowCrypto
import Foundation

/// One stored escrow row's columns, by name, as a store's driver reads them: `nil` for SQL NULL, and
/// ``MalformedColumn`` for a value of another type. ``EscrowRecord/decode(_:)`` applies every other rule, the same
/// for every store.
package protocol StoredEscrowRow {
    func bytes(_ column: String) throws(MalformedColumn) -> [UInt8]?
    func integer(_ column: String) throws(MalformedColumn) -> Int64?
    func text(_ column: String) throws(MalformedColumn) -> String?
}

/// The first column of a stored escrow row that breaks a rule: a wrong type or length, a value out of range, a
/// missing or unknown value, a state without what it needs.
package struct MalformedColumn: Error, Sendable {
    package let column: String

    package init(_ column: String) { self.column = column }
}

extension EscrowRecord {
    /// The record a stored row holds, every value checked, so that no stored value can trap anywhere later: ids and
    /// indexes of their exact lengths, a 32-bit key version, times within ``storedTimes``, a revision within
    /// ``storedRevisions``, attempts within 32 bits, an HTTP status of three digits, and each state with what it
    /// needs (a lease its owner and end, a wait for confirmation its deadline, a dead escrow its code).
    package static func decode(_ row: some StoredEscrowRow) throws(MalformedColumn) -> EscrowRecord {
        func required<T>(_ value: T?, _ column: String) throws(MalformedColumn) -> T {
            guard let value else { throw MalformedColumn(column) }
            return value
        }
        func bytes(_ column: String) throws(MalformedColumn) -> [UInt8] { try required(row.bytes(column), column) }
        func time(_ column: String) throws(MalformedColumn) -> Date {
            try storedTime(required(row.integer(column), column), column)
        }
        func storedTime(_ milliseconds: Int64, _ column: String) throws(MalformedColumn) -> Date {
            guard storedTimes.contains(milliseconds) else { throw MalformedColumn(column) }
            return Timestamp.date(unixMilliseconds: milliseconds)
        }

        guard let id = EscrowID(bytes: try bytes("id")) else { throw MalformedColumn("id") }
        guard let index = BlindIndex(bytes: try bytes("blind_index")) else { throw MalformedColumn("blind_index") }
        guard let keyVersion = UInt32(exactly: try required(row.integer("key_version"), "key_version")) else {
            throw MalformedColumn("key_version")
        }
        guard let state = EscrowState(rawValue: try required(row.text("state"), "state")) else {
            throw MalformedColumn("state")
        }
        let phase: Phase
        switch state {
        case .pending:
            phase = .pending
        case .leased:
            guard let owner = try row.text("lease_owner"), let end = try row.integer("lease_expires_at") else {
                throw MalformedColumn("lease_owner")
            }
            phase = .leased(Lease(owner: owner, expiresAt: try storedTime(end, "lease_expires_at")))
        case .awaitingConfirmation:
            let deadline = try required(row.integer("confirm_deadline"), "confirm_deadline")
            phase = .awaitingConfirmation(deadline: try storedTime(deadline, "confirm_deadline"))
        case .dead:
            phase = .dead(DeadCode(rawValue: try required(row.text("dead_code"), "dead_code")))
        case .purged:
            throw MalformedColumn("state")
        }
        let attempts = try required(row.integer("attempts"), "attempts")
        guard (0...Int64(Int32.max)).contains(attempts) else { throw MalformedColumn("attempts") }
        let lastStatus = try row.integer("last_status")
        guard lastStatus.map({ (0...999).contains($0) }) ?? true else { throw MalformedColumn("last_status") }
        // The lifecycle adds one to it: a value at the top of the range would overflow.
        let revision = try required(row.integer("revision"), "revision")
        guard storedRevisions.contains(revision) else { throw MalformedColumn("revision") }
        let sealed = SealedEscrow(
            id: id,
            blindIndex: index,
            keyVersion: keyVersion,
            publicKey: try bytes("public_key"),
            sealedProfile: try bytes("sealed_profile"),
            sealedKey: try bytes("sealed_key"),
            mac: try bytes("mac"),
            profileBoxKey: try row.bytes("profile_box_key") ?? []
        )
        return EscrowRecord(
            sealed: sealed,
            contentTag: try bytes("content_tag"),
            phase: phase,
            revision: revision,
            attempts: Int(attempts),
            nextAttemptAt: try time("next_attempt_at"),
            createdAt: try time("created_at"),
            expiresAt: try time("expires_at"),
            updatedAt: try time("updated_at"),
            lastStatus: lastStatus.map { Int($0) }
        )
    }
}
