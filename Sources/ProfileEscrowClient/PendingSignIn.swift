import Foundation

/// One sign-in as the credential store keeps it, under a random name: the attempt secret from the start, and
/// Apple's credential once Apple answered, until the escrow captured it and the app took its ticket.
struct PendingSignIn: Codable, Sendable {
    /// The attempt secret: what binds the capture and the ticket's redeem to this app.
    var attempt: String
    var attemptExpiresAt: Date
    /// When the credential was first kept (``SignInClient/Configuration/keepAtMost`` counts from it).
    var keptAt: Date?
    var credential: AppleCredential?

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return try encoder.encode(self)
    }

    static func decode(_ item: Data) throws -> PendingSignIn {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return try decoder.decode(PendingSignIn.self, from: item)
    }
}
