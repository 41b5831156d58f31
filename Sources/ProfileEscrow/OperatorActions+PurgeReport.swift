public import EscrowCore
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

    /// The purge report of everything until now, its chain verified from the store's recorded checkpoint
    /// (``PurgeReport/buildFromCheckpoint(store:retentionSeconds:now:pageSize:)``): only the events written since the
    /// last verified report are read, and the report says from where. The console's page, which an auditor may load
    /// often.
    public func purgeReportFromCheckpoint() async throws -> PurgeReport {
        let now = escrow.configuration.clock.now()
        return try await PurgeReport.buildFromCheckpoint(
            store: escrow.store,
            retentionSeconds: escrow.configuration.retention,
            now: now
        )
    }

    /// The purge report rendered in `format`.
    public func purgeReport(_ format: ReportFormat, verify: Bool) async throws -> String {
        var rendered = ""
        try await purgeReport(verify: verify).write(format, rowsFrom: escrow.store) { rendered += $0 }
        return rendered
    }
}

extension PurgeReport {
    /// Writes the report in `format` through `write`, in pieces. CSV is the summary block, then a row a purge read
    /// again from `store` over the report's period, never held at once (the CLI prints each as it comes).
    public func write(
        _ format: OperatorActions.ReportFormat,
        rowsFrom store: any AuditTrailStore & OperatorReadStore,
        archives: [String] = [],
        to write: (String) -> Void
    ) async throws {
        switch format {
        case .text: write(text())
        case .json: write(String(decoding: json(), as: UTF8.self))
        case .csv:
            write(csvSummary() + Self.csvHeader + "\n")
            try await withoutActuallyEscaping(write) { write in
                _ = try await Self.build(
                    store: store,
                    since: since,
                    until: until,
                    verify: false,
                    archives: archives,
                    now: generatedAt,
                    onPurge: { write(Self.csvRow($0) + "\n") }
                )
            }
        }
    }
}
