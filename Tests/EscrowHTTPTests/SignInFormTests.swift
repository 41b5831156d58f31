import Testing

@testable import EscrowHTTP

/// Apple's form_post body, parsed strictly: each field once, valid escapes and UTF-8, or no form at all.
@Suite("Sign-in form")
struct SignInFormTests {
    @Test("fields decode, in order, with + as a space and percent escapes")
    func decodes() throws {
        let form = try #require(SignInForm(Array("state=a%2Bb&user=%7B%22x%22%3A1%7D&code=c+d&empty=".utf8)))
        #expect(form.fields.map(\.name) == ["state", "user", "code", "empty"])
        #expect(form["state"] == "a+b" && form["user"] == "{\"x\":1}" && form["code"] == "c d" && form["empty"] == "")
        #expect(SignInForm(Array("".utf8))?.fields.isEmpty == true)
    }

    @Test(
        "a repeated field, a broken escape or bytes that are not UTF-8 make no form",
        arguments: [
            "state=a&state=b", "state=%", "state=%4", "state=%zz", "state=%FF", "state=%C3%28", "user%3D=x&user%3d=y",
        ]
    )
    func refuses(_ body: String) {
        #expect(SignInForm(Array(body.utf8)) == nil)
    }

    @Test("encoding round-trips any text, and keeps only unreserved characters as they are")
    func roundTrips() throws {
        for text in ["plain", "a b+c&d=e", "é\u{202E}\u{0}", "{\"name\":{\"firstName\":\"x\"}}"] {
            let encoded = SignInForm.encode(text)
            #expect(encoded.utf8.allSatisfy { $0 < 0x80 && !"&=+ ".utf8.contains($0) })
            #expect(SignInForm.decode(Array(encoded.utf8)) == text)
        }
    }
}

@Suite("Sign-in form: bounded work")
struct SignInFormBoundsTests {
    @Test("at most 16 fields: a 4,000-field body makes no form, whatever its fields")
    func fieldCap() {
        let distinct = (0..<4000).map { "f\($0)=" }.joined(separator: "&")
        let empty = Array(repeating: "=", count: 4000).joined(separator: "&")
        let ampersands = String(repeating: "&", count: 16 * 1024)
        #expect(SignInForm(Array(distinct.utf8)) == nil, "distinct names past the cap")
        #expect(SignInForm(Array(empty.utf8)) == nil, "empty names are one name, repeated")
        #expect(SignInForm(Array(ampersands.utf8))?.fields.isEmpty == true, "separators alone are no field")
        let sixteen = (0..<16).map { "f\($0)=v" }.joined(separator: "&")
        #expect(SignInForm(Array(sixteen.utf8))?.fields.count == 16)
        #expect(SignInForm(Array((sixteen + "&f16=v").utf8)) == nil)
    }

    @Test("a repeated name is found among many (a set, not a scan of the fields so far)")
    func duplicateAmongMany() {
        let fields = (0..<15).map { "f\($0)=v" } + ["f3=again"]
        #expect(SignInForm(Array(fields.joined(separator: "&").utf8)) == nil)
    }
}
