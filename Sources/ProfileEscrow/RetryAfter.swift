package import Foundation

/// `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
///
/// The three HTTP-date forms are parsed by hand, as ``Timestamp`` writes dates by hand: a `DateFormatter`
/// builds an ICU formatter per instance (three per call were built here before), is not `Sendable` to share
/// as a static, and is lenient in ways an HTTP-date must not be. The grammar is small and fixed.
package enum RetryAfter {
    /// The wait in seconds asked for by `value` at `now`; nil when absent or unreadable. A date in
    /// the past means "now" (0).
    package static func seconds(_ value: String?, now: Date) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            return value.count <= 12 ? Double(value) : nil
        }
        guard let date = httpDate(value, now: now) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// An HTTP-date (RFC 9110 §5.6.7): IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT` (preferred), and the
    /// obsolete forms recipients must accept, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT` and asctime
    /// `Sun Nov  6 08:49:37 1994`. The day name is not checked against the date.
    static func httpDate(_ text: String, now: Date) -> Date? {
        let parts = text.split(separator: " ")
        let (day, month, year, time): (Substring, Substring, Int?, Substring)
        switch parts.count {
        case 6 where parts[0].hasSuffix(",") && parts[5] == "GMT":
            // IMF-fixdate.
            guard parts[1].count == 2, parts[3].count == 4 else { return nil }
            (day, month, year, time) = (parts[1], parts[2], number(parts[3]), parts[4])
        case 4 where parts[0].hasSuffix(",") && parts[3] == "GMT":
            // RFC 850: dd-Mon-yy with a two-digit year.
            let date = parts[1].split(separator: "-", omittingEmptySubsequences: false)
            guard date.count == 3, date[0].count == 2, date[2].count == 2, let short = number(date[2]) else {
                return nil
            }
            (day, month, year, time) = (date[0], date[1], fullYear(short, now: now), parts[2])
        case 5:
            // asctime: the day is space-padded, so "Nov  6" splits into "Nov" and "6" (empty parts dropped).
            guard parts[4].count == 4, parts[2].count <= 2 else { return nil }
            (day, month, year, time) = (parts[2], parts[1], number(parts[4]), parts[3])
        default:
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard let year, let day = number(day), let month = months.firstIndex(of: month).map({ $0 + 1 }),
            clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2]),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            (1...daysIn(month: month, year: year)).contains(day)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    /// Digits only: `Int("+1")` would accept a sign.
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        return Int(text)
    }

    private static let months: [Substring] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// RFC 9110: a two-digit year that appears more than 50 years in the future is the most recent past
    /// year with the same last two digits.
    private static func fullYear(_ short: Int, now: Date) -> Int? {
        guard (0...99).contains(short) else { return nil }
        let current = 1970 + Int(now.timeIntervalSince1970 / 31_556_952)
        var year = current - current % 100 + short
        if year > current + 50 { year -= 100 }
        return year
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Howard Hinnant's days_from_civil: days since 1970-01-01 in the proleptic Gregorian calendar.
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
