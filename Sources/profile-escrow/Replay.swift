import ArgumentParser
import EscrowCore
import EscrowSQLite
import Foundation
import ProfileEscrow
import ServiceLifecycle
import UnixSignals

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deliver escrows to the registration backend until it confirms them (SPEC §7).",
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
        var storeConfiguration = SQLiteEscrowStore.Configuration()
        storeConfiguration.ownerDescription = "profile-escrow replay"
        // The worker flushes purged bytes every few seconds (batched) instead of after each purge.
        storeConfiguration.checkpointAfterPurge = false
        let logger = options.logger
        let store = try SQLiteEscrowStore(path: options.databasePath, configuration: storeConfiguration, logger: logger)
        let escrow = Escrow(
            store: store,
            keyring: keyring,
            configuration: try worker.escrowConfiguration(options),
            logger: logger
        )
        let replayWorker = try ReplayWorker(escrow: escrow, configuration: workerConfiguration, logger: logger)

        if once {
            let progress = Progress(label: "delivered")
            let summary = try await replayWorker.runOnce { progress.update($0.delivered) }
            progress.finish()
            print("replay: \(summary)")
        } else {
            var groupConfiguration = ServiceGroupConfiguration(
                services: [.init(service: replayWorker)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
            // Deliveries in flight end within the delivery timeout; past this bound they are cancelled
            // (their leases run out, and fencing discards any late outcome).
            groupConfiguration.maximumGracefulShutdownDuration = try worker.gracefulShutdownBound()
            let group = ServiceGroup(configuration: groupConfiguration)
            try await group.run()
            print("replay: stopped")
        }
    }
}
