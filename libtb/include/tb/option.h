/*
 * tb/option.h - the plugins' option, the SPANK plugin's `--topobind=LAYOUT[:NAME[=VALUE],...]`:
 * checked (tb_option_check) and turned into the argv words of `topobind plan`
 * (tb_option_args). No Slurm here: the SPANK plugin (rankstep/topobind_spank.c), the Flux
 * plugin (rankstep/topobind_flux.c, after turning its spelling into this one) and the test
 * binary tb-spank-option (rankstep/spank_option_main.c, for tests/launch/test_fuzz_step.py)
 * share it. Code in src/tb_option.c.
 */
#ifndef TB_OPTION_H
#define TB_OPTION_H

#include <stddef.h>

#define TB_OPT_MAX 512     /* bytes of the option value */
#define TB_OPT_MAX_ARGS 64 /* argv words of one topobind command */

typedef struct {
    char *argv[TB_OPT_MAX_ARGS + 1];
    int argc;
    char words[TB_OPT_MAX + 4096]; /* the option's words and the plugin's (PATH, topology) */
    size_t used;
    int full; /* a word did not fit: the command is not run */
} tb_argv;

/* Add the N bytes at S (or the string S) as one argv word. */
void tb_argv_add(tb_argv *a, const char *s, size_t n);
void tb_argv_add_s(tb_argv *a, const char *s);

/* 0 when ARG is LAYOUT[:NAME[=VALUE][,NAME[=VALUE]...]] with names and values from a small
 * alphabet, a NAME starting with a letter and not one the plugin sets itself; -1 with ERR
 * (one line naming the option) otherwise. */
int tb_option_check(const char *arg, char *err, size_t errlen);

/* Append "--layout LAYOUT" and "--NAME" or "--NAME=VALUE" (one word each: a value is never
 * read as an option) for a checked OPT; returns whether threads= was given. */
int tb_option_args(tb_argv *a, const char *opt);

#endif
