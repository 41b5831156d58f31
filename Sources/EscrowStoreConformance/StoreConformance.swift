public import EscrowCore
import EscrowCrypto
import Foundation

/// The behaviour every ``EscrowStore`` must have, as framework-free checks: each throws
/// ``ConformanceFailure`` when the store under test breaks the contract. The SQLite tests run them
/// all; a PostgreSQL backend runs the same list unchanged.
public enum StoreConformance {
    /// Makes a new, empty store for one check.
    public typealias MakeStore = @Sendable () async throws -> any EscrowStore

    public struct Check: Sendable, CustomStringConvertible {
        public let name: String
        public let run: @Sendable (MakeStore) async throws -> Void
        public var description: String { name }
    }

    public static let all: [Check] = [
        Check(name: "capture stores and reads back", run: captureReadsBack),
        Check(name: "same content is unchanged", run: sameContentUnchanged),
        Check(name: "new content replaces", run: newContentReplaces),
        Check(name: "commit is compare-and-set", run: commitIsCompareAndSet),
        Check(name: "purge deletes and audits", run: purgeDeletesAndAudits),
        Check(name: "claim leases only due escrows once", run: claimLeasesDueOnce),
        Check(name: "claims only the key versions asked for", run: claimsOnlyTheKeyVersionsAsked),
        Check(name: "expired leases and confirm deadlines come back", run: expiredLeasesComeBack),
        Check(name: "concurrent claims never share an escrow", run: concurrentClaimsAreExclusive),
        Check(name: "queries and pagination", run: queriesAndPagination),
        Check(name: "audit chain is contiguous and verifies", run: auditChainVerifies),
        Check(name: "summary counts", run: summaryCounts),
        Check(name: "concurrent captures are all durable and chained", run: concurrentCaptures),
        Check(name: "concurrent commits are each compare-and-set", run: concurrentCommitsAreEachCompareAndSet),
        Check(name: "concurrent purges of one escrow apply once", run: concurrentPurgesOfOneEscrowApplyOnce),
    ]
}

/// A broken expectation, with what was expected.
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw ConformanceFailure(message()) }
}

/// Builds sealed records with a real keyring: stores see real ciphertexts.
struct Fixture {
    let keyring = Keyring.generate()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func user(_ number: Int) -> String {
        "000000.conformance\(String(format: "%020d", number)).0001"
    }

    func record(
        user number: Int,
        content: String = "content",
        at date: Date? = nil,
        retention: Double = 3600
    )
        throws -> EscrowRecord
    {
        let now = date ?? start
        let index = keyring.blindIndex(userIdentifier: user(number))
        let plaintext = SecretBytes(copying: Array("fake-profile:\(content)".utf8))
        let sealed = try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index)
        return EscrowRecord(
            sealed: sealed,
            contentTag: keyring.contentTag(blindIndex: index, plaintext: plaintext),
            createdAt: now,
            expiresAt: now.addingTimeInterval(retention)
        )
    }

    /// Captures users `0..<count` at ``start`` and leases them all to `w1` for a minute.
    func capturedAndLeased(_ count: Int, in store: any EscrowStore) async throws -> [EscrowRecord] {
        for number in 0..<count { _ = try await store.capture(try record(user: number, at: start), actor: .library) }
        let leased = try await store.claimDue(at: start, limit: count, owner: "w1", leaseDuration: 60)
        try expect(leased.count == count, "all \(count) leased: \(leased.count)")
        return leased
    }

    /// Fails unless `events` (all of `store`'s) chain up to its head.
    func expectIntactChain(_ events: [AuditEvent], of store: any EscrowStore, _ what: String) async throws {
        var verifier = AuditChain.Verifier()
        for event in events { verifier.consume(event) }
        verifier.finish(head: try await store.auditHead())
        try expect(verifier.isIntact, "\(what); broken at \(String(describing: verifier.firstBrokenSequence))")
    }

    func allEvents(_ store: any EscrowStore) async throws -> [AuditEvent] {
        var events: [AuditEvent] = []
        while true {
            let page = try await store.auditEvents(after: events.last?.sequence ?? 0, limit: 7)
            if page.isEmpty { return events }
            events += page
        }
    }
}

/// The checks' shorthand: the default lifecycle, as a store sees it from ``EscrowLifecycle``'s callers.
extension EscrowStore {
    func capture(_ record: EscrowRecord, actor: AuditActor) async throws -> CaptureOutcome {
        try await capture(record, actor: actor, lifecycle: EscrowLifecycle())
    }

    func claimDue(
        at now: Date,
        limit: Int,
        owner: String,
        leaseDuration: Double,
        keyVersions: Set<UInt32>? = nil
    ) async throws -> [EscrowRecord] {
        let request = ClaimRequest(
            now: now,
            limit: limit,
            owner: owner,
            leaseDuration: leaseDuration,
            keyVersions: keyVersions
        )
        return try await claimDue(request, lifecycle: EscrowLifecycle())
    }
}
