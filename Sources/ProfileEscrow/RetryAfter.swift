import Foundation

/// `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
enum RetryAfter {
    /// The wait in seconds asked for by `value` at `now`; nil when absent or unreadable. A date in
    /// the past means "now" (0).
    static func seconds(_ value: String?, now: Date) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            return value.count <= 12 ? Double(value) : nil
        }
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: value) {
                return max(0, date.timeIntervalSince(now))
            }
        }
        return nil
    }

    /// IMF-fixdate (preferred), then the obsolete RFC 850 and asctime forms recipients must accept.
    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
    ]
}
