public import EscrowCore
import EscrowCrypto
public import Foundation

/// A web sign-in attempt started and completed in a store, with hashes of obviously fake secrets: for the tests of
/// how a store keeps attempts and tickets.
public struct FakeSignIn: Sendable {
    public let attempt: SignInAttempt
    public let ticket: SignInTicket
    public let completion: SignInCompletion

    /// What finds ``ticket``: its attempt's state hash and its own hash.
    public var key: SignInTicketKey { SignInTicketKey(stateHash: attempt.stateHash, ticketHash: ticket.ticketHash) }

    public static func hash(_ text: String) -> [UInt8] { Hashing.blake2b256(Array(text.utf8)) }

    /// Starts attempt `name` at `start` (live 10 minutes) and completes it without a capture, issuing a ticket of
    /// 5 minutes.
    public static func complete(_ name: String, in store: any SignInStore, at start: Date) async throws -> FakeSignIn {
        let attempt = SignInAttempt(
            stateHash: hash("fake-state-\(name)"),
            nonceHash: hash("fake-nonce-\(name)"),
            bindingHash: hash("fake-binding-\(name)"),
            returnName: "app",
            createdAt: start,
            expiresAt: start.addingTimeInterval(600)
        )
        try await store.createSignInAttempt(attempt)
        let ticket = SignInTicket(
            ticketHash: hash("fake-ticket-\(name)"),
            sealedResult: Array("sealed-result-\(name)".utf8),
            expiresAt: start.addingTimeInterval(300)
        )
        let completion = try await store.completeSignIn(
            SignInCompletionRequest(
                stateHash: attempt.stateHash,
                bindingHash: attempt.bindingHash,
                now: start,
                attempt: attempt,
                ticket: { _ in ticket }
            ),
            capture: nil,
            actor: .http(token: "signin"),
            lifecycle: EscrowLifecycle()
        )
        return FakeSignIn(attempt: attempt, ticket: ticket, completion: completion)
    }

    /// Whether the completion used the attempt and issued the ticket.
    public var completed: Bool {
        if case .completed = completion { true } else { false }
    }
}
