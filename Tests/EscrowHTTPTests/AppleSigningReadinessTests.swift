import EscrowCrypto
import EscrowCustody
import EscrowTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

/// The team's key out of reach (a PKCS#11 module that is not there): sign-ins still capture, the exchange waits and
/// retries, and `/readyz` says so in its body while it stays `200`.
@Suite("Readiness: Apple client secrets")
struct AppleSigningReadinessTests {
    @Test("a key that cannot sign: /readyz 200 with appleSigning failing; the capture made, its exchange waiting")
    func unsignedKey() async throws {
        let missing = FileManager.default.temporaryDirectory.path + "/missing-\(UUID().uuidString)/libpkcs11.so"
        let signer = PKCS11AppleKeySigner(
            KeyCustody.PKCS11(module: missing, token: "fake-token", key: "fake-key"),
            environment: ["PROFILE_ESCROW_PKCS11_PIN": "0000"]
        )
        let exchange = try await AppleTokenExchangeTests.Exchange(signer: signer)
        var harness = exchange.flow.harness
        harness.dependencies.appleTokenExchanger = exchange.exchanger
        try await harness.app().test(.live) { client async throws in
            func readiness() async throws -> (HTTPResponse.Status, [String: Any]) {
                let response = try await client.execute(uri: "/readyz", method: .get)
                return (response.status, response.json)
            }
            let before = try await readiness()
            #expect(before.0 == .ok && before.1["appleSigning"] as? String == "unknown", "nothing signed yet")

            _ = try await exchange.signIn(client)
            #expect(try await exchange.running == 1, "the sign-in captured, its code queued with it")
            #expect(await exchange.exchanger.runOnce() == 1)
            #expect(exchange.apple.requests.isEmpty, "no exchange without a client secret")
            #expect(try await exchange.running == 1, "the exchange waits to be tried again")
            let after = try await readiness()
            #expect(after.0 == .ok, "captures go on: readiness is kept")
            #expect(after.1["appleSigning"] as? String == "failing")
            #expect(after.1["status"] as? String == "ready")
            #expect(!"\(after.1)".contains(missing), "the engine is named in the log only")
        }
        try await exchange.stop()
    }
}
