// A disk that loses power and fails, for the fault tests (LD_PRELOAD), in the manner of SQLite's own crash tests:
// the real files hold what the page cache holds; a shadow folder holds what the disk holds, updated only when a
// file or the folder is synced. A "power cut" is the shadow put in place of the real folder.
//
//   cc -O1 -shared -fPIC -o faultshim.so faultshim.c -ldl          (the shim)
//   cc -O1 -DFAULT_TOOL -o faulttool faultshim.c                    (snapshot and restore)
//
// Environment of a process run under the shim:
//   FAULT_DIR     the data folder watched (absolute, no trailing slash): its regular files and the folder itself
//   FAULT_SHADOW  the shadow folder: files/<inode> (each file's synced bytes), names (the folder's entries as last
//                 synced: "<inode> <name>" lines), count (the syncs so far, all processes together), cut (the power
//                 is off)
//   FAULT_CUT_AT  N: the Nth sync of a watched file or of the folder, counted across processes, does not happen:
//                 the power goes off (the shadow stops changing) and the process is killed (SIGKILL). Every later
//                 sync of any process finds the power off and is killed the same way.
//   FAULT_FAIL    op:part:n:errno[:count]: the nth call (n >= 1, counted in this process) of op (write or fsync;
//                 write also means pwrite, pwritev, writev; fsync also fdatasync) on a watched file whose name
//                 contains part ("*" for any) fails with errno (EIO or ENOSPC) without doing anything, and so do the
//                 count-1 matching calls after it (count 0: every one after it); part "/" means the folder itself
//                 (fsync only: its entries as last synced stay on the disk). A failed fsync loses what it did not
//                 write, as Linux does: the bytes stay in the page cache (the real file) but not on the disk (the
//                 shadow), and a later successful fsync does not write them unless they were written again.
//
// faulttool snapshot DIR SHADOW: the shadow made equal to DIR (the disk before the run).
// faulttool restore DIR SHADOW: DIR made equal to the shadow (after the power cut).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int copy_range(int from, int to, off_t start, off_t end) {
    char buffer[65536];
    off_t at = start;
    while (at < end) {
        size_t want = (size_t)(end - at) < sizeof buffer ? (size_t)(end - at) : sizeof buffer;
        ssize_t got = pread(from, buffer, want, at);
        if (got < 0) return -1;
        if (got == 0) break;
        if (pwrite(to, buffer, (size_t)got, at) != got) return -1;
        at += got;
    }
    return 0;
}

static int copy_file(const char *from, const char *to) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    struct stat status;
    int result = fstat(in, &status) == 0 ? copy_range(in, out, 0, status.st_size) : -1;
    close(in);
    close(out);
    return result;
}

// The folder's regular files as "<inode> <name>" lines, written to the shadow's names file at once (rename).
static int write_names(const char *dir, const char *shadow) {
    char temporary[4096], final[4096];
    snprintf(temporary, sizeof temporary, "%s/names.tmp.%d", shadow, (int)getpid());
    snprintf(final, sizeof final, "%s/names", shadow);
    FILE *out = fopen(temporary, "w");
    if (!out) return -1;
    DIR *listing = opendir(dir);
    if (!listing) {
        fclose(out);
        return -1;
    }
    struct dirent *entry;
    while ((entry = readdir(listing))) {
        char path[4096];
        struct stat status;
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        if (lstat(path, &status) == 0 && S_ISREG(status.st_mode))
            fprintf(out, "%llu %s\n", (unsigned long long)status.st_ino, entry->d_name);
    }
    closedir(listing);
    fclose(out);
    return rename(temporary, final);
}

#ifdef FAULT_TOOL

static int snapshot(const char *dir, const char *shadow) {
    char path[4096], copy[4096];
    snprintf(path, sizeof path, "%s/files", shadow);
    mkdir(shadow, 0700);
    mkdir(path, 0700);
    DIR *listing = opendir(dir);
    if (!listing) return -1;
    struct dirent *entry;
    while ((entry = readdir(listing))) {
        struct stat status;
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        if (lstat(path, &status) != 0 || !S_ISREG(status.st_mode)) continue;
        snprintf(copy, sizeof copy, "%s/files/%llu", shadow, (unsigned long long)status.st_ino);
        if (copy_file(path, copy) != 0) return -1;
    }
    closedir(listing);
    snprintf(path, sizeof path, "%s/cut", shadow);
    unlink(path);
    snprintf(path, sizeof path, "%s/count", shadow);
    unlink(path);
    return write_names(dir, shadow);
}

static int restore(const char *dir, const char *shadow) {
    char path[4096], line[4096 + 32];
    // Everything goes, then what the disk held comes back under its synced names.
    DIR *listing = opendir(dir);
    if (!listing) return -1;
    struct dirent *entry;
    while ((entry = readdir(listing))) {
        struct stat status;
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        if (lstat(path, &status) == 0 && S_ISREG(status.st_mode)) unlink(path);
    }
    closedir(listing);
    snprintf(path, sizeof path, "%s/names", shadow);
    FILE *names = fopen(path, "r");
    if (!names) return -1;
    while (fgets(line, sizeof line, names)) {
        unsigned long long inode;
        char name[4096];
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "%llu %4095[^\n]", &inode, name) != 2) continue;
        char source[4096];
        snprintf(source, sizeof source, "%s/files/%llu", shadow, inode);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (access(source, F_OK) == 0) {
            if (copy_file(source, path) != 0) return -1;
        } else {
            // Named on disk, its bytes never synced: an empty file.
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0) return -1;
            close(fd);
        }
        chmod(path, 0600);
    }
    fclose(names);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: faulttool snapshot|restore DIR SHADOW\n");
        return 2;
    }
    int result = -1;
    if (strcmp(argv[1], "snapshot") == 0) result = snapshot(argv[2], argv[3]);
    if (strcmp(argv[1], "restore") == 0) result = restore(argv[2], argv[3]);
    if (result != 0) fprintf(stderr, "faulttool %s: %s\n", argv[1], strerror(errno));
    return result == 0 ? 0 : 1;
}

#else

#include <dlfcn.h>
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static const char *watched_dir, *shadow_dir;
static long cut_at;

static struct {
    int active;
    int is_write;
    char part[256];
    long nth, count, seen;
    int error;
} fault;

// Ranges a failed fsync lost (on no disk, still in the page cache), per inode, until written again.
struct lost {
    unsigned long long inode;
    off_t start, end;
};
static struct lost lost_ranges[4096];
static int lost_count;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

__attribute__((constructor)) static void setup(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_pwritev = dlsym(RTLD_NEXT, "pwritev");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    watched_dir = getenv("FAULT_DIR");
    shadow_dir = getenv("FAULT_SHADOW");
    if (!watched_dir || !shadow_dir || !*watched_dir || !*shadow_dir) watched_dir = shadow_dir = NULL;
    const char *cut = getenv("FAULT_CUT_AT");
    cut_at = cut ? atol(cut) : 0;
    const char *spec = getenv("FAULT_FAIL");
    if (spec && *spec) {
        char op[16] = {0}, error[16] = {0};
        long nth = 0, count = 1;
        int fields = sscanf(spec, "%15[^:]:%255[^:]:%ld:%15[^:]:%ld", op, fault.part, &nth, error, &count);
        if (fields >= 4 && nth >= 1) {
            fault.active = 1;
            fault.is_write = strcmp(op, "write") == 0;
            fault.nth = nth;
            fault.count = count;
            fault.error = strcmp(error, "ENOSPC") == 0 ? ENOSPC : EIO;
        }
    }
}

// Whether fd is the watched folder (2), a file in it (1), or neither (0); name gets the file's name.
static int watched(int fd, char *name, size_t size, unsigned long long *inode) {
    if (!watched_dir) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, target, sizeof target - 1);
    if (length <= 0) return 0;
    target[length] = 0;
    size_t dir_length = strlen(watched_dir);
    struct stat status;
    if (fstat(fd, &status) != 0) return 0;
    *inode = status.st_ino;
    if (strcmp(target, watched_dir) == 0) return S_ISDIR(status.st_mode) ? 2 : 0;
    if (strncmp(target, watched_dir, dir_length) != 0 || target[dir_length] != '/') return 0;
    if (!S_ISREG(status.st_mode)) return 0;
    const char *base = target + dir_length + 1;
    if (strchr(base, '/')) return 0;
    snprintf(name, size, "%s", base);
    char *deleted = strstr(name, " (deleted)");
    if (deleted) *deleted = 0;
    return 1;
}

// Whether this call is one the fault spec fails.
static int injected(int is_write, const char *name) {
    if (!fault.active || fault.is_write != is_write) return 0;
    if (strcmp(fault.part, "*") != 0 && !strstr(name, fault.part)) return 0;
    pthread_mutex_lock(&lock);
    long seen = ++fault.seen;
    pthread_mutex_unlock(&lock);
    if (seen < fault.nth) return 0;
    if (fault.count > 0 && seen >= fault.nth + fault.count) return 0;
    return 1;
}

static void power_off_if_cut(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cut", shadow_dir);
    if (access(path, F_OK) == 0) kill(getpid(), SIGKILL);
}

// Counts one sync across processes; at FAULT_CUT_AT the power goes off.
static void count_sync(void) {
    power_off_if_cut();
    char path[4096];
    snprintf(path, sizeof path, "%s/count", shadow_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    flock(fd, LOCK_EX);
    char text[32] = {0};
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    long count = (got > 0 ? atol(text) : 0) + 1;
    int length = snprintf(text, sizeof text, "%ld\n", count);
    if (ftruncate(fd, 0) == 0) real_pwrite(fd, text, (size_t)length, 0);
    if (cut_at > 0 && count == cut_at) {
        snprintf(path, sizeof path, "%s/cut", shadow_dir);
        int marker = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (marker >= 0) close(marker);
        kill(getpid(), SIGKILL);
    }
    flock(fd, LOCK_UN);
    close(fd);
}

// A write of [start, end) to inode: what it covers is no longer lost.
static void rewritten(unsigned long long inode, off_t start, off_t end) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < lost_count; i++) {
        struct lost *range = &lost_ranges[i];
        if (range->inode != inode || range->end <= start || range->start >= end) continue;
        if (range->start < start && range->end > end && lost_count < 4096) {
            lost_ranges[lost_count++] = (struct lost){inode, end, range->end};
            range->end = start;
        } else if (range->start < start) {
            range->end = start;
        } else if (range->end > end) {
            range->start = end;
        } else {
            range->start = range->end = 0;
        }
    }
    pthread_mutex_unlock(&lock);
}

// The disk's copy of the file made equal to the page cache's, except the ranges a failed fsync lost.
static void synced_file(int fd, unsigned long long inode) {
    char shadow[4096], temporary[4096], self[64];
    snprintf(shadow, sizeof shadow, "%s/files/%llu", shadow_dir, inode);
    snprintf(temporary, sizeof temporary, "%s/files/%llu.tmp.%d", shadow_dir, inode, (int)getpid());
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    pthread_mutex_lock(&lock);
    if (copy_file(self, temporary) == 0) {
        int out = open(temporary, O_WRONLY | O_CLOEXEC);
        int old = open(shadow, O_RDONLY | O_CLOEXEC);
        for (int i = 0; out >= 0 && i < lost_count; i++) {
            struct lost *range = &lost_ranges[i];
            if (range->inode != inode || range->start >= range->end) continue;
            // What the disk had there: the old copy's bytes, zeros past its end.
            static const char zeros[65536];
            for (off_t at = range->start; at < range->end;) {
                size_t want = (size_t)(range->end - at) < sizeof zeros ? (size_t)(range->end - at) : sizeof zeros;
                char buffer[65536];
                ssize_t got = old >= 0 ? pread(old, buffer, want, at) : 0;
                if (got < 0) got = 0;
                if ((size_t)got < want) memset(buffer + got, 0, want - (size_t)got);
                real_pwrite(out, buffer, want, at);
                at += (off_t)want;
            }
            (void)zeros;
        }
        if (old >= 0) close(old);
        if (out >= 0) close(out);
        rename(temporary, shadow);
    }
    pthread_mutex_unlock(&lock);
}

// A failed fsync: whatever differs between the page cache and the disk is lost from the disk.
static void lost_file(int fd, unsigned long long inode) {
    char shadow[4096], self[64];
    snprintf(shadow, sizeof shadow, "%s/files/%llu", shadow_dir, inode);
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    pthread_mutex_lock(&lock);
    int now = open(self, O_RDONLY | O_CLOEXEC);
    int old = open(shadow, O_RDONLY | O_CLOEXEC);
    enum { block = 512 };
    char a[block], b[block];
    off_t at = 0;
    while (now >= 0) {
        ssize_t got = pread(now, a, block, at);
        if (got <= 0) break;
        ssize_t had = old >= 0 ? pread(old, b, (size_t)got, at) : 0;
        if (had != got || memcmp(a, b, (size_t)got) != 0) {
            if (lost_count > 0 && lost_ranges[lost_count - 1].inode == inode && lost_ranges[lost_count - 1].end == at)
                lost_ranges[lost_count - 1].end = at + got;
            else if (lost_count < 4096)
                lost_ranges[lost_count++] = (struct lost){inode, at, at + got};
        }
        at += got;
    }
    if (now >= 0) close(now);
    if (old >= 0) close(old);
    pthread_mutex_unlock(&lock);
}

static ssize_t before_write(int fd, off_t start, size_t length, int positioned) {
    char name[4096];
    unsigned long long inode;
    if (watched(fd, name, sizeof name, &inode) != 1) return 0;
    if (injected(1, name)) {
        errno = fault.error;
        return -1;
    }
    off_t at = positioned ? start : lseek(fd, 0, SEEK_CUR);
    if (at >= 0) rewritten(inode, at, at + (off_t)length);
    return 0;
}

static size_t total(const struct iovec *vectors, int count) {
    size_t sum = 0;
    for (int i = 0; i < count; i++) sum += vectors[i].iov_len;
    return sum;
}

ssize_t write(int fd, const void *buffer, size_t length) {
    if (before_write(fd, 0, length, 0) < 0) return -1;
    return real_write(fd, buffer, length);
}

ssize_t pwrite(int fd, const void *buffer, size_t length, off_t offset) {
    if (before_write(fd, offset, length, 1) < 0) return -1;
    return real_pwrite(fd, buffer, length, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t length, off_t offset) {
    if (before_write(fd, offset, length, 1) < 0) return -1;
    return real_pwrite64(fd, buffer, length, offset);
}

ssize_t writev(int fd, const struct iovec *vectors, int count) {
    if (before_write(fd, 0, total(vectors, count), 0) < 0) return -1;
    return real_writev(fd, vectors, count);
}

ssize_t pwritev(int fd, const struct iovec *vectors, int count, off_t offset) {
    if (before_write(fd, offset, total(vectors, count), 1) < 0) return -1;
    return real_pwritev(fd, vectors, count, offset);
}

static int sync_call(int fd, int (*real)(int)) {
    char name[4096];
    unsigned long long inode;
    int kind = watched(fd, name, sizeof name, &inode);
    if (kind == 0) return real(fd);
    count_sync();
    if (kind == 2) {
        // The folder itself: its name for FAULT_FAIL is "/" (no file's name holds one; "*" never matches it).
        if (strcmp(fault.part, "/") == 0 && injected(0, "/")) {
            errno = fault.error;
            return -1;
        }
        int result = real(fd);
        if (result == 0) {
            pthread_mutex_lock(&lock);
            write_names(watched_dir, shadow_dir);
            pthread_mutex_unlock(&lock);
        }
        return result;
    }
    if (injected(0, name)) {
        lost_file(fd, inode);
        errno = fault.error;
        return -1;
    }
    int result = real(fd);
    if (result == 0) synced_file(fd, inode);
    return result;
}

int fsync(int fd) { return sync_call(fd, real_fsync); }

int fdatasync(int fd) { return sync_call(fd, real_fdatasync); }

#endif
