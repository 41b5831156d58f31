public import EscrowCore
import EscrowCrypto
public import Foundation

extension OperatorActions {
    /// A page of the operator's list as the API's query string, the console's filter form and a bulk requeue's body
    /// give it: the filters, the page size and the cursor, each checked, a bad one refused naming it (never echoing it).
    public struct Query: Sendable, Equatable {
        public var filter = EscrowFilter()
        public var limit = 50
        public var cursor: EscrowListPosition?
        /// The filters as given (trimmed text), to link the next page or carry a filter into a bulk requeue's form.
        public var given: [(name: String, value: String)] = []

        public static let filterNames = ["state", "minAgeSeconds", "keyVersion", "deadCode", "minAttempts"]
        public static let pageNames = ["limit", "cursor"]

        public init() {}

        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.filter == rhs.filter && lhs.limit == rhs.limit && lhs.cursor == rhs.cursor
        }

        /// Parses `fields` at `now` (for `minAgeSeconds`). `allowed` names what may appear; anything else is refused.
        /// `emptyIsAbsent`: a form's empty field is a filter not set (an API caller leaves the parameter out instead).
        public init(
            _ fields: [(String, String)],
            now: Date,
            allowed: Set<String> = Set(filterNames + pageNames),
            emptyIsAbsent: Bool = false
        ) throws(InputError) {
            var seen: Set<String> = []
            for (name, raw) in fields {
                guard allowed.contains(name) else {
                    throw InputError(
                        field: nil,
                        "unknown parameter; allowed: \(allowed.sorted().joined(separator: ", "))"
                    )
                }
                guard seen.insert(name).inserted else { throw InputError(field: name, "\(name) may be given once") }
                let value = raw.trimmingCharacters(in: .whitespaces)
                if value.isEmpty {
                    if emptyIsAbsent { continue }
                    throw InputError(field: name, "\(name) must not be empty: leave it out instead")
                }
                try set(name, value, now: now)
                if Self.filterNames.contains(name) { given.append((name, value)) }
            }
        }

        private mutating func set(_ name: String, _ value: String, now: Date) throws(InputError) {
            switch name {
            case "state":
                guard let state = EscrowState(rawValue: value), EscrowState.live.contains(state) else {
                    throw InputError(
                        field: name,
                        "state must be one of \(EscrowState.live.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                filter.state = state
            case "minAgeSeconds":
                guard let seconds = Int(value), (0...(100 * 365 * 86_400)).contains(seconds) else {
                    throw InputError(field: name, "minAgeSeconds must be a whole number of seconds, 0-3153600000")
                }
                filter.createdAtOrBefore = now.addingTimeInterval(-Double(seconds))
            case "keyVersion":
                guard let version = UInt32(value) else {
                    throw InputError(field: name, "keyVersion must be a key version number (0-4294967295)")
                }
                filter.keyVersion = version
            case "deadCode":
                guard value.utf8.count <= 64, value.utf8.allSatisfy({ $0 == 0x5F || (0x61...0x7A).contains($0) })
                else {
                    throw InputError(field: name, "deadCode must be 1-64 characters of [a-z_], e.g. attempts_exhausted")
                }
                filter.deadCode = DeadCode(rawValue: value)
            case "minAttempts":
                guard let attempts = Int(value), (0...1_000_000).contains(attempts) else {
                    throw InputError(field: name, "minAttempts must be a whole number, 0-1000000")
                }
                filter.minimumAttempts = attempts
            case "limit":
                guard let limit = Int(value), (1...Escrow.maximumPageSize).contains(limit) else {
                    throw InputError(field: name, "limit must be a whole number, 1-\(Escrow.maximumPageSize)")
                }
                self.limit = limit
            case "cursor":
                guard let position = Self.decodeCursor(value) else {
                    throw InputError(field: name, "cursor must be the next value of a previous page, unchanged")
                }
                cursor = position
            default:
                break
            }
        }

        /// An opaque cursor: base64url of the position's creation time (8 bytes, big-endian milliseconds) and
        /// escrow id.
        public static func encodeCursor(_ position: EscrowListPosition) -> String {
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
}
