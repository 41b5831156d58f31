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

@Suite("/v1/admin: the operator's API")
struct AdminRoutesTests {
    /// Captures users 1...count over HTTP and returns their escrow ids, oldest first.
    static func capture(
        _ count: Int,
        _ harness: HTTPHarness,
        _ client: some TestClientProtocol
    ) async throws -> [String] {
        var ids: [String] = []
        for number in 1...count {
            let response = try await harness.capture(client, user: number)
            ids.append(try #require(response.json["escrowId"] as? String))
            harness.clock.advance(by: 1)
        }
        return ids
    }

    /// Makes escrow `id` dead (tampered → ciphertext_invalid) through the lifecycle.
    static func kill(_ id: String, _ harness: HTTPHarness) async throws {
        let escrowID = try #require(EscrowID(hex: id))
        let stored = try await harness.store.record(id: escrowID)
        let record = try #require(stored)
        let action = EscrowLifecycle().handle(.tampered, on: record, at: harness.clock.now(), actor: .library)
        #expect(try await harness.store.commit(action, id: record.id, expectedRevision: record.revision))
    }

    @Test("list: filters, keyset pages with an opaque cursor, no personal data")
    func listPages() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let ids = try await Self.capture(5, harness, client)
            try await Self.kill(ids[1], harness)
            try await Self.kill(ids[3], harness)
            var seen: [String] = []
            var uri = "/v1/admin/escrows?limit=2"
            for _ in 0..<10 {
                let page = try await client.execute(uri: uri, method: .get, headers: harness.headers("read"))
                #expect(page.status == .ok)
                #expect(page.headers[.cacheControl] == "no-store")
                let escrows = try #require(page.json["escrows"] as? [[String: Any]])
                seen += escrows.compactMap { $0["escrowId"] as? String }
                guard let next = page.json["next"] as? String else { break }
                uri = "/v1/admin/escrows?limit=2&cursor=\(next)"
            }
            #expect(seen == ids)
            let dead = try await client.execute(
                uri: "/v1/admin/escrows?state=dead&deadCode=ciphertext_invalid",
                method: .get,
                headers: harness.headers("read")
            )
            let deadIDs = (dead.json["escrows"] as? [[String: Any]] ?? []).compactMap { $0["escrowId"] as? String }
            #expect(deadIDs == [ids[1], ids[3]])
            let first = try #require((dead.json["escrows"] as? [[String: Any]])?.first)
            #expect(first["deadCode"] as? String == "ciphertext_invalid")
            #expect(first["keyVersion"] as? Int == Int(harness.keyring.activeVersion))
            #expect(dead.json["next"] is NSNull)
            for token in Fake.tokens { #expect(!dead.text.contains(token)) }

            for (query, field) in [
                ("state=gone", "state"), ("minAgeSeconds=-1", "minAgeSeconds"), ("keyVersion=x", "keyVersion"),
                ("deadCode=BAD", "deadCode"), ("minAttempts=a", "minAttempts"), ("limit=0", "limit"),
                ("cursor=AAAA", "cursor"),
            ] {
                let bad = try await client.execute(
                    uri: "/v1/admin/escrows?\(query)",
                    method: .get,
                    headers: harness.headers("read")
                )
                #expect(bad.status == .badRequest, "\(query)")
                #expect(bad.headers[.contentType] == "application/problem+json")
                #expect(bad.json["field"] as? String == field, "\(query)")
                #expect(bad.json["code"] as? String == "invalid_parameter")
            }
            let unknown = try await client.execute(
                uri: "/v1/admin/escrows?x=1",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(unknown.status == .badRequest)
            let noScope = try await client.execute(
                uri: "/v1/admin/escrows",
                method: .get,
                headers: harness.headers("capture")
            )
            #expect(noScope.status == .forbidden)
            let noToken = try await client.execute(
                uri: "/v1/admin/escrows",
                method: .get,
                headers: harness.headers(nil)
            )
            #expect(noToken.status == .unauthorized)
        }
    }

    @Test("requeue one and by filter, erase one: scopes, reasons, actors in the audit chain")
    func changesAreAudited() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let ids = try await Self.capture(4, harness, client)
            for id in ids.prefix(3) { try await Self.kill(id, harness) }
            func post(
                _ uri: String,
                _ token: String,
                _ body: String,
                method: HTTPRequest.Method = .post
            ) async throws
                -> TestResponse
            {
                try await client.execute(
                    uri: uri,
                    method: method,
                    headers: harness.headers(token, json: true),
                    body: ByteBuffer(string: body)
                )
            }
            let refused = try await post("/v1/admin/escrows/\(ids[0])/requeue", "read", #"{"reason":"x"}"#)
            #expect(refused.status == .forbidden)
            let noReason = try await post("/v1/admin/escrows/\(ids[0])/requeue", "operate", "{}")
            #expect(noReason.status == .badRequest)
            #expect(noReason.json["field"] as? String == "reason")
            let control = try await post("/v1/admin/escrows/\(ids[0])/requeue", "operate", #"{"reason":"a\u0007b"}"#)
            #expect(control.json["field"] as? String == "reason")
            let one = try await post(
                "/v1/admin/escrows/\(ids[0])/requeue",
                "operate",
                #"{"reason":"OPS-1 backend fixed"}"#
            )
            #expect(one.status == .ok)
            #expect(one.json["requeued"] as? Bool == true)
            let again = try await post("/v1/admin/escrows/\(ids[0])/requeue", "operate", #"{"reason":"OPS-1 again"}"#)
            #expect(again.json["requeued"] as? Bool == false)
            let unknown = try await post(
                "/v1/admin/escrows/\(EscrowID.random().hex)/requeue",
                "operate",
                #"{"reason":"x"}"#
            )
            #expect(unknown.status == .notFound)
            let badID = try await post("/v1/admin/escrows/nothex/requeue", "operate", #"{"reason":"x"}"#)
            #expect(badID.status == .badRequest)
            #expect(badID.json["field"] as? String == "escrowId")

            let pendingState = try await post(
                "/v1/admin/escrows/requeue",
                "operate",
                #"{"reason":"x","state":"pending"}"#
            )
            #expect(pendingState.status == .badRequest)
            let bulk = try await post(
                "/v1/admin/escrows/requeue",
                "operate",
                #"{"reason":"OPS-2 bulk","deadCode":"ciphertext_invalid","minAttempts":0}"#
            )
            #expect(bulk.status == .ok)
            #expect(bulk.json["requeued"] as? Int == 2)
            #expect(bulk.json["more"] as? Bool == false)

            let eraseRefused = try await post(
                "/v1/admin/escrows/\(ids[3])",
                "operate",
                #"{"reason":"x"}"#,
                method: .delete
            )
            #expect(eraseRefused.status == .forbidden)
            let erased = try await post(
                "/v1/admin/escrows/\(ids[3])",
                "erase",
                #"{"reason":"OPS-3 user asked"}"#,
                method: .delete
            )
            #expect(erased.status == .noContent)
            let gone = try await post("/v1/admin/escrows/\(ids[3])", "erase", #"{"reason":"OPS-3"}"#, method: .delete)
            #expect(gone.status == .notFound)

            let history = try await client.execute(
                uri: "/v1/admin/escrows/\(ids[3])",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(history.status == .ok)
            #expect(history.json["escrow"] is NSNull)
            let events = try #require(history.json["history"] as? [[String: Any]])
            #expect(events.last?["type"] as? String == "purged")
            #expect(events.last?["reason"] as? String == "OPS-3 user asked")
            #expect(events.last?["actor"] as? String == "http:scope-erase")
        }
        let events = try await harness.auditEvents()
        let requeues = events.filter { $0.draft.type == .requeued }
        #expect(requeues.map(\.draft.reason) == ["OPS-1 backend fixed", "OPS-2 bulk", "OPS-2 bulk"])
        #expect(requeues.allSatisfy { $0.draft.actor.rawValue == "http:scope-operate" })
        var verifier = AuditChain.Verifier()
        for event in events { verifier.consume(event) }
        verifier.finish(head: try await harness.store.auditHead())
        #expect(verifier.isIntact)
        for token in Fake.tokens { #expect(!harness.loggedText().contains(token)) }
    }

    @Test("overview, lookup (never echoed), purge report formats and its scope")
    func overviewLookupReport() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let ids = try await Self.capture(3, harness, client)
            try await Self.kill(ids[0], harness)
            let overview = try await client.execute(
                uri: "/v1/admin/overview",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(overview.status == .ok)
            let live = try #require(overview.json["live"] as? [String: Int])
            #expect(live == ["pending": 2, "leased": 0, "awaiting-confirmation": 0, "dead": 1])
            let window = try #require(overview.json["last24h"] as? [String: Any])
            #expect(window["captures"] as? Int == 3)
            #expect((overview.json["deadByCode"] as? [String: Int]) == ["ciphertext_invalid": 1])
            let history = try #require(overview.json["history"] as? [[String: Any]])
            #expect(history.last?["pending"] as? Int == 2 && history.last?["dead"] as? Int == 1)

            let found = try await client.execute(
                uri: "/v1/admin/lookup",
                method: .post,
                headers: harness.headers("read", json: true),
                body: Fake.body(["userIdentifier": Fake.userIdentifier(2)])
            )
            #expect(found.status == .ok)
            #expect(found.json as NSDictionary == ["exists": true] as NSDictionary)
            #expect(!found.text.contains(Fake.userIdentifier(2)))
            let missing = try await client.execute(
                uri: "/v1/admin/lookup",
                method: .post,
                headers: harness.headers("read", json: true),
                body: Fake.body(["userIdentifier": Fake.userIdentifier(9)])
            )
            #expect(missing.json["exists"] as? Bool == false)
            let invalid = try await client.execute(
                uri: "/v1/admin/lookup",
                method: .post,
                headers: harness.headers("read", json: true),
                body: Fake.body(["userIdentifier": "canaryuid with spaces"])
            )
            #expect(invalid.status == .badRequest)
            #expect(!invalid.text.contains("canaryuid"))

            let refused = try await client.execute(
                uri: "/v1/admin/purge-report",
                method: .get,
                headers: harness.headers("read")
            )
            #expect(refused.status == .forbidden)
            for (format, type) in [
                ("json", "application/json"), ("text", "text/plain; charset=utf-8"), ("csv", "text/csv; charset=utf-8"),
                ("html", "text/html; charset=utf-8"),
            ] {
                let report = try await client.execute(
                    uri: "/v1/admin/purge-report?format=\(format)",
                    method: .get,
                    headers: harness.headers("audit")
                )
                #expect(report.status == .ok, "\(format)")
                #expect(report.headers[.contentType] == type, "\(format)")
                for token in Fake.tokens { #expect(!report.text.contains(token)) }
            }
            let html = try await client.execute(
                uri: "/v1/admin/purge-report?format=html",
                method: .get,
                headers: harness.headers("audit")
            )
            let policy = try #require(html.headers[.contentSecurityPolicy])
            #expect(policy.contains("default-src 'none'") && !policy.contains("unsafe-inline"))
        }
    }
}
