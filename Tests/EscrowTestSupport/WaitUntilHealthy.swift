public import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Waits until a `serve` process answers `GET /healthz` with 200 on 127.0.0.1:`port`; fails with
/// ``TimedOut`` after `seconds` (a process starting on a loaded machine: generous on purpose).
public func waitUntilHealthy(_ client: HTTPClient, port: Int, within seconds: Double = 60) async throws {
    try await eventually("serve on port \(port) to be healthy", within: seconds, every: .milliseconds(100)) {
        let response = try? await client.execute(
            HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"),
            timeout: .seconds(1)
        )
        return response?.status == .ok
    }
}
