import EscrowCore
import EscrowCrypto
public import Foundation

extension PurgeReport {
    /// The JSON form: at least the keys of SPEC §8.
    public func json() -> Data {
        func number(_ value: Double?) -> Any { value.map { ($0 * 1000).rounded() / 1000 } ?? NSNull() }
        var object: [String: Any] = [
            "since": since.map(Timestamp.milliseconds) ?? NSNull(),
            "until": until.map(Timestamp.milliseconds) ?? NSNull(),
            "generatedAt": Timestamp.milliseconds(generatedAt),
            "captured": captured,
            "purged": Dictionary(uniqueKeysWithValues: PurgeReason.allCases.map { ($0.rawValue, purged[$0] ?? 0) }),
            "timeToPurgeSeconds": [
                "median": number(timeToPurgeSeconds?.median), "p95": number(timeToPurgeSeconds?.p95),
                "max": number(timeToPurgeSeconds?.max),
            ],
            "live": Dictionary(uniqueKeysWithValues: EscrowState.live.map { ($0.rawValue, live[$0] ?? 0) }),
            "oldestLiveAgeSeconds": number(oldestLiveAgeSeconds),
            "overdue": overdue,
            "dead": dead.map { ["escrowId": $0.id.hex, "code": $0.code?.rawValue ?? NSNull()] as [String: Any] },
        ]
        if let chain {
            object["chain"] =
                [
                    "verified": chain.verified, "events": chain.events,
                    "firstBrokenSequence": chain.firstBrokenSequence.map { $0 as Any } ?? NSNull(),
                    "headHash": chain.headHash ?? NSNull(),
                ] as [String: Any]
        }
        // Only plain values above: serialization cannot fail.
        return (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])) ?? Data()
    }

    /// The readable table.
    public func text() -> String {
        func seconds(_ value: Double?) -> String { value.map { Self.human($0) } ?? "-" }
        var lines: [String] = []
        lines.append("ProfileEscrow purge report")
        let from = since.map(Timestamp.milliseconds) ?? "beginning"
        lines.append("  period            \(from) .. \(until.map(Timestamp.milliseconds) ?? "now")")
        lines.append("  generated         \(Timestamp.milliseconds(generatedAt))")
        lines.append("")
        lines.append("  captured          \(captured)")
        lines.append("  purged            \(purged.values.reduce(0, +))")
        for reason in PurgeReason.allCases {
            lines.append(
                "    \(reason.rawValue.padding(toLength: 16, withPad: " ", startingAt: 0))\(purged[reason] ?? 0)"
            )
        }
        lines.append(
            "  time to purge     median \(seconds(timeToPurgeSeconds?.median)), "
                + "p95 \(seconds(timeToPurgeSeconds?.p95)), max \(seconds(timeToPurgeSeconds?.max))"
        )
        lines.append("")
        lines.append("  live now          \(live.values.reduce(0, +)) (oldest \(seconds(oldestLiveAgeSeconds)))")
        for state in EscrowState.live {
            lines.append("    \(state.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0))\(live[state] ?? 0)")
        }
        lines.append("  overdue           \(overdue)\(overdue > 0 ? "   <-- past retention and not purged" : "")")
        lines.append("  dead              \(dead.count)")
        for entry in dead.prefix(50) {
            lines.append("    \(entry.id.hex)  \(entry.code?.rawValue ?? "-")")
        }
        if dead.count > 50 { lines.append("    ... \(dead.count - 50) more (use --format json)") }
        if let chain {
            lines.append("")
            if chain.verified {
                lines.append("  audit chain       verified, \(chain.events) events, head \(chain.headHash ?? "-")")
            } else {
                lines.append(
                    "  audit chain       BROKEN at sequence \(chain.firstBrokenSequence.map(String.init) ?? "?") "
                        + "(\(chain.events) events read)"
                )
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The CSV header; each purge is one row from ``csvRow(_:)``.
    public static let csvHeader = "sequence,purgedAt,escrowId,indexPrefix,reason,ageSeconds,actor"

    public static func csvRow(_ purge: Purge) -> String {
        // Ids, prefixes, reasons and actors never hold commas or quotes; quote the actor anyway.
        let actor = "\"" + purge.actor.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        let at = Timestamp.milliseconds(purge.at)
        return "\(purge.sequence),\(at),\(purge.escrowID),\(purge.indexPrefix),\(purge.reason),"
            + "\(String(format: "%.3f", purge.ageSeconds)),\(actor)"
    }

    static func human(_ seconds: Double) -> String {
        switch seconds {
        case ..<1: String(format: "%.0fms", seconds * 1000)
        case ..<120: String(format: "%.1fs", seconds)
        case ..<7200: String(format: "%.1fm", seconds / 60)
        case ..<172_800: String(format: "%.1fh", seconds / 3600)
        default: String(format: "%.1fd", seconds / 86400)
        }
    }
}
