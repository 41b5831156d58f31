import EscrowCrypto
import Foundation
import Testing

@testable import EscrowCore

@Suite("Escrow plaintext encoding")
struct EscrowPlaintextTests {
    static let capturedAt = Date(timeIntervalSince1970: 1_763_719_200)

    static func plaintext(
        _ profile: Profile,
        verified: Bool = false,
        capturedAt: Date = capturedAt
    ) -> EscrowPlaintext {
        EscrowPlaintext(profile: profile, verified: verified, capturedAt: capturedAt)
    }

    static func bytes(_ secret: SecretBytes) -> [UInt8] {
        secret.withUnsafeBytes { Array($0) }
    }

    static func text(_ secret: SecretBytes) -> String {
        String(decoding: bytes(secret), as: UTF8.self)
    }

    static func decodeError(_ json: String) -> ProfileValidationError? {
        ProfileFixture.error { () throws(ProfileValidationError) in
            try EscrowPlaintext.decode(SecretBytes(copying: Array(json.utf8)))
        }
    }

    // MARK: canonical encoding

    @Test func encodesTheDocumentedExampleExactly() throws {
        let plaintext = Self.plaintext(try ProfileFixture.profile())
        let expected =
            #"{"v":1,"userIdentifier":"000000.test0000000000000000000000000000.0001","#
            + #""fullName":{"givenName":"Testy","familyName":"McTestface"},"email":"canary-0001@example.invalid","#
            + #""isPrivateEmail":false,"realUserStatus":"likelyReal","verified":false,"capturedAt":1763719200}"#
        #expect(Self.text(plaintext.encoded()) == expected)
        #expect(plaintext.encoded().count == 262)
    }

    @Test func omitsAbsentMembersAndKeepsTheOrder() throws {
        let emailOnly = try ProfileFixture.profile(
            userIdentifier: "u1",
            fullName: nil,
            email: "a@b",
            realUserStatus: nil
        )
        #expect(
            Self.text(Self.plaintext(emailOnly, verified: true, capturedAt: Date(timeIntervalSince1970: 0)).encoded())
                == #"{"v":1,"userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"verified":true,"capturedAt":0}"#
        )
        let allNames = try ProfileFixture.profile(
            userIdentifier: "u1",
            fullName: PersonName(
                givenName: "G",
                familyName: "F",
                middleName: "M",
                namePrefix: "P",
                nameSuffix: "S",
                nickname: "N"
            ),
            email: nil,
            realUserStatus: .unsupported
        )
        #expect(
            Self.text(Self.plaintext(allNames).encoded())
                == #"{"v":1,"userIdentifier":"u1","fullName":{"givenName":"G","familyName":"F","middleName":"M","#
                + #""namePrefix":"P","nameSuffix":"S","nickname":"N"},"isPrivateEmail":false,"#
                + #""realUserStatus":"unsupported","verified":false,"capturedAt":1763719200}"#
        )
    }

    @Test func escapesQuotesAndBackslashesAndWritesUnicodeRaw() throws {
        let profile = try ProfileFixture.profile(
            userIdentifier: "u1",
            fullName: PersonName(givenName: #"Te"st\y/"#, familyName: "Zoë 😀"),
            email: nil
        )
        let encoded = Self.bytes(Self.plaintext(profile).encoded())
        let expected =
            Array(#"{"v":1,"userIdentifier":"u1","fullName":{"givenName":"Te\"st\\y/","#.utf8)
            + Array("\"familyName\":\"Zoë 😀\"},".utf8)
        #expect(Array(encoded.prefix(expected.count)) == expected)
    }

    @Test func writerEscapesControlCharactersAsLowercaseHex() {
        let document = StringDocument(value: "a\u{0}\u{1F}\n\u{7F}\u{80}\"\\é")
        let expected = #""a\u0000\u001f\u000a"# + "\u{7F}\u{80}" + #"\"\\é""#
        #expect(String(decoding: CanonicalJSON.bytes(of: document), as: UTF8.self) == expected)
    }

    @Test(arguments: [
        (1_763_719_200.0, 1_763_719_200.0),
        (1_763_719_200.999, 1_763_719_200.0),
        (1_763_719_200.000_1, 1_763_719_200.0),
        (0.5, 0.0),
        (-0.5, -1.0),
    ])
    func capturedAtIsRoundedDownToWholeSeconds(_ given: Double, _ stored: Double) throws {
        let plaintext = Self.plaintext(try ProfileFixture.profile(), capturedAt: Date(timeIntervalSince1970: given))
        #expect(plaintext.capturedAt.timeIntervalSince1970 == stored)
        #expect(Self.text(plaintext.encoded()).hasSuffix(#""capturedAt":\#(Int64(stored))}"#))
    }

    // MARK: determinism

    @Test func sameContentGivesIdenticalBytes() throws {
        let first = Self.plaintext(
            try ProfileFixture.profile(fullName: PersonName(givenName: "Rene\u{301}e", familyName: "  McTestface ")),
            capturedAt: Date(timeIntervalSince1970: 1_763_719_200.25)
        )
        let second = Self.plaintext(
            try ProfileFixture.profile(
                fullName: PersonName(givenName: "Ren\u{E9}e", familyName: "McTestface", nickname: "  "),
                isPrivateEmail: false
            ),
            capturedAt: Date(timeIntervalSince1970: 1_763_719_200.75)
        )
        #expect(first == second)
        #expect(first.encoded() == second.encoded())
        #expect(Self.bytes(first.encoded()) == Self.bytes(second.encoded()))
    }

    static let variations: [@Sendable () throws -> EscrowPlaintext] = [
        { plaintext(try ProfileFixture.profile()) },
        { plaintext(try ProfileFixture.profile(userIdentifier: "000000.test0000000000000000000000000000.0002")) },
        { plaintext(try ProfileFixture.profile(fullName: PersonName(givenName: "Testy"))) },
        { plaintext(try ProfileFixture.profile(fullName: PersonName(givenName: "Testy", familyName: "McTestfacf"))) },
        { plaintext(try ProfileFixture.profile(fullName: PersonName(givenName: "McTestface", familyName: "Testy"))) },
        { plaintext(try ProfileFixture.profile(fullName: PersonName(familyName: "McTestface", nickname: "Testy"))) },
        { plaintext(try ProfileFixture.profile(fullName: nil)) },
        { plaintext(try ProfileFixture.profile(email: "canary-0002@example.invalid")) },
        { plaintext(try ProfileFixture.profile(email: nil)) },
        { plaintext(try ProfileFixture.profile(isPrivateEmail: true)) },
        { plaintext(try ProfileFixture.profile(realUserStatus: .unknown)) },
        { plaintext(try ProfileFixture.profile(realUserStatus: nil)) },
        { plaintext(try ProfileFixture.profile(), verified: true) },
        { plaintext(try ProfileFixture.profile(), capturedAt: capturedAt.addingTimeInterval(1)) },
    ]

    @Test func differentContentGivesDifferentBytes() throws {
        let encodings = try Self.variations.map { try Self.bytes($0().encoded()) }
        #expect(Set(encodings).count == encodings.count)
    }

    // MARK: round trip and decoding

    @Test func roundTripsEveryVariation() throws {
        for make in Self.variations {
            let plaintext = try make()
            let decoded = try EscrowPlaintext.decode(plaintext.encoded())
            #expect(decoded == plaintext)
            #expect(decoded.encoded() == plaintext.encoded())
        }
    }

    @Test func decodeAcceptsMembersInAnyOrder() throws {
        let json = #"{"capturedAt":5,"verified":true,"isPrivateEmail":false,"email":"a@b","userIdentifier":"u1","v":1}"#
        let decoded = try EscrowPlaintext.decode(SecretBytes(copying: Array(json.utf8)))
        #expect(decoded.profile.email == "a@b")
        #expect(decoded.verified)
        #expect(decoded.capturedAt == Date(timeIntervalSince1970: 5))
    }

    static let base = #""userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"verified":false,"capturedAt":0"#

    @Test(
        arguments: [
            ("{" + base + "}", ProfileValidationError.Code.missingField, "v"),
            (#"{"v":2,"# + base + "}", .invalidValue, "v"),
            (#"{"v":"1","# + base + "}", .invalidValue, "v"),
            (#"{"v":1.0,"# + base + "}", .invalidValue, "v"),
            (#"{"v":1,"# + base + #","extra":1}"#, .unknownField, "<key>"),
            (#"{"v":1,"# + base + #","identityToken":"x"}"#, .unknownField, "identityToken"),
            (
                #"{"v":1,"userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"verified":false}"#, .missingField,
                "capturedAt"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"capturedAt":0}"#, .missingField,
                "verified"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","email":"a@b","verified":false,"capturedAt":0}"#, .missingField,
                "isPrivateEmail"
            ),
            (
                #"{"v":1,"email":"a@b","isPrivateEmail":false,"verified":false,"capturedAt":0}"#, .missingField,
                "userIdentifier"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"verified":false,"#
                    + #""capturedAt":1.5}"#,
                .invalidType, "capturedAt"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"verified":false,"#
                    + #""capturedAt":"0"}"#,
                .invalidType, "capturedAt"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","email":"a@b","isPrivateEmail":false,"verified":0,"capturedAt":0}"#,
                .invalidType, "verified"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","email":"CANARY-7f3a","#
                    + #""isPrivateEmail":false,"verified":false,"capturedAt":0}"#,
                .invalidValue, "email"
            ),
            (
                #"{"v":1,"userIdentifier":"u1","isPrivateEmail":false,"verified":false,"capturedAt":0}"#,
                .nothingToEscrow, nil
            ),
            (
                #"{"v":1,"userIdentifier":"u1","fullName":{"givenName":"CANARY-7f3a\u0000"},"isPrivateEmail":false,"#
                    + #""verified":false,"capturedAt":0}"#, .invalidValue, "fullName.givenName"
            ),
            (#"{"v":1,"v":1,"# + base + "}", .malformedJSON, "v"),
            (#"{"v":1,"# + base + #","email":"CANARY-7f3a@example.invalid"}"#, .malformedJSON, "email"),
            (#"{"v":1,"# + base, .malformedJSON, nil),
            ("", .malformedJSON, nil),
            ("[]", .invalidType, nil),
        ] as [(String, ProfileValidationError.Code, String?)]
    )
    func decodeRejectsInvalidPlaintexts(_ json: String, _ code: ProfileValidationError.Code, _ field: String?) {
        ProfileFixture.expect(Self.decodeError(json), code: code, field: field)
    }

    @Test func decodeRejectsEveryTruncation() throws {
        let encoded = Self.bytes(Self.plaintext(try ProfileFixture.profile()).encoded())
        for length in 0..<encoded.count {
            let error = ProfileFixture.error { () throws(ProfileValidationError) in
                try EscrowPlaintext.decode(SecretBytes(copying: encoded.prefix(length)))
            }
            #expect(error?.code == .malformedJSON, "prefix of \(length) bytes")
        }
    }

    // MARK: replay bodies

    @Test func backendJSONMatchesSpecSection7() throws {
        let body = Self.plaintext(try ProfileFixture.profile(email: ProfileFixture.relayEmail), verified: true)
            .backendJSON(escrowId: "00112233445566778899aabbccddeeff", attempt: 3)
        let expected =
            #"{"escrowId":"00112233445566778899aabbccddeeff","#
            + #""userIdentifier":"000000.test0000000000000000000000000000.0001","#
            + #""fullName":{"givenName":"Testy","familyName":"McTestface","middleName":null,"namePrefix":null,"#
            + #""nameSuffix":null,"nickname":null},"email":"canary-0001@privaterelay.appleid.com","#
            + #""isPrivateEmail":true,"realUserStatus":"likelyReal","capturedAt":"2025-11-21T10:00:00Z","#
            + #""verified":true,"attempt":3}"#
        #expect(String(decoding: body, as: UTF8.self) == expected)
        #expect(throws: Never.self) { try StrictJSON.parse(body) }
    }

    @Test func backendJSONWritesNullForAbsentMembers() throws {
        let body = Self.plaintext(try ProfileFixture.profile(fullName: nil, realUserStatus: nil))
            .backendJSON(escrowId: "e1", attempt: 1)
        let expected =
            #"{"escrowId":"e1","userIdentifier":"000000.test0000000000000000000000000000.0001","#
            + #""fullName":null,"email":"canary-0001@example.invalid","isPrivateEmail":false,"#
            + #""realUserStatus":null,"capturedAt":"2025-11-21T10:00:00Z","verified":false,"attempt":1}"#
        #expect(String(decoding: body, as: UTF8.self) == expected)

        let nameOnly = Self.plaintext(try ProfileFixture.profile(fullName: PersonName(nickname: "Testy"), email: nil))
            .backendJSON(escrowId: "e1", attempt: 2)
        #expect(
            String(decoding: nameOnly, as: UTF8.self).contains(
                #""fullName":{"givenName":null,"familyName":null,"middleName":null,"namePrefix":null,"#
                    + #""nameSuffix":null,"nickname":"Testy"},"email":null,"#
            )
        )
    }

    @Test func profileJSONIsTheBackendBodyWithoutEscrowIdAndAttempt() throws {
        let plaintext = Self.plaintext(try ProfileFixture.profile())
        let expected =
            #"{"userIdentifier":"000000.test0000000000000000000000000000.0001","#
            + #""fullName":{"givenName":"Testy","familyName":"McTestface","middleName":null,"namePrefix":null,"#
            + #""nameSuffix":null,"nickname":null},"email":"canary-0001@example.invalid","#
            + #""isPrivateEmail":false,"realUserStatus":"likelyReal","capturedAt":"2025-11-21T10:00:00Z","#
            + #""verified":false}"#
        #expect(String(decoding: plaintext.profileJSON(), as: UTF8.self) == expected)
    }

    @Test(
        arguments: [
            0, 1, 59, 86_399, 86_400, 951_782_400, 951_868_800, 1_709_164_800, 1_709_251_199, 1_763_719_200,
            4_102_444_799, 253_402_300_799, -1, -86_400, -86_401,
        ] as [Int64]
    )
    func iso8601MatchesFoundation(_ seconds: Int64) {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
        #expect(Timestamp.seconds(unixSeconds: seconds) == expected)
    }

    // MARK: redaction

    @Test func plaintextNeverShowsItsContents() throws {
        let plaintext = Self.plaintext(
            try ProfileFixture.profile(
                userIdentifier: ProfileFixture.canary,
                fullName: PersonName(givenName: ProfileFixture.canary),
                email: ProfileFixture.canary + "@example.invalid"
            )
        )
        var dumped = ""
        dump(plaintext, to: &dumped)
        for rendering in [String(describing: plaintext), String(reflecting: plaintext), "\(plaintext)", dumped] {
            #expect(!rendering.contains(ProfileFixture.canary))
        }
        #expect("\(plaintext.encoded())" == "SecretBytes(redacted)")
    }
}

/// A single string, to test the writer's escaping directly.
private struct StringDocument: CanonicalJSONDocument {
    let value: String

    func write<Sink: CanonicalJSONSink>(to writer: inout CanonicalJSONWriter<Sink>) {
        writer.string(value)
    }
}
