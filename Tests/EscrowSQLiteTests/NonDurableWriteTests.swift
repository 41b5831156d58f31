import EscrowCore
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import EscrowSQLite
@testable import EscrowStoreConformance

/// Writes that do not wait for the disk (sign-in attempts, a claim's leases) switch the writer connection to
/// `synchronous=NORMAL` for their own transaction only: every durable write after them waits for the disk again.
@Suite("SQLite: writes that do not wait for the disk")
struct NonDurableWriteTests {
    @Test("after concurrent attempts and a claim, the writer is back at synchronous=FULL")
    func writerBackToFull() async throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteEscrowStore(path: directory.path + "/escrow.sqlite", logger: Logger(label: "test"))
        let fixture = SignInFixture()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for number in 1...32 { group.addTask { try await store.createSignInAttempt(fixture.attempt(number)) } }
            try await group.waitForAll()
        }
        for number in 1...32 {
            #expect(try await store.signInAttempt(stateHash: fixture.attempt(number).stateHash) != nil)
        }
        _ = try await store.claimDue(at: fixture.start, limit: 10, owner: "w1", leaseDuration: 60)
        let level = try await store.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        #expect(level == 2, "FULL")
    }

    /// SQLite refuses to change the level inside a transaction: a non-durable write that leaves one open cannot
    /// switch back, and the next durable write on that connection switches first or fails without writing.
    @Test("a connection left at NORMAL is switched back before its next durable write, or that write fails")
    func leftNormal() throws {
        let directory = TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path + "/left.sqlite")
        try queue.inDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL; CREATE TABLE t (x INTEGER)")
            try SQLiteEscrowStore.synchronous(db, durable: false) { try db.execute(sql: "BEGIN") }
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 1, "left at NORMAL: the switch back failed")
            #expect(throws: (any Error).self, "a durable write cannot switch inside the open transaction") {
                try SQLiteEscrowStore.synchronous(db, durable: true) { try db.execute(sql: "INSERT INTO t VALUES (1)") }
            }
            try db.execute(sql: "ROLLBACK")
            try SQLiteEscrowStore.synchronous(db, durable: true) { try db.execute(sql: "INSERT INTO t VALUES (2)") }
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2, "switched back first")
            #expect(try Int.fetchAll(db, sql: "SELECT x FROM t") == [2], "the refused write wrote nothing")
        }
    }
}
