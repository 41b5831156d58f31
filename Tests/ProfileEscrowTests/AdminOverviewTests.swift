import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import ProfileEscrow
import Testing

@Suite("Admin overview: what the publisher keeps")
struct AdminOverviewTests {
    @Test("counts by state and the last 24 hours; a backlog point every 5 minutes, for 24 hours, in the store")
    func countsAndHistory() async throws {
        let fixture = try EscrowFixture()
        for number in 0..<3 { _ = try await fixture.escrow.capture(try Fake.profile(number)) }
        let publisher = AdminOverviewPublisher(escrow: fixture.escrow, logger: fixture.logger)
        let first = try await publisher.refresh()
        #expect(first.live[.pending] == 3)
        #expect(first.captures == 3)
        #expect(first.history.count == 1)
        // Every 10 s for an hour: a point about every 5 minutes, the newest always fresh.
        for _ in 0..<360 {
            fixture.clock.advance(by: 10)
            _ = try await publisher.refresh()
        }
        let hour = try await publisher.latest()
        #expect((12...14).contains(hour.history.count), "\(hour.history.count) points in an hour")
        // The store keeps milliseconds.
        #expect(abs(hour.history.last!.at.timeIntervalSince(hour.generatedAt)) < 0.001)
        for (earlier, later) in zip(hour.history, hour.history.dropFirst().dropLast()) {
            #expect(later.at.timeIntervalSince(earlier.at) >= 280, "about 5 minutes apart (one refresh less)")
        }
        // The history is the store's: a new publisher (a restart, or another node) charts the same hour.
        let restarted = AdminOverviewPublisher(escrow: fixture.escrow, logger: fixture.logger)
        let again = try await restarted.refresh()
        #expect(again.history.dropLast().map(\.at) == hour.history.dropLast().map(\.at), "kept across a restart")
        // A day later the points of the first hour are gone.
        fixture.clock.advance(by: 24 * 3600)
        let day = try await publisher.refresh()
        #expect(day.history.count == 1, "\(day.history.count)")
        #expect(day.captures == 0, "captures older than 24 hours are not counted")
        #expect(day.live[.pending] == 3)
    }
}
