import ArgumentParser
import ProfileEscrow

/// `profile-escrow webhook-secret`: prints a new Standard Webhooks secret.
struct WebhookSecretCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook-secret",
        abstract: "Print a new webhook secret (whsec_<base64>, 32 random bytes).",
        discussion: """
            Give it to the backend and to the replay worker (PROFILE_ESCROW_WEBHOOK_SECRET). To rotate without a \
            failed delivery: add the new secret to the backend, set PROFILE_ESCROW_WEBHOOK_SECRET="<new> <old>" \
            (every delivery is then signed with both), remove the old secret from the backend, then from the worker.
            """
    )

    func run() throws {
        print(WebhookSecret.generateText())
    }
}
