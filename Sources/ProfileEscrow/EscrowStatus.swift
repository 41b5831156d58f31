public import EscrowCore
public import EscrowCrypto
public import Foundation

/// Metadata of a live escrow, for `status` and `GET /v1/escrows/{userIdentifier}`: never plaintext.
public struct EscrowStatus: Sendable, Equatable, Encodable {
    public var escrowID: EscrowID
    public var indexPrefix: String
    public var state: EscrowState
    public var attempts: Int
    public var nextAttemptAt: Date?
    public var createdAt: Date
    public var expiresAt: Date
    public var keyVersion: UInt32
    public var deadCode: DeadCode?
    public var lastStatus: Int?

    init(_ record: EscrowRecord) {
        escrowID = record.id
        indexPrefix = record.blindIndex.prefixHex
        state = record.state
        attempts = record.attempts
        nextAttemptAt = record.dueAt
        createdAt = record.createdAt
        expiresAt = record.expiresAt
        keyVersion = record.sealed.keyVersion
        deadCode = record.deadCode
        lastStatus = record.lastStatus
    }

    private enum Keys: String, CodingKey {
        case escrowId, state, attempts, nextAttemptAt, createdAt, expiresAt, keyVersion, deadCode, lastStatus
    }

    /// The one JSON shape of `status --format json` and `GET /v1/escrows/{userIdentifier}`: numbers as numbers,
    /// times as RFC 3339 with milliseconds (``Timestamp``), `null` for what is absent. No index prefix: it is
    /// not part of the API.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(escrowID.hex, forKey: .escrowId)
        try container.encode(state.rawValue, forKey: .state)
        try container.encode(attempts, forKey: .attempts)
        try container.encode(nextAttemptAt.map(Timestamp.milliseconds), forKey: .nextAttemptAt)
        try container.encode(Timestamp.milliseconds(createdAt), forKey: .createdAt)
        try container.encode(Timestamp.milliseconds(expiresAt), forKey: .expiresAt)
        try container.encode(keyVersion, forKey: .keyVersion)
        try container.encode(deadCode?.rawValue, forKey: .deadCode)
        try container.encode(lastStatus, forKey: .lastStatus)
    }
}
