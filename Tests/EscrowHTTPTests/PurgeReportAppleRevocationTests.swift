import EscrowCore
import EscrowTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// Revocations sent to the stand-in Apple, as the purge report counts them from the audit trail: in every form, and
/// on from the console's recorded checkpoint.
@Suite("Purge report: Apple revocations")
struct PurgeReportAppleRevocationTests {
    @Test("one revocation taken and one refused show in the report's JSON, text, CSV and HTML")
    func revocationsCounted() async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        for token in ["r.fake-token-1", "r.fake-token-2"] {
            _ = try await harness.escrow.queueAppleRevocation(
                token: token,
                tokenTypeHint: "refresh_token",
                clientID: SignInFlow.clientID
            )
        }
        let revoker = exchange.revoker(maximumAttempts: 1)
        // The first request refused (given up: one attempt allowed), the second taken.
        exchange.apple.script("/auth/revoke", [.error("invalid_request")])
        #expect(await revoker.runOnce() == 2)
        #expect(exchange.apple.requests.filter { $0.path == "/auth/revoke" }.map(\.status) == [400, 200])

        try await harness.app().test(.router) { client async throws in
            func report(_ format: String) async throws -> String {
                let response = try await client.execute(
                    uri: "/v1/admin/purge-report?format=\(format)",
                    method: .get,
                    headers: harness.headers("audit")
                )
                #expect(response.status == .ok, "\(format)")
                for token in ["r.fake-token-1", "r.fake-token-2"] { #expect(!response.text.contains(token)) }
                return response.text
            }
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(try await report("json").utf8)) as? [String: Any]
            )
            #expect(json["appleRevocations"] as? [String: Int] == ["revoked": 1, "failed": 1])
            #expect(try await report("text").contains("apple revocations 1 revoked, 1 failed"))
            let csv = try await report("csv")
            #expect(csv.contains("# appleRevocations.revoked: 1\n") && csv.contains("# appleRevocations.failed: 1\n"))
            let html = try await report("html")
            #expect(html.contains("Apple token revocations"))
            #expect(html.contains(#"revoked (Apple answered 200)</td><td class="n">1<"#))
            #expect(html.contains(#"failed (Apple refused it)</td><td class="n">1<"#))
        }

        // The console's report: counted from the trail, then again from the checkpoint it recorded.
        for resumed in [false, true] {
            let report = try await PurgeReport.buildFromCheckpoint(store: harness.fixture.store)
            #expect(report.chain?.verified == true)
            #expect((report.chain?.recorded != nil) == resumed)
            #expect(report.appleRevocations == PurgeReport.AppleRevocations(revoked: 1, failed: 1))
        }
        try await exchange.stop()
    }

    @Test("the console's overview shows the revocations pending, revoked and failed, never a token")
    func consoleOverview() async throws {
        let exchange = try await AppleTokenExchangeTests.Exchange()
        let harness = exchange.flow.harness
        let tokens = (1...4).map { "r.fake-token-\($0)" }
        func queue(_ token: String) async throws {
            _ = try await harness.escrow.queueAppleRevocation(
                token: token,
                tokenTypeHint: "refresh_token",
                clientID: SignInFlow.clientID
            )
        }
        for token in tokens.prefix(3) { try await queue(token) }
        exchange.apple.script("/auth/revoke", [.error("invalid_request")])
        #expect(await exchange.revoker(maximumAttempts: 1).runOnce() == 3)
        try await queue(tokens[3])
        let counts = try await OperatorActions(escrow: harness.escrow).overview().appleRevocations
        #expect(counts == AppleRevocationCounts(pending: 1, revoked: 2, failed: 1))

        try await harness.app().test(.router) { client async throws in
            let (_, home) = try await ConsoleTests.signIn("all", harness, client)
            #expect(home.status == .ok)
            let page = home.text
            #expect(page.contains("<h2>Apple token revocations</h2>"))
            let chart = try #require(
                page.components(separatedBy: #"aria-label="Apple token revocations by state""#).last?
                    .components(separatedBy: "</svg>").first
            )
            let texts = chart.components(separatedBy: "</text>").dropLast().compactMap {
                $0.components(separatedBy: ">").last
            }
            #expect(texts == ["pending", "1", "revoked", "2", "failed", "1"])
            for token in tokens { #expect(!page.contains(token)) }
        }
        try await exchange.stop()
    }
}
