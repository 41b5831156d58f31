/// Apple's form_post body (`application/x-www-form-urlencoded`), parsed strictly: every field once, at most
/// ``maximumFieldCount`` fields, valid percent-encoding and UTF-8, or no form at all. In time linear in the body's size.
///
/// Written here rather than with Hummingbird's `URLEncodedFormDecoder`, which decodes into a `Decodable` and keeps the
/// last of two fields of one name: a duplicate `state` or `id_token` must refuse the form, not pick one.
struct SignInForm: Sendable {
    /// Apple sends at most five fields (`code`, `id_token`, `state`, `user`, `error`), and the 503 page adds one.
    static let maximumFieldCount = 16

    /// The fields in the order they came, for a page that submits the same form again.
    let fields: [(name: String, value: String)]

    subscript(name: String) -> String? { fields.first { $0.name == name }?.value }

    init(fields: [(name: String, value: String)]) { self.fields = fields }

    init?(_ body: [UInt8]) {
        var fields: [(name: String, value: String)] = []
        var names: Set<String> = []
        // One pass over the bytes, each pair decoded from its range of `body` (no array of slices).
        var start = body.startIndex
        while start < body.endIndex {
            let end = body[start...].firstIndex(of: UInt8(ascii: "&")) ?? body.endIndex
            if end > start {
                let pair = body[start..<end]
                let equals = pair.firstIndex(of: UInt8(ascii: "=")) ?? end
                guard let name = Self.decode(body[start..<equals]),
                    let value = Self.decode(equals < end ? body[(equals + 1)..<end] : [])
                else { return nil }
                guard fields.count < Self.maximumFieldCount, names.insert(name).inserted else { return nil }
                fields.append((name, value))
            }
            start = end + 1
        }
        self.fields = fields
    }

    /// Decodes `+` and `%XX`; nil for a broken escape or bytes that are not UTF-8.
    static func decode(_ bytes: some Collection<UInt8>) -> String? {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): output.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                output.append(high << 4 | low)
            default: output.append(byte)
            }
        }
        return String(validating: output, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Percent-encodes a query or form value: only unreserved characters stay as they are.
    static func encode(_ value: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                output.append(byte)
            default:
                output += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
