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

    /// The environment value that turns Swift's runtime backtracer off.
    public static let backtraceDisabled = "enable=no"

    /// Turns off Swift's runtime backtracer, which on a crash prints registers and the memory they point to
    /// (secrets and profiles included), core dumps or not. The runtime reads `SWIFT_BACKTRACE` once, before
    /// `main`, so a process started without `SWIFT_BACKTRACE=enable=no` sets it and replaces itself
    /// (`execv` of `/proc/self/exe` with the same arguments): the one way to turn it off from inside. Returns
    /// only when the backtracer is already off (or the re-exec failed: then the process goes on, with it on).
    public static func disableCrashBacktraces() {
        #if os(Linux)
        if let value = getenv("SWIFT_BACKTRACE"), String(cString: value) == backtraceDisabled { return }
        setenv("SWIFT_BACKTRACE", backtraceDisabled, 1)
        let arguments = CommandLine.unsafeArgv
        _ = execv("/proc/self/exe", arguments)
        #endif
    }

    /// Makes every file and directory this process creates owner-only (`umask 077`): the database,
    /// its `-wal` and `-shm`, the token file and the keyring hold sealed or secret bytes.
    public static func restrictNewFiles() {
        _ = umask(0o077)
    }
}
