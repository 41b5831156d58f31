public import Foundation

/// RFC 3339 timestamps in UTC, written by hand (days-from-civil, proleptic Gregorian): no formatter, no
/// locale, no calendar. `ISO8601DateFormatter` builds an ICU formatter per instance, which measured 17% of
/// the CPU of an HTTP capture.
public enum Timestamp {
    /// Milliseconds since 1970, the precision at which times are stored, hashed and shown: truncated, except
    /// that a time within a microsecond below a whole millisecond counts as that millisecond. A stored time
    /// read back as a `Date` (a binary fraction of a second) can land just below its millisecond, and must
    /// give back the same number (measured: 16% of the milliseconds of 1970–2000 and 0.9% of 2001–2023 did not).
    /// Saturates instead of trapping on a time outside what 64 bits of milliseconds can hold.
    public static func unixMilliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000 + 0.001).rounded(.down)
        guard value.isFinite else { return value > 0 ? .max : .min }
        if value >= 9.2e18 { return .max }
        if value <= -9.2e18 { return .min }
        return Int64(value)
    }

    /// The `Date` of a stored millisecond count.
    public static func date(unixMilliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000)
    }

    /// `2026-12-21T10:00:00.123Z`: milliseconds, truncated the way the store keeps times.
    public static func milliseconds(_ date: Date) -> String {
        string(unixMilliseconds: unixMilliseconds(date), fraction: true)
    }

    /// `2026-12-21T10:00:00Z`: whole seconds, truncated.
    public static func seconds(_ date: Date) -> String {
        string(unixMilliseconds: unixMilliseconds(date), fraction: false)
    }

    /// `unixSeconds` as `2026-12-21T10:00:00Z`.
    public static func seconds(unixSeconds: Int64) -> String {
        let (milliseconds, overflow) = unixSeconds.multipliedReportingOverflow(by: 1_000)
        return string(unixMilliseconds: overflow ? (unixSeconds < 0 ? .min : .max) : milliseconds, fraction: false)
    }

    static func string(unixMilliseconds: Int64, fraction: Bool) -> String {
        let (seconds, millisecond) = floorDivision(unixMilliseconds, 1_000)
        let (days, second) = floorDivision(seconds, 86_400)
        // Howard Hinnant's civil_from_days.
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        var text = ""
        text.reserveCapacity(24)
        func append(_ value: Int64, digits: Int) {
            var divisor: Int64 = 1
            for _ in 1..<digits { divisor *= 10 }
            var rest = value
            while divisor <= value / 10 { divisor *= 10 }
            while divisor > 0 {
                text.unicodeScalars.append(Unicode.Scalar(UInt8(ascii: "0") + UInt8(rest / divisor)))
                rest %= divisor
                divisor /= 10
            }
        }
        switch year {
        case 0...9_999: append(year, digits: 4)
        case ..<0:
            text += "-"
            append(-year, digits: 4)
        default: text += String(year)
        }
        text += "-"
        append(month, digits: 2)
        text += "-"
        append(day, digits: 2)
        text += "T"
        append(second / 3_600, digits: 2)
        text += ":"
        append(second / 60 % 60, digits: 2)
        text += ":"
        append(second % 60, digits: 2)
        if fraction {
            text += "."
            append(millisecond, digits: 3)
        }
        text += "Z"
        return text
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }
}
