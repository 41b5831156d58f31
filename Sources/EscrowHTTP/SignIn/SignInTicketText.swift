import EscrowCore
import EscrowCrypto

/// A sign-in's ticket as the service hands it out: base64url of its attempt's state hash (32 bytes) and 32 bytes of
/// its own (random for a callback, derived from the attempt secret for a native capture), so the store finds the
/// ticket by its attempt's key and checks the ticket's hash there, with no index of tickets to write. The state hash
/// reveals nothing: the state itself, which it hashes, is spent once the attempt is used.
///
/// Written here rather than with a library: the format is this service's own, two fields in one opaque string.
enum SignInTicketText {
    /// The ticket of the attempt with `stateHash`, its own part `secret` (32 bytes).
    static func make(stateHash: [UInt8], secret: [UInt8]) -> String {
        Base64URL.encode(stateHash + secret)
    }

    /// A new ticket of the attempt with `stateHash`, with 256 random bits of its own.
    static func random(stateHash: [UInt8]) -> String {
        make(stateHash: stateHash, secret: Hashing.randomBytes(count: 32))
    }

    /// What finds `ticket` in the store: its attempt's state hash and its own hash, or its hash alone for a ticket of
    /// the earlier format (32 bytes of its own), which the store kept by that hash.
    static func key(_ ticket: String) -> SignInTicketKey {
        let ticketHash = AppleSignInRoutes.hash(ticket)
        guard let bytes = Base64URL.decode(ticket.utf8), bytes.count == 64 else {
            return SignInTicketKey(ticketHash: ticketHash)
        }
        return SignInTicketKey(stateHash: Array(bytes[..<32]), ticketHash: ticketHash)
    }
}
