/* tb_envelope.c - the topobind.result/1 envelope of a kernel's result (tb/kernel.h). */
#include "tb/kernel.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- envelope */
/* The evidence of the run (tb/evidence.h): begun by tb_run_start, ended by tb_json_header (the
 * measured work is done when the result is written), written and freed by tb_json_end. */
static tb_evidence *run_evidence;

void tb_run_start(tb_run *r, const char *kernel)
{
    time_t t = time(NULL);
    struct tm tm;
    memset(r, 0, sizeof *r);
    r->kernel = kernel;
    if (gethostname(r->host, sizeof r->host - 1) != 0)
        strcpy(r->host, "unknown");
    gmtime_r(&t, &tm);
    strftime(r->timestamp, sizeof r->timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    r->rank = tb_env_rank();
    r->ranks = tb_env_ranks();
    r->threads = omp_get_max_threads();
    tb_evidence_free(run_evidence);
    /* the placement probe (whereami) measures nothing: no evidence, no cost on every rank */
    run_evidence = strcmp(kernel, "whereami") ? tb_evidence_begin(0) : NULL;
}

void tb_run_measured(void)
{
    tb_evidence_end(run_evidence, NULL);
}

void tb_json_evidence(tb_json *j)
{
    tb_evidence_json(j, "evidence", run_evidence);
    tb_evidence_free(run_evidence);
    run_evidence = NULL;
}

void tb_json_header(tb_json *j, const tb_run *r)
{
    const char *layout = getenv("TOPOBIND_LAYOUT");
    tb_evidence_end(run_evidence, NULL);
    tbj_obj_begin(j, NULL);
    tbj_str(j, "schema", TB_SCHEMA);
    tbj_str(j, "kernel", r->kernel);
    tbj_str(j, "host", r->host);
    tbj_str(j, "timestamp", r->timestamp);
    tbj_str(j, "layout", layout && *layout ? layout : NULL);
    /* the check's tier (smoke, quick, full), as the checks set it; absent outside a check */
    const char *tier = getenv("TOPOBIND_TIER");
    if (tier && *tier)
        tbj_str(j, "tier", tier);
    tbj_int(j, "ranks", r->ranks);
    tbj_int(j, "rank", r->rank);
    tbj_int(j, "threads", r->threads);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tb_stats(const double *v, int n, double *min, double *max, double *avg, double *median)
{
    if (n <= 0) {
        *min = *max = *avg = *median = NAN;
        return;
    }
    double *s = tb_xmalloc(sizeof(double) * (size_t)n), sum = 0.0;
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_dbl);
    for (int i = 0; i < n; i++)
        sum += s[i];
    *min = s[0];
    *max = s[n - 1];
    *avg = sum / n;
    *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
}

void tb_json_metric(tb_json *j, const char *name, const char *unit, int higher_is_better,
                    const double *trials, int n, int skip)
{
    double mn, mx, avg, med;
    if (skip >= n || skip < 0)
        skip = 0;
    tb_stats(trials + skip, n - skip, &mn, &mx, &avg, &med);
    tbj_obj_begin(j, name);
    tbj_str(j, "unit", unit);
    tbj_bool(j, "higher_is_better", higher_is_better);
    tbj_dbl_array(j, "trials", trials, n);
    tbj_int(j, "warmup", skip);
    tbj_dbl(j, "best", higher_is_better ? mx : mn);
    tbj_dbl(j, "avg", avg);
    tbj_dbl(j, "min", mn);
    tbj_dbl(j, "max", mx);
    tbj_dbl(j, "median", med);
    tbj_obj_end(j);
}

void tb_json_headline(tb_json *j, const char *metric, const char *stat, double value,
                      const char *unit, int higher_is_better)
{
    tbj_obj_begin(j, "headline");
    tbj_str(j, "metric", metric);
    tbj_str(j, "stat", stat);
    tbj_dbl(j, "value", value);
    tbj_str(j, "unit", unit);
    tbj_bool(j, "higher_is_better", higher_is_better);
    tbj_obj_end(j);
}

void tb_json_matrix(tb_json *j, const char *name, const char *unit, const char *row_kind,
                    const char *col_kind, const int *rows, int nrows, const int *cols, int ncols,
                    const double *values)
{
    tbj_obj_begin(j, name);
    tbj_str(j, "unit", unit);
    tbj_int_array(j, "rows", rows, nrows);
    tbj_int_array(j, "cols", cols, ncols);
    tbj_str(j, "row_kind", row_kind);
    tbj_str(j, "col_kind", col_kind);
    tbj_arr_begin(j, "values");
    for (int r = 0; r < nrows; r++)
        tbj_dbl_array(j, NULL, values + (size_t)r * (size_t)ncols, ncols);
    tbj_arr_end(j);
    tbj_obj_end(j);
}
