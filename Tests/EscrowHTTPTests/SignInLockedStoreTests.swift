import EscrowCore
import EscrowTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import EscrowHTTP

#if canImport(Glibc)
import Glibc
#endif

/// A web sign-in's callback while another process holds the SQLite store's write lock (a long operator command, a
/// backup): the browser gets the page that posts Apple's form again within the sign-in's few seconds, not after the
/// 30 s other writes wait, with nothing captured; once the lock is free, the page's resubmission completes.
@Suite("Web sign-in on a locked SQLite store")
struct SignInLockedStoreTests {
    @Test("the callback answers its 503 page within seconds while the write lock is held; the resubmission completes")
    func resubmitPageWithinSeconds() async throws {
        let flow = try await SignInFlow()
        try await flow.harness.app().test(.live) { client async throws in
            let start = try await flow.start(client)
            let form = try await flow.form(start, user: SignInFlow.userJSON(1))
            // Another process's writer: an exclusive flock on the store's lock file through a descriptor of our own.
            let descriptor = open(flow.harness.databasePath + ".write-lock", O_RDWR | O_CLOEXEC)
            #expect(descriptor >= 0 && flock(descriptor, LOCK_EX | LOCK_NB) == 0)
            let started = ContinuousClock.now
            let down = try await flow.callback(client, form, cookie: start.cookie)
            let waited = ContinuousClock.now - started
            _ = flock(descriptor, LOCK_UN)
            close(descriptor)
            #expect(down.status == .serviceUnavailable)
            // About 3 s (the default bound), not the 30 s a capture waits; room for a loaded machine, where other
            // tests of this process can hold up this one's task for seconds.
            #expect(waited >= .seconds(2) && waited < .seconds(25), "answered after \(waited)")
            #expect(try await flow.captures() == 0, "nothing captured while the lock was held")

            // The browser posts the page's form again (as its script does): now it completes, captured once.
            let again = try await flow.callback(client, SignInFlow.hiddenFields(down.text), cookie: start.cookie)
            #expect(again.status == .seeOther)
            #expect(SignInFlow.query(again.headers[.location] ?? "")["ticket"] != nil)
            #expect(try await flow.captures() == 1)
        }
    }
}
