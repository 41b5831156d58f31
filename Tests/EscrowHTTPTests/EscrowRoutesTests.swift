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

@Suite("POST/GET/DELETE /v1/escrows")
struct EscrowRoutesTests {
    @Test("capture: 201 new, 200 same content with the same id, 200 replaced with the old one purged")
    func captureStatuses() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let first = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(1)
            )
            #expect(first.status == .created)
            #expect(first.headers[.contentType] == "application/json")
            let id = try #require(first.json["escrowId"] as? String)
            #expect(first.json["state"] as? String == "pending")
            #expect(first.json["expiresAt"] is String)
            #expect(Set(first.json.keys) == ["escrowId", "state", "expiresAt"])

            let again = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(1)
            )
            #expect(again.status == .ok)
            #expect(again.json["escrowId"] as? String == id)

            let replaced = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(1, given: "CANARYGIVENOTHER")
            )
            #expect(replaced.status == .ok)
            #expect(replaced.json["escrowId"] as? String != id)
        }
        let events = try await harness.auditEvents()
        #expect(events.contains { $0.draft.type == .purged && $0.draft.detail == "replaced" })
        #expect(events.filter { $0.draft.type == .captured }.allSatisfy { $0.draft.actor.rawValue == "http:all" })
        #expect(try await harness.liveCount() == 1)
    }

    @Test("status: metadata, never plaintext; 404 problem when none; 400 for a bad identifier")
    func status() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            _ = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(2)
            )
            let found = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(2))",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(found.status == .ok)
            #expect(found.json["state"] as? String == "pending")
            #expect(found.json["attempts"] as? Int == 0)
            #expect(
                Set(found.json.keys) == [
                    "escrowId", "state", "attempts", "nextAttemptAt", "createdAt", "expiresAt", "keyVersion",
                    "deadCode", "lastStatus",
                ]
            )
            #expect(found.json["keyVersion"] as? Int == 1)
            #expect(found.json["deadCode"] is NSNull && found.json["lastStatus"] is NSNull)
            #expect(found.headers[.cacheControl] == "no-store")
            for canary in Fake.tokens { #expect(!found.text.contains(canary)) }

            let missing = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(3))",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(missing.status == .notFound)
            #expect(missing.headers[.contentType] == "application/problem+json")
            #expect(missing.json["code"] as? String == "not_found")
            #expect(missing.json["status"] as? Int == 404)

            let bad = try await client.execute(
                uri: "/v1/escrows/bad%20id",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(bad.status == .badRequest)
            #expect(bad.json["code"] as? String == "invalid_user_identifier")
            #expect(bad.json["field"] as? String == "userIdentifier")
            let long = try await client.execute(
                uri: "/v1/escrows/\(String(repeating: "a", count: 256))",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(long.status == .badRequest)
        }
    }

    @Test("replay: 200 the decrypted profile; 404 when none")
    func replay() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            _ = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(4)
            )
            let response = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(4))/replay",
                method: .post,
                headers: harness.headers("replay")
            )
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "no-store")
            #expect(response.json["userIdentifier"] as? String == Fake.userIdentifier(4))
            #expect(response.json["email"] as? String == Fake.email(4))
            #expect((response.json["fullName"] as? [String: Any])?["givenName"] as? String == "CANARYGIVEN4")
            #expect(response.json["verified"] as? Bool == false)

            let missing = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(5))/replay",
                method: .post,
                headers: harness.headers("replay")
            )
            #expect(missing.status == .notFound)
        }
    }

    @Test("requeue: a dead escrow back to pending (scope replay); false when not dead; 404 when none")
    func requeue() async throws {
        let harness = try await HTTPHarness()
        let receipt = try await harness.escrow.capture(
            try ProfileParser.parse(Array(Fake.body(6).readableBytesView)).profile
        )
        try await harness.app().test(.router) { client async throws in
            func requeue(_ number: Int, token: String = "replay") async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/escrows/\(Fake.userIdentifier(number))/requeue",
                    method: .post,
                    headers: harness.headers(token)
                )
            }
            let notDead = try await requeue(6)
            #expect(notDead.status == .ok && notDead.json["requeued"] as? Bool == false)
            #expect(try await requeue(6, token: "read").status == .forbidden)
            #expect(try await requeue(7).status == .notFound)

            // Dead (the backend rejected it for good), then requeued by the operator over HTTP.
            let record = try #require(try await harness.store.record(id: receipt.escrowID))
            let dead = EscrowLifecycle().handle(.tampered, on: record, at: Date(), actor: .cli)
            #expect(try await harness.store.commit(dead, id: record.id, expectedRevision: record.revision))
            let requeued = try await requeue(6)
            #expect(requeued.status == .ok && requeued.json["requeued"] as? Bool == true)
            let status = try #require(try await harness.store.record(id: receipt.escrowID))
            #expect(status.state == .pending && status.attempts == 0)
            let events = try await harness.auditEvents().filter { $0.draft.escrowID == receipt.escrowID.hex }
            #expect(events.last?.draft.type == .requeued && events.last?.draft.actor.rawValue == "http:scope-replay")
        }
    }

    @Test("a malformed row: GET, replay and requeue answer 409 ciphertext_invalid (never 5xx), DELETE purges it")
    func malformedRow() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let capture = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(9)
            )
            #expect(capture.status == .created)
            // Someone with database access breaks the row (a negative attempt count: no record can hold it).
            let python = ChildProcess()
            python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            python.arguments = [
                "python3", "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('UPDATE escrow SET attempts = -5'); "
                    + "c.commit()",
                harness.databasePath,
            ]
            try python.run()
            await python.exited()
            #expect(python.terminationStatus == 0)

            let path = "/v1/escrows/\(Fake.userIdentifier(9))"
            for (uri, method) in [
                (path, HTTPRequest.Method.get), (path + "/replay", .post), (path + "/requeue", .post),
            ] {
                let response = try await client.execute(uri: uri, method: method, headers: harness.headers())
                #expect(response.status == .conflict, "\(method) \(uri)")
                #expect(response.json["code"] as? String == "ciphertext_invalid", "\(method) \(uri)")
            }
            let dead = try await harness.auditEvents().filter { $0.draft.type == .dead }
            #expect(dead.count == 1 && dead.first?.draft.detail == "ciphertext_invalid", "quarantined once")
            let erase = try await client.execute(uri: path, method: .delete, headers: harness.headers())
            #expect(erase.status == .noContent)
            #expect(try await harness.liveCount() == 0, "the malformed row is gone")
            #expect(try await harness.auditEvents().last?.draft.detail == "erased")
            #expect(try await client.execute(uri: path, method: .get, headers: harness.headers()).status == .notFound)
        }
    }

    @Test("replay on a capture-only node (public-only keyring): 409; capture still works")
    func captureOnly() async throws {
        let harness = try await HTTPHarness(keyring: Keyring.generate().publicOnly())
        try await harness.app().test(.router) { client async throws in
            let capture = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(6)
            )
            #expect(capture.status == .created)
            let replay = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(6))/replay",
                method: .post,
                headers: harness.headers("replay")
            )
            #expect(replay.status == .conflict)
            #expect(replay.json["code"] as? String == "capture_only")
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.json["captureOnly"] as? Bool == true)
        }
    }

    @Test("confirm: 200 {purged: true}, then {purged: false}; erase: 204, also when nothing is held")
    func confirmAndErase() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            for number in [7, 8] {
                _ = try await client.execute(
                    uri: "/v1/escrows",
                    method: .post,
                    headers: harness.headers(json: true),
                    body: Fake.body(number)
                )
            }
            let confirmed = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(7))/confirm",
                method: .post,
                headers: harness.headers("confirm")
            )
            #expect(confirmed.status == .ok)
            #expect(confirmed.json["purged"] as? Bool == true)
            let again = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(7))/confirm",
                method: .post,
                headers: harness.headers("confirm")
            )
            #expect(again.json["purged"] as? Bool == false)

            let erased = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(8))",
                method: .delete,
                headers: harness.headers("erase")
            )
            #expect(erased.status == .noContent)
            #expect(erased.body.readableBytes == 0)
            let nothing = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(8))",
                method: .delete,
                headers: harness.headers("erase")
            )
            #expect(nothing.status == .noContent)
        }
        let purges = try await harness.auditEvents().filter { $0.draft.type == .purged }
        #expect(purges.map(\.draft.detail) == ["confirmed", "erased"])
        #expect(purges.map(\.draft.actor.rawValue) == ["http:scope-confirm", "http:scope-erase"])
        #expect(try await harness.liveCount() == 0)
    }
}

@Suite("No personal data in logs on identifier routes")
struct IdentifierRouteLogTests {
    /// The path of these routes holds the user identifier: neither it nor the profile may reach a log
    /// line or a response body other than the replay's own, whatever the route answers.
    @Test func routesWithTheIdentifierInThePathLogNoPersonalData() async throws {
        let harness = try await HTTPHarness()
        let user = Fake.userIdentifier(7)
        let bodies = try await harness.app().test(.router) { client async throws -> [String] in
            var bodies: [String] = []
            _ = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(7)
            )
            for (uri, method) in [
                ("/v1/escrows/\(user)", HTTPRequest.Method.get), ("/v1/escrows/\(user)/replay", .post),
                ("/v1/escrows/\(user)/confirm", .post), ("/v1/escrows/\(user)", .delete),
                ("/v1/escrows/\(user)/nope", .post), ("/v1/escrows/\(user)", .put),
                ("/v1/escrows/\(user)%20CANARYGIVEN", .get), ("/v1/escrows/\(user)/replay", .post),
            ] {
                let response = try await client.execute(uri: uri, method: method, headers: harness.headers())
                if !uri.hasSuffix("/replay") || response.status != .ok { bodies.append(response.text) }
            }
            return bodies
        }
        #expect(bodies.count >= 6)
        let logged = harness.loggedText()
        #expect(!logged.isEmpty, "the harness captures the access log")
        for token in Fake.tokens {
            #expect(!logged.contains(token), "\(token) was logged")
            #expect(!bodies.joined().contains(token), "\(token) was echoed in a response")
        }
    }
}
