/*
 * tb/json.h - a tiny JSON writer (escaped strings, nested objects/arrays, round-trip doubles)
 * and its atomic write (code in src/tb_json.c; libc only: the per-rank step links it).
 */
#ifndef TB_JSON_H
#define TB_JSON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <sched.h>
#include <stddef.h>
#include <stdio.h>

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

/* S as a JSON string (quotes, backslashes, control characters and DEL escaped) onto F: the
 * same escaping as tbj_str, for a writer that streams (the step's sample file). */
void tbj_fput_string(FILE *f, const char *s);

/* Write the document plus '\n' with ONE write(2) to stdout (path NULL or "-"),
 * or atomically to path (temp file in the same directory + fsync + rename).
 * "{rank}" and "{pid}" in path are expanded (tb_expand_path); too long once expanded: exit 1. */
void tb_emit(tb_json *j, const char *path);

#endif
