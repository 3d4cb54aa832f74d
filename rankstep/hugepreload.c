/*
 * hugepreload.c - LD_PRELOAD shim serving large allocations from hugetlb pages.
 *
 *   LD_PRELOAD=rankstep/bin/libtbhugepages.so TOPOBIND_HUGE_PAGES=1G ./xhpl
 *
 * Allocations of at least TOPOBIND_HUGE_MIN bytes (default 64M; suffixes K/M/G = KiB/MiB/GiB)
 * made through malloc, calloc, realloc, posix_memalign, aligned_alloc or memalign are served
 * by mmap(MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_1GB) (TOPOBIND_HUGE_PAGES=1G, the
 * default) or MAP_HUGE_2MB (=2M); when the kernel refuses, 1G falls back to 2M and then to a
 * plain mmap (TOPOBIND_HUGE_VERBOSE=1 prints one note on stderr the first time). Smaller
 * allocations go to the real allocator (dlsym(RTLD_NEXT, ...)).
 *
 * Each huge block starts with a 64-byte header (base, mapping length, usable size) right
 * before the pointer returned; live huge pointers are also kept in a lock-free registry, so
 * free/realloc never read memory in front of a pointer they did not hand out.
 *
 * TOPOBIND_HUGE_REPORT=path writes at exit a small JSON (schema topobind.hugepreload/1) with
 * the number of huge allocations, their bytes and the page size obtained, read back from
 * /proc/self/smaps ({pid} and {rank} in the path are expanded by tb_expand_path, as the kernels'
 * --json FILE is: the rank from OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID,
 * the first that holds a number 0 .. 100000000, else 0; libtb/src/tb_env.c).
 */
#include "tb/env.h"
#include "tb/pages.h"
#include "tb/smaps.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HDR 64
#define MAGIC 0x7462687567657061ULL /* "tbhugepa" */
#define MAX_LIVE 1024
#define MAX_RECORDS 64
#define EXPORT __attribute__((visibility("default")))

typedef struct {
    uint64_t magic;
    void *base;
    size_t maplen;
    size_t usable;
    uint64_t check;
} hdr_t;

/* real allocator */
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static size_t (*real_usable)(void *);

/* bootstrap buffer for allocations made while dlsym resolves the real functions */
static _Alignas(64) char boot[1 << 16];
static atomic_size_t boot_used;
static atomic_int resolving;

/* configuration */
static size_t threshold = 64UL << 20;
static int pref_1g = 1, verbose = 0;
static char report_path[4096];

/* registry of live huge pointers (lock-free lookup) */
static _Atomic(uintptr_t) live[MAX_LIVE];
static atomic_int live_high; /* slots [0, live_high) may be in use */
static atomic_int live_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* statistics (under lock) */
typedef struct {
    size_t bytes, mapped;
    long kib;
    const char *method;
} record_t;
static record_t records[MAX_RECORDS];
static long n_huge, n_fallback;
static size_t bytes_huge, bytes_mapped;
static long kib_min = -1, kib_max = -1;
static atomic_int noted;

static void note_once(const char *fmt, ...)
{
    if (!verbose || atomic_exchange(&noted, 1))
        return;
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof b - 1)
        n = (int)sizeof b - 1;
    if (n > 0 && write(2, b, (size_t)n) < 0)
        return;
}

static size_t parse_size(const char *s, size_t dflt)
{
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return dflt;
    switch (*end) {
    case 'k':
    case 'K': v <<= 10; break;
    case 'm':
    case 'M': v <<= 20; break;
    case 'g':
    case 'G': v <<= 30; break;
    default: break;
    }
    return v ? (size_t)v : dflt;
}

static void resolve(void)
{
    if (real_malloc || atomic_load(&resolving))
        return;
    atomic_store(&resolving, 1);
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    real_usable = dlsym(RTLD_NEXT, "malloc_usable_size");
    threshold = parse_size(getenv("TOPOBIND_HUGE_MIN"), 64UL << 20);
    const char *pg = getenv("TOPOBIND_HUGE_PAGES");
    pref_1g = !(pg && (!strcmp(pg, "2M") || !strcmp(pg, "2m")));
    const char *v = getenv("TOPOBIND_HUGE_VERBOSE");
    verbose = v && *v && strcmp(v, "0") != 0;
    const char *rp = getenv("TOPOBIND_HUGE_REPORT");
    if (rp && *rp && strlen(rp) < sizeof report_path)
        strcpy(report_path, rp);
    atomic_store(&resolving, 0);
}

__attribute__((constructor)) static void init(void) { resolve(); }

/* ---- bootstrap allocator: 16-byte size header, never freed */
static void *boot_alloc(size_t n)
{
    size_t need = (n + 15) / 16 * 16 + 16;
    size_t off = atomic_fetch_add(&boot_used, need);
    if (off + need > sizeof boot)
        return NULL;
    *(size_t *)(boot + off) = n;
    return boot + off + 16;
}

static int is_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

/* ---- registry */
static int find_live(const void *p)
{
    if (!p || atomic_load_explicit(&live_count, memory_order_acquire) == 0)
        return -1;
    int hi = atomic_load_explicit(&live_high, memory_order_acquire);
    for (int i = 0; i < hi; i++)
        if (atomic_load_explicit(&live[i], memory_order_acquire) == (uintptr_t)p)
            return i;
    return -1;
}

static int add_live(void *p)
{
    pthread_mutex_lock(&lock);
    int hi = atomic_load(&live_high), slot = -1;
    for (int i = 0; i < hi && slot < 0; i++)
        if (atomic_load(&live[i]) == 0)
            slot = i;
    if (slot < 0 && hi < MAX_LIVE) {
        slot = hi;
        atomic_store(&live_high, hi + 1);
    }
    if (slot >= 0) {
        atomic_store(&live[slot], (uintptr_t)p);
        atomic_fetch_add(&live_count, 1);
    }
    pthread_mutex_unlock(&lock);
    return slot;
}

static hdr_t *header_of(void *user) { return (hdr_t *)((char *)user - HDR); }

/* ---- huge allocation */
static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void *huge_alloc(size_t size, size_t align)
{
    static const size_t G = 1UL << 30, M2 = 2UL << 20;
    if (align < 16)
        align = 16;
    typedef struct {
        size_t pg;
        int flags;
        const char *method;
    } try_t;
    try_t tries[3];
    int nt = 0, first_errno = 0;
    if (pref_1g)
        tries[nt++] = (try_t){G, MAP_HUGETLB | MAP_HUGE_1GB, "hugetlb-1G"};
    tries[nt++] = (try_t){M2, MAP_HUGETLB | MAP_HUGE_2MB, "hugetlb-2M"};
    tries[nt++] = (try_t){4096, 0, "mmap-4k"};
    for (int t = 0; t < nt; t++) {
        size_t extra = align > tries[t].pg ? align : 0;
        if (size > SIZE_MAX - HDR - extra - tries[t].pg)
            return NULL;
        size_t len = round_up(HDR + size + extra, tries[t].pg);
        char *base = mmap(NULL, len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | tries[t].flags, -1, 0);
        if (base == MAP_FAILED) {
            if (t == 0)
                first_errno = errno;
            continue;
        }
        if (t > 0)
            note_once("libtbhugepages: %s pages refused for a %zu MiB allocation (mmap: %s); "
                      "fell back to %s (reserve pages in "
                      "/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages)\n",
                      tries[0].method + 8, size >> 20, strerror(first_errno), tries[t].method);
        uintptr_t u = ((uintptr_t)base + HDR + align - 1) / align * align;
        char *user = (char *)u;
        hdr_t *h = header_of(user);
        h->magic = MAGIC;
        h->base = base;
        h->maplen = len;
        h->usable = (size_t)(base + len - user);
        h->check = MAGIC ^ (uint64_t)(uintptr_t)base ^ (uint64_t)len;
        if (add_live(user) < 0) { /* registry full: let the real allocator do it */
            munmap(base, len);
            return NULL;
        }
        long kps = -1;
        tb_smaps_lookup(user, &kps, NULL, NULL);
        pthread_mutex_lock(&lock);
        if (n_huge < MAX_RECORDS)
            records[n_huge] = (record_t){size, len, kps, tries[t].method};
        n_huge++;
        n_fallback += (t > 0);
        bytes_huge += size;
        bytes_mapped += len;
        if (kps > 0 && (kib_min < 0 || kps < kib_min))
            kib_min = kps;
        if (kps > kib_max)
            kib_max = kps;
        pthread_mutex_unlock(&lock);
        return user;
    }
    return NULL;
}

static void huge_free(void *user, int slot)
{
    hdr_t *h = header_of(user);
    void *base = h->base;
    size_t len = h->maplen;
    atomic_store(&live[slot], 0);
    atomic_fetch_sub(&live_count, 1);
    munmap(base, len);
}

/* ---- overrides */
EXPORT void *malloc(size_t n)
{
    if (!real_malloc) {
        resolve();
        if (!real_malloc)
            return boot_alloc(n);
    }
    if (n >= threshold) {
        void *p = huge_alloc(n, 16);
        if (p)
            return p;
    }
    return real_malloc(n);
}

EXPORT void *calloc(size_t n, size_t sz)
{
    if (!real_calloc) {
        resolve();
        if (!real_calloc) {
            if (sz && n > SIZE_MAX / sz)
                return NULL;
            return boot_alloc(n * sz); /* static buffer: already zero */
        }
    }
    if (sz && n > SIZE_MAX / sz) {
        errno = ENOMEM;
        return NULL;
    }
    if (n * sz >= threshold) {
        void *p = huge_alloc(n * sz, 16); /* anonymous mappings are zero-filled */
        if (p)
            return p;
    }
    return real_calloc(n, sz);
}

EXPORT void free(void *p)
{
    if (!p || is_boot(p))
        return;
    int slot = find_live(p);
    if (slot >= 0) {
        huge_free(p, slot);
        return;
    }
    if (!real_free)
        resolve();
    if (real_free)
        real_free(p);
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (is_boot(p))
        return *(size_t *)((char *)p - 16);
    if (find_live(p) >= 0)
        return header_of(p)->usable;
    if (!real_usable)
        resolve();
    return real_usable ? real_usable(p) : 0;
}

EXPORT void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t old;
    int slot = -1;
    if (is_boot(p))
        old = *(size_t *)((char *)p - 16);
    else if ((slot = find_live(p)) >= 0) {
        old = header_of(p)->usable;
        if (n <= old)
            return p;
    } else {
        if (!real_realloc)
            resolve();
        if (n < threshold)
            return real_realloc(p, n);
        old = real_usable ? real_usable(p) : 0;
    }
    void *q = malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, old < n ? old : n);
    free(p);
    return q;
}

static int pow2(size_t a) { return a && !(a & (a - 1)); }

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (!pow2(align) || align % sizeof(void *))
        return EINVAL;
    if (!real_posix_memalign)
        resolve();
    if (n >= threshold) {
        void *p = huge_alloc(n, align);
        if (p) {
            *out = p;
            return 0;
        }
    }
    return real_posix_memalign(out, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (!real_aligned_alloc)
        resolve();
    if (n >= threshold && pow2(align)) {
        void *p = huge_alloc(n, align);
        if (p)
            return p;
    }
    return real_aligned_alloc(align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    if (!real_memalign)
        resolve();
    if (n >= threshold && pow2(align)) {
        void *p = huge_alloc(n, align);
        if (p)
            return p;
    }
    return real_memalign(align, n);
}

/* ---- report at exit */
#define APPEND(...)                                                                           \
    do {                                                                                      \
        if (used < sizeof buf)                                                                \
            used += (size_t)snprintf(buf + used, sizeof buf - used, __VA_ARGS__);             \
    } while (0)

__attribute__((destructor)) static void report(void)
{
    if (!report_path[0])
        return;
    static char buf[16384];
    size_t used = 0;
    char path[4096], tmp[4200];
    pthread_mutex_lock(&lock);
    APPEND("{\"schema\":\"topobind.hugepreload/1\",\"pid\":%ld,\"requested\":\"%s\","
           "\"threshold_bytes\":%zu,\"huge_allocations\":%ld,\"bytes\":%zu,\"mapped_bytes\":%zu,",
           (long)getpid(), pref_1g ? "1G" : "2M", threshold, n_huge, bytes_huge, bytes_mapped);
    if (kib_min > 0)
        APPEND("\"page_kib\":%ld,\"page_kib_max\":%ld,", kib_min, kib_max);
    else
        APPEND("\"page_kib\":null,\"page_kib_max\":null,");
    APPEND("\"fallbacks\":%ld,\"live_at_exit\":%d,\"allocations\":[", n_fallback,
           atomic_load(&live_count));
    for (long i = 0; i < n_huge && i < MAX_RECORDS; i++)
        APPEND("%s{\"bytes\":%zu,\"mapped\":%zu,\"kib\":%ld,\"method\":\"%s\"}", i ? "," : "",
               records[i].bytes, records[i].mapped, records[i].kib, records[i].method);
    APPEND("]}\n");
    pthread_mutex_unlock(&lock);
    if (used >= sizeof buf)
        return;
    if (tb_expand_path(report_path, path, sizeof path) != 0) {
        static const char msg[] = "topobind hugepreload: TOPOBIND_HUGE_REPORT is too long once "
                                  "{rank} and {pid} are expanded: no report written\n";
        if (verbose)
            (void)!write(2, msg, sizeof msg - 1); /* a note at exit: nothing to do if it fails */
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, buf, used);
    fsync(fd);
    close(fd);
    if (w == (ssize_t)used)
        rename(tmp, path);
    else
        unlink(tmp);
}
