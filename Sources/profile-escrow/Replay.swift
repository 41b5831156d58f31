import ArgumentParser
import EscrowCore
import Foundation
import ProfileEscrow

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deliver escrows to the registration backend until it confirms them.",
        discussion: """
            The webhook secret (whsec_<base64>) comes from PROFILE_ESCROW_WEBHOOK_SECRET, never from the \
            command line. Without --once the worker runs until SIGTERM or SIGINT, then finishes the deliveries \
            in flight and gives back the leases it holds.
            """
    )
    @OptionGroup var options: GlobalOptions

    @Flag(help: "Deliver what is due now, print a summary and exit.") var once = false
    @OptionGroup var worker: WorkerOptions

    func validate() throws {
        _ = try worker.workerConfiguration()
        _ = try worker.escrowConfiguration(options)
    }

    func run() async throws {
        let workerConfiguration = try worker.workerConfiguration()
        let keyring = try options.loadKeyring(createIfDefault: false)
        let logger = options.logger
        // Purged bytes are flushed in batches (every few seconds, and at the end) instead of after each purge.
        let opened = try await options.location.open(readOnly: false, batchedPurges: true, logger: logger)
        let escrow = Escrow(
            store: opened.store,
            keyring: keyring,
            configuration: try worker.escrowConfiguration(options),
            logger: logger
        )
        if once {
            let replayWorker = try ReplayWorker(escrow: escrow, configuration: workerConfiguration, logger: logger)
            let progress = Progress(label: "delivered")
            let summary = try await replayWorker.runOnce { progress.update($0.delivered) }
            progress.finish()
            print("replay: \(summary)")
        } else {
            let services = try EscrowServiceGroup.replayServices(
                escrow: escrow,
                worker: workerConfiguration,
                keyringPath: options.keyringPath,
                logger: logger
            )
            try await EscrowServiceGroup.run(
                services,
                shutdownBound: workerConfiguration.gracefulShutdownBound,
                logger: logger
            )
            print("replay: stopped")
        }
    }
}
