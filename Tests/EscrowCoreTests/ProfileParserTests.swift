import Testing

@testable import EscrowCore

@Suite("Profile input parsing")
struct ProfileParserTests {
    static let valid = """
        {
          "userIdentifier": "000000.test0000000000000000000000000000.0001",
          "fullName": { "givenName": "Testy", "familyName": "McTestface", "middleName": null,
                        "namePrefix": null, "nameSuffix": null, "nickname": null },
          "email": "canary-0001@privaterelay.appleid.com",
          "isPrivateEmail": true,
          "realUserStatus": "likelyReal",
          "identityToken": "eyJ0ZXN0IjoidGVzdCJ9.eyJ0ZXN0IjoidGVzdCJ9.dGVzdA"
        }
        """

    static func parse(_ json: String) throws(ProfileValidationError) -> ProfileInput {
        try ProfileParser.parse(Array(json.utf8))
    }

    static func error(_ json: String) -> ProfileValidationError? {
        ProfileFixture.error { () throws(ProfileValidationError) in try parse(json) }
    }

    /// A body with the given extra members after a valid user identifier.
    static func body(_ members: String) -> String {
        #"{"userIdentifier":"000000.test0000000000000000000000000000.0001","# + members + "}"
    }

    @Test func parsesTheSpecExample() throws {
        let input = try Self.parse(Self.valid)
        #expect(input.profile.userIdentifier == ProfileFixture.userIdentifier)
        #expect(input.profile.fullName == PersonName(givenName: "Testy", familyName: "McTestface"))
        #expect(input.profile.email == ProfileFixture.relayEmail)
        #expect(input.profile.isPrivateEmail)
        #expect(input.profile.realUserStatus == .likelyReal)
        #expect(input.identityToken == "eyJ0ZXN0IjoidGVzdCJ9.eyJ0ZXN0IjoidGVzdCJ9.dGVzdA")
    }

    @Test func nullIsAllowedForEveryOptionalField() throws {
        let input = try Self.parse(
            Self.body(
                #"""
                "fullName":null,"email":"canary-0001@example.invalid","isPrivateEmail":null,"realUserStatus":null,\#
                "identityToken":null
                """#
            )
        )
        #expect(input.profile.fullName == nil)
        #expect(input.profile.isPrivateEmail == false)
        #expect(input.profile.realUserStatus == nil)
        #expect(input.identityToken == nil)

        let nameOnly = try Self.parse(
            Self.body(
                #"""
                "fullName":{"givenName":null,"familyName":null,"middleName":null,"namePrefix":null,"nameSuffix":null,\#
                "nickname":"Testy"},"email":null
                """#
            )
        )
        #expect(nameOnly.profile.fullName == PersonName(nickname: "Testy"))
        #expect(nameOnly.profile.email == nil)
    }

    @Test(arguments: [
        (#"{"email":"canary-0001@example.invalid"}"#, "userIdentifier"),
        (#"{"userIdentifier":null,"email":"canary-0001@example.invalid"}"#, "userIdentifier"),
    ])
    func userIdentifierIsRequired(_ json: String, _ field: String) {
        ProfileFixture.expect(Self.error(json), code: .missingField, field: field)
    }

    @Test(arguments: [
        // Unknown keys are never echoed: a key is sender's text and could be a name (`{"Ana": "Ng"}`).
        (#""email":"canary-0001@example.invalid","CANARY_7f3a":1"#, "<key>"),
        (#""email":"canary-0001@example.invalid","title":"Dr""#, "<key>"),
        (#""fullName":{"givenName":"Testy","title":"CANARY-7f3a"}"#, "fullName.<key>"),
        (#""fullName":{"givenname":"Testy"}"#, "fullName.<key>"),
        (#""fullName":{"givenName":"Testy"},"fullname":{}"#, "<key>"),
        (#""email":"canary-0001@example.invalid","is_private_email":true"#, "<key>"),
        (#""email":"canary-0001@example.invalid","CANARY-7f3a@example.invalid":1"#, "<key>"),
        (#""fullName":{"CANARY-7f3a McTestface":null}"#, "fullName.<key>"),
        (#""fullName":{"Ana":"Ng"}"#, "fullName.<key>"),
    ])
    func unknownFieldsAreRejected(_ members: String, _ field: String) {
        let error = Self.error(Self.body(members))
        #expect(error?.code == .unknownField)
        #expect(error?.field == field)
        #expect(error?.description.contains(ProfileFixture.canary) == false)
        #expect(error?.description.contains("Ana") == false)
    }

    @Test(arguments: [
        (#"{"userIdentifier":1,"email":"canary-0001@example.invalid"}"#, "userIdentifier"),
        (#"{"userIdentifier":["u1"],"email":"canary-0001@example.invalid"}"#, "userIdentifier"),
        (#"{"userIdentifier":"u1","fullName":"CANARY-7f3a McTestface"}"#, "fullName"),
        (#"{"userIdentifier":"u1","fullName":[]}"#, "fullName"),
        (#"{"userIdentifier":"u1","fullName":{"givenName":1}}"#, "fullName.givenName"),
        (#"{"userIdentifier":"u1","fullName":{"nickname":true}}"#, "fullName.nickname"),
        (#"{"userIdentifier":"u1","fullName":{"familyName":{"CANARY-7f3a":1}}}"#, "fullName.familyName"),
        (#"{"userIdentifier":"u1","email":true}"#, "email"),
        (#"{"userIdentifier":"u1","email":["CANARY-7f3a@example.invalid"]}"#, "email"),
        (#"{"userIdentifier":"u1","email":"canary-0001@example.invalid","isPrivateEmail":"true"}"#, "isPrivateEmail"),
        (#"{"userIdentifier":"u1","email":"canary-0001@example.invalid","isPrivateEmail":1}"#, "isPrivateEmail"),
        (#"{"userIdentifier":"u1","email":"canary-0001@example.invalid","realUserStatus":2}"#, "realUserStatus"),
        (#"{"userIdentifier":"u1","email":"canary-0001@example.invalid","identityToken":{}}"#, "identityToken"),
    ])
    func wrongTypesAreRejected(_ json: String, _ field: String) {
        ProfileFixture.expect(Self.error(json), code: .invalidType, field: field)
    }

    @Test(arguments: ["[]", "[{}]", #""CANARY-7f3a""#, "1", "true", "null"])
    func topLevelMustBeAnObject(_ json: String) {
        ProfileFixture.expect(Self.error(json), code: .invalidType, field: nil)
    }

    @Test(arguments: ["likelyReal", "unknown", "unsupported"])
    func realUserStatusAccepted(_ status: String) throws {
        let json = Self.body(#""email":"canary-0001@example.invalid","realUserStatus":""# + status + "\"")
        let input = try Self.parse(json)
        #expect(input.profile.realUserStatus?.rawValue == status)
    }

    @Test(arguments: ["LikelyReal", "likely_real", "", " likelyReal", "CANARY-7f3a"])
    func realUserStatusRejected(_ status: String) {
        let json = Self.body(#""email":"canary-0001@example.invalid","realUserStatus":""# + status + "\"")
        ProfileFixture.expect(Self.error(json), code: .invalidValue, field: "realUserStatus")
    }

    @Test(arguments: [
        (#"{"userIdentifier":"u1","email":"canary-0001@example.invalid","email":"CANARY-7f3a@x.invalid"}"#, "email"),
        (#"{"userIdentifier":"u1","userIdentifier":"CANARY-7f3a","email":"canary-0001@x.invalid"}"#, "userIdentifier"),
        (#"{"userIdentifier":"u1","fullName":{"givenName":"Testy","givenName":"CANARY-7f3a"}}"#, "fullName.givenName"),
        (#"{"userIdentifier":"u1","fullName":{"nickname":null,"nickname":null}}"#, "fullName.nickname"),
        // Keys are compared after unescaping.
        (#"{"userIdentifier":"u1","email":"canary-0001@x.invalid","\u0065mail":"CANARY-7f3a@x.invalid"}"#, "email"),
    ])
    func duplicateKeysAreRejected(_ json: String, _ path: String) {
        ProfileFixture.expect(Self.error(json), code: .malformedJSON, field: path)
    }

    static let malformed: [String] = [
        "",
        " ",
        "{",
        #"{"userIdentifier""#,
        #"{"userIdentifier":"#,
        #"{"userIdentifier":"CANARY-7f3a"#,
        #"{"userIdentifier":"CANARY-7f3a",}"#,
        #"{"userIdentifier":"CANARY-7f3a" "email":"x@y"}"#,
        #"{'userIdentifier':'CANARY-7f3a'}"#,
        #"{userIdentifier:"CANARY-7f3a"}"#,
        #"{"userIdentifier":"CANARY-7f3a"}}"#,
        #"{"userIdentifier":"CANARY-7f3a"} x"#,
        #"{"userIdentifier":"CANARY-7f3a","isPrivateEmail":tru}"#,
        #"{"userIdentifier":"CANARY-7f3a","isPrivateEmail":True}"#,
        #"{"userIdentifier":"CANARY-7f3a","realUserStatus":01}"#,
        #"{"userIdentifier":"CANARY-7f3a","realUserStatus":NaN}"#,
        #"{"userIdentifier":"CANARY-7f3a\x"}"#,
        #"{"userIdentifier":"CANARY-7f3a\ud800"}"#,
        "{\"userIdentifier\":\"CANARY-7f3a\n\"}",
        "\u{FEFF}{\"userIdentifier\":\"CANARY-7f3a\"}",
        "{\"userIdentifier\":\"CANARY-7f3a\"}\u{0}",
    ]

    @Test(arguments: malformed)
    func malformedJSONIsRejected(_ json: String) {
        ProfileFixture.expect(Self.error(json), code: .malformedJSON, field: nil)
    }

    @Test func invalidUTF8IsRejected() {
        var bytes = Array(Self.body(#""email":"canary-0001@example.invalid","fullName":{"givenName":"Test"#).utf8)
        bytes += [0xC3, 0x28]  // a lead byte followed by a non-continuation byte
        bytes += Array(#""}}"#.utf8)
        let error = ProfileFixture.error { () throws(ProfileValidationError) in try ProfileParser.parse(bytes) }
        ProfileFixture.expect(error, code: .malformedJSON, field: nil)
    }

    @Test func bodySizeLimit() throws {
        let base = Self.body(#""email":"canary-0001@example.invalid""#)
        let padding = ProfileParser.maximumBodySize - base.utf8.count
        let atLimit = base + String(repeating: " ", count: padding)
        #expect(atLimit.utf8.count == 16 * 1024)
        _ = try Self.parse(atLimit)

        ProfileFixture.expect(Self.error(atLimit + " "), code: .bodyTooLarge, field: nil)
        // Checked before parsing: garbage that is too large is "too large", not "malformed".
        let garbage = [UInt8](repeating: UInt8(ascii: "{"), count: 16 * 1024 + 1)
        let error = ProfileFixture.error { () throws(ProfileValidationError) in try ProfileParser.parse(garbage) }
        ProfileFixture.expect(error, code: .bodyTooLarge, field: nil)
    }

    @Test func validationErrorsCarryTheFieldPath() {
        let json = Self.body(#""fullName":{"givenName":"CANARY-7f3a\u202eTesty"}"#)
        ProfileFixture.expect(Self.error(json), code: .invalidValue, field: "fullName.givenName")
        let blank = Self.body(#""fullName":{"nickname":"  "}"#)
        ProfileFixture.expect(Self.error(blank), code: .nothingToEscrow, field: nil)
        ProfileFixture.expect(Self.error(Self.body(#""email":"CANARY-7f3a""#)), code: .invalidValue, field: "email")
    }

    @Test func namesAreNormalizedWhenParsed() throws {
        let input = try Self.parse(Self.body(#""fullName":{"givenName":"  Rene\u0301e ","familyName":" "}"#))
        let given = try #require(input.profile.fullName?.givenName)
        #expect(Array(given.unicodeScalars) == ["R", "e", "n", "\u{E9}", "e"])
        #expect(input.profile.fullName?.familyName == nil)
    }

    @Test func acceptsNonContiguousCollections() throws {
        let bytes = Array(Self.body(#""email":"canary-0001@example.invalid""#).utf8)
        let input = try ProfileParser.parse(bytes.lazy.map { $0 })
        #expect(input.profile.email == ProfileFixture.email)
    }
}
