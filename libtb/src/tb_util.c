/* tb_util.c - timing, errors, argument parsing helpers. */
#include "tb/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *tb_prog = "kernel";

double tb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tb_die(int status, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: error: %s\n", tb_prog, msg);
    fflush(stderr);
    exit(status);
}

void tb_usage_error(const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: error: %s (see '%s --help')\n", tb_prog, msg, tb_prog);
    fflush(stderr);
    exit(TB_EXIT_USAGE);
}

void *tb_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        tb_die(1, "out of memory allocating %zu bytes", n);
    return p;
}

void *tb_xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p)
        tb_die(1, "out of memory allocating %zu x %zu bytes", n, sz);
    return p;
}

/* Parse "<number><suffix>" where suffix is looked up by the caller. Returns the mantissa and
 * leaves *rest at the suffix. */
static int parse_mantissa(const char *s, double *v, const char **rest)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    *v = strtod(s, &end);
    if (end == s || errno || !isfinite(*v))
        return -1;
    *rest = end;
    return 0;
}

long long tb_parse_count(const char *opt, const char *s, long long min, long long max)
{
    double v, mul = 1.0;
    const char *rest;
    if (parse_mantissa(s, &v, &rest) != 0)
        tb_usage_error("%s expects a number like 20000000 or 20M, got '%s'", opt, s ? s : "");
    if (*rest) {
        if (!strcmp(rest, "k") || !strcmp(rest, "K"))
            mul = 1e3;
        else if (!strcmp(rest, "M"))
            mul = 1e6;
        else if (!strcmp(rest, "G"))
            mul = 1e9;
        else
            tb_usage_error("%s: unknown suffix '%s' in '%s' (use k, M or G = 1e3, 1e6, 1e9)", opt,
                           rest, s);
    }
    v *= mul;
    if (v != floor(v) || v < (double)min || v > (double)max)
        tb_usage_error("%s must be an integer between %lld and %lld, got '%s'", opt, min, max, s);
    return (long long)v;
}

long long tb_parse_bytes(const char *opt, const char *s)
{
    double v, mul = 1.0;
    const char *rest;
    if (parse_mantissa(s, &v, &rest) != 0)
        tb_usage_error("%s expects a size like 16K, 2M or 1G, got '%s'", opt, s ? s : "");
    if (*rest) {
        char u = (char)toupper((unsigned char)rest[0]);
        const char *tail = rest + 1;
        if (u == 'B' && !*tail)
            mul = 1.0;
        else if (u == 'K' || u == 'M' || u == 'G' || u == 'T') {
            if (*tail && strcmp(tail, "B") && strcmp(tail, "iB") && strcmp(tail, "ib") &&
                strcmp(tail, "b"))
                tb_usage_error("%s: unknown size suffix in '%s' (use K, M, G, T = KiB ... TiB)",
                               opt, s);
            mul = u == 'K' ? 1024.0 : u == 'M' ? 1048576.0 : u == 'G' ? 1073741824.0
                                                                  : 1099511627776.0;
        } else
            tb_usage_error("%s: unknown size suffix in '%s' (use K, M, G, T = KiB ... TiB)", opt,
                           s);
    }
    v *= mul;
    if (v < 1.0 || v != floor(v) || v > 9.0e18)
        tb_usage_error("%s must be a positive whole number of bytes, got '%s'", opt, s);
    return (long long)v;
}

double tb_parse_double(const char *opt, const char *s, double min, double max)
{
    double v;
    const char *rest;
    if (parse_mantissa(s, &v, &rest) != 0 || *rest)
        tb_usage_error("%s expects a number, got '%s'", opt, s ? s : "");
    if (v < min || v > max)
        tb_usage_error("%s must be between %g and %g, got '%s'", opt, min, max, s);
    return v;
}

/* Non-dying list parser: "0,2,4-7" (whitespace/newline tolerated at the end). */
int tb_list_parse(const char *s, int **out)
{
    int cap = 16, n = 0;
    int *v = tb_xmalloc(sizeof(int) * (size_t)cap);
    const char *p = s;
    if (!s) {
        free(v);
        return -1;
    }
    while (*p && *p != '\n') {
        char *end;
        long a, b;
        if (!isdigit((unsigned char)*p))
            goto bad;
        a = strtol(p, &end, 10);
        b = a;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                goto bad;
            b = strtol(p, &end, 10);
            p = end;
        }
        if (b < a || a < 0 || b > 1000000)
            goto bad;
        for (long x = a; x <= b; x++) {
            if (n == cap) {
                cap *= 2;
                int *nv = realloc(v, sizeof(int) * (size_t)cap);
                if (!nv)
                    goto bad;
                v = nv;
            }
            v[n++] = (int)x;
        }
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            goto bad;
    }
    *out = v;
    return n;
bad:
    free(v);
    return -1;
}

int tb_parse_intlist(const char *opt, const char *s, int **out)
{
    int n = tb_list_parse(s, out);
    if (n <= 0)
        tb_usage_error("%s expects a list like 0,1,4-7 (OS indexes), got '%s'", opt, s ? s : "");
    return n;
}

void tb_bytes_label(long long bytes, char *buf, size_t len)
{
    if (bytes >= (1LL << 30) && bytes % (1LL << 30) == 0)
        snprintf(buf, len, "%lldG", bytes >> 30);
    else if (bytes >= (1LL << 20) && bytes % (1LL << 20) == 0)
        snprintf(buf, len, "%lldM", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, len, "%lldK", bytes >> 10);
    else
        snprintf(buf, len, "%lldB", bytes);
}
