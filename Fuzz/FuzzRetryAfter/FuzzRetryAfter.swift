import Foundation
import ProfileEscrow

/// `Retry-After` parsing (delta-seconds and the three HTTP-date forms): a number of seconds ≥ 0 or nil,
/// never a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRetryAfter(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    if let seconds = RetryAfter.seconds(text, now: Date(timeIntervalSince1970: 1_763_719_200)) {
        guard seconds >= 0, seconds.isFinite else { fatalError("Retry-After out of range") }
    }
    return 0
}
