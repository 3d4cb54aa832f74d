/* tb_smaps.c - malloc-free readers of /proc/self/smaps and small sysfs files.
 * Also linked into the LD_PRELOAD shim, where calling malloc is not allowed. */
#include "tb/smaps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long tb_read_long_file(const char *path)
{
    char b[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0)
        return -1;
    b[n] = '\0';
    char *end;
    long v = strtol(b, &end, 10);
    return end == b ? -1 : v;
}

static int is_header(const char *line)
{
    /* "7f12a0000000-7f12e0000000 rw-p ..." ; field lines start with an upper-case letter */
    return (line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f');
}

static long field_kb(const char *line, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || line[n] != ':')
        return -2;
    return strtol(line + n + 1, NULL, 10);
}

int tb_smaps_lookup(const void *addr, long *kernel_page_kib, long *anon_huge_kib, long *rss_kib)
{
    uintptr_t a = (uintptr_t)addr;
    char chunk[8192], line[512];
    size_t ll = 0;
    int in_target = 0, found = 0, done = 0;
    long kps = -1, ahp = -1, rss = -1;
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (!done) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n && !done; i++) {
            char c = chunk[i];
            if (c != '\n') {
                if (ll + 1 < sizeof line)
                    line[ll++] = c;
                continue;
            }
            line[ll] = '\0';
            ll = 0;
            if (is_header(line)) {
                if (in_target) {
                    done = 1;
                    break;
                }
                char *end;
                uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
                if (*end != '-')
                    continue;
                uintptr_t hi = (uintptr_t)strtoull(end + 1, NULL, 16);
                if (a >= lo && a < hi)
                    in_target = found = 1;
                continue;
            }
            if (!in_target)
                continue;
            long v;
            if ((v = field_kb(line, "KernelPageSize")) != -2)
                kps = v;
            else if ((v = field_kb(line, "AnonHugePages")) != -2)
                ahp = v;
            else if ((v = field_kb(line, "Rss")) != -2)
                rss = v;
        }
    }
    close(fd);
    if (kernel_page_kib)
        *kernel_page_kib = kps;
    if (anon_huge_kib)
        *anon_huge_kib = ahp;
    if (rss_kib)
        *rss_kib = rss;
    return found ? 0 : -1;
}
