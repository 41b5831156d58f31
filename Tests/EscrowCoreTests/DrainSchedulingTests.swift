import Testing

@testable import EscrowCore

#if canImport(Glibc)
import Glibc
#endif

/// A drain of the SQLite writer runs under Linux's normal policy in a process that moved its threads to batch, and
/// gives its thread back as batch; otherwise it leaves the thread's policy alone.
@Suite("Drain scheduling")
struct DrainSchedulingTests {
    static let other: Int32 = 0
    static let batch: Int32 = 3
    static let idle: Int32 = 5

    /// Runs `body` on this thread under `policy`, then puts the thread back under the normal policy.
    func underPolicy(_ policy: Int32, _ body: () -> Void) throws {
        var parameters = sched_param(sched_priority: 0)
        try #require(sched_setscheduler(0, policy, &parameters) == 0)
        defer { _ = sched_setscheduler(0, Self.other, &parameters) }
        body()
    }

    @Test func aBatchThreadDrainsUnderTheNormalPolicyAndIsBatchAfter() throws {
        try underPolicy(Self.batch) {
            let during = DrainScheduling.draining(underNormalPolicy: true) { sched_getscheduler(0) }
            #expect(during == Self.other)
            #expect(sched_getscheduler(0) == Self.batch)
        }
    }

    @Test func switchedOffADrainKeepsItsThreadsPolicy() throws {
        try underPolicy(Self.batch) {
            #expect(DrainScheduling.draining(underNormalPolicy: false) { sched_getscheduler(0) } == Self.batch)
            #expect(sched_getscheduler(0) == Self.batch)
        }
    }

    /// Only batch is raised: an idle thread (an operator's `chrt --idle`) and a normal one stay as they are.
    @Test(arguments: [idle, other])
    func anotherPolicyIsLeftAlone(policy: Int32) throws {
        try underPolicy(policy) {
            #expect(DrainScheduling.draining(underNormalPolicy: true) { sched_getscheduler(0) } == policy)
            #expect(sched_getscheduler(0) == policy)
        }
    }
}
