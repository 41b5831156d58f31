import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import NIOCore
import ProfileEscrow
import ServiceLifecycle
import Testing

@testable import EscrowCustody

#if canImport(Glibc)
import Glibc
#endif

/// Capture-only work with the custody engine stopped, plain-http Transit addresses, and the Transit request body,
/// against a real OpenBao (each test that stops one has its own) and real `profile-escrow` processes.
@Suite struct CustodyOutageTests {
    typealias Node = CustodyEngineTests.Node

    static func body(_ number: Int) -> String {
        #"{"userIdentifier":"\#(user(number))","fullName":{"givenName":"FAKEOUTAGE\#(number)"},"#
            + #""email":"outage\#(number)@example.invalid"}"#
    }

    static func user(_ number: Int) -> String { "000000.custodyoutage\(String(format: "%020d", number)).0001" }

    /// Runs the CLI on the node with standard input.
    static func run(_ node: Node, _ arguments: [String], stdin: String = "") async throws -> ProfileEscrowCLI.Result {
        try await ProfileEscrowCLI.run(
            arguments + ["--keyring", node.keyringPath, "--database", node.databasePath],
            stdin: stdin,
            environment: node.engine.environment,
            in: node.directory.path
        )
    }

    /// `POST url` with curl: the status.
    static func post(_ url: String, token: String, body: String, in directory: String) async throws -> Int {
        let result = try await ProfileEscrowCLI.run(
            [
                "-s", "-o", "/dev/null", "-m", "10", "-w", "%{http_code}", "-X", "POST", "-H",
                "Authorization: Bearer \(token)", "-H", "Content-Type: application/json", "--data-binary", body, url,
            ],
            executable: "/usr/bin/curl",
            in: directory
        )
        return Int(result.stdout) ?? 0
    }

    /// `custody` of `GET /v1/admin/overview`, with a `read` token.
    static func overviewCustody(_ base: String, token: String, in directory: String) async throws -> [String: Any]? {
        let result = try await ProfileEscrowCLI.run(
            ["-s", "-m", "10", "-H", "Authorization: Bearer \(token)", base + "/v1/admin/overview"],
            executable: "/usr/bin/curl",
            in: directory
        )
        let body = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return body?["custody"] as? [String: Any]
    }

    /// OpenBao stopped: `capture` exits 0 on a keyring in custody, `serve` starts, captures over HTTP, answers
    /// `/readyz` 503 with nothing about the engine, claims nothing; once OpenBao is back it unwraps the keys by itself
    /// and its worker delivers every escrow captured meanwhile.
    @Test func captureAndServeWorkWithTheEngineStoppedAndDeliverWhenItIsBack() async throws {
        let openBao = try PrivateOpenBao()
        let node = try await Node(.transit, openBao: openBao)
        let address = try #require(openBao.variables["PROFILE_ESCROW_TEST_BAO_ADDR"])
        let keyName = try #require(openBao.variables["PROFILE_ESCROW_TEST_BAO_KEY"])
        let added = try await node.cli(["tokens", "add", "outage", "--scope", "capture"])
        try #require(added.status == 0, "tokens add: \(added.stderr)")
        let token = String(try #require(added.stdout.split(separator: "\n").last))
        let reader = try await node.cli(["tokens", "add", "outage-read", "--scope", "read"])
        try #require(reader.status == 0, "tokens add: \(reader.stderr)")
        let readToken = String(try #require(reader.stdout.split(separator: "\n").last))
        let secret = try await ProfileEscrowCLI.run(["webhook-secret"], in: node.directory.path).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(secret.hasPrefix("whsec_"))
        let backend = try await FakeBackend.start(secret: secret)

        try openBao.halt()
        var resumed = false
        defer { if !resumed { try? openBao.resume() } }
        // A command that opens escrows needs the engine: it is really down.
        await #expect(try node.cli(["keys", "rewrap"]).status == 4)
        // The CLI's capture needs only the public keys.
        let captured = try await Self.run(node, ["capture"], stdin: Self.body(1))
        #expect(captured.status == 0, "capture with the engine stopped: \(captured.stderr)")
        node.expectNoCredential(captured)

        let port = CustodyEngineTests.freePort()
        let processes = ProfileEscrowProcesses(
            directory: node.directory.path,
            environment: node.engine.environment.merging(["PROFILE_ESCROW_WEBHOOK_SECRET": secret]) { $1 }
        )
        defer { processes.killAll() }
        let serve = try processes.start(
            "serve",
            [
                "serve", "--keyring", node.keyringPath, "--database", node.databasePath, "--port", "\(port)",
                "--backend", backend.url, "--poll-interval", "0.05s",
            ]
        )
        let base = "http://127.0.0.1:\(port)"
        try await CustodyEngineTests.eventually("serve answers /healthz") {
            guard serve.isRunning else { return true }
            return try await CustodyEngineTests.get(base + "/healthz", in: node.directory.path).status == 200
        }
        try #require(
            serve.isRunning,
            "serve exited with the engine stopped: \(processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined())"
        )

        // Not ready for opening, and a stranger learns nothing about the engine.
        let ready = try await CustodyEngineTests.get(base + "/readyz", in: node.directory.path)
        #expect(ready.status == 503)
        #expect(ready.body.contains("custody_unavailable"))
        let hostAndPort = address.replacingOccurrences(of: "http://", with: "")
        // (The key's name is also this product's, in the problem's type URN: it is looked for as the engine names it.)
        for secretOrLocation in [
            hostAndPort, "\"\(keyName)\"", "transit", "mount", "unreachable", "refused", node.engine.credential,
        ] {
            #expect(!ready.body.contains(secretOrLocation), "/readyz tells a stranger \(secretOrLocation)")
        }
        let metrics = try await CustodyEngineTests.get(base + "/metrics", in: node.directory.path)
        #expect(metrics.body.contains("profile_escrow_custody_up 0"))
        // An operator with a `read` token sees where the engine is and why it failed.
        let down = try await Self.overviewCustody(base, token: readToken, in: node.directory.path)
        #expect(down?["up"] as? Bool == false && down?["keysUnavailable"] as? Bool == true)
        #expect((down?["message"] as? String)?.contains(hostAndPort) == true)

        // It captures over HTTP, and claims nothing it cannot open.
        for number in 2...3 {
            let status = try await Self.post(
                base + "/v1/escrows",
                token: token,
                body: Self.body(number),
                in: node.directory.path
            )
            #expect(status == 201, "capture \(number) with the engine stopped answered \(status)")
        }
        // Real time on purpose: the worker is a real process polling every 50 ms, and what is checked is that ~60 of
        // its polls claim nothing; no event marks a claim that did not happen.
        try await pause(for: .seconds(3))
        #expect(backend.requests.isEmpty, "delivered with the keys still wrapped")
        let store = try SQLiteEscrowStore(path: node.databasePath, logger: Logger(label: "test"))
        defer { try? store.close() }
        let held = try await store.records(.all, after: nil, limit: 10)
        #expect(held.count == 3)
        #expect(held.allSatisfy { $0.state == .pending && $0.attempts == 0 }, "claimed without keys")

        // The engine comes back: unwrapped in the background, ready, and every escrow delivered.
        try openBao.resume()
        resumed = true
        try await EscrowTestSupport.eventually("/readyz once OpenBao is back", within: 90, every: .milliseconds(250)) {
            try await CustodyEngineTests.get(base + "/readyz", in: node.directory.path).status == 200
        }
        #expect(try await Self.overviewCustody(base, token: readToken, in: node.directory.path)?["up"] as? Bool == true)
        try await EscrowTestSupport.eventually("the three escrows delivered", within: 30, every: .milliseconds(250)) {
            Set(backend.requests.compactMap(\.escrowID)).count == 3
        }
        #expect(backend.requests.allSatisfy { $0.signatureValid })
        #expect(backend.violations.isEmpty)
        try await EscrowTestSupport.eventually("the three escrows purged", within: 30, every: .milliseconds(250)) {
            try await store.records(.all, after: nil, limit: 10).isEmpty
        }
        processes.stopAll()
        await backend.stop()
        let log = processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined()
        #expect(log.contains("did not unwrap the keyring"))
        #expect(log.contains("keyring unwrapped"))
        #expect(!log.contains(node.engine.credential))
        for number in 1...3 { #expect(!log.contains("FAKEOUTAGE\(number)") && !log.contains("outage\(number)@")) }
    }

    /// OpenBao stopped: the operator's commands that open no escrow (`confirm`, `erase`, `requeue`, `sweep`, `status`,
    /// `list`) work on a keyring in custody, and never print the engine's credential; a command that opens escrows
    /// (`keys rewrap`) still needs the engine.
    @Test func operatorCommandsThatOpenNothingNeedNoEngine() async throws {
        let openBao = try PrivateOpenBao()
        let node = try await Node(.transit, openBao: openBao)
        try openBao.halt()
        defer { try? openBao.resume() }
        for number in 1...3 {
            let captured = try await Self.run(node, ["capture"], stdin: Self.body(number))
            #expect(captured.status == 0, "capture: \(captured.stderr)")
        }
        let commands: [[String]] = [
            ["status", Self.user(1)], ["confirm", Self.user(1)], ["erase", Self.user(2), "--reason", "test erasure"],
            ["requeue", "--all-dead"], ["sweep"], ["list"],
        ]
        for command in commands {
            let result = try await Self.run(node, command)
            #expect(result.status == 0, "\(command[0]) with the engine stopped: \(result.stderr)")
            node.expectNoCredential(result)
        }
        #expect(try await Self.run(node, ["status", Self.user(1)]).status == 3, "confirmed: purged")
        #expect(try await Self.run(node, ["status", Self.user(3)]).status == 0, "the third is still held")
        #expect(try await Self.run(node, ["keys", "rewrap"]).status == 4, "a command that opens escrows needs the engine")
    }

    /// The unwrap in the background: while the engine refuses (no token yet) the reloader tries again 2 s after a
    /// failure, then 4, then 8 (on the escrow's clock, not every interval), and the node captures and opens nothing;
    /// once the token is there the next try unwraps the keys and escrows open; the service ends at graceful shutdown.
    @Test func theUnwrapIsRetriedWithABackoffOnTheEscrowsClock() async throws {
        let node = try await Node(.transit)
        let tokenFile = node.directory.path + "/bao-token"
        let environment = ["PROFILE_ESCROW_TRANSIT_TOKEN_FILE": tokenFile]
        let loaded = try await KeyringCustody.loadForService(path: node.keyringPath, environment: environment)
        let failure = try #require(loaded.unwrapFailure)
        #expect(failure.code == .custodyRefused)
        #expect(loaded.keyring.isWrapped && loaded.keyring.openableVersions.isEmpty)

        let fixture = try EscrowFixture(keyring: loaded.keyring)
        let escrow = fixture.escrow
        escrow.custodyHealth.failed(failure, keysUnavailable: true)
        let profile = try CustodyEngineTests.profile(1)
        let receipt = try await escrow.capture(profile)
        await #expect(throws: EscrowError.self) { _ = try await escrow.replay(userIdentifier: profile.userIdentifier) }
        #expect(try await fixture.store.record(id: receipt.escrowID)?.state == .pending, "never dead for a missing key")

        let reloader = KeyringReloader(
            escrow: escrow,
            path: node.keyringPath,
            interval: .seconds(2),
            environment: environment,
            logger: fixture.logger
        )
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [.init(service: reloader)], logger: fixture.logger)
        )
        let running = Task { try await group.run() }
        func tries() -> Int { fixture.loggedText().components(separatedBy: "keys still wrapped").count - 1 }
        /// Moves the clock by 2 s once the reloader waits on it, then waits until it waits again.
        func step() async throws {
            try await eventually("the reloader waits", within: 20, every: .milliseconds(5)) {
                fixture.clock.sleeping > 0
            }
            fixture.clock.advance(by: 2)
            try await eventually("the reloader waits again", within: 20, every: .milliseconds(5)) {
                fixture.clock.sleeping > 0
            }
        }
        try await step()  // 2 s: the first try
        #expect(tries() == 1)
        try await step()  // 4 s: waiting (4 s after the first)
        #expect(tries() == 1, "tried again before its backoff")
        try await step()  // 6 s: the second
        #expect(tries() == 2)
        for _ in 0..<3 { try await step() }  // 8, 10, 12 s: waiting (8 s after the second)
        #expect(tries() == 2, "tried again before its backoff")
        #expect(escrow.custodyHealth.problem?.keysUnavailable == true)

        try Data(try CustodyEngine.variable("PROFILE_ESCROW_TEST_BAO_TOKEN").utf8).write(
            to: URL(fileURLWithPath: tokenFile)
        )
        try await step()  // 14 s: the third, which unwraps
        try await eventually("the keys unwrapped", within: 20, every: .milliseconds(10)) {
            escrow.custodyHealth.problem == nil
        }
        #expect(tries() == 2)
        #expect(fixture.loggedText().contains("keyring unwrapped"))
        #expect(escrow.keyring.openableVersions == [1])
        #expect(try await escrow.replay(userIdentifier: profile.userIdentifier).profile == profile)

        await group.triggerGracefulShutdown()
        try await bounded("the reloader ends at graceful shutdown", within: 10) { try await running.value }
    }

    /// Plain `http` to a host that is not loopback: refused as an option (naming it), in a keyring file (at load,
    /// by every command), and by the custodian itself; loopback addresses stay allowed.
    @Test func plainHTTPTransitIsRefusedUnlessLoopback() async throws {
        for allowed in [
            "http://127.0.0.1:8200", "http://127.9.9.9", "http://localhost:8200", "http://[::1]:8200",
            "https://bao.example.invalid:8200", "https://10.0.0.1",
        ] {
            #expect(KeyCustody.Transit(address: allowed, key: "k").cleartextRemoteHost == nil, "\(allowed)")
        }
        for refused in [
            "http://10.0.0.1:8200", "http://bao.example.invalid", "http://127.0.0.1.example.invalid",
            "http://[::2]:8200", "http://user@192.0.2.1:8200/", "http://localhost.example.invalid",
        ] {
            #expect(KeyCustody.Transit(address: refused, key: "k").cleartextRemoteHost != nil, "\(refused)")
            #expect(throws: CryptoError.self) { try KeyCustody.transit(.init(address: refused, key: "k")).validate() }
        }

        // The option.
        let node = try await Node(.transit, initialize: false)
        let option = try await node.cli([
            "keys", "init", "--custody", "transit", "--transit-address", "http://192.0.2.7:8200", "--transit-key", "k",
        ])
        #expect(option.status == 2)
        #expect(option.stderr.contains("--transit-address") && option.stderr.contains("https://"))
        node.expectNoCredential(option)
        #expect(!FileManager.default.fileExists(atPath: node.keyringPath))

        // A keyring file that records such an address: refused at load, by capture too (which needs no engine).
        let made = try await node.cli(["keys", "init"] + node.engine.arguments)
        try #require(made.status == 0, "keys init: \(made.stderr)")
        var lines = try SecretScan.lines(node.keyringPath)
        let custodyLine = try #require(lines.firstIndex { $0.hasPrefix("custody transit ") })
        var fields = lines[custodyLine].split(separator: " ").map(String.init)
        fields[2] = "http://192.0.2.7:8200"
        lines[custodyLine] = fields.joined(separator: " ")
        try SecretScan.write(lines, to: node.keyringPath)
        let error = #expect(throws: CryptoError.self) { _ = try Keyring.load(path: node.keyringPath) }
        #expect(error?.code == .keyringMalformed && error?.message.contains("plain http://") == true)
        for command in [["capture"], ["keys", "show"], ["keys", "rewrap"]] {
            let result = try await Self.run(node, command, stdin: Self.body(9))
            #expect(result.status == 4, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("192.0.2.7") && result.stderr.contains("https://"))
            node.expectNoCredential(result)
        }

        // The custodian of a library user who builds one directly: refused before anything is sent.
        let custodian = TransitCustodian(
            KeyCustody.Transit(address: "http://192.0.2.7:8200", key: "k"),
            environment: node.engine.environment,
            timeout: .seconds(1)
        )
        let refused = await #expect(throws: CryptoError.self) {
            _ = try await custodian.wrap(SecretBytes(copying: [UInt8](repeating: 7, count: 32)), associatedData: [1])
        }
        #expect(refused?.code == .custodyRefused)
    }

    /// The request body that carries a secret in base64 is zeroed once the request is over: answered, and refused.
    @Test func theTransitRequestBodyIsZeroedAfterUse() async throws {
        let engine = try CustodyEngine.make(.transit)
        guard case .transit(let transit) = engine.custody else { return }
        let custodian = TransitCustodian(transit, environment: engine.environment)
        let secret = SecretBytes(copying: [UInt8](repeating: 0xA5, count: 32))
        let encoded = secret.base64Encoded()
        func body() -> ByteBuffer {
            var buffer = ByteBuffer(string: #"{"plaintext":""#)
            encoded.withUnsafeBytes { _ = buffer.writeBytes($0) }
            buffer.writeString(#""}"#)
            return buffer
        }
        // Answered: the engine encrypted it (so the body was sent as written), and the body's bytes are zeros now.
        let sent = body()
        let answer = try await custodian.post("encrypt", body: sent)
        #expect(String(buffer: answer).contains("vault:v"))
        #expect(sent.readableBytes > 40)
        #expect(sent.readableBytesView.allSatisfy { $0 == 0 }, "the encrypt body still holds the secret")

        // Refused before sending (plain http to a remote host): zeroed all the same.
        let remote = TransitCustodian(
            KeyCustody.Transit(address: "http://192.0.2.7:8200", key: "k"),
            environment: engine.environment
        )
        let unsent = body()
        await #expect(throws: CryptoError.self) { _ = try await remote.post("encrypt", body: unsent) }
        #expect(unsent.readableBytesView.allSatisfy { $0 == 0 })
    }
}
