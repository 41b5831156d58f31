import EscrowCore
import EscrowSQLite
import Foundation

/// The console's capabilities of ``ObservedStore``, passed to the store it observes as they are.
extension ObservedStore {
    func createConsoleSession(_ session: ConsoleSessionRecord) async throws {
        try await inner.createConsoleSession(session)
    }
    func consoleSession(idHash: [UInt8], now: Date, idle: TimeInterval) async throws -> ConsoleSessionRecord? {
        try await inner.consoleSession(idHash: idHash, now: now, idle: idle)
    }
    func touchConsoleSession(idHash: [UInt8], at now: Date) async throws {
        try await inner.touchConsoleSession(idHash: idHash, at: now)
    }
    func endConsoleSession(idHash: [UInt8]) async throws { try await inner.endConsoleSession(idHash: idHash) }
    func holdConsolePage(
        _ page: HeldConsolePage,
        resultHash: [UInt8],
        sessionHash: [UInt8],
        expiresAt: Date
    ) async throws {
        try await inner.holdConsolePage(page, resultHash: resultHash, sessionHash: sessionHash, expiresAt: expiresAt)
    }
    func takeConsolePage(resultHash: [UInt8], sessionHash: [UInt8], now: Date) async throws -> HeldConsolePage? {
        try await inner.takeConsolePage(resultHash: resultHash, sessionHash: sessionHash, now: now)
    }
    func sweepConsoleSessions(now: Date, idle: TimeInterval) async throws -> Int {
        try await inner.sweepConsoleSessions(now: now, idle: idle)
    }
    func recordBacklogSample(_ sample: BacklogSample, slotSeconds: Int, window: TimeInterval) async throws {
        try await inner.recordBacklogSample(sample, slotSeconds: slotSeconds, window: window)
    }
    func backlogSamples(since: Date) async throws -> [BacklogSample] { try await inner.backlogSamples(since: since) }
    func purgeReportCheckpoint() async throws -> PurgeReportCheckpoint? { try await inner.purgeReportCheckpoint() }
    func recordPurgeReportCheckpoint(_ checkpoint: PurgeReportCheckpoint) async throws {
        try await inner.recordPurgeReportCheckpoint(checkpoint)
    }
}
