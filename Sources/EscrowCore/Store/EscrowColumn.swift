import EscrowCrypto
import Foundation

/// The columns of a stored escrow row, in one list for every store: each store's inserts, updates and reads name
/// them from here, and binds ``EscrowRecord/storedValue(_:)`` in its own way.
package enum EscrowColumn: String, CaseIterable, Sendable {
    case id
    case blindIndex = "blind_index"
    case keyVersion = "key_version"
    case publicKey = "public_key"
    case sealedProfile = "sealed_profile"
    case sealedKey = "sealed_key"
    case mac
    case contentTag = "content_tag"
    case state
    case revision
    case attempts
    case nextAttemptAt = "next_attempt_at"
    case leaseOwner = "lease_owner"
    case leaseExpiresAt = "lease_expires_at"
    case confirmDeadline = "confirm_deadline"
    case dueAt = "due_at"
    case createdAt = "created_at"
    case expiresAt = "expires_at"
    case updatedAt = "updated_at"
    case deadCode = "dead_code"
    case lastStatus = "last_status"
    /// Last, as `ALTER TABLE … ADD COLUMN` put it: a `SELECT *` reads the columns in this order.
    case profileBoxKey = "profile_box_key"

    /// What a column holds.
    package enum Kind: Sendable {
        case bytes
        case integer
        case text
    }

    package var kind: Kind {
        switch self {
        case .id, .blindIndex, .publicKey, .sealedProfile, .sealedKey, .mac, .profileBoxKey, .contentTag: .bytes
        case .state, .leaseOwner, .deadCode: .text
        default: .integer
        }
    }

    /// The columns a change of an escrow rewrites: all but its identity (`id`, `blind_index`) and `created_at`.
    package static let changeable: [EscrowColumn] = allCases.filter { ![.id, .blindIndex, .createdAt].contains($0) }
}

/// One column's value as a store binds it.
package enum StoredValue: Sendable, Equatable {
    case bytes([UInt8])
    case integer(Int64?)
    case text(String?)
}

extension EscrowRecord {
    /// The value this record stores in `column`: times as milliseconds since 1970, `due_at` as the lifecycle
    /// derives it, absent values as NULL.
    package func storedValue(_ column: EscrowColumn) -> StoredValue {
        func time(_ date: Date?) -> StoredValue { .integer(date.map(Timestamp.unixMilliseconds)) }
        switch column {
        case .id: return .bytes(sealed.id.bytes)
        case .blindIndex: return .bytes(sealed.blindIndex.bytes)
        case .keyVersion: return .integer(Int64(sealed.keyVersion))
        case .publicKey: return .bytes(sealed.publicKey)
        case .sealedProfile: return .bytes(sealed.sealedProfile)
        case .sealedKey: return .bytes(sealed.sealedKey)
        case .mac: return .bytes(sealed.mac)
        case .profileBoxKey: return .bytes(sealed.profileBoxKey)
        case .contentTag: return .bytes(contentTag)
        case .state: return .text(state.rawValue)
        case .revision: return .integer(revision)
        case .attempts: return .integer(Int64(attempts))
        case .nextAttemptAt: return time(nextAttemptAt)
        case .leaseOwner: return .text(leaseOwner)
        case .leaseExpiresAt: return time(leaseExpiresAt)
        case .confirmDeadline: return time(confirmDeadline)
        case .dueAt: return time(dueAt)
        case .createdAt: return time(createdAt)
        case .expiresAt: return time(expiresAt)
        case .updatedAt: return time(updatedAt)
        case .deadCode: return .text(deadCode?.rawValue)
        case .lastStatus: return .integer(lastStatus.map { Int64($0) })
        }
    }
}

extension AuditEvent {
    /// The columns of a stored audit event, in the order ``storedValues`` gives them (and stores read them).
    package static let storedColumns = [
        "seq", "at", "type", "escrow_id", "index_prefix", "detail", "http_status", "actor", "age_ms", "hash",
        "encoding", "reason",
    ]

    /// This event's values of ``storedColumns``, in order.
    package var storedValues: [StoredValue] {
        [
            .integer(sequence), .integer(Timestamp.unixMilliseconds(draft.at)), .text(draft.type.rawValue),
            .text(draft.escrowID), .text(draft.indexPrefix), .text(draft.detail),
            .integer(draft.httpStatus.map { Int64($0) }), .text(draft.actor.rawValue), .integer(draft.ageMilliseconds),
            .bytes(hash), .integer(Int64(encoding.rawValue)), .text(draft.reason),
        ]
    }
}
