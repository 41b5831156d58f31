public import EscrowCore
import EscrowCrypto
import Foundation
import Logging

extension Escrow {
    /// A MAC under this deployment's keyring (see `Keyring.serviceStamp`), for the web sign-in's resubmission stamps.
    package func serviceStamp(_ message: [UInt8]) -> [UInt8] { keyring.serviceStamp(message) }

    /// Completes a web sign-in in `signIns` (the store that holds the escrows): seals `profile`, when given, as a
    /// verified capture, and in one transaction uses the attempt, stores its ticket and captures. Durable before it
    /// returns; nothing is captured unless the attempt was live and its binding matched. `emailVerified` records
    /// whether Apple signed the profile's email (the identity token's claim) or only the browser or app gave it;
    /// `transferSub` is the token's `transfer_sub`, sealed with the profile and delivered beside it.
    ///
    /// `signIns` is the store the sign-in routes serve from (they start and redeem in it too); ``signIns`` is what
    /// this escrow's sweep cleans. A server passes the same store to both.
    ///
    /// `appleExchange`: the exchange of the sign-in's authorization code (``appleExchange(code:clientID:redirectURI:now:)``),
    /// sealed with the escrow and queued with the capture when a profile is captured (it replaces the request's own).
    public func completeSignIn(
        _ request: SignInCompletionRequest,
        profile: Profile?,
        emailVerified: Bool? = nil,
        transferSub: String? = nil,
        appleExchange code: AppleCodeExchange? = nil,
        in signIns: any SignInStore,
        actor: AuditActor
    ) async throws -> SignInCompletion {
        var request = request
        var record: EscrowRecord?
        if let profile {
            var (sealed, appleExchange) = try sealedRecord(
                profile,
                verified: true,
                emailVerified: emailVerified,
                transferSub: transferSub,
                appleCode: code,
                now: request.now
            )
            if let appleExchange { request.appleExchange = appleExchange }
            // The first delivery waits for the code's exchange: ending it makes the escrow due at once.
            if request.appleExchange != nil {
                sealed.nextAttemptAt = request.now.addingTimeInterval(AppleTokenExchange.codeLifetime)
            }
            record = sealed
        }
        let completion = try await signIns.completeSignIn(
            request,
            capture: record,
            actor: actor,
            lifecycle: lifecycle
        )
        if case .completed(_, let outcome?) = completion {
            switch outcome {
            case .created: EscrowMetrics.captured()
            case .replaced:
                EscrowMetrics.captured()
                EscrowMetrics.purged(.replaced)
            case .unchanged: break
            }
            logger.debug(
                "escrow captured at a web sign-in",
                metadata: [
                    "escrow.id": "\(outcome.record.id)", "escrow.index": "\(outcome.record.blindIndex.prefixHex)",
                ]
            )
        }
        return completion
    }
}
