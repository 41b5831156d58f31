import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProfileEscrow
import Testing

@testable import EscrowHTTP

/// Rows broken in the SQLite file by another process (someone with database access), then met by
/// `GET /v1/escrows/{user}` and `POST /v1/escrows/{user}/replay` over a real socket: whichever comes first moves the
/// row to dead (`ciphertext_invalid`) with one audit event, as the replay worker does; every answer is the same clear
/// problem (`ciphertext_invalid`: retrying does not help); `DELETE` then removes the row.
@Suite("Malformed rows over HTTP")
struct MalformedRowHTTPTests {
    /// What breaks each user's row: the first user's `SET`, then the second's (an id is unique, so two broken ids
    /// differ).
    static let mutations: [(name: String, first: String, second: String)] = [
        ("key_version -1", "key_version = -1", "key_version = -1"),
        ("key_version 2^32+1", "key_version = 4294967297", "key_version = 4294967297"),
        ("empty or 1-byte id", "id = x''", "id = x'01'"),
        ("15-byte id", "id = randomblob(15)", "id = randomblob(15)"),
        ("17-byte id", "id = randomblob(17)", "id = randomblob(17)"),
        ("negative attempts", "attempts = -5", "attempts = -5"),
    ]

    /// Changes `user`'s row in the database file from another process (Python's sqlite3), as an attacker or a careless
    /// operator would; exactly one row must change.
    static func tamper(_ harness: HTTPHarness, user: Int, _ assignment: String) async throws {
        let index = harness.keyring.blindIndex(userIdentifier: Fake.userIdentifier(user)).hex
        let python = ChildProcess()
        let output = Pipe()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = [
            "python3", "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                + "n=c.execute(sys.argv[2]).rowcount; c.commit(); print(n)",
            harness.databasePath,
            "UPDATE escrow SET \(assignment) WHERE blind_index = x'\(index)'",
        ]
        python.standardOutput = output
        try python.run()
        await python.exited()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(python.terminationStatus == 0 && printed.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    static func deadEvents(_ harness: HTTPHarness) async throws -> [AuditEvent] {
        try await harness.auditEvents().filter { $0.draft.type == .dead && $0.draft.detail == "ciphertext_invalid" }
    }

    @Test(
        "GET and replay quarantine a malformed row once and answer ciphertext_invalid; DELETE removes it",
        arguments: 0..<mutations.count
    )
    func quarantinedOnEitherRoute(_ number: Int) async throws {
        let mutation = Self.mutations[number]
        let harness = try await HTTPHarness()
        for user in [1, 2] {
            _ = try await harness.escrow.capture(
                try ProfileParser.parse(Array(Fake.body(user).readableBytesView)).profile
            )
        }
        try await Self.tamper(harness, user: 1, mutation.first)
        try await Self.tamper(harness, user: 2, mutation.second)
        let index: @Sendable (Int) -> BlindIndex = { user in
            harness.keyring.blindIndex(userIdentifier: Fake.userIdentifier(user))
        }
        #expect(try await harness.store.malformedRow(blindIndex: index(1))?.isQuarantined == false, "\(mutation.name)")

        try await harness.app().test(.live) { client async throws in
            func call(_ method: HTTPRequest.Method, _ user: Int, _ suffix: String = "") async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/escrows/\(Fake.userIdentifier(user))\(suffix)",
                    method: method,
                    headers: harness.headers()
                )
            }
            func expectClear(_ response: TestResponse, _ what: String) {
                // 409: the escrow's state (dead for good) is what answers, not a fault a retry would clear.
                #expect(response.status == .conflict, "\(mutation.name): \(what)")
                #expect(response.headers[.contentType] == "application/problem+json", "\(mutation.name): \(what)")
                #expect(response.json["code"] as? String == "ciphertext_invalid", "\(mutation.name): \(what)")
                let detail = response.json["detail"] as? String ?? ""
                #expect(detail.contains("moved to dead"), "\(mutation.name): \(what): \(detail)")
            }
            // User 1: GET first. The row is quarantined by it, with one event.
            expectClear(try await call(.get, 1), "GET first")
            #expect(
                try await harness.store.malformedRow(blindIndex: index(1))?.isQuarantined == true,
                "\(mutation.name)"
            )
            #expect(try await Self.deadEvents(harness).count == 1, "\(mutation.name): GET quarantined it once")
            expectClear(try await call(.post, 1, "/replay"), "replay after GET")
            expectClear(try await call(.get, 1), "GET again")
            #expect(try await Self.deadEvents(harness).count == 1, "\(mutation.name): no second event")

            // User 2: replay first.
            #expect(try await harness.store.malformedRow(blindIndex: index(2))?.isQuarantined == false)
            expectClear(try await call(.post, 2, "/replay"), "replay first")
            #expect(
                try await harness.store.malformedRow(blindIndex: index(2))?.isQuarantined == true,
                "\(mutation.name)"
            )
            #expect(try await Self.deadEvents(harness).count == 2, "\(mutation.name): replay quarantined it once")
            expectClear(try await call(.get, 2), "GET after replay")

            // What a client does next: erase it (and capture the profile again when the user comes back).
            #expect(try await call(.delete, 1).status == .noContent)
            #expect(try await call(.get, 1).status == .notFound, "\(mutation.name): gone after DELETE")
            #expect(try await harness.store.malformedRow(blindIndex: index(1)) == nil)
        }
        for token in Fake.tokens { #expect(!harness.loggedText().contains(token)) }
    }

    @Test(
        "the admin API by escrow id: GET and requeue quarantine a malformed row once (409), DELETE erases it",
        arguments: [0, 1, 5]  // the mutations that leave the id intact: an id that is broken is no id to ask by
    )
    func adminByID(_ number: Int) async throws {
        let mutation = Self.mutations[number]
        let harness = try await HTTPHarness()
        let receipt = try await harness.escrow.capture(
            try ProfileParser.parse(Array(Fake.body(1).readableBytesView)).profile
        )
        try await Self.tamper(harness, user: 1, mutation.first)
        #expect(try await harness.store.malformedRow(id: receipt.escrowID)?.isQuarantined == false, "\(mutation.name)")
        try await harness.app().test(.router) { client async throws in
            func call(_ method: HTTPRequest.Method, _ suffix: String = "") async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/admin/escrows/\(receipt.escrowID.hex)\(suffix)",
                    method: method,
                    headers: harness.headers(json: true),
                    body: method == .get ? nil : Fake.body(["reason": "fake operator reason"])
                )
            }
            let read = try await call(.get)
            #expect(read.status == .conflict, "\(mutation.name): GET answered \(read.status)")
            #expect(read.json["code"] as? String == "ciphertext_invalid")
            #expect(try await harness.store.malformedRow(id: receipt.escrowID)?.isQuarantined == true)
            #expect(try await Self.deadEvents(harness).count == 1, "\(mutation.name): quarantined once")
            let requeue = try await call(.post, "/requeue")
            #expect(requeue.status == .conflict, "\(mutation.name): requeue answered \(requeue.status)")
            #expect(try await Self.deadEvents(harness).count == 1, "\(mutation.name): no second event")
            let erase = try await call(.delete)
            #expect(
                erase.status == .noContent || erase.status == .ok,
                "\(mutation.name): DELETE answered \(erase.status)"
            )
            #expect(try await harness.store.malformedRow(id: receipt.escrowID) == nil, "\(mutation.name): erased")
        }
    }
}
