#include <sodium.h>
#include <sys/prctl.h>
#include <sys/resource.h>

/// prctl is variadic and does not import into Swift: wrap the one call we make.
static inline int profile_escrow_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
