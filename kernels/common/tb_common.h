/*
 * tb_common.h - shared helpers of the topobind kernels.
 *
 *  - wall-clock timing (clock_gettime(CLOCK_MONOTONIC))
 *  - argument parsing helpers (sizes with suffixes, lists, page kinds)
 *  - a tiny JSON writer (escaped strings, nested objects/arrays, round-trip doubles)
 *  - the result envelope of topobind.result/1 (header, pages, placement, metrics, ...)
 *  - memory regions with a chosen page size (--pages 1G|2M|thp|4k|auto) and the
 *    read-back of the page size really obtained from /proc/self/smaps
 *  - placement: CPU (OS index), NUMA node and affinity mask of every OpenMP thread,
 *    rank and rank count from the launcher environment (tb_env.h, included here: also
 *    "{rank}"/"{pid}" in paths; shared with rankstep/'s rankexec and hugepage shim)
 *  - main() scaffolding (tb_kernel.c): the shared options, arrays in one region and
 *    their parallel first touch, the envelope's end
 */
#ifndef TB_COMMON_H
#define TB_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <getopt.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

#include "tb_env.h" /* tb_env_rank, tb_env_ranks, tb_expand_path */

#define TB_SCHEMA "topobind.result/1"

/* Exit statuses shared by every kernel. */
#define TB_EXIT_USAGE 2 /* bad command line */
#define TB_EXIT_PAGES 3 /* --strict and the requested page size was not obtained */
#define TB_EXIT_INVALID 4 /* the run completed but its result does not validate */

/* ---------------------------------------------------------------- misc */
extern const char *tb_prog; /* program name used in error messages */

double tb_now(void); /* seconds, CLOCK_MONOTONIC */
void tb_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* "prog: error: <msg>; see 'prog --help'" and exit 2 */
void tb_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *tb_xmalloc(size_t n);
void *tb_xcalloc(size_t n, size_t sz);

/* ---------------------------------------------------------------- arguments */
/* Integer count with optional decimal suffix k/M/G (1e3/1e6/1e9); "20M" = 20000000. */
long long tb_parse_count(const char *opt, const char *s, long long min, long long max);
/* Byte size with optional binary suffix K/M/G/T (KiB...), "16K" = 16384, "1G" = 2^30. */
long long tb_parse_bytes(const char *opt, const char *s);
double tb_parse_double(const char *opt, const char *s, double min, double max);
/* CPU/node list "0,2,4-7" -> malloc'ed array; returns the count. */
int tb_list_parse(const char *s, int **out); /* -1 on a malformed list, never exits */
int tb_parse_intlist(const char *opt, const char *s, int **out);
/* Format a byte count as the short label used in metric names ("16K", "2M", "1G", "1536K"). */
void tb_bytes_label(long long bytes, char *buf, size_t len);

/* ---------------------------------------------------------------- JSON writer */
typedef struct {
    char *buf;
    size_t len, cap;
    int depth;
    unsigned char first[64]; /* first[depth]: no element written yet at this level */
} tb_json;

void tbj_init(tb_json *j);
void tbj_free(tb_json *j);
void tbj_obj_begin(tb_json *j, const char *key); /* key NULL inside arrays / at top level */
void tbj_obj_end(tb_json *j);
void tbj_arr_begin(tb_json *j, const char *key);
void tbj_arr_end(tb_json *j);
void tbj_str(tb_json *j, const char *key, const char *s); /* s NULL -> null */
void tbj_dbl(tb_json *j, const char *key, double v);      /* non-finite -> null */
void tbj_int(tb_json *j, const char *key, long long v);
void tbj_bool(tb_json *j, const char *key, int v);
void tbj_null(tb_json *j, const char *key);
void tbj_dbl_array(tb_json *j, const char *key, const double *v, int n);
void tbj_int_array(tb_json *j, const char *key, const int *v, int n);
void tbj_cpuset(tb_json *j, const char *key, const cpu_set_t *set); /* list of OS indexes */

/* Write the document plus '\n' with ONE write(2) to stdout (path NULL or "-"),
 * or atomically to path (temp file in the same directory + fsync + rename).
 * "{rank}" and "{pid}" in path are expanded (tb_expand_path); too long once expanded: exit 1. */
void tb_emit(tb_json *j, const char *path);

/* ---------------------------------------------------------------- run envelope */
typedef struct {
    const char *kernel;
    char host[256];
    char timestamp[32]; /* UTC ISO 8601 of the run's start */
    int rank, ranks;    /* from the launcher environment */
    int threads;        /* OpenMP threads per rank (the kernel may overwrite before writing) */
} tb_run;

void tb_run_start(tb_run *r, const char *kernel);
/* Opens the top-level object and writes schema, kernel, host, timestamp, layout, ranks, threads. */
void tb_json_header(tb_json *j, const tb_run *r);
/* A metric: stats over trials[skip..n) (all of them when skip >= n).
 * best = max if higher_is_better else min. */
void tb_json_metric(tb_json *j, const char *name, const char *unit, int higher_is_better,
                    const double *trials, int n, int skip);
void tb_stats(const double *v, int n, double *min, double *max, double *avg, double *median);
void tb_json_headline(tb_json *j, const char *metric, const char *stat, double value,
                      const char *unit, int higher_is_better);
/* values[r*ncols+c], NaN written as null. */
void tb_json_matrix(tb_json *j, const char *name, const char *unit, const char *row_kind,
                    const char *col_kind, const int *rows, int nrows, const int *cols, int ncols,
                    const double *values);

/* ---------------------------------------------------------------- placement */
typedef struct {
    int rank, thread, cpu, numa;
    cpu_set_t affinity;
} tb_place;

int tb_numa_of_cpu(int cpu); /* from /sys/devices/system/cpu/cpuN/nodeM; 0 if unknown */
void tb_place_self(tb_place *p, int rank, int thread);
/* One entry per OpenMP thread of a parallel region of omp_get_max_threads() threads;
 * returns the count, *out malloc'ed. */
int tb_place_omp(int rank, tb_place **out);
/* "placement": [...]; with_affinity adds "affinity", host (non-NULL) adds "host". */
void tb_json_placement(tb_json *j, const tb_place *p, int n, int with_affinity,
                       const char *host);
void tb_json_place_entry(tb_json *j, const tb_place *p, int with_affinity, const char *host);
/* Pin the calling thread to one CPU (OS index); returns 0 or errno. */
int tb_pin_self(int cpu);
/* CPUs (OS indexes) of the process affinity mask; returns the count, *out malloc'ed. */
int tb_process_cpus(int **out);
/* NUMA nodes present (with CPUs if need_cpus, with memory otherwise). */
int tb_numa_nodes(int need_cpus, int **out);
/* CPUs of NUMA node `node` that are in the process affinity mask. */
int tb_node_cpus(int node, int **out);
/* Total size in bytes of the distinct last-level cache instances (0 if unknown). */
long long tb_llc_total_bytes(void);

/* ---------------------------------------------------------------- memory with page control */
/* mmap(2)'s hugetlb page-size flags, for C libraries whose headers predate them (used by
 * tb_pages.c and the LD_PRELOAD shim rankstep/hugepreload.c: macros only, nothing to link). */
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

typedef enum { TB_PG_AUTO = 0, TB_PG_1G, TB_PG_2M, TB_PG_THP, TB_PG_4K } tb_pgkind;

typedef struct {
    tb_pgkind requested;
    tb_pgkind method;    /* how the mapping was finally made */
    int strict;
    int mem_node;        /* NUMA node the mapping is bound to, -1 = default policy */
    void *base;          /* start of the mapping (aligned to the page size) */
    size_t bytes;        /* bytes asked for */
    size_t len;          /* mapping length (rounded up to the page size) */
    long kib;            /* page size obtained (read back after first touch), KiB */
    long anon_huge_kib;  /* AnonHugePages of the mapping (THP) */
    long rss_kib;        /* Rss of the mapping */
    int fallback;        /* the requested page size was not obtained */
    char note[1024];     /* what was tried */
} tb_region;

int tb_parse_pages(const char *s, tb_pgkind *out); /* 0 ok, -1 unknown */
const char *tb_pgkind_name(tb_pgkind k);         /* "1G", "2M", "thp", "4k", "auto" */
const char *tb_pgkind_method(tb_pgkind k);       /* "hugetlb-1G", "hugetlb-2M", "thp", "4k" */
/* Map `bytes` (not touched). Exits 3 with a one-line hint if strict and the requested
 * hugetlb pages cannot be mapped. mem_node >= 0: bind the mapping to that NUMA node
 * (mbind MPOL_BIND, before the first touch) and only use hugetlb pages free on it. */
void tb_region_alloc(tb_region *r, tb_pgkind req, size_t bytes, int strict, int mem_node);
/* After the first touch: read back the page size from /proc/self/smaps, set kib, fallback
 * and note. Exits 3 with a hint if strict and the page size is not the requested one. */
void tb_region_probe(tb_region *r);
void tb_region_free(tb_region *r);
void tb_json_pages(tb_json *j, const tb_region *r); /* "pages": {...} */

/* Malloc-free lookup of the mapping containing addr in /proc/self/smaps.
 * Returns 0 when found; values in kB (-1 when the field is missing). */
int tb_smaps_lookup(const void *addr, long *kernel_page_kib, long *anon_huge_kib, long *rss_kib);
/* Read a long from a sysfs/procfs file, -1 on error. */
long tb_read_long_file(const char *path);

/* ---------------------------------------------------------------- main() scaffolding */
/* The options the kernels share; put the TB_OPTION_* entries in the kernel's option table,
 * loop with tb_getopt() and hand every code the kernel does not handle to
 * tb_common_option() (its `default:`), then call tb_no_operands(). */
typedef struct {
    tb_pgkind pages;  /* --pages (TB_PG_AUTO when not given) */
    int strict;       /* --strict */
    const char *json; /* --json FILE (NULL: stdout) */
} tb_opts;
enum { TB_OPT_PAGES = 0x100, TB_OPT_STRICT, TB_OPT_JSON };
#define TB_OPTION_PAGES {"pages", required_argument, 0, TB_OPT_PAGES}
#define TB_OPTION_STRICT {"strict", no_argument, 0, TB_OPT_STRICT}
#define TB_OPTION_JSON {"json", required_argument, 0, TB_OPT_JSON}
#define TB_OPTION_HELP {"help", no_argument, 0, 'h'}

int tb_getopt(int argc, char **argv, const struct option *opts); /* getopt_long, quiet */
/* --pages/--strict/--json into *c; --help: help(stdout) and exit 0; a missing value or an
 * unknown option: exit 2 with one line (tb_usage_error). */
void tb_common_option(int o, tb_opts *c, char **argv, void (*help)(FILE *));
void tb_no_operands(int argc, char **argv); /* exit 2 on an argument left after the options */
/* `count` page-aligned arrays of `elems` doubles in one region with the --pages/--strict of
 * *c (not touched: first touch is the kernel's). */
void tb_alloc_arrays(tb_region *reg, const tb_opts *c, long long elems, int count,
                     double **arrays);
/* First touch in parallel: each OpenMP thread writes value(k, i, ctx) into arrays[k][i] for
 * the static block it computes on later (tb_static_range); returns the team size. */
int tb_first_touch(long long elems, double **arrays, int count,
                   double (*value)(int array, long long i, const void *ctx), const void *ctx);
/* The envelope's end: "valid", "validation", close, write (tb_emit to path), free; returns
 * the kernel's exit status (0, or TB_EXIT_INVALID when not valid). */
int tb_json_end(tb_json *j, int valid, const char *validation, const char *path);

/* Static block partition used for first touch AND compute loops (same as OpenMP
 * schedule(static) without chunk: the first n%nth threads get one more element). */
static inline void tb_static_range(long long n, int tid, int nth, long long *lo, long long *hi)
{
    long long q = n / nth, r = n % nth;
    *lo = (long long)tid * q + (tid < r ? tid : r);
    *hi = *lo + q + (tid < r ? 1 : 0);
}

/* splitmix64 pseudo-random generator */
static inline uint64_t tb_rand64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

#endif
