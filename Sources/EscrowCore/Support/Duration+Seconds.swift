extension Duration {
    /// The duration in seconds, as a `Double` (for waits, rates and log fields).
    package var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
