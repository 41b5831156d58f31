internal import CSodium
import NIOConcurrencyHelpers

/// Recycles `sodium_malloc`'ed buffers.
///
/// `sodium_malloc` maps fresh pages with guard pages around them and locks them in memory: about
/// seven system calls for every allocation and free (some 23 µs here), several times per capture and
/// per replay. The pool keeps released buffers, still guarded and locked, and hands them out again.
///
/// Invariant: every buffer in the pool is all zeroes. A buffer is zeroed in full when first allocated
/// (libsodium fills new memory with a canary pattern), and ``SecretBytes`` zeroes the bytes it exposed
/// (the only ones that could have been written) before giving the buffer back. Buffers are rounded up
/// to a power of two from 64 bytes to 16 KiB; larger ones are not pooled.
enum SecretBufferPool {
    static let smallestClass = 64
    static let largestClass = 16 * 1024
    /// Buffers kept per size class; beyond that, released buffers are freed. Sized for about a thousand
    /// captures in flight: with 64, a burst freed and re-mapped buffers (mprotect, TLB shootdowns: 28% of
    /// the CPU in kernel under 1,000 concurrent captures).
    static let keptPerClass = 512

    /// Pointers are kept as addresses: the pool owns the memory, nothing else refers to it.
    private static let free = NIOLockedValueBox<[Int: [UInt]]>([:])

    /// The allocation size used for a request of `count` bytes.
    static func capacity(for count: Int) -> Int {
        guard count <= largestClass else { return Swift.max(count, 1) }
        var size = smallestClass
        while size < count { size <<= 1 }
        return size
    }

    /// A zero-filled buffer of `capacity(for: count)` bytes.
    static func take(count: Int) -> (pointer: UnsafeMutableRawPointer, capacity: Int) {
        let capacity = capacity(for: count)
        if capacity <= largestClass,
            let address = free.withLockedValue({ $0[capacity]?.popLast() }),
            let pointer = UnsafeMutableRawPointer(bitPattern: address)
        {
            return (pointer, capacity)
        }
        guard let allocated = sodium_malloc(capacity) else {
            fatalError("sodium_malloc failed: out of memory")
        }
        sodium_memzero(allocated, capacity)
        return (allocated, capacity)
    }

    /// Takes back a buffer that is all zeroes again.
    static func give(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        if capacity <= largestClass {
            let kept = free.withLockedValue { classes -> Bool in
                guard classes[capacity, default: []].count < keptPerClass else { return false }
                classes[capacity, default: []].append(UInt(bitPattern: pointer))
                return true
            }
            if kept { return }
        }
        sodium_free(pointer)
    }
}
