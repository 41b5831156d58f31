import Foundation
import Logging
import Testing

@testable import profile_escrow

/// The JSON log line: every line parses as one JSON object whatever its strings hold, and the escapes are the ones
/// log pipelines and JavaScript expect.
@Suite("JSON log lines")
struct LogOutputTests {
    @Test func controlCharactersAndSeparatorsAreEscaped() throws {
        let awkward = "a\"b\\c\nd\re\tf\u{0}g\u{1F}h\u{7F}i\u{85}j\u{2028}k\u{2029}l é 中 😀"
        #expect(
            LogOutput.quote(awkward)
                == #""a\"b\\c\nd\re\tf\u0000g\u001fh\u007fi\u0085j\u2028k\u2029l é 中 😀""#
        )
        let line = LogOutput.json(
            date: Date(timeIntervalSince1970: 1_800_000_000),
            level: .info,
            label: "profile-escrow.test",
            message: awkward,
            ["message": .string("shadowed"), "list": .array([.string("x\u{1}"), .dictionary(["k": .string("v")])])]
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        #expect(object["message"] as? String == awkward)
        #expect(object["metadata.message"] as? String == "shadowed")
        #expect(object["time"] as? String == "2027-01-15T08:00:00.000Z")
        let list = try #require(object["list"] as? [Any])
        #expect(list.first as? String == "x\u{1}")
        #expect((list.last as? [String: String]) == ["k": "v"])
        #expect(!line.contains(0x0A), "one line")
    }
}
