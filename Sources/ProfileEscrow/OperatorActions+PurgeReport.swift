import EscrowCore
import Foundation

extension OperatorActions {
    /// The purge report's plain renderings: a readable table, JSON, CSV (a `# ` summary block, then one row per
    /// purge). Its HTML document for an auditor is the HTTP module's (`PurgeReport.html(for:)`), from its templates.
    public enum ReportFormat: String, Sendable, CaseIterable {
        case text, json, csv

        /// The media type of the rendering.
        public var mediaType: String {
            switch self {
            case .text: "text/plain; charset=utf-8"
            case .json: "application/json"
            case .csv: "text/csv; charset=utf-8"
            }
        }
    }

    /// The purge report of everything until now (the retention's overdue escrows counted); `verify` recomputes the
    /// audit chain.
    public func purgeReport(verify: Bool) async throws -> PurgeReport {
        let now = escrow.configuration.clock.now()
        return try await PurgeReport.build(
            store: escrow.store,
            until: now,
            verify: verify,
            retentionSeconds: escrow.configuration.retention,
            now: now
        )
    }

    /// The purge report rendered in `format`; `csv` is its summary, then one row per purge.
    public func purgeReport(_ format: ReportFormat, verify: Bool) async throws -> String {
        let report = try await purgeReport(verify: verify)
        switch format {
        case .text: return report.text()
        case .json: return String(decoding: report.json(), as: UTF8.self)
        case .csv:
            var csv = report.csvSummary() + PurgeReport.csvHeader + "\n"
            _ = try await PurgeReport.build(
                store: escrow.store,
                until: report.generatedAt,
                verify: false,
                now: report.generatedAt,
                onPurge: { csv += PurgeReport.csvRow($0) + "\n" }
            )
            return csv
        }
    }
}
