import EscrowTestSupport
import Foundation
import Testing

@testable import ProfileEscrowClient

/// What a launch's resume does with items that need no escrow to decide: nothing listens at the escrow's address, so
/// any request would end as "kept, unavailable".
@Suite("ProfileEscrowClient: resume at launch without the escrow")
struct ResumeTests {
    @Test(
        "a credential kept past keepAtMost is dropped and given back; an attempt Apple never answered is forgotten once expired; an unreadable item is removed"
    )
    func housekeeping() async throws {
        let directory = TemporaryDirectory()
        let store = try FileCredentialStore(directory: directory.path + "/app")
        let credential = AppleCredential(
            user: "001234.old.0001",
            identityToken: "eyJ.old.sig",
            email: "old@example.invalid"
        )
        let longAgo = Date().addingTimeInterval(-2 * 24 * 60 * 60)
        try store.save(
            PendingSignIn(attempt: "a1", attemptExpiresAt: longAgo, keptAt: longAgo, credential: credential).encoded(),
            as: "signin-old"
        )
        try store.save(PendingSignIn(attempt: "a2", attemptExpiresAt: longAgo).encoded(), as: "signin-unanswered")
        try store.save(
            PendingSignIn(attempt: "a3", attemptExpiresAt: Date().addingTimeInterval(600)).encoded(),
            as: "signin-under-way"
        )
        try store.save(Data("not json".utf8), as: "signin-torn")

        let client = SignInClient(
            configuration: SignInClient.Configuration(escrowURL: URL(string: "http://127.0.0.1:\(try freePort())")!),
            store: store,
            ticketHandler: { _ in Issue.record("no ticket can come from here") }
        )
        let outcomes = await client.resumePending()
        #expect(outcomes.count == 1)
        guard case .dropped(let error, let givenBack) = outcomes.first else {
            Issue.record("expected the old credential dropped")
            return
        }
        #expect(error == SignInClientError(.tooOld))
        #expect(givenBack == credential)
        #expect(try store.names() == ["signin-under-way"], "an attempt still live may yet be answered by Apple")
    }
}
