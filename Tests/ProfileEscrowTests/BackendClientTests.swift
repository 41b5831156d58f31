import EscrowCore
import EscrowTestSupport
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOSSL
import Testing

@testable import ProfileEscrow

/// The delivery's HTTP client on the wire: kept-alive connections reused and dropped when they must be, answers
/// read as the status says, TLS verified, one deadline over everything. Against ``WireHTTPServer``, which answers
/// with exact bytes (what a server library would not send).
@Suite("Backend client on the wire")
struct BackendClientTests {
    static let body = Array(#"{"escrowId":"0123456789abcdef0123456789abcdef","attempt":1}"#.utf8)
    static let escrowID = "0123456789abcdef0123456789abcdef"

    static func client(
        _ url: String,
        tls: TLSConfiguration? = nil,
        idleTimeout: TimeAmount = BackendExchangeHandler.defaultIdleTimeout
    ) throws -> BackendClient {
        try BackendClient(
            url: try #require(URL(string: url)),
            tls: tls,
            secrets: [try WebhookSecret(WebhookSecret.generateText())],
            idleTimeout: idleTimeout
        )
    }

    /// `seconds`: 30 by default, a bound, not a timing under test: under the whole suite on two cores (serve and
    /// OpenBao processes of other suites running beside it) an answer that takes milliseconds alone has taken more
    /// than 10 s. Tests of the deadline itself pass their own.
    static func deliver(_ client: BackendClient, within seconds: Double = 30) async -> BackendClient.Answer {
        await client.deliver(body: body, escrowID: escrowID, within: seconds, now: Date())
    }

    @Test(
        "the URL gives the connection's host and port, the Host header and the request target",
        arguments: [
            ("http://[::1]:8080/hook?tenant=a%20b", "::1", 8080, "[::1]:8080", "/hook?tenant=a%20b"),
            ("https://backend.invalid", "backend.invalid", 443, "backend.invalid", "/"),
            ("https://backend.invalid:443/x/y", "backend.invalid", 443, "backend.invalid", "/x/y"),
            ("http://127.0.0.1:80/%7Euser/", "127.0.0.1", 80, "127.0.0.1", "/%7Euser/"),
            ("https://10.0.0.7:8443/r", "10.0.0.7", 8443, "10.0.0.7:8443", "/r"),
        ]
    )
    func endpoint(url: String, host: String, port: Int, authority: String, target: String) throws {
        let client = try Self.client(url)
        #expect(client.connections.endpoint.host == host)
        #expect(client.connections.endpoint.port == port)
        #expect(client.authority == authority)
        #expect(client.target == target)
        let secure = url.hasPrefix("https")
        #expect((client.connections.endpoint.tls != nil) == secure)
        // SNI and the name checked: the host name; an address is checked against the certificate's IP entries.
        let named = secure && host.first?.isLetter == true
        #expect(client.connections.endpoint.serverHostname == (named ? host : nil))
    }

    @Test("one connection carries every delivery in turn; the request line, Host and body are as given")
    func keptAlive() async throws {
        let server = try await WireHTTPServer.start { _ in .ok }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register?tenant=a%20b")
        for _ in 0..<20 {
            #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        }
        #expect(server.accepted == 1)
        let requests = server.received
        #expect(requests.count == 20)
        for request in requests {
            #expect(request.head.hasPrefix("POST /register?tenant=a%20b HTTP/1.1\r\n"))
            #expect(request.header("Host") == "127.0.0.1:\(server.port)")
            #expect(request.header("Content-Length") == String(Self.body.count))
            #expect(request.header("Idempotency-Key") == Self.escrowID)
            #expect(request.body == Self.body)
        }
        // Eight at once need up to eight connections (the one above among them); the next eight find them idle:
        // sixteen deliveries over at most eight connections.
        for _ in 0..<2 {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<8 { group.addTask { _ = await Self.deliver(client) } }
            }
        }
        #expect(server.received.count == 36)
        #expect(server.accepted <= 8)
        #expect(client.connections.openCount == server.accepted)
        await client.connections.shutdown()
        try await eventually("the client closed its connections", within: 10) { server.openConnections == 0 }
        await server.stop()
    }

    @Test(
        "an answer after which the connection cannot carry another is not reused, and the status stands",
        arguments: [
            // The server leaves these connections open: the client must not take them for the next request.
            ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
            ("HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + String(repeating: " ", count: 20000), false),
            // A body without a length ends when the server closes the connection.
            ("HTTP/1.1 200 OK\r\n\r\nregistered", true),
        ]
    )
    func notReused(answer: String, close: Bool) async throws {
        let server = try await WireHTTPServer.start { _ in WireHTTPServer.Wire(answer, close: close) }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register")
        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        #expect(server.accepted == 2)
        #expect(server.received.map(\.connection) == [1, 2])
        try await eventually("the client closed the first connection", within: 10) { server.openConnections <= 1 }
        await client.connections.shutdown()
        await server.stop()
    }

    @Test("informational answers are skipped; a chunked body is read and the connection kept; Retry-After is read")
    func informationalAndChunked() async throws {
        let server = try await WireHTTPServer.start { number in
            number == 0
                ? WireHTTPServer.Wire(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                        + "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok"
                )
                : WireHTTPServer.Wire(
                    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "5\r\nlater\r\n0\r\n\r\n"
                )
        }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register")
        #expect(await Self.deliver(client).outcome == .accepted(status: 202))
        #expect(await Self.deliver(client).outcome == .retry(status: 503, retryAfter: 7))
        #expect(await Self.deliver(client).outcome == .retry(status: 503, retryAfter: 7))
        #expect(server.accepted == 1)
        await client.connections.shutdown()
        await server.stop()
    }

    /// One timer serves a connection's deadlines and its idle time, moved only when it would fire too late: a timer
    /// left at an earlier exchange's deadline must neither end the next exchange early nor keep the connection
    /// open past its idle time.
    @Test("one timer per connection: a later exchange keeps its own deadline; an idle connection closes on time")
    func oneTimer() async throws {
        let server = try await WireHTTPServer.start { number in number == 1 ? .silence : .ok }
        // Times with room for the whole suite's load (a test's task may resume seconds after its answer came, and a
        // 4 s deadline once ran out under it): the first exchange's deadline (10 s, before the 20 s idle time) is what
        // the timer is left at; the second has 15 s and no answer.
        let client = try Self.client("http://127.0.0.1:\(server.port)/register", idleTimeout: .seconds(20))
        #expect(await Self.deliver(client, within: 10).outcome == .confirmed(status: 200))
        let started = ContinuousClock.now
        let silent = await Self.deliver(client, within: 15)
        #expect(silent.timedOut)
        #expect(ContinuousClock.now - started >= .milliseconds(14_900), "not cut off at the earlier deadline")
        #expect(server.received.map(\.connection) == [1, 1])

        // Answered and left idle: open until its idle time is up, then closed by the client.
        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        #expect(client.connections.idleCount == 1)
        try await pause(for: .milliseconds(500))
        #expect(client.connections.idleCount == 1, "still open within its idle time")
        try await eventually("the idle connection closed", within: 45) {
            client.connections.openCount == 0 && server.openConnections == 0
        }
        await client.connections.shutdown()
        await server.stop()
    }

    @Test("a kept-alive connection the backend closed while idle is not used again")
    func closedWhileIdle() async throws {
        let server = try await WireHTTPServer.start { _ in .ok }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register")
        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        #expect(client.connections.idleCount == 1)
        await server.closeConnections()
        try await eventually("the client saw the connection close", within: 10) {
            client.connections.idleCount == 0 && client.connections.openCount == 0
        }
        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        #expect(server.accepted == 2)
        await client.connections.shutdown()
        await server.stop()
    }

    @Test(
        "a kept-alive connection found closed as the request goes out: the same request once more, on a new one",
        arguments: [true, false]
    )
    func keptAliveFoundClosed(newConnectionAnswers: Bool) async throws {
        // Request 1 meets a connection the backend closes without answering (its keep-alive timeout, on the way).
        let server = try await WireHTTPServer.start { number in
            switch number {
            case 1: WireHTTPServer.Wire(bytes: [], close: true)
            case 2 where !newConnectionAnswers: WireHTTPServer.Wire(bytes: [], close: true)
            default: .ok
            }
        }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register")
        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        let second = await Self.deliver(client)
        let received = server.received
        // Sent again once, on a new connection, byte for byte; a new connection that fails is not tried again.
        #expect(received.count == 3)
        #expect(received.map(\.connection) == [1, 1, 2])
        #expect(received[1].head == received[2].head && received[1].body == received[2].body)
        if newConnectionAnswers {
            #expect(second.outcome == .confirmed(status: 200))
        } else {
            #expect(second.outcome == .retry(status: nil, retryAfter: nil))
            #expect(second.failure == "the backend closed the connection without answering")
        }
        await client.connections.shutdown()
        await server.stop()
    }

    /// The exchange handler alone, on NIO's embedded channel: a reset that comes while the connection is idle (the
    /// backend gave up on it) is what the next exchange handed to it fails with, as a lost connection, so that the
    /// request is sent again; a TLS or parsing error is not.
    @Test(
        "an error while idle is the next exchange's failure: a lost connection for a reset, not for TLS",
        arguments: [true, false]
    )
    func errorWhileIdle(reset: Bool) throws {
        let channel = EmbeddedChannel()
        let handler = BackendExchangeHandler()
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        let error: any Error =
            reset
            ? IOError(errnoCode: ECONNRESET, reason: "read(descriptor:pointer:size:)")
            : NIOSSLError.handshakeFailed(.sslError([]))
        channel.pipeline.fireErrorCaught(error)
        #expect(!channel.isActive)
        let promise = channel.eventLoop.makePromise(of: BackendExchange.Ended.self)
        handler.start(
            BackendExchange(
                head: HTTPRequestHead(version: .http1_1, method: .POST, uri: "/register"),
                body: ByteBuffer(),
                deadline: .now() + .seconds(5),
                sentAt: Date(),
                promise: promise
            )
        )
        let failure = #expect(throws: BackendClient.Failure.self) { try promise.futureResult.wait() }
        #expect(failure?.lostUnanswered == reset)
        #expect(failure?.description.contains(reset ? "lost without an answer" : "handshakeFailed") == true)
    }

    @Test("no answer: closed, not HTTP, or silence until the deadline; each named, none reused")
    func noAnswer() async throws {
        let server = try await WireHTTPServer.start { number in
            switch number {
            case 0: WireHTTPServer.Wire(bytes: [], close: true)
            case 1: WireHTTPServer.Wire("SSH-2.0-OpenSSH_9.2\r\n\r\n")
            case 2: .silence
            default: .ok
            }
        }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register")

        let closed = await Self.deliver(client)
        #expect(closed.outcome == .retry(status: nil, retryAfter: nil) && !closed.timedOut)
        #expect(closed.failure == "the backend closed the connection without answering")

        let garbled = await Self.deliver(client)
        #expect(garbled.outcome == .retry(status: nil, retryAfter: nil) && !garbled.timedOut)
        #expect(garbled.failure?.hasPrefix("the exchange with the backend failed: ") == true)

        let started = ContinuousClock.now
        let silent = await Self.deliver(client, within: 1.5)
        #expect(silent.outcome == .retry(status: nil, retryAfter: nil) && silent.timedOut)
        #expect(silent.failure == "no answer within the delivery deadline")
        // Bounded, not hung: under the whole suite on two cores (serve and OpenBao processes of other suites beside
        // it), the deadline's answer has come 27 s late, so the bound allows for that.
        #expect(ContinuousClock.now - started < .seconds(60), "bounded by the deadline")

        #expect(await Self.deliver(client).outcome == .confirmed(status: 200))
        #expect(server.accepted == 4, "a connection without an answer is never used again")
        await client.connections.shutdown()
        await server.stop()
    }

    @Test("a status that came in time stands when the deadline cuts the body off")
    func cutOffBody() async throws {
        // The head and part of a 1,000-byte body, then nothing.
        let server = try await WireHTTPServer.start { _ in
            WireHTTPServer.Wire("HTTP/1.1 201 Created\r\nContent-Length: 1000\r\n\r\nabc")
        }
        let client = try Self.client("http://127.0.0.1:\(server.port)/register")
        // The head comes at once; 8 s leave room for the whole suite's load to let it be read before the deadline.
        let started = ContinuousClock.now
        let answer = await Self.deliver(client, within: 8)
        #expect(
            answer.outcome == .confirmed(status: 201) && answer.bodyCutOff && !answer.timedOut,
            "\(answer.outcome), cut off: \(answer.bodyCutOff), timed out: \(answer.timedOut), \(answer.failure ?? "-"), after \(ContinuousClock.now - started)"
        )
        try await eventually("the cut-off connection is closed", within: 10) { server.openConnections == 0 }
        await client.connections.shutdown()
        await server.stop()
    }

    @Test("a refused connection is a named failure, not a timeout")
    func refused() async throws {
        let server = try await WireHTTPServer.start { _ in .ok }
        let port = server.port
        await server.stop()
        let client = try Self.client("http://127.0.0.1:\(port)/register")
        let answer = await Self.deliver(client)
        #expect(answer.outcome == .retry(status: nil, retryAfter: nil) && !answer.timedOut)
        #expect(answer.failure?.hasPrefix("cannot connect to the backend: ") == true)
        guard case .connect(_, let refused) = answer.cause else {
            Issue.record("expected a failure to connect, got \(String(describing: answer.cause))")
            return
        }
        #expect(refused, "classified where it happened: nothing listened")
        #expect(OperatorActions.classify(try #require(answer.cause)) == .connectionRefused)
        await client.connections.shutdown()
    }

    @Test("over TLS the backend's certificate is verified, for a name or an address, whatever the caller set")
    func tls() async throws {
        let directory = try await Self.certificates()
        let path = directory.path
        func serving(_ ca: String) async throws -> WireHTTPServer { try await Self.serving(ca, in: path) }
        func trusting(_ ca: String, verification: CertificateVerification = .fullVerification) -> TLSConfiguration {
            Self.trusting(ca, in: path, verification: verification)
        }

        let server = try await serving("trusted")
        for host in ["127.0.0.1", "localhost"] {
            let client = try Self.client("https://\(host):\(server.port)/register", tls: trusting("trusted"))
            #expect(await Self.deliver(client).outcome == .confirmed(status: 200), "\(host)")
            #expect(await Self.deliver(client).outcome == .confirmed(status: 200), "\(host)")
            #expect(client.connections.openCount == 1, "kept alive over TLS (\(host))")
            await client.connections.shutdown()
        }
        #expect(server.received.count == 4)

        // Another CA, even with verification turned off by the caller: refused before any request is sent.
        for verification in [CertificateVerification.fullVerification, .none] {
            let client = try Self.client(
                "https://127.0.0.1:\(server.port)/register",
                tls: trusting("stranger", verification: verification)
            )
            let answer = await Self.deliver(client)
            #expect(answer.outcome == .retry(status: nil, retryAfter: nil))
            #expect(answer.failure?.hasPrefix("TLS with the backend failed: handshakeFailed") == true)
            #expect(answer.cause.map(OperatorActions.classify) == .tls, "\(String(describing: answer.cause))")
            await client.connections.shutdown()
        }
        #expect(server.received.count == 4)
        await server.stop()

        // A certificate for another name than the one dialled.
        let misnamed = try await serving("named")
        let client = try Self.client("https://127.0.0.1:\(misnamed.port)/register", tls: trusting("named"))
        let misnamedAnswer = await Self.deliver(client)
        #expect(misnamedAnswer.outcome == .retry(status: nil, retryAfter: nil))
        #expect(misnamedAnswer.cause.map(OperatorActions.classify) == .tls, "a name mismatch is a TLS failure")
        #expect(misnamed.received.isEmpty)
        await client.connections.shutdown()
        await misnamed.stop()
    }

    /// A temporary directory with certificates from three CAs (``TestCertificates``): `trusted` and `stranger`, whose
    /// servers are 127.0.0.1 and `localhost`, and `named`, whose server is only `backend.invalid`.
    static func certificates() async throws -> TemporaryDirectory {
        let directory = TemporaryDirectory()
        try await TestCertificates.make(directory.path, ca: "trusted")
        try await TestCertificates.make(directory.path, ca: "stranger")
        try await TestCertificates.make(directory.path, ca: "named", serverNames: "DNS:backend.invalid")
        return directory
    }

    /// A server over TLS with `<ca>-server`'s certificate; with `clientCA`, it asks for a client certificate
    /// issued by it.
    static func serving(_ ca: String, in path: String, clientCA: String? = nil) async throws -> WireHTTPServer {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile("\(path)/\(ca)-server.pem").map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: "\(path)/\(ca)-server.key", format: .pem))
        )
        if let clientCA {
            tls.trustRoots = .file("\(path)/\(clientCA).pem")
            tls.certificateVerification = .noHostnameVerification
        }
        return try await WireHTTPServer.start(tls: tls) { _ in .ok }
    }

    static func trusting(
        _ ca: String,
        in path: String,
        verification: CertificateVerification = .fullVerification
    ) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file("\(path)/\(ca).pem")
        tls.certificateVerification = verification
        return tls
    }

    @Test("a backend that asks for a client certificate gets the configured one")
    func mutualTLS() async throws {
        let directory = try await Self.certificates()
        let path = directory.path
        let server = try await Self.serving("trusted", in: path, clientCA: "trusted")
        let url = "https://127.0.0.1:\(server.port)/register"

        let anonymous = try Self.client(url, tls: Self.trusting("trusted", in: path))
        #expect(await Self.deliver(anonymous).outcome == .retry(status: nil, retryAfter: nil))
        await anonymous.connections.shutdown()

        for (client, answered) in [("stranger-client", false), ("trusted-client", true)] {
            var tls = Self.trusting("trusted", in: path)
            tls.certificateChain = try NIOSSLCertificate.fromPEMFile("\(path)/\(client).pem").map { .certificate($0) }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: "\(path)/\(client).key", format: .pem))
            let backend = try Self.client(url, tls: tls)
            let outcome = await Self.deliver(backend).outcome
            #expect(outcome == (answered ? .confirmed(status: 200) : .retry(status: nil, retryAfter: nil)), "\(client)")
            await backend.connections.shutdown()
        }
        #expect(server.received.count == 1)
        await server.stop()
    }

    @Test("a TLS handshake that never completes ends at the delivery's deadline")
    func stalledHandshake() async throws {
        // Accepts the connection and reads the ClientHello, but never answers it.
        let server = try await WireHTTPServer.start { _ in .ok }
        let client = try Self.client("https://127.0.0.1:\(server.port)/register")
        let started = ContinuousClock.now
        let answer = await Self.deliver(client, within: 1.5)
        #expect(answer.outcome == .retry(status: nil, retryAfter: nil) && answer.timedOut)
        // Bounded, not hung: under the whole suite on two cores (serve and OpenBao processes of other suites beside
        // it), the deadline's answer has come 27 s late, so the bound allows for that.
        #expect(ContinuousClock.now - started < .seconds(60), "bounded by the deadline")
        await client.connections.shutdown()
        await server.stop()
    }

    @Test("settings that cannot make a TLS context are refused when a worker is configured, naming the problem")
    func unusableTLS() throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file("/nonexistent/ca.pem")
        func refused(_ error: any Error) -> Bool {
            (error as? EscrowError)?.message.hasPrefix("the TLS settings toward the backend cannot be used") == true
        }
        #expect(performing: { _ = try Self.client("https://127.0.0.1:1/register", tls: tls) }, throws: refused)
        var configuration = try ReplayWorker.Configuration(
            backendURL: "https://127.0.0.1:1/register",
            webhookSecret: WebhookSecret.generateText()
        )
        configuration.backendTLS = tls
        #expect(performing: { try configuration.validate() }, throws: refused)
        // Over plain http the TLS settings are not used, so not checked.
        configuration.backendURL = try #require(URL(string: "http://127.0.0.1:1/register"))
        try configuration.validate()
    }
}
