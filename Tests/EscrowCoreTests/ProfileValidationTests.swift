import Testing

@testable import EscrowCore

/// Obviously fake test data, and a canary that must never appear in an error or a description.
enum ProfileFixture {
    static let canary = "CANARY-7f3a"
    static let userIdentifier = "000000.test0000000000000000000000000000.0001"
    static let email = "canary-0001@example.invalid"
    static let relayEmail = "canary-0001@privaterelay.appleid.com"

    static func profile(
        userIdentifier: String = userIdentifier,
        fullName: PersonName? = PersonName(givenName: "Testy", familyName: "McTestface"),
        email: String? = email,
        isPrivateEmail: Bool? = nil,
        realUserStatus: RealUserStatus? = .likelyReal
    ) throws(ProfileValidationError) -> Profile {
        try Profile(
            userIdentifier: userIdentifier,
            fullName: fullName,
            email: email,
            isPrivateEmail: isPrivateEmail,
            realUserStatus: realUserStatus
        )
    }

    /// A name with only the component `key` set.
    static func name(_ key: String, _ value: String) -> PersonName {
        var components = [String?](repeating: nil, count: PersonName.keys.count)
        components[PersonName.keys.firstIndex(of: key)!] = value
        return PersonName(components: components)
    }

    /// The error `body` throws, or `nil` when it succeeds.
    static func error<T>(_ body: () throws(ProfileValidationError) -> T) -> ProfileValidationError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    /// Checks an error's code and field, and that neither its description nor its message echoes the canary.
    static func expect(
        _ error: ProfileValidationError?,
        code: ProfileValidationError.Code,
        field: String?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error else {
            Issue.record("expected \(code) on \(field ?? "nil"), got success", sourceLocation: sourceLocation)
            return
        }
        #expect(error.code == code, sourceLocation: sourceLocation)
        #expect(error.field == field, sourceLocation: sourceLocation)
        #expect(!error.description.contains(canary), sourceLocation: sourceLocation)
        #expect(!error.message.contains(canary), sourceLocation: sourceLocation)
        #expect(!String(reflecting: error).contains(canary), sourceLocation: sourceLocation)
    }
}

@Suite("Profile validation")
struct ProfileValidationTests {
    // MARK: userIdentifier

    @Test(arguments: [
        ProfileFixture.userIdentifier,
        "000000.0000000000000000000000000000000b.0001",
        "a",
        "A-Z_a.z-0_9",
        String(repeating: "x", count: 255),
    ])
    func userIdentifierAccepted(_ value: String) throws {
        let profile = try ProfileFixture.profile(userIdentifier: value)
        #expect(profile.userIdentifier == value)
    }

    @Test(arguments: [
        "",
        ProfileFixture.canary + String(repeating: "x", count: 256 - ProfileFixture.canary.utf8.count),
        ProfileFixture.canary + " 0001",
        ProfileFixture.canary + "/0001",
        ProfileFixture.canary + "@example",
        ProfileFixture.canary + "\n",
        ProfileFixture.canary + "é",
        ProfileFixture.canary + "+1",
    ])
    func userIdentifierRejected(_ value: String) {
        ProfileFixture.expect(
            ProfileFixture.error { () throws(ProfileValidationError) in
                try ProfileFixture.profile(userIdentifier: value)
            },
            code: .invalidValue,
            field: "userIdentifier"
        )
    }

    // MARK: name components

    @Test(
        arguments: PersonName.keys,
        [
            ("Testy", "Testy"),
            ("  Testy  ", "Testy"),
            ("\u{A0}Testy\u{3000}", "Testy"),
            ("Testy McTestface", "Testy McTestface"),
            ("Zoë", "Zoë"),
            ("O'Test-Face", "O'Test-Face"),
            ("テスト", "テスト"),
        ]
    )
    func nameComponentAccepted(_ key: String, _ input: (given: String, expected: String)) throws {
        let profile = try ProfileFixture.profile(fullName: ProfileFixture.name(key, input.given), email: nil)
        let stored = try #require(profile.fullName?.components[PersonName.keys.firstIndex(of: key)!])
        #expect(Array(stored.unicodeScalars) == Array(input.expected.unicodeScalars))
    }

    static let forbiddenInNames: [String] = [
        "\u{0}", "\t", "\r", "\n", "\r\n", "\u{1B}", "\u{1F}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}",
        "\u{2028}", "\u{2029}",
        "\u{202A}", "\u{202B}", "\u{202C}", "\u{202D}", "\u{202E}",
        "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}",
        "\u{200E}", "\u{200F}", "\u{061C}",
    ]

    @Test(arguments: PersonName.keys, forbiddenInNames)
    func nameComponentRejectsControlAndBidi(_ key: String, _ forbidden: String) {
        let canary = ProfileFixture.canary
        for value in [canary + forbidden + "Testy", forbidden + canary, canary + forbidden] {
            ProfileFixture.expect(
                ProfileFixture.error { () throws(ProfileValidationError) in
                    try ProfileFixture.profile(fullName: ProfileFixture.name(key, value))
                },
                code: .invalidValue,
                field: "fullName." + key
            )
        }
    }

    @Test(arguments: PersonName.keys)
    func nameComponentIsNFCNormalized(_ key: String) throws {
        let profile = try ProfileFixture.profile(fullName: ProfileFixture.name(key, "Rene\u{301}e"), email: nil)
        let stored = try #require(profile.fullName?.components[PersonName.keys.firstIndex(of: key)!])
        #expect(Array(stored.unicodeScalars) == ["R", "e", "n", "\u{E9}", "e"])
        #expect(stored.utf8.count == 6)
    }

    @Test func whitespaceAgreesWithUnicodeForEveryASCIIScalarAndSomeOthers() {
        let others: [UInt32] = [0x85, 0xA0, 0x1680, 0x2000, 0x2028, 0x2029, 0x202F, 0x3000, 0xE9, 0x200B, 0xFEFF]
        for value in Array(0...0x7F) + others {
            let scalar = Unicode.Scalar(value)!
            #expect(Profile.isWhitespace(scalar) == scalar.properties.isWhitespace, "U+\(String(value, radix: 16))")
        }
    }

    @Test(
        arguments: PersonName.keys,
        [
            // (value, accepted): the 256-byte limit counts UTF-8 bytes after NFC normalization.
            (String(repeating: "a", count: 256), true),
            (String(repeating: "é", count: 128), true),
            // 384 bytes decomposed, 256 bytes once composed.
            (String(repeating: "e\u{301}", count: 128), true),
            (String(repeating: "a", count: 257), false),
            (String(repeating: "e\u{301}", count: 129), false),
            // U+0958 is excluded from composition: 240 bytes as given, 480 bytes in NFC.
            (String(repeating: "\u{0958}", count: 80), false),
            (ProfileFixture.canary + String(repeating: "x", count: 300), false),
        ]
    )
    func nameComponentLengthLimitAppliesAfterNFC(_ key: String, _ input: (value: String, accepted: Bool)) {
        let error = ProfileFixture.error { () throws(ProfileValidationError) in
            try ProfileFixture.profile(fullName: ProfileFixture.name(key, input.value), email: nil)
        }
        if input.accepted {
            #expect(error == nil)
        } else {
            ProfileFixture.expect(error, code: .invalidValue, field: "fullName." + key)
        }
    }

    @Test(arguments: PersonName.keys, ["", " ", "   ", "\u{A0}", "\u{3000}", " \u{2003} "])
    func whitespaceOnlyNameComponentIsAbsent(_ key: String, _ value: String) throws {
        var name = PersonName(givenName: "Testy")
        if key == "givenName" { name.familyName = "McTestface" }
        var components = name.components
        components[PersonName.keys.firstIndex(of: key)!] = value
        let profile = try ProfileFixture.profile(fullName: PersonName(components: components))
        #expect(profile.fullName?.components[PersonName.keys.firstIndex(of: key)!] == .some(nil))

        // A name whose only component is blank is no name at all.
        let blankOnly = try ProfileFixture.profile(fullName: ProfileFixture.name(key, value))
        #expect(blankOnly.fullName == nil)
    }

    // MARK: email

    @Test(arguments: [
        ProfileFixture.email,
        "a@b",
        "CaNaRy+Tag@Example.Invalid",
        String(repeating: "l", count: 64) + "@example.invalid",
        "canary@" + String(repeating: "d", count: 254 - 7),
        "tëst@exämple.invalid",
    ])
    func emailAccepted(_ email: String) throws {
        let profile = try ProfileFixture.profile(fullName: nil, email: email)
        #expect(profile.email == email)
    }

    @Test(arguments: [
        "",
        ProfileFixture.canary,
        ProfileFixture.canary + "@@example.invalid",
        ProfileFixture.canary + "@example@invalid",
        "@" + ProfileFixture.canary,
        ProfileFixture.canary + "@",
        ProfileFixture.canary + String(repeating: "l", count: 65 - 11) + "@example.invalid",
        ProfileFixture.canary + "@" + String(repeating: "d", count: 255 - 11 - 1),
        ProfileFixture.canary + " @example.invalid",
        ProfileFixture.canary + "@example.invalid ",
        " " + ProfileFixture.canary + "@example.invalid",
        ProfileFixture.canary + "\t@example.invalid",
        ProfileFixture.canary + "@example.invalid\n",
        ProfileFixture.canary + "\u{A0}@example.invalid",
        ProfileFixture.canary + "\u{0}@example.invalid",
        ProfileFixture.canary + "\u{202E}@example.invalid",
        ProfileFixture.canary + "\u{2028}@example.invalid",
    ])
    func emailRejected(_ email: String) {
        ProfileFixture.expect(
            ProfileFixture.error { () throws(ProfileValidationError) in try ProfileFixture.profile(email: email) },
            code: .invalidValue,
            field: "email"
        )
    }

    // MARK: isPrivateEmail

    @Test(arguments: [
        (ProfileFixture.relayEmail, true),
        ("canary-0001@PrivateRelay.AppleID.COM", true),
        (ProfileFixture.email, false),
        ("canary-0001@sub.privaterelay.appleid.com", false),
        ("canary-0001@privaterelay.appleid.com.example.invalid", false),
        ("privaterelay.appleid.com@example.invalid", false),
    ])
    func isPrivateEmailDefaultsFromDomain(_ email: String, _ expected: Bool) throws {
        #expect(try ProfileFixture.profile(email: email).isPrivateEmail == expected)
    }

    @Test func isPrivateEmailDefaultsToFalseWithoutEmail() throws {
        #expect(try ProfileFixture.profile(email: nil).isPrivateEmail == false)
    }

    @Test(arguments: [(ProfileFixture.relayEmail, false), (ProfileFixture.email, true)])
    func isPrivateEmailExplicitValueWins(_ email: String, _ explicit: Bool) throws {
        #expect(try ProfileFixture.profile(email: email, isPrivateEmail: explicit).isPrivateEmail == explicit)
    }

    @Test func isPrivateEmailTrueRequiresEmail() {
        ProfileFixture.expect(
            ProfileFixture.error { () throws(ProfileValidationError) in
                try ProfileFixture.profile(email: nil, isPrivateEmail: true)
            },
            code: .invalidValue,
            field: "isPrivateEmail"
        )
        #expect(
            ProfileFixture.error { () throws(ProfileValidationError) in
                try ProfileFixture.profile(email: nil, isPrivateEmail: false)
            } == nil
        )
    }

    // MARK: realUserStatus

    @Test(arguments: [RealUserStatus.unsupported, .unknown, .likelyReal, nil])
    func realUserStatusIsOptional(_ status: RealUserStatus?) throws {
        #expect(try ProfileFixture.profile(realUserStatus: status).realUserStatus == status)
    }

    // MARK: something to escrow

    @Test(arguments: [
        (PersonName?.none, String?.none, false),
        (PersonName(), nil, false),
        (PersonName(givenName: "   ", nickname: "\u{3000}"), nil, false),
        (PersonName(nickname: "Testy"), nil, true),
        (nil, ProfileFixture.email, true),
        (PersonName(givenName: " "), ProfileFixture.email, true),
    ])
    func somethingToEscrow(_ name: PersonName?, _ email: String?, _ accepted: Bool) {
        let error = ProfileFixture.error { () throws(ProfileValidationError) in
            try ProfileFixture.profile(fullName: name, email: email)
        }
        if accepted {
            #expect(error == nil)
        } else {
            ProfileFixture.expect(error, code: .nothingToEscrow, field: nil)
        }
    }

    @Test func fullNameWithoutComponentsBecomesNil() throws {
        let profile = try ProfileFixture.profile(fullName: PersonName(givenName: " ", familyName: ""))
        #expect(profile.fullName == nil)
    }

    // MARK: redaction

    @Test func profileAndNameNeverShowTheirContents() throws {
        let name = PersonName(givenName: ProfileFixture.canary, familyName: ProfileFixture.canary + "-family")
        let profile = try ProfileFixture.profile(
            userIdentifier: ProfileFixture.canary,
            fullName: name,
            email: ProfileFixture.canary + "@example.invalid"
        )
        let input = ProfileInput(profile: profile, identityToken: ProfileFixture.canary + ".jwt")
        for subject in [profile as Any, name, profile.fullName as Any, input] {
            var dumped = ""
            dump(subject, to: &dumped)
            let renderings = [
                String(describing: subject), String(reflecting: subject), "\(subject)", dumped,
                String(describing: Mirror(reflecting: subject).children.map { $0.value }),
            ]
            for rendering in renderings {
                #expect(!rendering.contains(ProfileFixture.canary), "leaked: \(type(of: subject))")
            }
        }
        #expect(String(describing: profile) == "Profile(redacted)")
        #expect("\(name)" == "PersonName(redacted)")
        #expect(Mirror(reflecting: profile).children.isEmpty)
    }

    @Test func errorCodesAreStable() {
        let codes: [ProfileValidationError.Code] = [
            .malformedJSON, .bodyTooLarge, .unknownField, .invalidType, .invalidValue, .missingField, .nothingToEscrow,
        ]
        #expect(
            codes.map(\.rawValue) == [
                "malformed_json", "body_too_large", "unknown_field", "invalid_type", "invalid_value", "missing_field",
                "nothing_to_escrow",
            ]
        )
    }
}
