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

    /// Makes every file and directory this process creates owner-only (`umask 077`): the database,
    /// its `-wal` and `-shm`, the token file and the keyring hold sealed or secret bytes.
    public static func restrictNewFiles() {
        _ = umask(0o077)
    }
}
