import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProfileEscrow
import ServiceLifecycle
import Testing

@testable import EscrowHTTP

/// The same API over real sockets, one test per endpoint group.
@Suite("Live server")
struct LiveServerTests {
    @Test("escrows: capture, status, replay, confirm, erase over a socket")
    func escrows() async throws {
        let harness = try await HTTPHarness()
        let uri = "/v1/escrows/\(Fake.userIdentifier(1))"
        try await harness.app().test(.live) { client async throws in
            let capture = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: Fake.body(1)
            )
            #expect(capture.status == .created)
            #expect(try await client.execute(uri: uri, method: .get, headers: harness.headers()).status == .ok)
            let replay = try await client.execute(uri: uri + "/replay", method: .post, headers: harness.headers())
            #expect(replay.json["email"] as? String == Fake.email(1))
            let confirm = try await client.execute(uri: uri + "/confirm", method: .post, headers: harness.headers())
            #expect(confirm.json["purged"] as? Bool == true)
            #expect(
                try await client.execute(uri: uri, method: .delete, headers: harness.headers()).status == .noContent
            )
            let big = ByteBuffer(bytes: Array(repeating: UInt8(ascii: "a"), count: 64 * 1024))
            let tooLarge = try await client.execute(
                uri: "/v1/escrows",
                method: .post,
                headers: harness.headers(json: true),
                body: big
            )
            #expect(tooLarge.status == .contentTooLarge)
        }
    }

    @Test("apple notifications over a socket")
    func notifications() async throws {
        let keys = AppleTestKeys.shared
        let harness = try await HTTPHarness(apple: try await keys.verifier())
        _ = try await harness.escrow.capture(try ProfileParser.parse(Array(Fake.body(1).readableBytesView)).profile)
        let jws = try await keys.sign(
            AppleTestKeys.NotificationClaims(
                events: AppleTestKeys.events("consent-revoked", sub: Fake.userIdentifier(1))
            )
        )
        try await harness.app().test(.live) { client async throws in
            let response = try await client.execute(
                uri: "/v1/apple/notifications",
                method: .post,
                headers: [.contentType: "application/json"],
                body: Fake.body(["payload": jws])
            )
            #expect(response.status == .ok)
            #expect(response.json["outcome"] as? String == "purged")
        }
        #expect(try await harness.liveCount() == 0)
    }

    @Test("healthz, readyz, metrics, 404 and 405 over a socket")
    func operational() async throws {
        let harness = try await HTTPHarness()
        try await harness.app().test(.live) { client async throws in
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.status == .ok)
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true)
            #expect(try await client.execute(uri: "/nope", method: .get).status == .notFound)
            #expect(try await client.execute(uri: "/healthz", method: .post).status == .methodNotAllowed)
        }
    }
}

@Suite("PurgeFlusher")
struct PurgeFlusherTests {
    @Test("with checkpointAfterPurge off, purged ciphertext leaves the WAL within the flush interval")
    func flushes() async throws {
        let harness = try await HTTPHarness(checkpointAfterPurge: false)
        let profile = try ProfileParser.parse(Array(Fake.body(1).readableBytesView)).profile
        let receipt = try await harness.escrow.capture(profile)
        let sealed = try #require(try await harness.store.record(id: receipt.escrowID)).sealed.sealedProfile
        try await harness.escrow.confirm(userIdentifier: profile.userIdentifier)
        let needle = Array(sealed.prefix(32))
        func anyFileHoldsTheCiphertext() -> Bool {
            harness.fixture.storeFiles().contains { $0.bytes.contains(bytes: needle) }
        }
        // Without a checkpoint the WAL still holds the captured page: otherwise this test proves nothing.
        try #require(anyFileHoldsTheCiphertext(), "the purged ciphertext is in the WAL before any flush")

        let flusher = PurgeFlusher(
            store: harness.store,
            interval: .milliseconds(100),
            clock: harness.clock,
            logger: harness.logger
        )
        let group = ServiceGroup(services: [flusher], logger: harness.logger)
        // Read the files while the flusher runs: shutdown flushes once more, so a check after it
        // could not tell a periodic flush from the final one.
        let clearedWhileRunning = try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // The interval is counted on the escrow's clock: moved one interval a poll instead of waited for.
            // Polled, not required (the expectation below says what failed): without periodic flushes the files
            // are never cleared while the flusher runs.
            let cleared =
                (try? await eventually("the WAL flushed", within: 10, every: .milliseconds(50)) {
                    harness.clock.advance(by: 0.1)
                    return !anyFileHoldsTheCiphertext()
                }) != nil
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return cleared
        }
        #expect(clearedWhileRunning, "the WAL was flushed while the flusher ran, every 100 ms of its clock")
    }
}
