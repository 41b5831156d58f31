import Foundation
import Testing

@testable import EscrowHTTP

/// The Apple notification fuzz corpus (Fuzz/Corpus/FuzzAppleNotification) through the same parsers as
/// the fuzz target: the events claim and the JWS header check.
@Suite("Fuzz corpus replay: Apple notifications")
struct FuzzCorpusAppleTests {
    @Test func appleNotification() async throws {
        let directory = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/Corpus/FuzzAppleNotification")
        let jwks = try await AppleJWKS(json: Array(AppleTestKeys.shared.jwks))
        var events = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            let text = String(decoding: try Data(contentsOf: directory.appendingPathComponent(name)), as: UTF8.self)
            if AppleNotificationEvent(json: text) != nil { events += 1 }
            #expect(AppleToken(text).map(jwks.accepts) != true, "no corpus token names a test key")
        }
        #expect(events >= 1, "the events seed parses")
    }
}
