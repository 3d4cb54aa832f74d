/* tb_json.c - a tiny JSON writer and its atomic write (tb/json.h). libc only. */
#include "tb/env.h"
#include "tb/json.h"
#include "tb/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* C's escape in a JSON string into OUT (at least 7 bytes): its length, or 0 when C stands as
 * it is. Quotes, backslashes, control characters and DEL (a host or command name may hold
 * any of them). The one escaper of tbj_str and tbj_fput_string. */
static size_t escape_char(unsigned char c, char *out)
{
    const char *two = NULL;
    switch (c) {
    case '"': two = "\\\""; break;
    case '\\': two = "\\\\"; break;
    case '\n': two = "\\n"; break;
    case '\r': two = "\\r"; break;
    case '\t': two = "\\t"; break;
    case '\b': two = "\\b"; break;
    case '\f': two = "\\f"; break;
    default:
        if (c >= 0x20 && c != 0x7f)
            return 0;
        snprintf(out, 7, "\\u%04x", c);
        return 6;
    }
    memcpy(out, two, 2);
    return 2;
}

static void put_escaped(tb_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        size_t n = escape_char(*p, esc);
        put(j, n ? esc : (const char *)p, n ? n : 1);
    }
    put(j, "\"", 1);
}

void tbj_fput_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        size_t n = escape_char(*p, esc);
        if (n)
            fwrite(esc, 1, n, f);
        else
            fputc(*p, f);
    }
    fputc('"', f);
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
