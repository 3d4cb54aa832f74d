/* tb_json.c - tiny JSON writer and the topobind.result/1 envelope. */
#include "tb_common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- buffer */
static void put(tb_json *j, const char *s, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (j->len + n + 1 > cap)
            cap *= 2;
        char *nb = realloc(j->buf, cap);
        if (!nb)
            tb_die(1, "out of memory in the JSON writer");
        j->buf = nb;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(tb_json *j, const char *s) { put(j, s, strlen(s)); }

static void put_escaped(tb_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': puts_(j, "\\\""); break;
        case '\\': puts_(j, "\\\\"); break;
        case '\n': puts_(j, "\\n"); break;
        case '\r': puts_(j, "\\r"); break;
        case '\t': puts_(j, "\\t"); break;
        case '\b': puts_(j, "\\b"); break;
        case '\f': puts_(j, "\\f"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                puts_(j, esc);
            } else
                put(j, (const char *)p, 1);
        }
    }
    put(j, "\"", 1);
}

void tbj_init(tb_json *j)
{
    memset(j, 0, sizeof *j);
    j->first[0] = 1;
}

void tbj_free(tb_json *j)
{
    free(j->buf);
    memset(j, 0, sizeof *j);
}

/* Comma (if needed) and "key": */
static void element(tb_json *j, const char *key)
{
    if (!j->first[j->depth])
        put(j, ",", 1);
    j->first[j->depth] = 0;
    if (key) {
        put_escaped(j, key);
        put(j, ":", 1);
    }
}

static void open_(tb_json *j, const char *key, const char *bracket)
{
    element(j, key);
    puts_(j, bracket);
    if (j->depth + 1 >= (int)sizeof j->first)
        tb_die(1, "JSON nesting too deep");
    j->depth++;
    j->first[j->depth] = 1;
}

void tbj_obj_begin(tb_json *j, const char *key) { open_(j, key, "{"); }
void tbj_arr_begin(tb_json *j, const char *key) { open_(j, key, "["); }
void tbj_obj_end(tb_json *j)
{
    j->depth--;
    put(j, "}", 1);
}
void tbj_arr_end(tb_json *j)
{
    j->depth--;
    put(j, "]", 1);
}

void tbj_str(tb_json *j, const char *key, const char *s)
{
    element(j, key);
    if (s)
        put_escaped(j, s);
    else
        puts_(j, "null");
}

/* Shortest of %.15g..%.17g that reads back to the same double. */
static void put_double(tb_json *j, double v)
{
    char b[40];
    if (!isfinite(v)) {
        puts_(j, "null");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        if (strtod(b, NULL) == v)
            break;
    }
    puts_(j, b);
}

void tbj_dbl(tb_json *j, const char *key, double v)
{
    element(j, key);
    put_double(j, v);
}

void tbj_int(tb_json *j, const char *key, long long v)
{
    char b[32];
    element(j, key);
    snprintf(b, sizeof b, "%lld", v);
    puts_(j, b);
}

void tbj_bool(tb_json *j, const char *key, int v)
{
    element(j, key);
    puts_(j, v ? "true" : "false");
}

void tbj_null(tb_json *j, const char *key)
{
    element(j, key);
    puts_(j, "null");
}

void tbj_dbl_array(tb_json *j, const char *key, const double *v, int n)
{
    tbj_arr_begin(j, key);
    for (int i = 0; i < n; i++)
        tbj_dbl(j, NULL, v[i]);
    tbj_arr_end(j);
}

void tbj_int_array(tb_json *j, const char *key, const int *v, int n)
{
    tbj_arr_begin(j, key);
    for (int i = 0; i < n; i++)
        tbj_int(j, NULL, v[i]);
    tbj_arr_end(j);
}

void tbj_cpuset(tb_json *j, const char *key, const cpu_set_t *set)
{
    tbj_arr_begin(j, key);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set))
            tbj_int(j, NULL, c);
    tbj_arr_end(j);
}

/* ---------------------------------------------------------------- output */
static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void tb_emit(tb_json *j, const char *path)
{
    put(j, "\n", 1);
    if (!path || !strcmp(path, "-")) {
        fflush(stdout);
        if (write_all(1, j->buf, j->len) != 0)
            tb_die(1, "cannot write the result to stdout: %s", strerror(errno));
        return;
    }
    char target[4096], tmp[4200];
    if (tb_expand_path(path, target, sizeof target) != 0)
        tb_die(1, "cannot write %.200s...: the path is longer than %zu bytes once {rank} and "
               "{pid} are expanded; give a shorter one", path, sizeof target - 1);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", target, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        tb_die(1, "cannot write %s: %s", target, strerror(errno));
    if (write_all(fd, j->buf, j->len) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        tb_die(1, "cannot write %s: %s", target, strerror(e));
    }
    close(fd);
    if (rename(tmp, target) != 0) {
        int e = errno;
        unlink(tmp);
        tb_die(1, "cannot rename %s to %s: %s", tmp, target, strerror(e));
    }
}

/* ---------------------------------------------------------------- envelope */
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
}

void tb_json_header(tb_json *j, const tb_run *r)
{
    const char *layout = getenv("TOPOBIND_LAYOUT");
    tbj_obj_begin(j, NULL);
    tbj_str(j, "schema", TB_SCHEMA);
    tbj_str(j, "kernel", r->kernel);
    tbj_str(j, "host", r->host);
    tbj_str(j, "timestamp", r->timestamp);
    tbj_str(j, "layout", layout && *layout ? layout : NULL);
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
