import EscrowCore
import Foundation
import Testing

@Suite("Timestamps")
struct TimestampTests {
    @Test("Known instants, with and without milliseconds")
    func knownInstants() {
        #expect(Timestamp.milliseconds(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.seconds(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        // 2027-01-01T10:00:00.123Z
        #expect(Timestamp.milliseconds(Date(timeIntervalSince1970: 1_798_797_600.123_4)) == "2027-01-01T10:00:00.123Z")
        #expect(Timestamp.seconds(Date(timeIntervalSince1970: 1_798_797_600.999)) == "2027-01-01T10:00:00Z")
        // Leap day and the last millisecond of a leap year.
        #expect(Timestamp.milliseconds(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
        #expect(Timestamp.milliseconds(Date(timeIntervalSince1970: 1_735_689_599.999)) == "2024-12-31T23:59:59.999Z")
        // Before 1970: floor, not truncation toward zero.
        #expect(Timestamp.milliseconds(Date(timeIntervalSince1970: -0.001)) == "1969-12-31T23:59:59.999Z")
        #expect(Timestamp.seconds(unixSeconds: -86_400) == "1969-12-31T00:00:00Z")
        // Years outside 0...9999 keep all their digits (and a sign).
        #expect(Timestamp.seconds(unixSeconds: 253_402_300_800) == "10000-01-01T00:00:00Z")
        #expect(Timestamp.seconds(unixSeconds: -451_729_497_600).hasPrefix("-12345-"))
    }

    @Test("Agrees with ISO8601DateFormatter over many instants")
    func agreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            // Whole milliseconds between 1901 and 2200, so both sides agree on the fraction.
            let milliseconds = Int64.random(in: -2_000_000_000_000...7_258_118_400_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
            #expect(Timestamp.milliseconds(date) == formatter.string(from: date), "at \(milliseconds) ms")
            #expect(Timestamp.seconds(date) == plain.string(from: date), "at \(milliseconds) ms")
        }
    }
}

@Suite("Stored times")
struct StoredTimeTests {
    @Test("A time stored in milliseconds reads back as the same milliseconds")
    func millisecondsRoundTrip() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100_000 {
            let milliseconds = Int64.random(in: -2_000_000_000_000...7_258_118_400_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
            #expect(Timestamp.unixMilliseconds(date) == milliseconds)
        }
    }
}
