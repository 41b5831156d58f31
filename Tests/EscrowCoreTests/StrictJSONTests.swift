import Testing

@testable import EscrowCore

@Suite("StrictJSON")
struct StrictJSONTests {
    static func parse(_ text: String) throws(StrictJSONError) -> StrictJSON.Value {
        try StrictJSON.parse(Array(text.utf8))
    }

    static func error(_ bytes: [UInt8]) -> StrictJSONError? {
        do {
            _ = try StrictJSON.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    static func error(_ text: String) -> StrictJSONError? {
        error(Array(text.utf8))
    }

    @Test func parsesAllValueKindsAndKeepsMemberOrder() throws {
        let value = try Self.parse(
            #" { "z" : [1, -0, 0.5, -1.25e+3, 2E-2, 10], "a": {"t": true, "f": false, "n": null}, "m": "" } "#
        )
        #expect(
            value
                == .object([
                    .init(
                        key: "z",
                        value: .array([
                            .number("1"), .number("-0"), .number("0.5"), .number("-1.25e+3"), .number("2E-2"),
                            .number("10"),
                        ])
                    ),
                    .init(
                        key: "a",
                        value: .object([
                            .init(key: "t", value: .bool(true)), .init(key: "f", value: .bool(false)),
                            .init(key: "n", value: .null),
                        ])
                    ),
                    .init(key: "m", value: .string("")),
                ])
        )
    }

    @Test(arguments: [
        (#""\"\\\/\b\f\n\r\t""#, "\"\\/\u{8}\u{C}\n\r\t"),
        (#""\u0041\u00e9\u20AC""#, "A\u{E9}\u{20AC}"),
        (#""\ud83d\ude00""#, "\u{1F600}"),
        (#""\udbff\udfff\ud800\udc00""#, "\u{10FFFF}\u{10000}"),
        (#""\u0000""#, "\u{0}"),
        ("\"Zoë 😀 テスト\"", "Zoë 😀 テスト"),
        (#""plain""#, "plain"),
    ])
    func decodesStrings(_ json: String, _ expected: String) throws {
        guard case .string(let string) = try Self.parse(json) else {
            Issue.record("not a string")
            return
        }
        #expect(Array(string.unicodeScalars) == Array(expected.unicodeScalars))
    }

    @Test(arguments: [
        ("", StrictJSONError.Code.unexpectedEnd, 0),
        ("   ", .unexpectedEnd, 3),
        ("{", .unexpectedEnd, 1),
        (#"{"a":1"#, .unexpectedEnd, 6),
        (#"{"a":1,}"#, .unexpectedByte, 7),
        (#"[1,]"#, .unexpectedByte, 3),
        (#"[1 2]"#, .unexpectedByte, 3),
        (#"{"a" 1}"#, .unexpectedByte, 5),
        (#"{a:1}"#, .unexpectedByte, 1),
        (#"{"a":1}x"#, .trailingData, 7),
        (#"{} {}"#, .trailingData, 3),
        ("01", .leadingZero, 0),
        ("-01", .leadingZero, 0),
        ("[00]", .leadingZero, 1),
        ("-", .unexpectedEnd, 1),
        ("-a", .invalidNumber, 0),
        ("1.", .invalidNumber, 0),
        ("1.e5", .invalidNumber, 0),
        ("1e", .invalidNumber, 0),
        ("1e+", .invalidNumber, 0),
        (".5", .unexpectedByte, 0),
        ("+1", .unexpectedByte, 0),
        ("NaN", .unexpectedByte, 0),
        ("Infinity", .unexpectedByte, 0),
        ("0x10", .trailingData, 1),
        ("tru", .unexpectedEnd, 3),
        ("nul1", .unexpectedByte, 3),
        (#""abc"#, .unexpectedEnd, 4),
        ("\"a\tb\"", .controlCharacterInString, 2),
        ("\"a\nb\"", .controlCharacterInString, 2),
        ("\"\u{1F}\"", .controlCharacterInString, 1),
        (#""\x""#, .invalidEscape, 1),
        (#""\u12G4""#, .invalidEscape, 5),
        (#""\'""#, .invalidEscape, 1),
        (#""\ud800""#, .loneSurrogate, 1),
        (#""\ud800\u0041""#, .loneSurrogate, 1),
        (#""\ud800x""#, .loneSurrogate, 1),
        (#""\udc00""#, .loneSurrogate, 1),
        (#""\udfff""#, .loneSurrogate, 1),
        (#""\udbff""#, .loneSurrogate, 1),
        (#""a\ude00\ud83d""#, .loneSurrogate, 2),
        ("\u{FEFF}{}", .unexpectedByte, 0),
        ("[1]\u{0}", .trailingData, 3),
    ])
    func rejectsMalformedInput(_ json: String, _ reason: StrictJSONError.Code, _ offset: Int) {
        let error = Self.error(json)
        #expect(error?.code == reason)
        #expect(error?.offset == offset)
        #expect(error?.path == nil)
    }

    @Test(
        arguments: [
            ([0x22, 0x80, 0x22], 1),  // lone continuation byte
            ([0x22, 0xC0, 0x80, 0x22], 1),  // overlong NUL
            ([0x22, 0xC1, 0xBF, 0x22], 1),  // overlong
            ([0x22, 0xE0, 0x80, 0x80, 0x22], 1),  // overlong 3-byte
            ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),  // UTF-8 encoded surrogate U+D800
            ([0x22, 0xF0, 0x80, 0x80, 0x80, 0x22], 1),  // overlong 4-byte
            ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),  // above U+10FFFF
            ([0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], 1),  // invalid lead byte
            ([0x22, 0xFF, 0x22], 1),
            ([0x22, 0x41, 0xE2, 0x82, 0x22], 2),  // truncated sequence
            ([0x22, 0x41, 0xE2, 0x82], 2),  // truncated at the end of input
            ([0x22, 0x41, 0xC3, 0x28, 0x22], 2),  // lead byte followed by ASCII
        ] as [([UInt8], Int)]
    )
    func rejectsInvalidUTF8(_ bytes: [UInt8], _ offset: Int) {
        let error = Self.error(bytes)
        #expect(error?.code == .invalidUTF8)
        #expect(error?.offset == offset)
    }

    @Test func acceptsMaximalValidUTF8() throws {
        let bytes: [UInt8] = [0x22, 0xC2, 0x80, 0xEF, 0xBF, 0xBD, 0xF4, 0x8F, 0xBF, 0xBF, 0xED, 0x9F, 0xBF, 0x22]
        guard case .string(let string) = try StrictJSON.parse(bytes) else {
            Issue.record("not a string")
            return
        }
        #expect(string.unicodeScalars.map(\.value) == [0x80, 0xFFFD, 0x10FFFF, 0xD7FF])
    }

    @Test(arguments: [1, 16, 32])
    func acceptsNestingUpToTheLimit(_ depth: Int) throws {
        _ = try Self.parse(String(repeating: "[", count: depth) + String(repeating: "]", count: depth))
        let objects = String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        _ = try Self.parse(objects)
    }

    @Test(arguments: [33, 34, 1000])
    func rejectsNestingBeyondTheLimit(_ depth: Int) {
        let arrays = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(Self.error(arrays)?.code == .tooDeep)
        #expect(Self.error(arrays)?.offset == 32)
        let objects = String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        #expect(Self.error(objects)?.code == .tooDeep)
        let mixed = String(repeating: #"[{"a":"#, count: depth) + "1" + String(repeating: "}]", count: depth)
        #expect(Self.error(mixed)?.code == .tooDeep)
    }

    @Test(arguments: [
        (#"{"a":1,"a":2}"#, "<key>", 7),
        (#"{"email":1,"email":2}"#, "email", 11),
        (#"{"fullName":{"givenName":"x","givenName":"y"}}"#, "fullName.givenName", 29),
        (#"{"list":[{"k":1},{"k":1,"k":2}]}"#, "<key>[1].<key>", 24),
        (#"{"a":{"b":{"c":1,"c":1}}}"#, "<key>.<key>.<key>", 17),
        (#"{"\u0065mail":1,"email":2}"#, "email", 16),
        // Canonically equivalent keys count as duplicates too.
        (#"{"\u00e9":1,"e\u0301":2}"#, "<key>", 12),
        // Keys the project does not define are never echoed: they could be personal data.
        (#"{"CANARY-7f3a@example.invalid":1,"CANARY-7f3a@example.invalid":2}"#, "<key>", 33),
        (#"{"x":{"CANARY 7f3a":1,"CANARY 7f3a":2}}"#, "<key>.<key>", 22),
    ])
    func rejectsDuplicateKeysWithTheirPath(_ json: String, _ path: String, _ offset: Int) {
        let error = Self.error(json)
        #expect(error?.code == .duplicateKey)
        #expect(error?.path == path)
        #expect(error?.offset == offset)
        #expect(error?.message.contains("7f3a") == false)
    }

    @Test func errorsNeverEchoStringContents() {
        let inputs = [
            #"{"name":"CANARY-7f3a\x"}"#,
            "{\"name\":\"CANARY-7f3a\n\"}",
            #"{"name":"CANARY-7f3a"#,
            #"{"name":"CANARY-7f3a"} "CANARY-7f3a""#,
            #"{"name":"CANARY-7f3a\udc00"}"#,
        ]
        for input in inputs {
            let error = Self.error(input)
            #expect(error != nil)
            #expect(error?.description.contains(ProfileFixture.canary) == false)
        }
    }

    @Test func parsesNonContiguousCollections() throws {
        let bytes = Array(#"{"a":["b",1]}"#.utf8)
        #expect(try StrictJSON.parse(bytes.lazy.map { $0 }) == Self.parse(#"{"a":["b",1]}"#))
        #expect(Self.error(Array("[1,".utf8))?.code == .unexpectedEnd)
    }
}
