#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#elseif canImport(Darwin)
internal import Darwin
#endif

/// The byte-level recursive-descent parser behind ``StrictJSON``.
struct StrictJSONParser {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    /// Path segments of the members being parsed, for duplicate-key errors.
    private var path: [PathSegment] = []

    private enum PathSegment {
        case key(String)
        case index(Int)
    }

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws(StrictJSONError) -> StrictJSON.Value {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard offset == bytes.count else { throw StrictJSONError(.trailingData, offset: offset) }
        return value
    }

    // MARK: Values

    private mutating func parseValue(depth: Int) throws(StrictJSONError) -> StrictJSON.Value {
        guard let byte = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw StrictJSONError(.unexpectedByte, offset: offset)
        }
    }

    private mutating func parseObject(depth: Int) throws(StrictJSONError) -> StrictJSON.Value {
        guard depth <= StrictJSON.maximumDepth else { throw StrictJSONError(.tooDeep, offset: offset) }
        offset += 1  // {
        skipWhitespace()
        var members: [StrictJSON.Member] = []
        var seen: Set<String> = []
        if peek() == UInt8(ascii: "}") {
            offset += 1
            return .object(members)
        }
        while true {
            guard let byte = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
            guard byte == UInt8(ascii: "\"") else { throw StrictJSONError(.unexpectedByte, offset: offset) }
            let keyOffset = offset
            let key = try parseString()
            // Swift compares strings by canonical equivalence, so "é" and "e\u{301}" count as the same
            // key: stricter than byte equality, which is what we want.
            guard seen.insert(key).inserted else {
                path.append(.key(key))
                throw StrictJSONError(.duplicateKey, offset: keyOffset, path: renderedPath())
            }
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            path.append(.key(key))
            let value = try parseValue(depth: depth)
            path.removeLast()
            members.append(StrictJSON.Member(key: key, value: value))
            skipWhitespace()
            guard let next = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
            offset += 1
            switch next {
            case UInt8(ascii: ","): skipWhitespace()
            case UInt8(ascii: "}"): return .object(members)
            default: throw StrictJSONError(.unexpectedByte, offset: offset - 1)
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(StrictJSONError) -> StrictJSON.Value {
        guard depth <= StrictJSON.maximumDepth else { throw StrictJSONError(.tooDeep, offset: offset) }
        offset += 1  // [
        skipWhitespace()
        var elements: [StrictJSON.Value] = []
        if peek() == UInt8(ascii: "]") {
            offset += 1
            return .array(elements)
        }
        while true {
            path.append(.index(elements.count))
            elements.append(try parseValue(depth: depth))
            path.removeLast()
            skipWhitespace()
            guard let next = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
            offset += 1
            switch next {
            case UInt8(ascii: ","): skipWhitespace()
            case UInt8(ascii: "]"): return .array(elements)
            default: throw StrictJSONError(.unexpectedByte, offset: offset - 1)
            }
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(StrictJSONError) {
        let text = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for expected in text {
            guard let byte = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
            guard byte == expected else { throw StrictJSONError(.unexpectedByte, offset: offset) }
            offset += 1
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, returned as its literal text.
    private mutating func parseNumber() throws(StrictJSONError) -> String {
        let start = offset
        if peek() == UInt8(ascii: "-") { offset += 1 }
        guard let first = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
        if first == UInt8(ascii: "0") {
            offset += 1
            if let next = peek(), isDigit(next) { throw StrictJSONError(.leadingZero, offset: start) }
        } else if isDigit(first) {
            skipDigits()
        } else {
            throw StrictJSONError(.invalidNumber, offset: start)
        }
        if peek() == UInt8(ascii: ".") {
            offset += 1
            guard let digit = peek(), isDigit(digit) else { throw StrictJSONError(.invalidNumber, offset: start) }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            offset += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { offset += 1 }
            guard let digit = peek(), isDigit(digit) else { throw StrictJSONError(.invalidNumber, offset: start) }
            skipDigits()
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<offset]), as: UTF8.self)
    }

    // MARK: Strings

    /// Parses a string starting at its opening quote. Strings without escapes are decoded straight from
    /// the input; the scratch buffer used for escapes is zeroed afterwards (it may hold a name or email).
    private mutating func parseString() throws(StrictJSONError) -> String {
        offset += 1  // "
        let start = offset
        var hasEscapes = false
        // First pass: find the end, validating UTF-8, control characters and escapes.
        while true {
            guard let byte = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
            switch byte {
            case UInt8(ascii: "\""):
                let end = offset
                offset += 1
                if !hasEscapes {
                    return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
                }
                return unescape(start..<end)
            case UInt8(ascii: "\\"):
                hasEscapes = true
                _ = try parseEscape()
            case 0x00..<0x20:
                throw StrictJSONError(.controlCharacterInString, offset: offset)
            case 0x20..<0x80:
                offset += 1
            default:
                offset += try utf8SequenceLength(at: offset)
            }
        }
    }

    /// Decodes an escape at `offset` (the backslash) and moves past it.
    private mutating func parseEscape() throws(StrictJSONError) -> Unicode.Scalar {
        let escapeOffset = offset
        offset += 1  // backslash
        guard let byte = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
        offset += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try parseHex4()
            switch unit {
            case 0xD800...0xDBFF:
                guard peek() == UInt8(ascii: "\\"), peek(at: offset + 1) == UInt8(ascii: "u") else {
                    throw StrictJSONError(.loneSurrogate, offset: escapeOffset)
                }
                offset += 2
                let low = try parseHex4()
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw StrictJSONError(.loneSurrogate, offset: escapeOffset)
                }
                let value = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                return Unicode.Scalar(value)!
            case 0xDC00...0xDFFF:
                throw StrictJSONError(.loneSurrogate, offset: escapeOffset)
            default:
                return Unicode.Scalar(unit)!
            }
        default:
            throw StrictJSONError(.invalidEscape, offset: escapeOffset)
        }
    }

    private mutating func parseHex4() throws(StrictJSONError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw StrictJSONError(.invalidEscape, offset: offset)
            }
            value = value << 4 | UInt16(digit)
            offset += 1
        }
        return value
    }

    /// Second pass over an already validated string body that contains escapes.
    private func unescape(_ range: Range<Int>) -> String {
        var scratch: [UInt8] = []
        scratch.reserveCapacity(range.count)  // never grows: unescaping only shrinks
        defer { scratch.withUnsafeMutableBytes { Self.zero($0) } }
        var reader = StrictJSONParser(bytes: UnsafeRawBufferPointer(rebasing: bytes[range]))
        while let byte = reader.peek() {
            if byte == UInt8(ascii: "\\") {
                // Validated in the first pass.
                let scalar = try! reader.parseEscape()
                scratch.append(contentsOf: UTF8.encode(scalar)!)
            } else {
                scratch.append(byte)
                reader.offset += 1
            }
        }
        return String(decoding: scratch, as: UTF8.self)
    }

    /// The length of the well-formed UTF-8 sequence at `start` (a non-ASCII lead byte), per RFC 3629:
    /// no overlong forms, no surrogates, nothing above U+10FFFF.
    private func utf8SequenceLength(at start: Int) throws(StrictJSONError) -> Int {
        let lead = bytes[start]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            secondRange = 0x80...0x9F
        case 0xF0:
            length = 4
            secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            secondRange = 0x80...0x8F
        default: throw StrictJSONError(.invalidUTF8, offset: start)
        }
        for index in 1..<length {
            guard let byte = peek(at: start + index) else { throw StrictJSONError(.invalidUTF8, offset: start) }
            let range = index == 1 ? secondRange : 0x80...0xBF
            guard range.contains(byte) else { throw StrictJSONError(.invalidUTF8, offset: start) }
        }
        return length
    }

    // MARK: Helpers

    private func peek() -> UInt8? {
        peek(at: offset)
    }

    private func peek(at index: Int) -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private mutating func expect(_ byte: UInt8) throws(StrictJSONError) {
        guard let next = peek() else { throw StrictJSONError(.unexpectedEnd, offset: offset) }
        guard next == byte else { throw StrictJSONError(.unexpectedByte, offset: offset) }
        offset += 1
    }

    private mutating func skipWhitespace() {
        while let byte = peek(),
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
                || byte == UInt8(ascii: "\r")
        {
            offset += 1
        }
    }

    private mutating func skipDigits() {
        while let byte = peek(), isDigit(byte) { offset += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// The path of the innermost member, e.g. `fullName.givenName` or `items[2].name`, with keys shown as
    /// ``StrictJSON/displayName(forKey:)`` does.
    private func renderedPath() -> String {
        var result = ""
        for segment in path {
            switch segment {
            case .key(let key):
                if !result.isEmpty { result += "." }
                result += StrictJSON.displayName(forKey: key)
            case .index(let index):
                result += "[\(index)]"
            }
        }
        return result
    }

    /// Zeroes memory that held input bytes, in a way the optimizer may not drop.
    static func zero(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(Darwin)
        _ = memset_s(base, buffer.count, 0, buffer.count)
        #else
        explicit_bzero(base, buffer.count)
        #endif
    }
}
