internal import CSodium

#if canImport(Glibc)
import Glibc
#endif

/// Process-level protections for a process that holds secrets in memory.
public enum ProcessHardening {
    /// Disables core dumps (`RLIMIT_CORE` 0) and marks the process non-dumpable, so neither a crash
    /// nor a same-user `ptrace` reads keys or profiles out of memory. (`sodium_malloc`'ed buffers are
    /// also excluded from dumps by libsodium itself.) Call once at start.
    public static func disableCoreDumps() {
        #if os(Linux)
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        _ = profile_escrow_set_not_dumpable()
        #endif
    }

    /// Replaces the Swift runtime's crash backtracer, which on Linux prints registers and the memory they
    /// point to (secrets live in this memory), with a handler that writes one fixed line and exits with
    /// `128 + signal` at once, for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and SIGTRAP. The runtime's own
    /// message (`Fatal error: …`, PII-free by our errors' design) is still printed before the trap.
    /// Call once at start, before any other thread exists.
    ///
    /// Why handlers rather than re-executing with `SWIFT_BACKTRACE=enable=no`: no second exec (the
    /// command line and environment are not handed over twice), and an operator's own
    /// `SWIFT_BACKTRACE=enable=yes` cannot turn the dump back on, since these handlers replace the
    /// runtime's whatever the environment says.
    @discardableResult
    public static func disableCrashReports() -> Bool {
        #if os(Linux)
        return profile_escrow_install_crash_handlers() == 0
        #else
        return false
        #endif
    }

    /// Makes every file and directory this process creates owner-only (`umask 077`): the database,
    /// its `-wal` and `-shm`, the token file and the keyring hold sealed or secret bytes.
    public static func restrictNewFiles() {
        _ = umask(0o077)
    }
}
