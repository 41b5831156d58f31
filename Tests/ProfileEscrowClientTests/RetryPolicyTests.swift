import Testing

@testable import ProfileEscrowClient

@Suite("ProfileEscrowClient: backoff and the escrow's statuses")
struct RetryPolicyTests {
    @Test("waits double from the first up to the longest; the round ends after its tries")
    func exponentialAndBounded() {
        let policy = RetryPolicy(tries: 6, firstDelay: .seconds(1), longestDelay: .seconds(5))
        let delays = (1...6).map { policy.delay(afterFailures: $0, retryAfter: nil) }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5), nil])
    }

    @Test("Retry-After is waited when within the longest wait; a longer one ends the round")
    func retryAfter() {
        let policy = RetryPolicy(tries: 4, firstDelay: .seconds(1), longestDelay: .seconds(30))
        #expect(policy.delay(afterFailures: 1, retryAfter: .seconds(7)) == .seconds(7))
        #expect(policy.delay(afterFailures: 1, retryAfter: .seconds(31)) == nil)
    }

    @Test("401 and 410 and a malformed request are refused for good; 429, 5xx and others are tried again")
    func statuses() {
        func code(_ status: Int, _ retryAfter: String? = nil) -> (String, SignInClientError.Code?, Duration?) {
            switch EscrowAPI.classify(status, retryAfter: retryAfter) {
            case .answered: ("answered", nil, nil)
            case .refused(let error): ("refused", error.code, nil)
            case .unavailable(let error, let after): ("unavailable", error.code, after)
            }
        }
        #expect(code(200).0 == "answered")
        #expect(code(201).0 == "answered")
        #expect(code(401) == ("refused", .tokenRefused, nil))
        #expect(code(410) == ("refused", .attemptGone, nil))
        #expect(code(413) == ("refused", .requestRefused, nil))
        #expect(code(429, "3") == ("unavailable", .unavailable, .seconds(3)))
        #expect(code(503, "soon") == ("unavailable", .unavailable, nil))
        #expect(code(500) == ("unavailable", .unavailable, nil))
    }

    @Test("an error's description names its code and status, nothing else")
    func errorText() {
        #expect(
            SignInClientError(.tokenRefused, status: 401).description
                == "sign-in through the escrow: tokenRefused (HTTP 401)"
        )
        #expect(SignInClientError(.unavailable).description == "sign-in through the escrow: unavailable")
    }
}

@Suite("ProfileEscrowClient: nothing personal printed")
struct RedactionTests {
    @Test("a credential, a ticket and the outcomes holding them print which fields are set, never their values")
    func printedRedacted() {
        let credential = AppleCredential(
            user: "001234.feedface.0001",
            identityToken: "eyJ.secret-token.sig",
            authorizationCode: "c.secret-code",
            fullName: AppleCredential.Name(givenName: "Ana", familyName: "Ng"),
            email: "ana@example.invalid"
        )
        let ticket = SignInTicket(ticket: "tk-secret", attempt: "attempt-secret", escrowID: "3f00")
        var dumped = ""
        dump(SignInOutcome.dropped(SignInClientError(.tokenRefused, status: 401), credential), to: &dumped)
        let printed = [
            "\(credential)", String(reflecting: credential), "\(ticket)", "\(SignInOutcome.delivered(ticket))",
            "\(SignInOutcome.dropped(SignInClientError(.tokenRefused), credential))", dumped,
        ]
        for text in printed {
            for secret in ["001234", "secret", "Ana", "Ng", "ana@example", "3f00"] {
                #expect(!text.contains(secret), "\(secret) printed")
            }
        }
        #expect("\(credential)" == "AppleCredential(redacted; code: true, name: true, email: true)")
    }
}
