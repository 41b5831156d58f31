import AsyncHTTPClient
import EscrowTestSupport
import Foundation
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing

@testable import EscrowHTTP

/// TLS in the service: a certificate served from files and reloaded when they change, mutual TLS on the internal
/// listener. Certificates made by `openssl` for the test (``TestCertificates``).
@Suite("TLS")
struct TLSTests {
    /// GET /healthz over TLS trusting only `ca`, with a client certificate when given; the status, or nil when the
    /// handshake fails.
    static func get(port: Int, directory: String, ca: String, client: String? = nil) async -> Int? {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file("\(directory)/\(ca).pem")
        if let client {
            tls.certificateChain = try! NIOSSLCertificate.fromPEMFile("\(directory)/\(client).pem").map {
                .certificate($0)
            }
            tls.privateKey = .privateKey(try! NIOSSLPrivateKey(file: "\(directory)/\(client).key", format: .pem))
        }
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(
                tlsConfiguration: tls,
                timeout: HTTPClient.Configuration.Timeout(connect: .seconds(2), read: .seconds(5))
            )
        )
        let status: Int?
        do {
            let response = try await http.execute(
                HTTPClientRequest(url: "https://127.0.0.1:\(port)/healthz"),
                timeout: .seconds(10)
            )
            status = Int(response.status.code)
        } catch {
            status = nil
        }
        try? await http.shutdown()
        return status
    }

    @Test("served from the files; a renewed certificate is served from the next connection on; a broken one is not")
    func servedAndReloaded() async throws {
        var harness = try await HTTPHarness()
        let directory = harness.fixture.directory.path
        try await TestCertificates.make(directory, ca: "ca1")
        try await TestCertificates.make(directory, ca: "ca2")
        let certificate = directory + "/tls.pem"
        let key = directory + "/tls.key"
        try FileManager.default.copyItem(atPath: directory + "/ca1-server.pem", toPath: certificate)
        try FileManager.default.copyItem(atPath: directory + "/ca1-server.key", toPath: key)
        let files = try TLSCertificateFiles(certificatePath: certificate, keyPath: key)
        harness.dependencies.tls = files
        let logger = Logger(label: "test")
        try await harness.app().test(.live) { client async throws in
            let port = try #require(client.port)
            #expect(await Self.get(port: port, directory: directory, ca: "ca1") == 200)
            #expect(await Self.get(port: port, directory: directory, ca: "ca2") == nil, "not the new one yet")
            // A half-done renewal (the new key with the old certificate) is refused; the pair in use stays.
            try FileManager.default.removeItem(atPath: key)
            try FileManager.default.copyItem(atPath: directory + "/ca2-server.key", toPath: key)
            #expect(!files.reloadIfChanged(logger: logger))
            #expect(await Self.get(port: port, directory: directory, ca: "ca1") == 200)
            // The renewal completed: served from the next handshake on.
            try FileManager.default.removeItem(atPath: certificate)
            try FileManager.default.copyItem(atPath: directory + "/ca2-server.pem", toPath: certificate)
            #expect(files.reloadIfChanged(logger: logger))
            #expect(await Self.get(port: port, directory: directory, ca: "ca2") == 200)
            #expect(await Self.get(port: port, directory: directory, ca: "ca1") == nil)
        }
    }

    @Test("with a client CA, the internal listener takes only clients with its certificate")
    func mutualTLS() async throws {
        var harness = try await HTTPHarness()
        let directory = harness.fixture.directory.path
        try await TestCertificates.make(directory, ca: "ca1")
        try await TestCertificates.make(directory, ca: "other")
        harness.dependencies.tls = try TLSCertificateFiles(
            certificatePath: directory + "/ca1-server.pem",
            keyPath: directory + "/ca1-server.key"
        )
        harness.configuration.tlsClientCA = directory + "/ca1.pem"
        try await harness.app().test(.live) { client async throws in
            let port = try #require(client.port)
            #expect(await Self.get(port: port, directory: directory, ca: "ca1") == nil, "no client certificate")
            #expect(await Self.get(port: port, directory: directory, ca: "ca1", client: "other-client") == nil)
            #expect(await Self.get(port: port, directory: directory, ca: "ca1", client: "ca1-client") == 200)
        }
    }

    @Test("a key that is not the certificate's, or a file that is not PEM, is refused naming the file")
    func refusedAtLoad() async throws {
        let directory = NSTemporaryDirectory() + "tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await TestCertificates.make(directory, ca: "ca1")
        try await TestCertificates.make(directory, ca: "ca2")
        #expect(throws: TLSCertificateFiles.LoadError.self) {
            try TLSCertificateFiles(
                certificatePath: directory + "/ca1-server.pem",
                keyPath: directory + "/ca2-server.key"
            )
        }
        do {
            _ = try TLSCertificateFiles(
                certificatePath: directory + "/server.ext",
                keyPath: directory + "/ca1-server.key"
            )
            Issue.record("a file that is not PEM loaded")
        } catch {
            #expect("\(error)".contains("server.ext"))
        }
    }
}
