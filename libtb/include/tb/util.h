/*
 * tb/util.h - the small helpers everything of libtb uses (code in src/tb_util.c; libc only):
 * wall-clock time, one-line errors, allocation that exits on failure, and the parsing of the
 * kernels' arguments (counts, byte sizes, CPU lists).
 */
#ifndef TB_UTIL_H
#define TB_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>

/* Exit statuses shared by every kernel. */
#define TB_EXIT_USAGE 2 /* bad command line */
#define TB_EXIT_PAGES 3 /* --strict and the requested page size was not obtained */
#define TB_EXIT_INVALID 4 /* the run completed but its result does not validate */

extern const char *tb_prog; /* program name used in error messages */

double tb_now(void); /* seconds, CLOCK_MONOTONIC */
/* "prog: error: <msg>" and exit STATUS */
void tb_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* "prog: error: <msg>; see 'prog --help'" and exit 2 */
void tb_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *tb_xmalloc(size_t n);
void *tb_xcalloc(size_t n, size_t sz);

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

#endif
