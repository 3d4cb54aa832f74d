/* tb_pages.c - memory regions with a chosen page size and read-back of what was obtained.
 *
 *   1G, 2M : mmap(MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_1GB/2MB), length rounded up
 *   thp    : 2 MiB-aligned anonymous mmap + madvise(MADV_HUGEPAGE)
 *   4k     : anonymous mmap + madvise(MADV_NOHUGEPAGE) (really 4 KiB even with THP=always)
 *   auto   : 1G, 2M, thp, 4k in that order
 * Nothing is touched here: the kernels first-touch in parallel with the threads that use the
 * memory, then call tb_region_probe() which reads KernelPageSize/AnonHugePages back from
 * /proc/self/smaps.
 */
#include "tb/pages.h"
#include "tb/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TB_MPOL_BIND 2

static const size_t TB_2M = 2UL << 20, TB_1G = 1UL << 30;

int tb_parse_pages(const char *s, tb_pgkind *out)
{
    if (!s)
        return -1;
    if (!strcmp(s, "1G") || !strcmp(s, "1g"))
        *out = TB_PG_1G;
    else if (!strcmp(s, "2M") || !strcmp(s, "2m"))
        *out = TB_PG_2M;
    else if (!strcmp(s, "thp") || !strcmp(s, "THP"))
        *out = TB_PG_THP;
    else if (!strcmp(s, "4k") || !strcmp(s, "4K"))
        *out = TB_PG_4K;
    else if (!strcmp(s, "auto"))
        *out = TB_PG_AUTO;
    else
        return -1;
    return 0;
}

const char *tb_pgkind_name(tb_pgkind k)
{
    switch (k) {
    case TB_PG_1G: return "1G";
    case TB_PG_2M: return "2M";
    case TB_PG_THP: return "thp";
    case TB_PG_4K: return "4k";
    default: return "auto";
    }
}

const char *tb_pgkind_method(tb_pgkind k)
{
    switch (k) {
    case TB_PG_1G: return "hugetlb-1G";
    case TB_PG_2M: return "hugetlb-2M";
    case TB_PG_THP: return "thp";
    case TB_PG_4K: return "4k";
    default: return "none";
    }
}

static long expected_kib(tb_pgkind k)
{
    switch (k) {
    case TB_PG_1G:
    case TB_PG_AUTO: return 1048576;
    case TB_PG_2M:
    case TB_PG_THP: return 2048;
    default: return 4;
    }
}

static void kib_text(long kib, char *b, size_t n)
{
    if (kib >= 1048576 && kib % 1048576 == 0)
        snprintf(b, n, "%ld GiB", kib / 1048576);
    else if (kib >= 1024 && kib % 1024 == 0)
        snprintf(b, n, "%ld MiB", kib / 1024);
    else
        snprintf(b, n, "%ld KiB", kib);
}

static void bytes_text(size_t bytes, char *b, size_t n)
{
    if (bytes >= TB_1G)
        snprintf(b, n, "%.2f GiB", (double)bytes / (double)TB_1G);
    else
        snprintf(b, n, "%.1f MiB", (double)bytes / (double)(1UL << 20));
}

static void note(tb_region *r, const char *fmt, ...)
{
    size_t used = strlen(r->note);
    if (used + 4 >= sizeof r->note)
        return;
    if (used) {
        strcat(r->note, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note + used, sizeof r->note - used, fmt, ap);
    va_end(ap);
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

typedef struct {
    long nr, free, resv;
} hp_counts;

static hp_counts hugetlb_counts(long kib, int node)
{
    char path[160];
    hp_counts c;
    if (node >= 0) {
        snprintf(path, sizeof path,
                 "/sys/devices/system/node/node%d/hugepages/hugepages-%ldkB/nr_hugepages", node,
                 kib);
        c.nr = tb_read_long_file(path);
        snprintf(path, sizeof path,
                 "/sys/devices/system/node/node%d/hugepages/hugepages-%ldkB/free_hugepages", node,
                 kib);
        c.free = tb_read_long_file(path);
        c.resv = 0;
    } else {
        snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%ldkB/nr_hugepages", kib);
        c.nr = tb_read_long_file(path);
        snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%ldkB/free_hugepages",
                 kib);
        c.free = tb_read_long_file(path);
        snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%ldkB/resv_hugepages",
                 kib);
        c.resv = tb_read_long_file(path);
    }
    if (c.nr < 0)
        c.nr = 0;
    if (c.free < 0)
        c.free = 0;
    if (c.resv < 0)
        c.resv = 0;
    return c;
}

/* "reserve them as root: echo N > /sys/.../nr_hugepages" */
static void hugetlb_hint(long kib, int node, size_t len, char *b, size_t n)
{
    hp_counts c = hugetlb_counts(kib, node);
    long need = (long)(len / ((size_t)kib * 1024));
    long in_use = c.nr - (c.free - c.resv);
    if (in_use < 0)
        in_use = 0;
    if (node >= 0)
        snprintf(b, n,
                 "reserve them as root: echo %ld > "
                 "/sys/devices/system/node/node%d/hugepages/hugepages-%ldkB/nr_hugepages",
                 in_use + need, node, kib);
    else
        snprintf(b, n,
                 "reserve them as root: echo %ld > /sys/kernel/mm/hugepages/hugepages-%ldkB/"
                 "nr_hugepages",
                 in_use + need, kib);
}

static int bind_to_node(void *base, size_t len, int node)
{
    unsigned long mask[16];
    if (node < 0 || node >= (int)(sizeof mask * 8))
        return EINVAL;
    memset(mask, 0, sizeof mask);
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_mbind, base, len, TB_MPOL_BIND, mask, (unsigned long)(sizeof mask * 8), 0UL) !=
        0)
        return errno;
    return 0;
}

static void bind_or_note(tb_region *r)
{
    if (r->mem_node < 0)
        return;
    int e = bind_to_node(r->base, r->len, r->mem_node);
    if (e)
        tb_die(1, "mbind of %zu bytes to NUMA node %d failed: %s", r->len, r->mem_node,
               strerror(e));
    note(r, "bound to NUMA node %d (mbind MPOL_BIND)", r->mem_node);
}

/* R takes the anonymous mapping [BASE, BASE+LEN) made for KIND (thp or 4k), advised with
 * ADVICE (named NAME); a note says how (HOW: what else was done to it), then the NUMA binding. */
static void take_advised(tb_region *r, void *base, size_t len, tb_pgkind kind, int advice,
                         const char *name, const char *how)
{
    char sz[32];
    r->base = base;
    r->len = len;
    r->method = kind;
    bytes_text(len, sz, sizeof sz);
    if (madvise(base, len, advice) != 0)
        note(r, "%s: madvise(%s) failed: %s", tb_pgkind_name(kind), name, strerror(errno));
    else
        note(r, "%s: mapped %s%s with madvise(%s)", tb_pgkind_name(kind), sz, how, name);
    bind_or_note(r);
}

void tb_region_alloc(tb_region *r, tb_pgkind req, size_t bytes, int strict, int mem_node)
{
    static const tb_pgkind chain[] = {TB_PG_1G, TB_PG_2M, TB_PG_THP, TB_PG_4K};
    int start = 0;
    memset(r, 0, sizeof *r);
    r->requested = req;
    r->strict = strict && req != TB_PG_AUTO;
    r->mem_node = mem_node;
    r->bytes = bytes ? bytes : 1;
    while (req != TB_PG_AUTO && chain[start] != req)
        start++;
    for (int i = start; i < 4; i++) {
        tb_pgkind k = chain[i];
        int last_chance = r->strict; /* strict: no fallback past the requested kind */
        char sz[32];
        if (k == TB_PG_1G || k == TB_PG_2M) {
            size_t pg = k == TB_PG_1G ? TB_1G : TB_2M;
            long kib = (long)(pg / 1024);
            int flag = k == TB_PG_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB;
            size_t len = round_up(r->bytes, pg);
            hp_counts c = hugetlb_counts(kib, mem_node);
            long need = (long)(len / pg);
            char why[200] = "";
            void *p = MAP_FAILED;
            bytes_text(len, sz, sizeof sz);
            if (mem_node >= 0 && c.free < need) {
                snprintf(why, sizeof why, "only %ld free %s pages on NUMA node %d, %ld needed",
                         c.free, tb_pgkind_name(k), mem_node, need);
            } else {
                p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | flag, -1, 0);
                if (p == MAP_FAILED)
                    snprintf(why, sizeof why,
                             "mmap(MAP_HUGETLB|MAP_HUGE_%s) of %s failed: %s (%ld of %ld reserved "
                             "%s pages free, %ld needed)",
                             k == TB_PG_1G ? "1GB" : "2MB", sz, strerror(errno), c.free - c.resv,
                             c.nr, tb_pgkind_name(k), need);
            }
            if (p == MAP_FAILED) {
                if (last_chance) {
                    char hint[256];
                    hugetlb_hint(kib, mem_node, len, hint, sizeof hint);
                    tb_die(TB_EXIT_PAGES, "requested %s pages but got none: %s; %s",
                           tb_pgkind_name(req), why, hint);
                }
                note(r, "%s: %s", tb_pgkind_name(k), why);
                continue;
            }
            r->base = p;
            r->len = len;
            r->method = k;
            note(r, "%s: mapped %s with MAP_HUGETLB|MAP_HUGE_%s", tb_pgkind_name(k), sz,
                 k == TB_PG_1G ? "1GB" : "2MB");
            bind_or_note(r);
            return;
        }
        if (k == TB_PG_THP) {
            size_t len = round_up(r->bytes, TB_2M);
            char *p = mmap(NULL, len + TB_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
            if (p == MAP_FAILED) {
                note(r, "thp: mmap of %zu bytes failed: %s", len, strerror(errno));
                if (last_chance)
                    tb_die(1, "cannot map %zu bytes: %s", len, strerror(errno));
                continue;
            }
            char *a = (char *)round_up((size_t)p, TB_2M);
            if (a > p)
                munmap(p, (size_t)(a - p));
            if (a + len < p + len + TB_2M)
                munmap(a + len, (size_t)(p + len + TB_2M - (a + len)));
            take_advised(r, a, len, TB_PG_THP, MADV_HUGEPAGE, "MADV_HUGEPAGE", " 2 MiB-aligned");
            return;
        }
        /* 4k */
        size_t len = round_up(r->bytes, 4096);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            tb_die(1, "cannot map %zu bytes: %s", len, strerror(errno));
        take_advised(r, p, len, TB_PG_4K, MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE", "");
        return;
    }
}

static void thp_hint(char *b, size_t n)
{
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = '\0';
        fclose(f);
    }
    if (strstr(mode, "[never]"))
        snprintf(b, n, "THP is disabled; enable it as root: echo madvise > "
                       "/sys/kernel/mm/transparent_hugepage/enabled");
    else
        snprintf(b, n, "no free 2 MiB blocks for THP (fragmented memory?); as root try: echo 1 > "
                       "/proc/sys/vm/compact_memory, or use --pages 2M");
}

void tb_region_probe(tb_region *r)
{
    long kps = -1, ahp = -1, rss = -1;
    char got[32], want[32];
    if (tb_smaps_lookup(r->base, &kps, &ahp, &rss) != 0)
        note(r, "mapping not found in /proc/self/smaps");
    r->anon_huge_kib = ahp;
    r->rss_kib = rss;
    switch (r->method) {
    case TB_PG_1G:
    case TB_PG_2M: r->kib = kps > 0 ? kps : expected_kib(r->method); break;
    case TB_PG_THP:
        r->kib = (ahp > 0 && 2 * ahp >= rss) ? 2048 : (kps > 0 ? kps : 4);
        note(r, "smaps after first touch: AnonHugePages %ld kB of Rss %ld kB", ahp, rss);
        break;
    default: r->kib = kps > 0 ? kps : 4; break;
    }
    long exp = expected_kib(r->requested);
    tb_pgkind want_method = r->requested == TB_PG_AUTO ? TB_PG_1G : r->requested;
    r->fallback = r->method != want_method || r->kib != exp;
    kib_text(r->kib, got, sizeof got);
    kib_text(exp, want, sizeof want);
    note(r, "got %s pages (%s)%s", got, tb_pgkind_method(r->method),
         r->fallback ? (r->requested == TB_PG_AUTO ? ", fell back from 1G" : ", a fallback")
                     : "");
    if (r->strict && r->kib != exp) {
        char hint[256];
        if (r->requested == TB_PG_THP)
            thp_hint(hint, sizeof hint);
        else
            hugetlb_hint(exp, r->mem_node, r->len, hint, sizeof hint);
        tb_die(TB_EXIT_PAGES, "requested %s pages but got %s (%s); %s",
               tb_pgkind_name(r->requested), got, tb_pgkind_method(r->method), hint);
    }
}

void tb_region_free(tb_region *r)
{
    if (r->base)
        munmap(r->base, r->len);
    r->base = NULL;
}

void tb_json_pages(tb_json *j, const tb_region *r)
{
    tbj_obj_begin(j, "pages");
    tbj_str(j, "requested", tb_pgkind_name(r->requested));
    tbj_int(j, "kib", r->kib);
    tbj_bool(j, "fallback", r->fallback);
    tbj_str(j, "note", r->note);
    tbj_str(j, "method", tb_pgkind_method(r->method));
    tbj_int(j, "bytes", (long long)r->len);
    tbj_int(j, "anon_huge_kib", r->anon_huge_kib);
    tbj_bool(j, "strict", r->strict);
    if (r->mem_node >= 0)
        tbj_int(j, "mem_node", r->mem_node);
    else
        tbj_null(j, "mem_node");
    tbj_obj_end(j);
}
