/*
 * tb/kernel.h - what the benchmark kernels (kernels/NAME.c) and the placement probe share, on top
 * of the rest of libtb (included here: util, env, json, pages, place, smaps):
 *  - the result envelope of topobind.result/1 (header, metrics, headline, matrix; code in
 *    src/tb_envelope.c)
 *  - main() scaffolding (src/tb_kernel.c): the shared options, arrays in one region and
 *    their parallel first touch, the envelope's end
 *  - the static block partition and a pseudo-random generator (inline)
 */
#ifndef TB_KERNEL_H
#define TB_KERNEL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tb/env.h"   /* tb_env_rank, tb_env_ranks, tb_expand_path */
#include "tb/evidence.h" /* tb_evidence_* (the run's evidence) */
#include "tb/json.h"  /* tb_json, tbj_*, tb_emit */
#include "tb/pages.h" /* tb_region, tb_pgkind */
#include "tb/place.h" /* tb_place */
#include "tb/smaps.h" /* tb_smaps_lookup, tb_read_long_file */
#include "tb/util.h"  /* tb_die, tb_parse_*, tb_now */

#define TB_SCHEMA "topobind.result/1"

/* ---------------------------------------------------------------- run envelope */
typedef struct {
    const char *kernel;
    char host[256];
    char timestamp[32]; /* UTC ISO 8601 of the run's start */
    int rank, ranks;    /* from the launcher environment */
    int threads;        /* OpenMP threads per rank (the kernel may overwrite before writing) */
} tb_run;

/* Also begins the run's evidence (tb/evidence.h; not for the placement probe, whereami): from
 * here to tb_json_header, written by tb_json_end as "evidence" (docs/results-format.md). */
void tb_run_start(tb_run *r, const char *kernel);
/* The measured work is done: the run's evidence ends here (its window, its pages) rather than
 * at tb_json_header, for a kernel that frees its buffers or measures more before writing. */
void tb_run_measured(void);
void tb_json_evidence(tb_json *j);   /* "evidence" of the run, when there is one; frees it */
/* Ends the run's evidence, opens the top-level object and writes schema, kernel, host,
 * timestamp, layout, ranks, threads. */
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
/* The envelope's end: "evidence" (tb_json_evidence), "valid", "validation", close, write (tb_emit to path), free; returns
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
