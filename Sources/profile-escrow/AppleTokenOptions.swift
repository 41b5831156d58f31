import ArgumentParser
import EscrowCrypto
import EscrowCustody
import EscrowHTTP
import Foundation

/// `serve`'s options for Apple's tokens: with a team id (and the key `apple key import` recorded beside the keyring),
/// every sign-in's authorization code is redeemed here at Apple's token endpoint and the refresh token delivered in
/// the escrow. Each also from its `PROFILE_ESCROW_…` variable.
struct AppleTokenOptions: ParsableArguments {
    @Option(
        name: .customLong("apple-team-id"),
        help: """
            Redeem sign-ins' authorization codes here, signing client secrets with this team's key (imported with \
            `apple key import`) (env PROFILE_ESCROW_APPLE_TEAM_ID).
            """
    )
    var teamID: String?
    @Option(
        name: .customLong("apple-token-url"),
        help: """
            Apple's token endpoint (env PROFILE_ESCROW_APPLE_TOKEN_URL; default \
            \(AppleTokenExchanger.Configuration().tokenURL)).
            """
    )
    var tokenURL: String?
    @Option(
        name: .customLong("apple-revoke-url"),
        help: """
            Apple's revoke endpoint, where revocations queued at POST /v1/apple/revocations are sent \
            (env PROFILE_ESCROW_APPLE_REVOKE_URL; default \(AppleRevoker.Configuration().revokeURL)).
            """
    )
    var revokeURL: String?

    /// The exchange's settings, nil without a team id. The key's record is read (never the key): a missing record or
    /// another team's key is a usage error.
    func settings(
        _ environment: OptionEnvironment,
        keyringPath: String,
        apple: EscrowServer.AppleKeys?
    ) throws -> AppleTokenExchangeSettings? {
        guard let teamID = try environment.value(self.teamID, "apple-team-id") else {
            guard try environment.value(tokenURL, "apple-token-url") == nil else {
                throw ValidationError("--apple-token-url needs --apple-team-id (PROFILE_ESCROW_APPLE_TEAM_ID)")
            }
            return nil
        }
        guard apple != nil else {
            throw ValidationError("--apple-team-id verifies the id_token Apple answers with: it needs --apple-audience")
        }
        var exchange = AppleTokenExchanger.Configuration()
        if let url = try environment.value(tokenURL, "apple-token-url") {
            try SignInOptions.requireWebURL(url, "--apple-token-url")
            exchange.tokenURL = url
        }
        var revoke = AppleRevoker.Configuration()
        if let url = try environment.value(revokeURL, "apple-revoke-url") {
            try SignInOptions.requireWebURL(url, "--apple-revoke-url")
            revoke.revokeURL = url
        }
        let recordPath = AppleKeyRecord.path(besideKeyring: keyringPath)
        let record: AppleKeyRecord
        do {
            record = try AppleKeyRecord.read(path: recordPath)
        } catch {
            throw ValidationError(
                "--apple-team-id needs Apple's key: `profile-escrow apple key import` (\(error.message))"
            )
        }
        guard record.teamID == teamID else {
            throw ValidationError("the key imported beside the keyring is team \(record.teamID)'s, not \(teamID)'s")
        }
        let secrets = AppleClientSecrets(
            teamID: teamID,
            keyID: record.keyID,
            signer: try record.signer(environment: environment.values)
        )
        var settings = AppleTokenExchangeSettings(exchange: exchange) { try await secrets.secret(for: $0).jwt }
        settings.revoke = revoke
        return settings
    }
}
