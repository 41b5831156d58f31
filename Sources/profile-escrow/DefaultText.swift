/// A default as a help text shows it, read from the library's configuration where it is written (the one place), in
/// the form the option takes.
enum DefaultText {
    /// `3600` → `1h`, `120` → `2m`, `30` → `30s`, `0.25` → `250ms`, `0` → `0s`: the largest unit the duration is a
    /// whole number of, as the duration options take it.
    static func duration(_ seconds: Double) -> String {
        for (suffix, factor) in [("d", 86_400.0), ("h", 3600), ("m", 60), ("s", 1)]
        where seconds >= factor && (seconds / factor).rounded() == seconds / factor {
            return "\(Int(seconds / factor))\(suffix)"
        }
        return seconds == 0 ? "0s" : "\(number(seconds * 1000))ms"
    }

    static func duration(_ duration: Duration) -> String {
        self.duration(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// `100.0` → `100`, `0.5` → `0.5`.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int64(value))" : "\(value)"
    }
}
