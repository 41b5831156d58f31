import AsyncHTTPClient
import EscrowTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// `serve` with its web sign-in options, as a process: the options reach the routes.
@Suite("serve: web sign-in")
struct ServeSignInTests {
    @Test("the start answers a 302 to the configured authorize page with the binding cookie; the callback is served")
    func startAndCallbackServed() async throws {
        let cli = CLITests()
        await #expect(try cli.run(["keys", "init"]).status == 0)
        // A JWKS file with one RSA public key (a random modulus: no token is verified in this test). Odd, as an RSA
        // modulus is: an even one is refused when the file is loaded, and serve would not start.
        var modulus = (0..<256).map { _ in UInt8.random(in: 0...255) }
        modulus[0] |= 0x80
        modulus[255] |= 0x01
        let jwks = [
            "keys": [["kty": "RSA", "kid": "test-kid", "alg": "RS256", "n": Self.base64URL(modulus), "e": "AQAB"]]
        ]
        let jwksPath = cli.directory.path + "/apple-jwks.json"
        try JSONSerialization.data(withJSONObject: jwks).write(to: URL(fileURLWithPath: jwksPath))
        let processes = ProfileEscrowProcesses(
            directory: cli.directory.path,
            environment: [
                "PROFILE_ESCROW_DATABASE": cli.database, "PROFILE_ESCROW_KEYRING": cli.keyring,
                "PROFILE_ESCROW_APPLE_AUDIENCE": "invalid.example.web", "PROFILE_ESCROW_APPLE_JWKS": jwksPath,
                "PROFILE_ESCROW_SIGNIN_CLIENT_ID": "invalid.example.web",
                "PROFILE_ESCROW_SIGNIN_CALLBACK_URL": "https://escrow.example.invalid/v1/apple/signin/callback",
                "PROFILE_ESCROW_SIGNIN_RETURN": "app=https://app.example.invalid/signed-in",
                "PROFILE_ESCROW_APPLE_AUTHORIZE_URL": "https://apple.example.invalid/auth/authorize",
            ]
        )
        defer { processes.killAll() }
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(redirectConfiguration: .disallow)
        )
        do {
            let port = try await processes.startHealthyCaptureNode("serve", client: client)
            let start = try await client.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/apple/signin"),
                timeout: .seconds(30)
            )
            #expect(start.status == .found)
            let location = start.headers.first(name: "Location") ?? ""
            #expect(location.hasPrefix("https://apple.example.invalid/auth/authorize?client_id=invalid.example.web&"))
            #expect(start.headers.first(name: "Set-Cookie")?.hasPrefix("__Host-pe-signin-") == true)
            var callback = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/apple/signin/callback")
            callback.method = .POST
            callback.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            callback.body = .bytes(ByteBuffer(string: "state=forged"))
            let refused = try await client.execute(callback, timeout: .seconds(30))
            #expect(refused.status == .badRequest, "an unknown state: a page, no redirect")
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
