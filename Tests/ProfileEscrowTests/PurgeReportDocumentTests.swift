import EscrowCore
import EscrowCrypto
import EscrowHTTP
import EscrowSQLite
import EscrowTestSupport
import Foundation
import GRDB
import ProfileEscrow
import Testing

/// The auditor's HTML report over two weeks of made-up traffic (fake users only). With
/// `PURGE_REPORT_HTML_OUT=<path>` it also writes the document there (scripts/purge-report-screenshot.sh).
@Suite("Purge report document")
struct PurgeReportDocumentTests {
    @Test func twoWeeksOfTraffic() async throws {
        var configuration = EscrowConfiguration()
        configuration.retention = 7 * 86_400
        let harness = try EscrowFixture(configuration: configuration)
        var number = 0
        // 14 days: each day some captures confirmed after seconds to hours, some erased, a few never confirmed.
        for day in 0..<14 {
            let dayOffset = Double(14 - day) * 86_400
            for slot in 0..<(6 + day % 4) {
                number += 1
                let captured = dayOffset - Double(slot) * 1_800
                _ = try await harness.clock.past(captured) {
                    try await harness.escrow.capture(try Fake.profile(number))
                }
                let delay = [2.0, 8, 45, 300, 4_000, 20_000][slot % 6]
                try await harness.clock.past(captured - delay) {
                    if slot == 5 {
                        _ = try await harness.escrow.erase(userIdentifier: Fake.userIdentifier(number))
                    } else if slot != 4 || day % 3 != 0 {
                        _ = try await harness.escrow.confirm(userIdentifier: Fake.userIdentifier(number))
                    }
                }
            }
        }
        // Never confirmed: swept as expired after the 7-day retention.
        #expect(try await harness.escrow.sweep() > 0)
        // A row altered on disk: opening it makes it dead with ciphertext_invalid.
        number += 1
        let receipt = try await harness.escrow.capture(try Fake.profile(number))
        try await harness.tamper(
            "UPDATE escrow SET sealed_profile = substr(sealed_profile, 1, 80) WHERE id = ?",
            [Data(receipt.escrowID.bytes)]
        )
        _ = try? await harness.escrow.replay(userIdentifier: Fake.userIdentifier(number))

        let report = try await PurgeReport.build(store: harness.store, verify: true, retentionSeconds: 7 * 86_400)
        #expect(report.purged[.confirmed, default: 0] > 50)
        #expect(report.purged[.expired, default: 0] > 0)
        #expect(report.dead.count == 1)
        #expect(report.hourly.count > 14)
        #expect(report.timeToPurgeDistribution.reduce(0, +) == report.purged.values.reduce(0, +))
        let html = try report.html()
        for inline in ["style=", "<style", "<script"] { #expect(!html.contains(inline), "no inline \(inline)") }
        #expect(html.contains("Verified"))
        #expect(html.contains(receipt.escrowID.hex))
        #expect(html.contains("ciphertext_invalid"))
        #expect(html.contains("retention 7 days"))
        #expect(html.components(separatedBy: "<svg").count == 3)
        for canary in Fake.tokens { #expect(!html.contains(canary)) }
        let csv = report.csvSummary()
        #expect(csv.split(separator: "\n").allSatisfy { $0.hasPrefix("# ") })
        #expect(csv.contains("# dead: \(receipt.escrowID.hex)=ciphertext_invalid"))
        if let path = ProcessInfo.processInfo.environment["PURGE_REPORT_HTML_OUT"] {
            try html.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }
}
