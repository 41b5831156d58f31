import ArgumentParser
import EscrowCore
import EscrowCrypto
import Foundation
import ProfileEscrow

/// `profile-escrow audit archive|verify`: moves the oldest audit events into segment files that verify on their own,
/// and verifies segments, their chaining and the store's checkpoint.
struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Archive the audit trail's oldest events into verifiable segment files, and verify them.",
        subcommands: [Archive.self, Verify.self]
    )

    struct Archive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move the events before a time into a segment file, and record the cut's checkpoint.",
            discussion: """
                Writes the longest run of the oldest events that are all before --before and belong to no escrow \
                still in the store (a live escrow's history stays, and so does every event after its first one: \
                the store keeps one unbroken chain). The segment is written to <out>.partial, synced, linked to \
                <out> and its folder synced; only then do transactions of --chunk events delete the events in \
                order, each recording its checkpoint (the last deleted event's sequence and hash). Works while \
                serve and replay workers run. \
                Exits 0 (also when there is nothing to archive: no file is written), 1 when the store's chain is \
                broken (nothing is archived), 2 for bad input (an existing --out), 4 when the store is unavailable.
                """
        )
        @OptionGroup var options: GlobalOptions
        @Option(help: "Archive events before this time: an ISO-8601 time, or an age such as 30d.") var before: String
        @Option(help: "The segment file to write (never overwritten).") var out: String
        @Flag(
            help: """
                Write each blind-index prefix as its commitment (a hash bound to the escrow id): counts, reasons, \
                times and hashes stay, and the segment still verifies; events written before v2 keep theirs.
                """
        )
        var redactPrefixes = false
        @Option(
            help: """
                Events deleted per transaction (default \(AuditArchiver.defaultChunk)): writers wait for one \
                transaction at most.
                """
        )
        var chunk = AuditArchiver.defaultChunk
        @Option(help: "text or json.") var format: OutputFormat = .text

        func validate() throws {
            guard chunk >= 1 else { throw ValidationError("--chunk: at least 1") }
            guard PurgeReportCommand.parseTime(before, now: Date()) != nil else {
                throw ValidationError("--before: '\(before)' is not an ISO-8601 time or an age such as 30d")
            }
        }

        func run() async throws {
            let now = Date()
            let time = PurgeReportCommand.parseTime(before, now: now) ?? now
            let store = try await options.openStore(owner: "profile-escrow audit archive")
            let result: AuditArchiveResult
            do {
                result = try await AuditArchiver.archive(
                    store: store,
                    before: time,
                    to: out,
                    redactPrefixes: redactPrefixes,
                    actor: .cli,
                    now: now,
                    chunk: chunk
                )
            } catch {
                guard let error = error as? AuditSegmentError else { throw error }
                FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
                throw ExitCode(error.message.contains("chain is broken") ? CLIFailure.problem : CLIFailure.badInput)
            }
            let plan = result.plan
            switch format {
            case .json:
                var fields: [String: String] = [
                    "archived": "\(result.checkpoint?.eventCount ?? 0)",
                    "stoppedBy": "\"\(plan.limit.rawValue)\"",
                    "prefixesKept": "\(result.prefixesKept)",
                ]
                if let checkpoint = result.checkpoint {
                    fields["segment"] = "\"\(Self.jsonEscaped(out))\""
                    fields["firstSequence"] = "\(checkpoint.firstSequence)"
                    fields["checkpointSequence"] = "\(checkpoint.sequence)"
                    fields["checkpointHash"] = "\"\(Hex.encode(checkpoint.hash))\""
                    fields["transactions"] = "\(result.transactions)"
                    fields["longestTransactionSeconds"] = String(format: "%.3f", result.commitSeconds)
                }
                let body = fields.keys.sorted().map { "  \"\($0)\": \(fields[$0]!)" }.joined(separator: ",\n")
                print("{\n\(body)\n}")
            case .text:
                guard let checkpoint = result.checkpoint else {
                    print("nothing to archive before \(Timestamp.seconds(time)) (\(Self.reason(plan.limit)))")
                    return
                }
                print(
                    "archived \(checkpoint.eventCount) events (sequences \(checkpoint.firstSequence)-"
                        + "\(checkpoint.sequence)) to \(out)"
                )
                print("checkpoint \(checkpoint.sequence) \(Hex.encode(checkpoint.hash))")
                print("stopped by: \(Self.reason(plan.limit))")
                print(
                    "deleted in \(result.transactions) transaction(s), the longest "
                        + "\(String(format: "%.3f", result.commitSeconds)) s"
                )
                if result.prefixesKept > 0 {
                    print(
                        "note: \(result.prefixesKept) events predate the v2 encoding and keep their prefix "
                            + "(their hash covers it)"
                    )
                }
            }
        }

        static func reason(_ limit: AuditArchivePlan.Limit) -> String {
            switch limit {
            case .time: "the next event is not before the cut's time"
            case .liveEscrow: "the next event belongs to an escrow still in the store; it and all later events stay"
            case .head: "the end of the chain"
            case .empty: "no event after the checkpoint"
            }
        }

        static func jsonEscaped(_ text: String) -> String {
            text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify archived segments alone, their chaining into each other, and the store's checkpoint.",
            discussion: """
                Each segment is checked line by line: its header, every event's sequence, the hash it chains from \
                and its own hash recomputed from its fields, and the trailer (count, last hash, file hash). The \
                segments must follow each other without gap or overlap. With --database (or \
                PROFILE_ESCROW_DATABASE), they must also contain every cut the store recorded and end at its \
                checkpoint, and the store's chain is verified from the checkpoint to its head. Every problem names \
                the file and line, or the sequences missing. Exits 0 when everything verifies, 1 on any problem, \
                2 for a file that cannot be read, 4 when the store is unavailable.
                """
        )
        @OptionGroup var options: GlobalOptions
        @Argument(help: "Segment files, in any order.") var segments: [String] = []
        @Option(help: "text or json.") var format: OutputFormat = .text

        func validate() throws {
            guard !segments.isEmpty else { throw ValidationError("give one or more segment files") }
        }

        func run() async throws {
            let withStore = options.database != nil || options.environment["PROFILE_ESCROW_DATABASE"] != nil
            let store =
                withStore ? try await options.openStore(readOnly: true, owner: "profile-escrow audit verify") : nil
            let result: AuditArchiveVerification
            do {
                result = try await AuditArchiveVerification.verify(paths: segments, store: store)
            } catch {
                guard let error = error as? AuditSegmentError else { throw error }
                FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
                throw ExitCode(CLIFailure.badInput)
            }
            switch format {
            case .text: print(Self.text(result), terminator: "")
            case .json: print(Self.json(result))
            }
            if !result.isIntact { throw ExitCode(CLIFailure.problem) }
        }

        static func text(_ result: AuditArchiveVerification) -> String {
            var lines: [String] = []
            for segment in result.segments {
                let range =
                    "\(segment.firstSequence.map(String.init) ?? "?")-\(segment.lastSequence.map(String.init) ?? "?")"
                lines.append(
                    "\(segment.intact ? "ok    " : "FAILED") \(segment.path): sequences \(range), \(segment.count) "
                        + "events\(segment.redacted ? ", prefixes redacted" : "")"
                )
            }
            if let checkpoint = result.checkpoint {
                lines.append("store checkpoint: sequence \(checkpoint.sequence) \(Hex.encode(checkpoint.hash))")
            }
            if let chain = result.storeChain {
                lines.append(
                    "store chain: \(chain.verified ? "verified" : "BROKEN"), \(chain.events) events from sequence "
                        + "\(chain.fromSequence), head \(chain.headHash ?? "-")"
                )
            }
            lines += result.notes.map { "note: \($0)" }
            lines += result.problems.map { "problem: \($0)" }
            lines.append(result.isIntact ? "verified" : "NOT verified: \(result.problems.count) problem(s)")
            return lines.joined(separator: "\n") + "\n"
        }

        static func json(_ result: AuditArchiveVerification) -> String {
            struct Body: Encodable {
                struct Segment: Encodable {
                    var path: String
                    var firstSequence: Int64?
                    var lastSequence: Int64?
                    var events: Int64
                    var redacted: Bool
                    var intact: Bool
                }
                var verified: Bool
                var segments: [Segment]
                var checkpointSequence: Int64?
                var checkpointHash: String?
                var storeChain: PurgeReport.Chain?
                var notes: [String]
                var problems: [String]
            }
            let body = Body(
                verified: result.isIntact,
                segments: result.segments.map {
                    .init(
                        path: $0.path,
                        firstSequence: $0.firstSequence,
                        lastSequence: $0.lastSequence,
                        events: $0.count,
                        redacted: $0.redacted,
                        intact: $0.intact
                    )
                },
                checkpointSequence: result.checkpoint?.sequence,
                checkpointHash: result.checkpoint.map { Hex.encode($0.hash) },
                storeChain: result.storeChain,
                notes: result.notes,
                problems: result.problems
            )
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            return String(decoding: (try? encoder.encode(body)) ?? Data(), as: UTF8.self)
        }
    }
}
