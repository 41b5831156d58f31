extension EscrowRecord {
    /// Stored times a record can hold (milliseconds from 1970 to the end of year 9999): differences between
    /// them (an escrow's age, say) never overflow. A stored row outside this range is malformed, in every store.
    public static let storedTimes: ClosedRange<Int64> = 0...253_402_300_799_999
    /// Stored revisions a record can hold (up to 2^53 - 1): the lifecycle's one more never overflows. A stored row
    /// outside this range is malformed, in every store.
    public static let storedRevisions: ClosedRange<Int64> = 0...9_007_199_254_740_991
}
