import AsyncHTTPClient
import EscrowTestSupport
import Foundation
import ProfileEscrowClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `serve` with native sign-in (the app's bundle ID as an audience, the stand-in Apple key's JWKS file),
/// reached through a proxy whose address the app keeps: the escrow can go down (killed) and come back on another port
/// while the app's configured URL stays the same, as behind a load balancer.
final class NativeSignInEscrow: Sendable {
    let directory = TemporaryDirectory()
    let processes: ProfileEscrowProcesses
    let proxy: PartitionProxy
    /// A bearer token with the scopes of the app's backend (`signin`) and of an operator reading (`read`).
    let backendToken: String

    var escrowURL: URL { URL(string: "http://127.0.0.1:\(proxy.port)")! }

    /// `environment` adds to (or overrides) the `serve` options of native sign-in.
    init(environment extra: [String: String] = [:]) async throws {
        let path = directory.path
        let jwks = path + "/apple-jwks.json"
        try TestAppleSigner.shared.jwks.write(to: URL(fileURLWithPath: jwks))
        let environment = [
            "PROFILE_ESCROW_DATABASE": path + "/escrow.sqlite", "PROFILE_ESCROW_KEYRING": path + "/keyring",
            "PROFILE_ESCROW_APPLE_AUDIENCE": "\(TestAppleSigner.appAudience),\(TestAppleSigner.webAudience)",
            "PROFILE_ESCROW_APPLE_JWKS": jwks, "PROFILE_ESCROW_SIGNIN_CLIENT_ID": TestAppleSigner.webAudience,
            "PROFILE_ESCROW_SIGNIN_CALLBACK_URL": "https://escrow.example.invalid/v1/apple/signin/callback",
            "PROFILE_ESCROW_SIGNIN_RETURN": "app=https://app.example.invalid/signed-in",
            "PROFILE_ESCROW_APPLE_AUTHORIZE_URL": "https://apple.example.invalid/auth/authorize",
        ].merging(extra) { $1 }
        processes = ProfileEscrowProcesses(directory: path, environment: environment)
        let initialized = try await ProfileEscrowCLI.run(["keys", "init"], environment: environment, in: path)
        let added = try await ProfileEscrowCLI.run(
            ["tokens", "add", "app-backend", "--scope", "signin", "read"],
            environment: environment,
            in: path
        )
        guard initialized.status == 0, added.status == 0, let token = added.stdout.split(separator: "\n").last else {
            throw SetUpFailed(output: initialized.stderr + added.stderr)
        }
        backendToken = String(token)
        // Nothing listens on the proxy's first target: the escrow is down until `up()`.
        proxy = try PartitionProxy(to: "127.0.0.1", port: try freePort())
    }

    struct SetUpFailed: Error {
        var output: String
    }

    deinit {
        processes.killAll()
        proxy.stop()
    }

    /// Starts `serve` on a fresh port, sends the app's address there, and waits until it is healthy.
    func up() async throws {
        let port = try await processes.startHealthyCaptureNode("serve", client: HTTPClient.shared)
        proxy.retarget(to: port)
    }

    /// Kills `serve` (SIGKILL: nothing flushed, no goodbye); the app's address then refuses every connection.
    func down() {
        processes.signal("serve")
    }

    /// The app's backend redeeming a ticket: `POST /v1/apple/signin/tickets/redeem`.
    func redeem(_ body: [String: String]) async throws -> (status: Int, answer: [String: Any]) {
        try await request("POST", "/v1/apple/signin/tickets/redeem", body: JSONSerialization.data(withJSONObject: body))
    }

    /// The types of the audit events of an escrow (`GET /v1/admin/escrows/{id}`).
    func history(ofEscrow id: String) async throws -> [String] {
        let (_, answer) = try await request("GET", "/v1/admin/escrows/\(id)", body: nil)
        return (answer["history"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
    }

    /// How many escrows the store holds (`GET /v1/admin/escrows`).
    func escrowCount() async throws -> Int {
        let (_, answer) = try await request("GET", "/v1/admin/escrows?limit=100", body: nil)
        return (answer["escrows"] as? [Any])?.count ?? -1
    }

    /// One request to `serve` (with the backend's token), its status and JSON answer.
    func request(_ method: String, _ path: String, body: Data?) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: escrowURL.absoluteString + path)!, timeoutInterval: 30)
        request.httpMethod = method
        request.setValue("Bearer \(backendToken)", forHTTPHeaderField: "Authorization")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, answer)
    }
}
