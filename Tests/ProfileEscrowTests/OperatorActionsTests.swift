import EscrowCore
import EscrowCrypto
import EscrowTestSupport
import Foundation
import ProfileEscrow
import Testing

/// The operator's actions over a real SQLite store: what the admin API, the console and the CLI share, refusals
/// included (each the same for all three doors).
@Suite("Operator actions")
struct OperatorActionsTests {
    @Test("refusals name the input, never its value, and are bad input")
    func refusals() throws {
        let harness = try EscrowFixture()
        let actions = OperatorActions(escrow: harness.escrow)
        #expect(throws: OperatorActions.InputError.missingReason) { try OperatorActions.reason(nil) }
        #expect(throws: OperatorActions.InputError.invalidReason) { try OperatorActions.reason(" \n ") }
        #expect(throws: OperatorActions.InputError.invalidUserIdentifier) {
            try OperatorActions.userIdentifier("canary name@example.invalid")
        }
        do {
            _ = try actions.bulkFilter([("state", "pending")])
            Issue.record("a bulk requeue of pending escrows was accepted")
        } catch {
            #expect(error.field == "state" && FailureKind(of: error) == .badInput)
        }
        do {
            _ = try actions.query([("minAttempts", "canary")])
            Issue.record("a filter out of range was accepted")
        } catch {
            #expect(error.field == "minAttempts" && !error.message.contains("canary"))
        }
    }

    @Test("requeue one and by filter, erase, inspect: the same answers for every door; a gone id is not found")
    func changes() async throws {
        let harness = try EscrowFixture()
        let actions = OperatorActions(escrow: harness.escrow)
        let receipt = try await harness.escrow.capture(try Fake.profile(1))
        let reason = try OperatorActions.reason("TICKET-1")
        #expect(try await actions.requeue(receipt.escrowID, reason: reason, actor: .cli) == false, "not dead")
        let none = try await actions.requeue(matching: try actions.bulkFilter([]), reason: reason, actor: .cli)
        #expect(none.requeued == 0 && !none.more)
        #expect(try await actions.hasEscrow(userIdentifier: Fake.userIdentifier(1)))
        try await actions.erase(receipt.escrowID, reason: reason, actor: .console(token: "ops"))
        let history = try await actions.inspect(receipt.escrowID)
        #expect(history.status == nil && history.events.last?.reason == "TICKET-1")
        for id in [receipt.escrowID, EscrowID.random()] {
            let error = await #expect(throws: EscrowError.self) {
                try await actions.erase(id, reason: reason, actor: .cli)
            }
            #expect(error.map { FailureKind(of: $0) } == .notFound, "erased, or never held: not found")
        }
        #expect(try await actions.hasEscrow(userIdentifier: Fake.userIdentifier(1)) == false)
    }

    @Test("by user identifier: status and erase with the operator's reason; an escrow id given as a user is told apart")
    func byUserIdentifier() async throws {
        let harness = try EscrowFixture()
        let actions = OperatorActions(escrow: harness.escrow)
        let user = Fake.userIdentifier(1)
        let receipt = try await harness.escrow.capture(try Fake.profile(1))
        let status = try #require(try await actions.status(userIdentifier: user, actor: .cli))
        #expect(status.escrowID == receipt.escrowID && status.state == .pending)
        #expect(try await actions.isHeldEscrowID(receipt.escrowID.hex))
        #expect(try await actions.isHeldEscrowID(user) == false)
        await #expect(throws: OperatorActions.InputError.invalidUserIdentifier) {
            try await actions.status(userIdentifier: "canary name@example.invalid", actor: .cli)
        }
        let reason = try OperatorActions.reason("TICKET-2")
        #expect(try await actions.erase(userIdentifier: user, reason: reason, actor: .cli))
        #expect(try await actions.erase(userIdentifier: user, reason: reason, actor: .cli) == false, "nothing held")
        #expect(try await actions.status(userIdentifier: user, actor: .cli) == nil)
        #expect(try await actions.isHeldEscrowID(receipt.escrowID.hex) == false, "purged: no row")
        let events = try await actions.inspect(receipt.escrowID).events
        #expect(events.last?.reason == "TICKET-2" && events.last?.actor == .cli)
    }
}
