/// Where ``CanonicalJSONWriter`` puts its bytes.
package protocol CanonicalJSONSink {
    mutating func append(_ byte: UInt8)
}

/// Counts bytes without storing them: the first of two passes, so that the second one can write into a
/// buffer of exactly the right size (no reallocation leaves copies of a profile in freed memory).
struct CanonicalJSONCounter: CanonicalJSONSink {
    private(set) var count = 0

    mutating func append(_ byte: UInt8) {
        count += 1
    }
}

/// Writes into preallocated memory (a `SecretBytes` buffer or an array's uninitialized capacity).
struct CanonicalJSONBufferSink: CanonicalJSONSink {
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    mutating func append(_ byte: UInt8) {
        precondition(count < buffer.count, "canonical JSON longer than measured")
        buffer[count] = byte
        count += 1
    }
}

/// Appends to a growing byte array: for documents that hold nothing secret (HTTP responses).
package struct CanonicalJSONArraySink: CanonicalJSONSink {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 128) {
        bytes.reserveCapacity(capacity)
    }

    package mutating func append(_ byte: UInt8) {
        bytes.append(byte)
    }
}

/// A document that writes itself with a ``CanonicalJSONWriter``, the same way on every pass.
protocol CanonicalJSONDocument {
    func write<Sink: CanonicalJSONSink>(to writer: inout CanonicalJSONWriter<Sink>)
}

/// The one JSON writer behind every byte format of a profile (the sealed plaintext, the backend replay body,
/// the HTTP replay body): no whitespace, members in the order written, strings escaped minimally.
///
/// Strings escape `"` as `\"`, `\` as `\\` and every byte below 0x20 as `\u00XX` (lowercase hex); every other
/// character is written as raw UTF-8. Integers are plain decimal. Commas are inserted automatically.
package struct CanonicalJSONWriter<Sink: CanonicalJSONSink> {
    package private(set) var sink: Sink
    /// For each open object, whether a member has been written yet.
    private var hasMembers: [Bool] = []

    package init(sink: Sink) {
        self.sink = sink
    }

    package mutating func beginObject() {
        sink.append(UInt8(ascii: "{"))
        hasMembers.append(false)
    }

    package mutating func endObject() {
        hasMembers.removeLast()
        sink.append(UInt8(ascii: "}"))
    }

    /// Writes a member name (and the comma before it when needed); a value must follow.
    package mutating func key(_ name: String) {
        precondition(!hasMembers.isEmpty, "a key outside an object")
        if hasMembers[hasMembers.count - 1] {
            sink.append(UInt8(ascii: ","))
        }
        hasMembers[hasMembers.count - 1] = true
        string(name)
        sink.append(UInt8(ascii: ":"))
    }

    package mutating func string(_ value: String) {
        sink.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                sink.append(UInt8(ascii: "\\"))
                sink.append(byte)
            case 0x00..<0x20:
                for escaped in "\\u00".utf8 { sink.append(escaped) }
                sink.append(Self.hexDigit(byte >> 4))
                sink.append(Self.hexDigit(byte & 0x0F))
            default:
                sink.append(byte)
            }
        }
        sink.append(UInt8(ascii: "\""))
    }

    package mutating func bool(_ value: Bool) {
        raw(value ? "true" : "false")
    }

    package mutating func null() {
        raw("null")
    }

    package mutating func integer(_ value: Int64) {
        raw(String(value))
    }

    /// `value`, or `null` when it is `nil`.
    package mutating func stringOrNull(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    /// Writes ASCII text as is (literals, numbers).
    private mutating func raw(_ text: String) {
        for byte in text.utf8 { sink.append(byte) }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}

/// Runs a ``CanonicalJSONDocument`` through the writer.
enum CanonicalJSON {
    /// The exact encoded length of `document`.
    static func count(of document: some CanonicalJSONDocument) -> Int {
        var writer = CanonicalJSONWriter(sink: CanonicalJSONCounter())
        document.write(to: &writer)
        return writer.sink.count
    }

    /// Writes `document` into `buffer`, whose size must be ``count(of:)``.
    static func write(_ document: some CanonicalJSONDocument, into buffer: UnsafeMutableRawBufferPointer) {
        var writer = CanonicalJSONWriter(sink: CanonicalJSONBufferSink(buffer))
        document.write(to: &writer)
        precondition(writer.sink.count == buffer.count, "canonical JSON shorter than measured")
    }

    /// `document` as a byte array allocated once at its exact size.
    static func bytes(of document: some CanonicalJSONDocument) -> [UInt8] {
        let count = count(of: document)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initializedCount in
            write(document, into: UnsafeMutableRawBufferPointer(buffer))
            initializedCount = count
        }
    }
}
