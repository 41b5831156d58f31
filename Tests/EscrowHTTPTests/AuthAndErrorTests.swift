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
import Prometheus
import Testing

@testable import EscrowHTTP

@Suite("Bearer tokens, rate limit and problem+json errors")
struct AuthAndErrorTests {
    @Test("missing, malformed, unknown and revoked tokens: 401 with WWW-Authenticate; wrong scope: 403")
    func tokens() async throws {
        let harness = try await HTTPHarness()
        let uri = "/v1/escrows/\(Fake.userIdentifier(1))"
        try await harness.app().test(.router) { client async throws in
            for headers: HTTPFields in [
                [:], [.authorization: "Basic abc"], [.authorization: "Bearer"], [.authorization: "Bearer pe_unknown"],
                [.authorization: "Bearer " + String(repeating: "x", count: 5000)],
            ] {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
                #expect(response.headers[.contentType] == "application/problem+json")
                #expect(response.json["code"] as? String == "unauthorized")
            }
            // Every scope is checked: a token with another scope is 403.
            let routes: [(String, HTTPRequest.Method, String)] = [
                ("/v1/escrows", .post, "capture"), (uri, .get, "read"), (uri + "/replay", .post, "replay"),
                (uri + "/confirm", .post, "confirm"), (uri, .delete, "erase"),
            ]
            for (path, method, scope) in routes {
                let other = scope == "read" ? "capture" : "read"
                let response = try await client.execute(
                    uri: path,
                    method: method,
                    headers: harness.headers(other, json: true),
                    body: Fake.body(1)
                )
                #expect(response.status == .forbidden, "\(method) \(path)")
                #expect(response.json["code"] as? String == "forbidden")
            }
            #expect(try await harness.tokenStore.revokeToken(name: "scope-read", at: Date()))
            let revoked = try await client.execute(uri: uri, method: .get, headers: harness.headers("read"))
            #expect(revoked.status == .unauthorized)
        }
    }

    @Test("the scheme is case-insensitive and optional whitespace around the token and media type is allowed")
    func headerWhitespace() async throws {
        let harness = try await HTTPHarness()
        let token = try #require(harness.tokens["all"])
        try await harness.app().test(.router) { client async throws in
            let captured = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: [.authorization: "bearer  \t\(token) \t", .contentType: " Application/JSON ; charset=utf-8"],
                body: Fake.body(1)
            )
            #expect(captured.status == .created)
            // Whitespace inside the token is not trimmed away: it is another token.
            let inside = try await client.execute(
                uri: "/v1/escrows/\(Fake.userIdentifier(1))",
                method: .get,
                headers: [.authorization: "Bearer \(token.prefix(10)) \(token.dropFirst(10))"]
            )
            #expect(inside.status == .unauthorized)
        }
    }

    @Test("per-token rate limit: 429 with Retry-After, other tokens unaffected")
    func rateLimit() async throws {
        // One token per 100 s: the third request is limited however slowly a busy machine runs the first two.
        let harness = try await HTTPHarness(rateLimit: RateLimit(requestsPerSecond: 0.01, burst: 2))
        try await harness.app().test(.router) { client async throws in
            let uri = "/v1/escrows/\(Fake.userIdentifier(1))"
            for _ in 0..<2 {
                let response = try await client.execute(uri: uri, method: .get, headers: harness.headers("read"))
                #expect(response.status == .notFound)
            }
            let limited = try await client.execute(uri: uri, method: .get, headers: harness.headers("read"))
            #expect(limited.status == .tooManyRequests)
            #expect(limited.json["code"] as? String == "rate_limited")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
            let other = try await client.execute(uri: uri, method: .get, headers: harness.headers("all"))
            #expect(other.status == .notFound)
        }
    }

    @Test("the configured maximumBodySize is the limit a capture meets and the one its 413 names")
    func configuredBodyLimit() async throws {
        for limit in [1024, 32 * 1024] {
            var configured = try await HTTPHarness()
            configured.configuration.maximumBodySize = limit
            let harness = configured
            // A valid profile padded with whitespace to 20 KiB: over the parser's own 16 KiB.
            let body = Array(Fake.body(1).readableBytesView)
            let padded =
                body.prefix(1) + Array(repeating: UInt8(ascii: " "), count: 20 * 1024 - body.count) + body.dropFirst()
            try await harness.app().test(.router) { client async throws in
                let response = try await client.execute(
                    uri: "/v1/escrows",
                    method: .post,
                    headers: harness.headers(json: true),
                    body: ByteBuffer(bytes: padded)
                )
                if limit < padded.count {
                    #expect(response.status == .contentTooLarge)
                    #expect(response.json["code"] as? String == "body_too_large")
                    #expect((response.json["detail"] as? String)?.contains("at most \(limit) bytes") == true)
                } else {
                    #expect(response.status == .created, "a body under the configured limit is accepted")
                }
            }
        }
    }

    @Test("413 over 16 KiB, 415 without application/json, 404 and 405 problems")
    func bodyAndRouting() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let big = ByteBuffer(bytes: Array(repeating: UInt8(ascii: " "), count: 16 * 1024 + 1))
            let tooLarge = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: big
            )
            #expect(tooLarge.status == .contentTooLarge)
            #expect(tooLarge.json["code"] as? String == "body_too_large")

            for contentType in [
                nil, "", ";", "text/plain", "application/x-www-form-urlencoded", "application/jsonx",
                "application/json-seq", "application/jso", "xapplication/json", "application /json",
            ] {
                var headers = harness.headers()
                if let contentType { headers[.contentType] = contentType }
                let response = try await client.execute(
                    uri: "/v1/escrows",
                    method: .post,
                    headers: headers,
                    body: Fake.body(1)
                )
                #expect(response.status == .unsupportedMediaType)
                #expect(response.json["code"] as? String == "unsupported_media_type")
            }
            for (user, contentType) in [
                "application/json; charset=utf-8", " Application/JSON ", "APPLICATION/JSON;charset=utf-8",
                "\tapplication/json\t; x=y",
            ].enumerated() {
                var headers = harness.headers()
                headers[.contentType] = contentType
                let accepted = try await client.execute(
                    uri: "/v1/escrows",
                    method: .post,
                    headers: headers,
                    body: Fake.body(1 + user)
                )
                #expect(accepted.status == .created, "\(contentType)")
            }

            let unknown = try await client.execute(uri: "/v2/nothing", method: .get)
            #expect(unknown.status == .notFound)
            #expect(unknown.json["code"] as? String == "route_not_found")
            let wrongMethod = try await client.execute(uri: "/v1/escrows", method: .get, headers: harness.headers())
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.headers[.allow] == "POST")
            #expect(wrongMethod.headers[.contentType] == "application/problem+json")
            let wrongMethod2 = try await client.execute(uri: "/v1/escrows/abc", method: .put)
            #expect(wrongMethod2.status == .methodNotAllowed)
        }
        #expect(try await harness.liveCount() == 4, "the four accepted media types, nothing else")
    }

    /// Every profile validation rule (docs/http-api.md) and every kind of broken JSON: 400 problem with the rule's code and field,
    /// nothing stored, nothing personal echoed or logged.
    @Test(
        "bad input: 400 problem with code and field, nothing stored",
        arguments: [
            ("{", "malformed_json", nil),
            (
                "{\"userIdentifier\": \"000000.canaryuid1.0001\", \"email\": \"canarymail@example.invalid\"",
                "malformed_json", nil
            ),
            ("[]", "invalid_type", nil),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"userIdentifier\":\"000000.canaryuid2.0001\",\"email\":\"canarymail@example.invalid\"}",
                "malformed_json", "userIdentifier"
            ),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"email\":\"canarymail@example.invalid\",\"extra\":1}",
                "unknown_field", "<key>"
            ),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"fullName\":{\"givenName\":\"CANARYGIVEN\",\"age\":3}}",
                "unknown_field", "fullName.<key>"
            ),
            (
                "{\"userIdentifier\":\"bad id canaryuid\",\"email\":\"canarymail@example.invalid\"}", "invalid_value",
                "userIdentifier"
            ),
            ("{\"userIdentifier\":\"000000.canaryuid1.0001\"}", "nothing_to_escrow", nil),
            ("{\"email\":\"canarymail@example.invalid\"}", "missing_field", "userIdentifier"),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"email\":\"canarymail at example.invalid\"}",
                "invalid_value", "email"
            ),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"fullName\":{\"givenName\":\"CANARYGIVEN\\r\\nX\"}}",
                "invalid_value", "fullName.givenName"
            ),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"fullName\":{\"givenName\":\"CANARYGIVEN\\u202e\"}}",
                "invalid_value", "fullName.givenName"
            ),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"fullName\":{\"familyName\":\"CANARYFAMILY\\u0085\"}}",
                "invalid_value", "fullName.familyName"
            ),
            (
                "{\"userIdentifier\":\"000000.canaryuid1.0001\",\"email\":\"canarymail@example.invalid\",\"realUserStatus\":\"bot\"}",
                "invalid_value", "realUserStatus"
            ),
            ("{\"userIdentifier\":\"000000.canaryuid1.0001\",\"email\":5}", "invalid_type", "email"),
        ] as [(String, String, String?)]
    )
    func badInput(body: String, code: String, field: String?) async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.router) { client async throws in
            let response = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: ByteBuffer(string: body)
            )
            #expect(response.status == .badRequest)
            #expect(response.headers[.contentType] == "application/problem+json")
            #expect(response.json["code"] as? String == code)
            #expect(response.json["field"] as? String == field)
            #expect(response.json["status"] as? Int == 400)
            #expect(response.json["type"] as? String == "urn:profile-escrow:problem:\(code)")
            #expect(response.json["title"] is String)
            #expect(response.json["detail"] is String)
            for canary in Fake.tokens { #expect(!response.text.contains(canary)) }
        }
        #expect(try await harness.liveCount() == 0)
        let logged = harness.loggedText()
        for canary in Fake.tokens { #expect(!logged.contains(canary)) }
    }

    @Test("healthz, readyz and metrics (open, or with a metrics-scope token when configured)")
    func operational() async throws {
        var harness = try await HTTPHarness()
        let open = harness
        try await open.app().test(.router) { client async throws in
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            _ = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: open.headers(json: true),
                body: Fake.body(1)
            )
            // The live gauges are published off the request path (the worker's sweep, or this refresher).
            await LiveGaugeRefresher(
                escrow: open.escrow,
                factory: PrometheusMetricsFactory(registry: open.registry),
                logger: open.logger
            ).refresh()
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.status == .ok)
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true)
            #expect(metrics.text.contains("profile_escrow_live{state=\"pending\"} 1"))
            #expect(metrics.text.contains("profile_escrow_oldest_pending_age_seconds"))
        }
        harness.configuration.metricsRequireToken = true
        let closed = harness
        try await closed.app().test(.router) { client async throws in
            #expect(try await client.execute(uri: "/metrics", method: .get).status == .unauthorized)
            #expect(
                try await client.execute(uri: "/metrics", method: .get, headers: closed.headers("read")).status
                    == .forbidden
            )
            #expect(
                try await client.execute(uri: "/metrics", method: .get, headers: closed.headers("metrics")).status
                    == .ok
            )
        }
    }
}
