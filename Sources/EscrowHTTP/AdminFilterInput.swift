import EscrowCore
import EscrowCrypto
import Foundation
import HTTPTypes
import ProfileEscrow

/// The filters, page size and cursor of the admin list, as the API's query string and the console's filter form give
/// them: each checked, a bad one refused with a problem naming it (never echoing it).
struct AdminFilterInput: Sendable, Equatable {
    var filter = EscrowFilter()
    var limit = 50
    var cursor: EscrowListPosition?
    /// The filter members as given (canonical text), to build the next page's link.
    var given: [(name: String, value: String)] = []

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.filter == rhs.filter && lhs.limit == rhs.limit && lhs.cursor == rhs.cursor
    }

    static let filterNames = ["state", "minAgeSeconds", "keyVersion", "deadCode", "minAttempts"]
    static let pageNames = ["limit", "cursor"]

    /// Parses `fields` (empty values are absent). `allowed` names what may appear; anything else is refused.
    static func parse(
        _ fields: [(String, String)],
        now: Date,
        allowed: Set<String> = Set(filterNames + pageNames),
        emptyIsAbsent: Bool = false
    ) throws(Problem) -> AdminFilterInput {
        var input = AdminFilterInput()
        var seen: Set<String> = []
        for (name, raw) in fields {
            guard allowed.contains(name) else {
                throw invalid(field: nil, "unknown parameter; allowed: \(allowed.sorted().joined(separator: ", "))")
            }
            guard seen.insert(name).inserted else { throw invalid(field: name, "\(name) may be given once") }
            let value = raw.trimmingCharacters(in: .whitespaces)
            // A form's empty field is a filter not set; an API caller leaves the parameter out instead.
            if value.isEmpty {
                if emptyIsAbsent { continue }
                throw invalid(field: name, "\(name) must not be empty: leave it out instead")
            }
            switch name {
            case "state":
                guard let state = EscrowState(rawValue: value), EscrowState.live.contains(state) else {
                    throw invalid(
                        field: name,
                        "state must be one of \(EscrowState.live.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                input.filter.state = state
            case "minAgeSeconds":
                guard let seconds = Int(value), (0...(100 * 365 * 86_400)).contains(seconds) else {
                    throw invalid(field: name, "minAgeSeconds must be a whole number of seconds, 0-3153600000")
                }
                input.filter.createdAtOrBefore = now.addingTimeInterval(-Double(seconds))
            case "keyVersion":
                guard let version = UInt32(value) else {
                    throw invalid(field: name, "keyVersion must be a key version number (0-4294967295)")
                }
                input.filter.keyVersion = version
            case "deadCode":
                guard value.utf8.count <= 64, value.utf8.allSatisfy({ $0 == 0x5F || (0x61...0x7A).contains($0) })
                else {
                    throw invalid(field: name, "deadCode must be 1-64 characters of [a-z_], e.g. attempts_exhausted")
                }
                input.filter.deadCode = DeadCode(rawValue: value)
            case "minAttempts":
                guard let attempts = Int(value), (0...1_000_000).contains(attempts) else {
                    throw invalid(field: name, "minAttempts must be a whole number, 0-1000000")
                }
                input.filter.minimumAttempts = attempts
            case "limit":
                guard let limit = Int(value), (1...Escrow.maximumPageSize).contains(limit) else {
                    throw invalid(field: name, "limit must be a whole number, 1-\(Escrow.maximumPageSize)")
                }
                input.limit = limit
            case "cursor":
                guard let position = Self.decodeCursor(value) else {
                    throw invalid(field: name, "cursor must be the next value of a previous page, unchanged")
                }
                input.cursor = position
            default:
                break
            }
            if filterNames.contains(name) { input.given.append((name, value)) }
        }
        return input
    }

    static func invalid(field: String?, _ detail: String) -> Problem {
        Problem(.badRequest, code: "invalid_parameter", detail: detail, field: field)
    }

    /// An opaque cursor: base64url of the position's creation time (8 bytes, big-endian milliseconds) and escrow id.
    static func encodeCursor(_ position: EscrowListPosition) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8 + EscrowID.byteCount)
        let time = UInt64(bitPattern: position.createdAt)
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(shift)))
        }
        bytes += position.id.bytes
        return Base64URL.encode(bytes)
    }

    static func decodeCursor(_ text: String) -> EscrowListPosition? {
        guard text.utf8.count == 32, let bytes = Base64URL.decode(text.utf8), bytes.count == 8 + EscrowID.byteCount
        else { return nil }
        let time = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let id = EscrowID(bytes: Array(bytes[8...])) else { return nil }
        return EscrowListPosition(createdAt: Int64(bitPattern: time), id: id)
    }
}
