/// Parses operator durations such as `250ms`, `5s`, `10m`, `2h`, `30d` into seconds.
public enum DurationParser {
    public static func seconds(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400), ("w", 604_800)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            // "10ms" also ends in "s": only accept when what is left is a plain number.
            guard let value = Double(number), value >= 0, value.isFinite, !number.contains("e") else { continue }
            return value * factor
        }
        return nil
    }
}
