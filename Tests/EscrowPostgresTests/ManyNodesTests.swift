import EscrowCore
import EscrowCrypto
import Foundation
import PostgresNIO
import Testing

@testable import EscrowPostgres

/// What only several nodes on one database can break: two store instances (two pools, two group commits) on one
/// database, as two service nodes have.
@Suite("PostgreSQL store: many nodes on one database")
struct ManyNodesTests {
    @Test("concurrent captures of the same users from two nodes leave exactly one live escrow each")
    func concurrentCapturesOfOneUser() async throws {
        try await TestDatabase.with { database in
            let nodes = [try await database.open(), try await database.open()]
            let records = Records()
            let users = 40
            let rounds = 3
            // Every user captured by both nodes at once, several times, with other content each time.
            let outcomes = try await withThrowingTaskGroup(of: CaptureOutcome.self) { group in
                for user in 0..<users {
                    for round in 0..<rounds {
                        for (number, node) in nodes.enumerated() {
                            let record = try records.record(user: user, content: "node\(number)-round\(round)")
                            group.addTask {
                                try await node.capture(record, actor: .library, lifecycle: EscrowLifecycle())
                            }
                        }
                    }
                }
                return try await group.reduce(into: [CaptureOutcome]()) { $0.append($1) }
            }
            #expect(outcomes.count == users * rounds * 2)
            let live = try await database.rows("SELECT blind_index FROM escrow")
            #expect(live.count == users, "one live escrow per user, got \(live.count) for \(users) users")
            for user in 0..<users {
                let index = records.keyring.blindIndex(userIdentifier: records.user(user))
                #expect(try await nodes[0].record(blindIndex: index) != nil)
                #expect(try await nodes[1].record(blindIndex: index) == (try await nodes[0].record(blindIndex: index)))
            }
            // The audit agrees: every capture that created or replaced one is there, and every replaced one purged.
            let events = try await allEvents(nodes[0])
            let captured = events.filter { $0.draft.type == .captured }.count
            let purged = events.filter { $0.draft.type == .purged }.count
            let stored = outcomes.filter { if case .unchanged = $0 { false } else { true } }.count
            #expect(captured == stored)
            #expect(captured - purged == users)
            var verifier = AuditChain.Verifier()
            for event in events { verifier.consume(event) }
            verifier.finish(head: try await nodes[1].auditHead())
            #expect(verifier.isIntact)
            for node in nodes { await node.close() }
        }
    }

    @Test("concurrent claims from two nodes never share an escrow")
    func concurrentClaimsFromTwoNodes() async throws {
        try await TestDatabase.with { database in
            let nodes = [try await database.open(), try await database.open()]
            let records = Records()
            let count = 150
            for user in 0..<count {
                _ = try await nodes[user % 2].capture(
                    try records.record(user: user),
                    actor: .library,
                    lifecycle: .init()
                )
            }
            let claimed = try await withThrowingTaskGroup(of: [EscrowID].self) { group in
                for worker in 0..<8 {
                    let node = nodes[worker % 2]
                    group.addTask {
                        var mine: [EscrowID] = []
                        while true {
                            let request = ClaimRequest(
                                now: records.start,
                                limit: 4,
                                owner: "w\(worker)",
                                leaseDuration: 60
                            )
                            let batch = try await node.claimDue(request, lifecycle: EscrowLifecycle())
                            if batch.isEmpty { return mine }
                            mine += batch.map(\.id)
                        }
                    }
                }
                return try await group.reduce(into: [EscrowID]()) { $0 += $1 }
            }
            #expect(claimed.count == count, "\(claimed.count) leases for \(count) escrows")
            #expect(Set(claimed).count == count, "no escrow leased twice")
            let leased = try await nodes[0].records(.state(.leased), after: nil, limit: 1_000)
            #expect(leased.count == count)
            for node in nodes { await node.close() }
        }
    }

    @Test("concurrent appends from two nodes leave one chain, with no gap or fork")
    func oneChainAcrossNodes() async throws {
        try await TestDatabase.with { database in
            let nodes = [try await database.open(), try await database.open(), try await database.open()]
            let records = Records()
            let perNode = 60
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (number, node) in nodes.enumerated() {
                    for item in 0..<perNode {
                        group.addTask {
                            if item % 2 == 0 {
                                let draft = AuditDraft(
                                    type: .keysRotated,
                                    at: records.start,
                                    detail: "\(number)-\(item)",
                                    actor: .cli
                                )
                                try await node.appendAudit([draft, draft])
                            } else {
                                let record = try records.record(user: number * 1_000 + item)
                                _ = try await node.capture(record, actor: .library, lifecycle: EscrowLifecycle())
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let events = try await allEvents(nodes[2])
            let expected = nodes.count * (perNode / 2 * 2 + perNode / 2)
            #expect(events.count == expected)
            #expect(events.map(\.sequence) == Array(1...Int64(expected)), "no gap, no duplicate sequence")
            var verifier = AuditChain.Verifier()
            for event in events { verifier.consume(event) }
            verifier.finish(head: try await nodes[0].auditHead())
            #expect(verifier.isIntact, "first broken link: \(String(describing: verifier.firstBrokenSequence))")
            for node in nodes { await node.close() }
        }
    }

    @Test("several nodes starting at once apply each migration exactly once")
    func migrationsApplyOnce() async throws {
        try await TestDatabase.with { database in
            let stores = try await withThrowingTaskGroup(of: PostgresEscrowStore.self) { group in
                for _ in 0..<6 { group.addTask { try await database.open() } }
                return try await group.reduce(into: [PostgresEscrowStore]()) { $0.append($1) }
            }
            #expect(stores.count == 6)
            let rows = try await database.rows("SELECT version FROM schema_migrations ORDER BY version")
            let versions = try rows.map { try $0.decode(Int64.self) }
            #expect(versions == Array(1...PostgresSchema.latestVersion), "each migration recorded once: \(versions)")
            // Every node works on the same schema.
            let record = try Records().record(user: 1)
            _ = try await stores[3].capture(record, actor: .library, lifecycle: EscrowLifecycle())
            #expect(try await stores[5].record(id: record.id) == record)
            for store in stores { await store.close() }
        }
    }

    @Test("a token added or revoked on one node is seen by the other's next lookup")
    func tokensAcrossNodes() async throws {
        try await TestDatabase.with { database in
            let (a, b) = (try await database.open(), try await database.open())
            let hash = Hashing.blake2b256(Array("pe_fake-token-0001".utf8))
            let token = AccessTokenRecord(name: "svc.pgtest", scopes: [.capture], hash: hash, createdAt: Date())
            try await a.addToken(token)
            #expect(try await b.token(hash: hash)?.name == "svc.pgtest")
            await #expect(throws: EscrowStoreError.self) { try await b.addToken(token) }
            #expect(try await b.revokeToken(name: "svc.pgtest", at: Date()))
            #expect(try await a.token(hash: hash)?.isRevoked == true)
            #expect(try await a.revokeToken(name: "svc.pgtest", at: Date()) == false)
            // A revoked name can be reused.
            let again = AccessTokenRecord(
                name: "svc.pgtest",
                scopes: [.capture, .replay],
                hash: Hashing.blake2b256(Array("pe_fake-token-0002".utf8)),
                createdAt: Date()
            )
            try await b.addToken(again)
            #expect(try await a.tokens().map(\.scopes) == [[.capture, .replay]])
            await a.close()
            await b.close()
        }
    }

    @Test("a notification is recorded once, whichever node receives it")
    func notificationsAcrossNodes() async throws {
        try await TestDatabase.with { database in
            let (a, b) = (try await database.open(), try await database.open())
            let id = Hashing.blake2b256(Array("fake-jti-0001".utf8))
            #expect(try await a.hasNotification(idHash: id) == false)
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for node in [a, b, a, b] { group.addTask { try await node.recordNotification(idHash: id, at: Date()) } }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 1)
            #expect(try await b.hasNotification(idHash: id))
            await a.close()
            await b.close()
        }
    }
}
