import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import ProfileEscrow
import Testing

/// 1,000 profiles whose every personal field carries a canary: none reaches the store's files or the
/// logs, every one reads back exactly with the full keyring, none with a public-only keyring.
@Suite("Canaries")
struct CanaryTests {
    @Test func thousandCanariesNeverReachDiskOrLogsAndAllReadBack() async throws {
        let harness = try EscrowFixture()
        let count = 1_000
        var profiles: [Profile] = []
        for number in 0..<count {
            let profile = try Fake.profile(number)
            profiles.append(profile)
            let receipt = try await harness.escrow.capture(profile)
            #expect(receipt.outcome == .created)
        }
        try await harness.store.flushPurged()
        for (name, bytes) in harness.storeFiles() {
            for token in Fake.tokens {
                #expect(!bytes.contains(bytes: Array(token.utf8)), "\(token) found in \(name)")
            }
        }
        let logged = harness.loggedText()
        #expect(!logged.isEmpty, "the harness does capture logs")
        for token in Fake.tokens {
            #expect(!logged.contains(token), "\(token) was logged")
        }

        for profile in profiles {
            let opened = try await harness.escrow.replay(userIdentifier: profile.userIdentifier)
            #expect(opened.profile == profile)
            #expect(!opened.verified)
        }

        let capturer = Escrow(store: harness.store, keyring: harness.keyring.publicOnly(), logger: .init(label: "t"))
        for profile in profiles.prefix(50) {
            await #expect(throws: EscrowError.self) {
                _ = try await capturer.replay(userIdentifier: profile.userIdentifier)
            }
        }
        // A failed open on a capture-only node must not mark anything dead.
        let summary = try await harness.store.summary(at: Date())
        #expect(summary.live[.pending] == count)
        #expect(summary.dead.isEmpty)
    }

    @Test func aPublicOnlyKeyringCapturesButNeverOpens() async throws {
        let full = Keyring.generate()
        let harness = try EscrowFixture(keyring: full.publicOnly())
        let profile = try Fake.profile(1)
        _ = try await harness.escrow.capture(profile)
        do {
            _ = try await harness.escrow.replay(userIdentifier: profile.userIdentifier)
            Issue.record("a public-only keyring opened an escrow")
        } catch let error as EscrowError {
            #expect(error.code == .captureOnly)
        }
        let opener = Escrow(store: harness.store, keyring: full, logger: .init(label: "t"))
        #expect(try await opener.replay(userIdentifier: profile.userIdentifier).profile == profile)
    }
}
