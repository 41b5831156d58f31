import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

@Suite("POST /v1/apple/notifications")
struct AppleNotificationTests {
    let keys = AppleTestKeys.shared

    func harnessWithEscrow(_ number: Int = 1) async throws -> HTTPHarness {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        let profile = try ProfileParser.parse(Array(Fake.body(number).readableBytesView)).profile
        _ = try await harness.escrow.capture(profile)
        return harness
    }

    func post(_ harness: HTTPHarness, _ jws: String) async throws -> TestResponse {
        try await harness.app().test(.router) { client async throws in
            try await client.execute(
                uri: "/v1/apple/notifications",
                method: .post,
                headers: [.contentType: "application/json"],
                body: Fake.body(["payload": jws])
            )
        }
    }

    func notification(
        _ type: String,
        number: Int = 1,
        email: String? = nil,
        jti: String = UUID().uuidString,
        eventTime: Date = Date().addingTimeInterval(1)
    )
        async throws -> String
    {
        try await keys.sign(
            AppleTestKeys.NotificationClaims(
                jti: jti,
                events: AppleTestKeys.events(
                    type,
                    sub: Fake.userIdentifier(number),
                    email: email,
                    eventTime: eventTime
                )
            )
        )
    }

    @Test("forwarded to the backend once verified: signed like deliveries, retried with backoff, a duplicate not again")
    func forwarded() async throws {
        let secret = WebhookSecret.generateText()
        let backend = try await FakeBackend.start(secret: secret)
        // The first attempt fails (503): the forwarder tries again after its backoff.
        backend.respond { _, count in count == 0 ? .status(503) : .status(204) }
        var harness = try await harnessWithEscrow()
        let forwarder = try harness.forwarder(to: backend)
        harness.dependencies.notificationForwarder = forwarder
        let running = Task { try await forwarder.run() }
        let jti = UUID().uuidString
        let jws = try await notification("consent-revoked", jti: jti)
        #expect(try await post(harness, jws).status == .ok)
        #expect(try await post(harness, jws).json["outcome"] as? String == "duplicate")
        try await eventually("forwarded after one retry", within: 20) {
            backend.answered.map(\.status) == [503, 204]
        }
        let requests = backend.requests
        #expect(requests.allSatisfy { $0.signatureValid }, "signed with the webhook secret, as deliveries are")
        #expect(Set(requests.map(\.webhookID)).count == 1, "one webhook id for both attempts")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(requests[1].body)) as? [String: Any])
        #expect(body["type"] as? String == "apple-notification")
        #expect(body["event"] as? String == "consent-revoked")
        #expect(body["outcome"] as? String == "purged")
        #expect(body["payload"] as? String == jws, "Apple's JWS as received: the backend can verify it")
        #expect(requests[1].at.timeIntervalSince(requests[0].at) >= 0.9, "after a backoff")
        try await eventually("forwarded: out of the outbox", within: 10) { try await harness.store.outboxCount() == 0 }
        // Stopped, the forwarder sends nothing more: a duplicate queued would have been sent by now or still be held.
        running.cancel()
        _ = try? await running.value
        #expect(backend.requests.count == 2, "the duplicate is not forwarded")
        #expect(try await harness.store.outboxCount() == 0, "and not queued")
        await backend.stop()
    }

    @Test("consent-revoked purges as revoked; account-delete and account-deleted as account-deleted")
    func purges() async throws {
        for (type, reason) in [
            ("consent-revoked", "revoked"), ("account-delete", "account-deleted"),
            ("account-deleted", "account-deleted"),
        ] {
            let harness = try await harnessWithEscrow()
            let response = try await post(harness, try await notification(type))
            #expect(response.status == .ok)
            #expect(response.json["outcome"] as? String == "purged")
            #expect(try await harness.liveCount() == 0)
            let purge = try #require(try await harness.auditEvents().last)
            #expect(purge.draft.type == .purged)
            #expect(purge.draft.detail == reason)
            #expect(purge.draft.actor == .apple)
        }
    }

    @Test("email-disabled and email-enabled set emailForwarding, keep the address, take a new one")
    func emailForwarding() async throws {
        let harness = try await harnessWithEscrow()
        let before = try #require(
            try await harness.store.record(
                blindIndex: harness.keyring.blindIndex(userIdentifier: Fake.userIdentifier(1))
            )
        )

        let disabled = try await post(harness, try await notification("email-disabled", email: Fake.email(1)))
        #expect(disabled.status == .ok)
        #expect(disabled.json["outcome"] as? String == "updated")
        let after = try #require(try await harness.store.record(blindIndex: before.blindIndex))
        #expect(after.id == before.id)
        // New boxes; the escrow's key pair kept, so that Apple's tokens sealed to it beside the profile still open.
        #expect(after.sealed.publicKey == before.sealed.publicKey)
        #expect(after.sealed.sealedProfile != before.sealed.sealedProfile)
        #expect(after.sealed.sealedKey != before.sealed.sealedKey)
        let off = try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1))
        #expect(off.profile.email == Fake.email(1), "the address stays")
        #expect(off.emailForwarding == false)
        let body = String(decoding: off.backendJSON(escrowId: after.id.hex, attempt: 1), as: UTF8.self)
        #expect(body.contains(#""verified":false,"emailForwarding":false,"attempt":1"#))

        let enabled = try await post(
            harness,
            try await notification("email-enabled", email: "canarymailnew@privaterelay.appleid.com")
        )
        #expect(enabled.json["outcome"] as? String == "updated")
        let on = try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1))
        #expect(on.profile.email == "canarymailnew@privaterelay.appleid.com", "a different email is taken")
        #expect(on.profile.isPrivateEmail)
        #expect(on.emailForwarding == true)
        #expect(on.profile.fullName?.givenName == "CANARYGIVEN1")
        let again = try await post(
            harness,
            try await notification("email-enabled", email: "canarymailnew@privaterelay.appleid.com")
        )
        #expect(again.json["outcome"] as? String == "unchanged")
        #expect(try await harness.auditEvents().filter { $0.draft.type == .updated }.count == 2)
        let logged = harness.loggedText()
        for canary in Fake.tokens { #expect(!logged.contains(canary)) }
    }

    @Test(
        "a notification whose event_time precedes the capture changes nothing",
        arguments: [
            "consent-revoked", "account-delete", "email-disabled", "email-enabled",
        ]
    )
    func lateNotification(type: String) async throws {
        let harness = try await harnessWithEscrow()
        let eventsBefore = try await harness.auditEvents().count
        let late = try await post(
            harness,
            try await notification(type, email: Fake.email(1), eventTime: Date().addingTimeInterval(-3600))
        )
        #expect(late.status == .ok)
        #expect(late.json["outcome"] as? String == "newer")
        #expect(try await harness.liveCount() == 1)
        #expect(try await harness.auditEvents().count == eventsBefore)
        #expect(try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1)).emailForwarding == nil)
    }

    @Test("a duplicate jti and an unknown type: 200, nothing changes")
    func duplicatesAndUnknown() async throws {
        let harness = try await harnessWithEscrow()
        let jti = "fixed-jti-1"
        let first = try await post(harness, try await notification("email-disabled", email: Fake.email(1), jti: jti))
        #expect(first.json["outcome"] as? String == "updated")
        let eventsAfterFirst = try await harness.auditEvents().count
        let duplicate = try await post(harness, try await notification("consent-revoked", jti: jti))
        #expect(duplicate.status == .ok)
        #expect(duplicate.json["outcome"] as? String == "duplicate")
        let unknown = try await post(harness, try await notification("something-new"))
        #expect(unknown.status == .ok)
        #expect(unknown.json["outcome"] as? String == "ignored")
        #expect(try await harness.liveCount() == 1)
        #expect(try await harness.auditEvents().count == eventsAfterFirst)
    }

    @Test("bad signature, alg none, unknown kid, wrong audience, not configured: 401 and no change")
    func invalid() async throws {
        let harness = try await harnessWithEscrow()
        let good = try await notification("consent-revoked").split(separator: ".")
        let other = try await notification("account-delete").split(separator: ".")
        var wrongAudience = AppleTestKeys.NotificationClaims(
            events: AppleTestKeys.events("consent-revoked", sub: Fake.userIdentifier(1))
        )
        wrongAudience.aud = "invalid.example.other-app"
        let forged = [
            [good[0], other[1], good[2]].joined(separator: "."),
            try keys.forge(header: ["alg": "none", "kid": AppleTestKeys.rsaKid], claims: wrongAudience),
            try await keys.sign(wrongAudience),
            "garbage",
        ]
        for jws in forged {
            let response = try await post(harness, jws)
            #expect(response.status == .unauthorized)
            #expect(response.json["code"] as? String == "notification_invalid")
        }
        #expect(try await harness.liveCount() == 1)

        let unconfigured = try await HTTPHarness()
        let response = try await post(unconfigured, try await notification("consent-revoked"))
        #expect(response.status == .unauthorized)
    }

    @Test("duplicate keys are refused, never resolved: in the body, the events claim, the JWKS file")
    func duplicateKeysAreRefused() async throws {
        let harness = try await harnessWithEscrow()
        let good = try await notification("consent-revoked")
        try await harness.app().test(.router) { client async throws in
            let response = try await client.execute(
                uri: "/v1/apple/notifications",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"payload":"not-a-jws","payload":"\#(good)"}"#)
            )
            #expect(response.status == .badRequest)
        }
        // Two `sub`s: a lenient parser would purge whichever came last.
        let events = #"{"type":"consent-revoked","sub":"000000.someone-else.0001","sub":"\#(Fake.userIdentifier(1))"}"#
        let twoSubjects = try await keys.sign(AppleTestKeys.NotificationClaims(events: events))
        let response = try await post(harness, twoSubjects)
        #expect(response.status == .badRequest)
        #expect(response.json["code"] as? String == "invalid_notification")
        #expect(try await harness.liveCount() == 1)

        let jwks = String(decoding: keys.jwks, as: UTF8.self)
        let doubled = Array(("{\"keys\":[],\"keys\"" + jwks.dropFirst("{\"keys\"".count)).utf8)
        do {
            _ = try await AppleVerifier(jwksJSON: doubled, audiences: [AppleTestKeys.audience])
            Issue.record("a JWKS file with two keys members was accepted")
        } catch {
            #expect("\(error)".contains("duplicate key"))
        }
        // An RSA key whose modulus is even (no RSA modulus is): refused at load, naming the key.
        let evenModulus = "wA" + String(repeating: "A", count: 340)
        let brokenKey = Array(
            #"{"keys":[{"kty":"RSA","kid":"broken-kid","alg":"RS256","n":"\#(evenModulus)","e":"AQAB"}]}"#.utf8
        )
        do {
            _ = try await AppleVerifier(jwksJSON: brokenKey, audiences: [AppleTestKeys.audience])
            Issue.record("a JWKS file with an unusable RSA key was accepted")
        } catch {
            #expect("\(error)".contains("RSA key broken-kid is not a valid public key"), "\(error)")
        }
        #expect(
            AppleNotificationEvent(json: #"{"type":"email-enabled","sub":"a","is_private_email":"true"}"#)?
                .isPrivateEmail == true
        )
        #expect(
            AppleNotificationEvent(json: #"{"type":"email-enabled","sub":"a","is_private_email":false}"#)?
                .isPrivateEmail == false
        )
    }

    @Test("a body that is not {payload}: 400; wrong content type: 415")
    func badBodies() async throws {
        let harness = try await harnessWithEscrow()
        try await harness.app().test(.router) { client async throws in
            let bad = try await client.execute(
                uri: "/v1/apple/notifications",
                method: .post,
                headers: [.contentType: "application/json"],
                body: ByteBuffer(string: "{\"nope\":1}")
            )
            #expect(bad.status == .badRequest)
            let wrongType = try await client.execute(
                uri: "/v1/apple/notifications",
                method: .post,
                headers: [.contentType: "text/plain"],
                body: ByteBuffer(string: "{}")
            )
            #expect(wrongType.status == .unsupportedMediaType)
        }
    }
}

@Suite("Apple notifications: ordering and races")
struct AppleNotificationOrderingTests {
    let keys = AppleTestKeys.shared

    @Test("an email change while a worker holds the lease answers 503, is not recorded, and applies on Apple's retry")
    func emailChangeWaitsForTheLease() async throws {
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        let profile = try ProfileParser.parse(Array(Fake.body(1).readableBytesView)).profile
        let receipt = try await harness.escrow.capture(profile)
        // A worker leases the escrow and is delivering it.
        let leased = try await harness.store.claimDue(
            ClaimRequest(now: Date(), limit: 1, owner: "w1", leaseDuration: 60),
            lifecycle: EscrowLifecycle()
        )
        #expect(leased.count == 1)
        let jws = try await keys.sign(
            AppleTestKeys.NotificationClaims(
                jti: "jti-busy",
                events: AppleTestKeys.events("email-disabled", sub: Fake.userIdentifier(1))
            )
        )
        let post = { @Sendable () async throws -> TestResponse in
            try await harness.app().test(.router) { client async throws in
                try await client.execute(
                    uri: "/v1/apple/notifications",
                    method: .post,
                    headers: [.contentType: "application/json"],
                    body: Fake.body(["payload": jws])
                )
            }
        }
        let busy = try await post()
        #expect(busy.status == .serviceUnavailable)
        #expect(busy.headers[.retryAfter] != nil)
        // Nothing changed under the worker: its fencing token is still good.
        let unchanged = try #require(try await harness.store.record(id: receipt.escrowID))
        #expect(unchanged.revision == leased[0].revision)
        // The worker gives the lease back; Apple retries the same notification (same jti).
        let release = EscrowLifecycle().handle(
            .release(fencingToken: leased[0].revision),
            on: leased[0],
            at: Date(),
            actor: .worker("w1")
        )
        #expect(try await harness.store.commit(release, id: receipt.escrowID, expectedRevision: leased[0].revision))
        let retried = try await post()
        #expect(retried.status == .ok)
        #expect(retried.json["outcome"] as? String == "updated")
        #expect(try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1)).emailForwarding == false)
        // Now it is recorded: a third delivery is a duplicate.
        let duplicate = try await post()
        #expect(duplicate.json["outcome"] as? String == "duplicate")
    }

    @Test("the email in a token is compared ASCII case-insensitively only")
    func emailComparisonFoldsOnlyASCII() {
        #expect(AppleVerifier.asciiCaseInsensitiveEqual("Kate@Example.INVALID", "kate@example.invalid"))
        // U+212A KELVIN SIGN lowercases to "k" under Unicode rules: it must not match.
        #expect(!AppleVerifier.asciiCaseInsensitiveEqual("\u{212A}ate@example.invalid", "kate@example.invalid"))
        #expect(!AppleVerifier.asciiCaseInsensitiveEqual("kate@example.invalid", "kate@example.invalid."))
    }
}
