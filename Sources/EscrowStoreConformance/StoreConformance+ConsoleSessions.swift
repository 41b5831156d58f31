import EscrowCore
import EscrowCrypto
import Foundation

/// Console sessions: one table for every store open on the same data, each session live until its idle or absolute
/// end, bounded per token, and swept; held pages read once, by their own session only.
extension StoreConformance {
    static let consoleSessionChecks: [Check] = [
        Check(name: "console sessions are shared, expire and are swept", escrows: consoleSessionsAreSharedAndExpire),
        Check(name: "a token keeps a bounded number of console sessions", escrows: consoleSessionsAreBoundedPerToken),
        Check(name: "a held console page is read once, by its session", escrows: heldConsolePagesAreReadOnce),
    ]

    static func consoleSession(_ number: Int, token: Int = 1, at start: Date) -> ConsoleSessionRecord {
        ConsoleSessionRecord(
            idHash: Hashing.blake2b256(Array("session \(number)".utf8)),
            tokenHash: Hashing.blake2b256(Array("token \(token)".utf8)),
            createdAt: start,
            lastSeenAt: start,
            expiresAt: start.addingTimeInterval(8 * 3600)
        )
    }

    static func consoleSessionsAreSharedAndExpire(_ make: MakeStore) async throws {
        // Two stores on the same data: two nodes of one cluster.
        let node = try await make()
        let other = try await make()
        let start = Fixture().start
        let idle: TimeInterval = 1800
        let session = consoleSession(1, at: start)
        try await node.createConsoleSession(session)
        try expect(
            try await other.consoleSession(idHash: session.idHash, now: start.addingTimeInterval(60), idle: idle)
                == session,
            "the other node finds the session as it was recorded"
        )
        try expect(
            try await other.consoleSession(idHash: Hashing.blake2b256([1]), now: start, idle: idle) == nil,
            "an unknown id finds nothing"
        )

        // Idle: unused for the idle time, it has ended; a touch starts the idle clock again.
        let late = start.addingTimeInterval(idle + 1)
        try expect(
            try await node.consoleSession(idHash: session.idHash, now: late, idle: idle) == nil,
            "a session unused for the idle time has ended"
        )
        try await other.touchConsoleSession(idHash: session.idHash, at: start.addingTimeInterval(idle - 1))
        try await node.touchConsoleSession(idHash: session.idHash, at: start.addingTimeInterval(10))
        let touched = try await node.consoleSession(idHash: session.idHash, now: late, idle: idle)
        try expect(
            touched?.lastSeenAt == start.addingTimeInterval(idle - 1),
            "a touch on one node keeps the session on the other; an older touch never moves it back: "
                + "\(touched as Any)"
        )
        // Absolute: past its end it has ended, however recently it was used.
        try await node.touchConsoleSession(idHash: session.idHash, at: session.expiresAt.addingTimeInterval(-1))
        try expect(
            try await node.consoleSession(idHash: session.idHash, now: session.expiresAt, idle: idle) == nil,
            "a session past its absolute end has ended"
        )

        // The sweep deletes ended sessions with their held pages and keeps live ones.
        let fresh = consoleSession(2, token: 2, at: session.expiresAt.addingTimeInterval(-60))
        try await node.createConsoleSession(fresh)
        try await node.holdConsolePage(
            HeldConsolePage(status: 200, sealed: [1, 2, 3]),
            resultHash: Hashing.blake2b256([2]),
            sessionHash: session.idHash,
            expiresAt: session.expiresAt.addingTimeInterval(60)
        )
        let swept = try await other.sweepConsoleSessions(now: session.expiresAt, idle: idle)
        try expect(swept == 1, "the sweep deletes the one ended session: \(swept)")
        try expect(
            try await node.takeConsolePage(
                resultHash: Hashing.blake2b256([2]),
                sessionHash: session.idHash,
                now: session.expiresAt
            ) == nil,
            "an ended session's held page goes with it"
        )
        try expect(
            try await node.consoleSession(idHash: fresh.idHash, now: session.expiresAt, idle: idle) == fresh,
            "the sweep keeps a live session"
        )
        try await other.endConsoleSession(idHash: fresh.idHash)
        try expect(
            try await node.consoleSession(idHash: fresh.idHash, now: session.expiresAt, idle: idle) == nil,
            "a session ended on one node has ended on every node"
        )
    }

    static func consoleSessionsAreBoundedPerToken(_ make: MakeStore) async throws {
        let store = try await make()
        let start = Fixture().start
        let count = ConsoleSessionLimits.perToken + 2
        for number in 0..<count {
            try await store.createConsoleSession(consoleSession(number, at: start.addingTimeInterval(Double(number))))
        }
        try await store.createConsoleSession(consoleSession(1000, token: 2, at: start))
        let now = start.addingTimeInterval(Double(count))
        var live: [Int] = []
        for number in 0..<count
        where try await store.consoleSession(idHash: consoleSession(number, at: start).idHash, now: now, idle: 3600)
            != nil
        {
            live.append(number)
        }
        try expect(
            live == Array(2..<count),
            "the token keeps its \(ConsoleSessionLimits.perToken) newest sessions: \(live)"
        )
        try expect(
            try await store.consoleSession(idHash: consoleSession(1000, at: start).idHash, now: now, idle: 3600) != nil,
            "another token's session is not counted against it"
        )
    }

    static func heldConsolePagesAreReadOnce(_ make: MakeStore) async throws {
        let store = try await make()
        let start = Fixture().start
        let session = consoleSession(1, at: start)
        let stranger = consoleSession(2, token: 2, at: start)
        try await store.createConsoleSession(session)
        try await store.createConsoleSession(stranger)
        func result(_ number: Int) -> [UInt8] { Hashing.blake2b256(Array("result \(number)".utf8)) }
        for number in 0...ConsoleSessionLimits.heldPerSession {
            try await store.holdConsolePage(
                HeldConsolePage(status: 200 + number, sealed: [UInt8(number)]),
                resultHash: result(number),
                sessionHash: session.idHash,
                expiresAt: start.addingTimeInterval(60 + Double(number))
            )
        }
        let newest = ConsoleSessionLimits.heldPerSession
        try expect(
            try await store.takeConsolePage(resultHash: result(newest), sessionHash: stranger.idHash, now: start)
                == nil,
            "another session finds nothing under this session's result"
        )
        let page = try await store.takeConsolePage(resultHash: result(newest), sessionHash: session.idHash, now: start)
        try expect(
            page == HeldConsolePage(status: 200 + newest, sealed: [UInt8(newest)]),
            "the session reads its page: \(page as Any)"
        )
        try expect(
            try await store.takeConsolePage(resultHash: result(newest), sessionHash: session.idHash, now: start) == nil,
            "a page is read once"
        )
        try expect(
            try await store.takeConsolePage(resultHash: result(0), sessionHash: session.idHash, now: start) == nil,
            "the oldest page made room past \(ConsoleSessionLimits.heldPerSession)"
        )
        try expect(
            try await store.takeConsolePage(
                resultHash: result(1),
                sessionHash: session.idHash,
                now: start.addingTimeInterval(61)
            ) == nil,
            "a page past its minute is not given"
        )
    }
}
