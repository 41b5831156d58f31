import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import GRDB
import Logging
import ProfileEscrow
import Testing

@Suite("Purge")
struct PurgeTests {
    enum Path: String, CaseIterable { case confirm, erase, sweep }

    /// After confirm, erase or sweep the escrow is gone from every store file (byte scan).
    @Test(arguments: Path.allCases)
    func purgedBytesAreGoneFromEveryFile(path: Path) async throws {
        var configuration = EscrowConfiguration()
        configuration.retention = 60
        let harness = try EscrowFixture(configuration: configuration)
        var kept: [EscrowRecord] = []
        var purged: [EscrowRecord] = []
        for number in 0..<40 {
            let receipt = try await harness.clock.past(number < 20 ? 120 : 0) {
                try await harness.escrow.capture(try Fake.profile(number))
            }
            let record = try #require(try await harness.store.record(id: receipt.escrowID))
            if number < 20 { purged.append(record) } else { kept.append(record) }
        }
        switch path {
        case .confirm:
            for number in 0..<20 {
                #expect(try await harness.escrow.confirm(userIdentifier: Fake.userIdentifier(number)))
            }
        case .erase:
            for number in 0..<20 {
                #expect(try await harness.escrow.erase(userIdentifier: Fake.userIdentifier(number)))
            }
        case .sweep:
            #expect(try await harness.escrow.sweep() == 20)
        }
        let files = harness.storeFiles()
        #expect(files.count >= 1)
        func window(_ bytes: [UInt8]) -> [UInt8] { Array(bytes[bytes.count / 2..<bytes.count / 2 + 24]) }
        for record in purged {
            for (name, bytes) in files {
                #expect(!bytes.contains(bytes: window(record.sealed.sealedProfile)), "purged profile box in \(name)")
                #expect(!bytes.contains(bytes: window(record.sealed.sealedKey)), "purged key box in \(name)")
                #expect(!bytes.contains(bytes: record.sealed.publicKey), "purged public key in \(name)")
            }
        }
        // The scan can see what is there: the kept escrows are found in the database file.
        let database = files[0].bytes
        #expect(kept.allSatisfy { database.contains(bytes: window($0.sealed.sealedProfile)) })

        let report = try await PurgeReport.build(store: harness.store, verify: true)
        let reason: PurgeReason = path == .confirm ? .confirmed : path == .erase ? .erased : .expired
        #expect(report.purged[reason] == 20)
        #expect(report.captured == 40)
        #expect(report.live[.pending] == 20)
        #expect(report.overdue == 0)
        #expect(report.chain?.verified == true)
        #expect(report.chain?.events == 40 + 20, "a capture and a purge each: one event")
        #expect(!report.hasProblem)
        #expect((report.timeToPurgeSeconds?.median ?? 0) >= (path == .sweep ? 119 : 0))
    }

    @Test func confirmAndEraseOfNothingSayFalse() async throws {
        let harness = try EscrowFixture()
        #expect(try await harness.escrow.confirm(userIdentifier: Fake.userIdentifier(1)) == false)
        #expect(try await harness.escrow.erase(userIdentifier: Fake.userIdentifier(1)) == false)
        #expect(try await harness.store.auditHead() == nil, "nothing audited when nothing was held")
    }

    @Test func overdueEscrowsAreAProblemUntilSwept() async throws {
        var configuration = EscrowConfiguration()
        configuration.retention = 1
        let harness = try EscrowFixture(configuration: configuration)
        _ = try await harness.clock.past(10) { try await harness.escrow.capture(try Fake.profile(1)) }
        let before = try await PurgeReport.build(store: harness.store, verify: false)
        #expect(before.overdue == 1)
        #expect(before.hasProblem)
        try await harness.escrow.sweep()
        let after = try await PurgeReport.build(store: harness.store, verify: false)
        #expect(after.overdue == 0)
        #expect(after.purged[.expired] == 1)
        #expect(!after.hasProblem)
    }

    @Test func sameContentIsUnchangedAndNewContentReplaces() async throws {
        let harness = try EscrowFixture()
        let first = try await harness.escrow.capture(try Fake.profile(1))
        let again = try await harness.escrow.capture(try Fake.profile(1))
        #expect(again.outcome == .unchanged)
        #expect(again.escrowID == first.escrowID)
        let changed = try await harness.escrow.capture(try Fake.profile(1, email: "canarymail-new@example.invalid"))
        #expect(changed.outcome == .replaced)
        #expect(changed.escrowID != first.escrowID)
        #expect(
            try await harness.escrow.replay(userIdentifier: Fake.userIdentifier(1)).profile.email
                == "canarymail-new@example.invalid"
        )
        let report = try await PurgeReport.build(store: harness.store, verify: true)
        #expect(report.purged[.replaced] == 1)
        #expect(report.captured == 2)
        #expect(report.chain?.verified == true)
    }

    @Test(arguments: ["edit", "delete", "deleteLast", "editHash"])
    func anEditedOrDeletedAuditRowBreaksTheChain(how: String) async throws {
        let harness = try EscrowFixture()
        for number in 0..<6 {
            _ = try await harness.escrow.capture(try Fake.profile(number))
            try await harness.escrow.confirm(userIdentifier: Fake.userIdentifier(number))
        }
        let intact = try await PurgeReport.build(store: harness.store, verify: true)
        #expect(intact.chain?.verified == true)
        #expect(intact.chain?.events == 12)
        switch how {
        case "edit": try await harness.tamper("UPDATE audit_event SET detail = 'expired' WHERE seq = 6")
        case "delete": try await harness.tamper("DELETE FROM audit_event WHERE seq = 6")
        case "deleteLast": try await harness.tamper("DELETE FROM audit_event WHERE seq = 12")
        default: try await harness.tamper("UPDATE audit_event SET hash = zeroblob(32) WHERE seq = 6")
        }
        let report = try await PurgeReport.build(store: harness.store, verify: true)
        #expect(report.chain?.verified == false)
        #expect(report.chain?.firstBrokenSequence == (how == "deleteLast" ? 12 : 6))
        #expect(report.hasProblem)
    }

    @Test func reportFormatsCarryTheSpecKeysAndNoPersonalData() async throws {
        let harness = try EscrowFixture()
        for number in 0..<4 { _ = try await harness.escrow.capture(try Fake.profile(number)) }
        try await harness.escrow.confirm(userIdentifier: Fake.userIdentifier(0))
        try await harness.escrow.erase(userIdentifier: Fake.userIdentifier(1))
        var rows: [String] = []
        let report = try await PurgeReport.build(store: harness.store, verify: true) {
            rows.append(PurgeReport.csvRow($0))
        }
        let json = try #require(try JSONSerialization.jsonObject(with: report.json()) as? [String: Any])
        for key in [
            "since", "until", "captured", "purged", "timeToPurgeSeconds", "live", "oldestLiveAgeSeconds",
            "overdue", "dead", "chain",
        ] {
            #expect(json[key] != nil, "json has \(key)")
        }
        let purged = try #require(json["purged"] as? [String: Int])
        #expect(
            purged == ["confirmed": 1, "expired": 0, "revoked": 0, "account-deleted": 0, "erased": 1, "replaced": 0]
        )
        let live = try #require(json["live"] as? [String: Int])
        #expect(live == ["pending": 2, "leased": 0, "awaiting-confirmation": 0, "dead": 0])
        // Numbers as numbers, null as null.
        #expect(json["since"] is NSNull && json["until"] is NSNull)
        #expect(json["captured"] as? Int == 4)
        let seconds = try #require(json["timeToPurgeSeconds"] as? [String: Any])
        #expect(seconds["median"] is Double && seconds["max"] is Double)
        let chain = try #require(json["chain"] as? [String: Any])
        #expect(chain["verified"] as? Bool == true && chain["firstBrokenSequence"] is NSNull)
        #expect((chain["headHash"] as? String)?.count == 64)
        #expect(rows.count == 2)
        #expect(rows[0].split(separator: ",").count == PurgeReport.csvHeader.split(separator: ",").count)
        let everything = String(decoding: report.json(), as: UTF8.self) + report.text() + rows.joined()
        for token in Fake.tokens { #expect(!everything.contains(token)) }
        #expect(report.text().contains("verified"))
    }
}
