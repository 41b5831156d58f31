import AsyncHTTPClient
import EscrowTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Two real `serve` nodes on one PostgreSQL database share the console's sessions: signed in on one, served by the
/// other, the same CSRF token accepted there; a token revoked with the CLI ends the session on both at their next
/// request; a node started again signs nobody out.
@Suite("PostgreSQL: console sessions shared by two serve nodes")
struct ConsoleSessionClusterTests {
    /// A browser's cookie jar for the console's two cookies, over plain HTTP on loopback.
    final class Jar: @unchecked Sendable {
        var cookies: [String: String] = [:]

        var header: String {
            cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        }

        func keep(_ response: HTTPClient.Response) {
            for value in response.headers["Set-Cookie"] {
                let pair = value.split(separator: ";")[0].split(separator: "=", maxSplits: 1)
                cookies[String(pair[0])] = pair.count == 2 ? String(pair[1]) : nil
            }
        }
    }

    static func request(
        _ client: HTTPClient,
        _ method: HTTPMethod,
        port: Int,
        _ path: String,
        jar: Jar,
        form: [String: String]? = nil
    ) async throws -> (status: Int, location: String?, body: String) {
        var headers = HTTPHeaders()
        if !jar.cookies.isEmpty { headers.add(name: "Cookie", value: jar.header) }
        var body: HTTPClient.Body?
        if let form {
            headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            body = .string(
                form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed)!)" }
                    .joined(separator: "&")
            )
        }
        let request = try HTTPClient.Request(
            url: "http://127.0.0.1:\(port)\(path)",
            method: method,
            headers: headers,
            body: body
        )
        let response = try await client.execute(request: request).get()
        jar.keep(response)
        let text = response.body.map { String(buffer: $0) } ?? ""
        return (Int(response.status.code), response.headers.first(name: "Location"), text)
    }

    static func csrf(_ page: String) throws -> String {
        let range = try #require(page.range(of: "name=\"csrf\" value=\""))
        return String(page[range.upperBound...].prefix { $0 != "\"" })
    }

    @Test func sessionsAcrossNodesRevocationAndRestart() async throws {
        try await TestDatabase.with { database in
            let directory = TemporaryDirectory()
            let environment = [
                "PROFILE_ESCROW_DATABASE": database.url,
                "PROFILE_ESCROW_KEYRING": directory.path + "/keyring",
            ]
            _ = try await ProfileEscrowCLI.setUpCaptureNode(token: "capture", environment: environment, in: directory.path)
            let added = try await ProfileEscrowCLI.run(
                ["tokens", "add", "operator", "--scope", "read", "operate"],
                environment: environment,
                in: directory.path
            )
            let token = try #require(added.stdout.split(separator: "\n").last.map(String.init))
            let processes = ProfileEscrowProcesses(directory: directory.path, environment: environment)
            defer { processes.killAll() }
            let client = HTTPClient(
                eventLoopGroupProvider: .singleton,
                configuration: .init(redirectConfiguration: .disallow)
            )
            defer { _ = client.shutdown() }
            let one = try await processes.startHealthyCaptureNode("one", client: client)
            let two = try await processes.startHealthyCaptureNode("two", client: client)

            let jar = Jar()
            let form = try await Self.request(client, .GET, port: one, "/console/signin", jar: jar)
            let signedIn = try await Self.request(
                client,
                .POST,
                port: one,
                "/console/signin",
                jar: jar,
                form: ["csrf": try Self.csrf(form.body), "token": token]
            )
            #expect(signedIn.status == 303 && jar.cookies["__Host-pe_session"] != nil, "signed in on one")

            let home = try await Self.request(client, .GET, port: two, "/console/", jar: jar)
            #expect(home.status == 200, "the other node serves the session")
            let paused = try await Self.request(
                client,
                .POST,
                port: two,
                "/console/deliveries/pause",
                jar: jar,
                form: ["csrf": try Self.csrf(home.body), "reason": "cluster test"]
            )
            let result = try #require(paused.location)
            #expect(
                paused.status == 303 && result.hasPrefix("/console/result/"),
                "the CSRF token holds on the other node"
            )
            let shown = try await Self.request(client, .GET, port: one, result, jar: jar)
            #expect(shown.status == 200, "the held answer is shown by the first node")

            // A restart of the first node signs nobody out.
            _ = processes.signal("one", SIGTERM)?.waitUntilExit()
            let again = try await processes.startHealthyCaptureNode("one-again", client: client)
            #expect(try await Self.request(client, .GET, port: again, "/console/", jar: jar).status == 200)

            let revoked = try await ProfileEscrowCLI.run(
                ["tokens", "revoke", "operator"],
                environment: environment,
                in: directory.path
            )
            #expect(revoked.status == 0, "\(revoked.stderr)")
            let started = ContinuousClock.now
            for port in [two, again] {
                let after = try await Self.request(client, .GET, port: port, "/console/", jar: jar)
                #expect(after.location == "/console/signin", "the next request on every node is signed out")
            }
            #expect(started.duration(to: .now) < .seconds(5))
        }
    }
}
