extension Substring {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace). Works on the UTF-8 bytes:
    /// going through `Character`s (grapheme breaking, twice reversed) measured 3.4% of the CPU of an HTTP capture.
    func trimmingSpaces() -> String {
        let bytes = utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}
