#include <sodium.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/// prctl is variadic and does not import into Swift: wrap the one call we make.
static inline int profile_escrow_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/// Names the calling thread (at most 15 bytes show), as `top -H` and /proc/<pid>/task/<tid>/comm show it.
static inline int profile_escrow_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}

/// The crash handler: one fixed line on stderr, then `_exit(128 + signal)` at once. Only
/// async-signal-safe calls (write, _exit); it reads nothing from the crashed state, so no register or
/// memory contents can reach a crash report. It replaces the Swift runtime's backtracer, which on
/// Linux prints registers and the memory they point to.
static void profile_escrow_crash_handler(int signal_number) {
    static const char message[] = "profile-escrow: fatal signal; exiting without a crash report\n";
    ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)ignored;
    _exit(128 + signal_number);
}

/// Installs the crash handler for every signal a crash raises. Returns 0, or -1 when one sigaction failed.
static inline int profile_escrow_install_crash_handlers(void) {
    static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = profile_escrow_crash_handler;
    sigfillset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    int result = 0;
    for (unsigned i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
        if (sigaction(signals[i], &action, NULL) != 0) result = -1;
    }
    return result;
}
