/*
 * tb/step.h - the per-rank step: the step file (format: docs/step-file.md; written by
 * topobind's launch/build.py and `topobind plan --format rankexec`) read from memory: find the
 * line of a local rank for a host, and apply it (tb_step_apply: binding, memory policy, THP,
 * each read back; variables through the caller). No exit, no output: errors come back as
 * text for the caller to report.
 * Used by the SPANK and Flux plugins (rankstep/topobind_spank.c, topobind_flux.c) and by the
 * per-rank step rankstep/rankexec.c, its thin callers (rankstep/README.md). Code in src/tb_step.c.
 */
#ifndef TB_STEP_H
#define TB_STEP_H

#include <stddef.h>

#define TB_STEP_MAX_SAMPLE_MS 600000 /* topobind run --sample-ms: 0 .. 600000 */
#define TB_STEP_MAX_FIELDS 65536      /* fields a rank's line (variables and % fields) */

/* The bytes of a step file, TEXT's LEN bytes (a NUL included): text, a TAB between fields, a
 * newline after each line; any other control byte (0x00-0x1f, 0x7f: NUL, CR, ESC, ...) is
 * refused, -1 with ERR naming its line and column (1-based), before anything is read or
 * applied (a NUL would end a line or a value early and drop the fields after it). The readers
 * (rankexec on its file, the plugins on the planner's output) call it on what they read. */
int tb_step_check_text(const char *text, size_t len, char *err, size_t errlen);

typedef struct {
    char *line;       /* "RANK\tFIELD\tFIELD..." of the rank (points into the text), or NULL */
    char *sample_dir; /* %sample DIR MS, when present (DIR absolute, not "/"; MS bounded) */
    long sample_ms;
} tb_step_choice;

/* The line of local rank RANK for HOST in TEXT (cut into lines in place). Returns 0 with
 * out->line set or NULL (no line for that rank on that host), -1 on a malformed file or a
 * rank with two lines in the groups that apply to HOST (ERR),
 * TB_STEP_NOT_STEP_FILE when TEXT is no step file at all (ERR: "not a topobind-rankexec ..."). */
#define TB_STEP_NOT_STEP_FILE (-2)
int tb_step_choose(char *text, const char *host, long rank, tb_step_choice *out, char *err,
                   size_t errlen);

/* Called for every field of a rank's line: NAME=VALUE, or %NAME=VALUE (directive=1).
 * Return 0 to go on, -1 to stop (after writing ERR). */
typedef int (*tb_step_field_fn)(void *ctx, const char *name, const char *value, int directive,
                                char *err, size_t errlen);

/* Walk the fields of LINE (cut in place). 0, or -1 with ERR; a line of more than
 * TB_STEP_MAX_FIELDS fields is refused before FN sees any. */
int tb_step_fields(char *line, tb_step_field_fn fn, void *ctx, char *err, size_t errlen);

/* The memory fields of version-3 lines (written by topobind's memory placement):
 * %mem=bind|interleave|preferred:NODES  set_mempolicy(2) of the calling process, kept across
 *                                       exec (preferred over several nodes needs Linux 5.15;
 *                                       before, the first node is preferred);
 * %thp=off                              prctl(PR_SET_THP_DISABLE), kept across exec.
 * The policy is read back (get_mempolicy): a node the kernel dropped (one that does not exist
 * or that the task's cpuset does not allow) fails it. 0, or -1 with ERR. */
int tb_step_mempolicy(const char *spec, char *err, size_t errlen);
int tb_step_thp(const char *value, char *err, size_t errlen);

/* Export NAME=VALUE into the rank's environment (PREPEND: put VALUE first in the ':' list
 * NAME already holds, before what the user set: LD_PRELOAD). 0, or -1 with ERR. */
typedef int (*tb_step_setenv_fn)(void *ctx, const char *name, const char *value, int prepend,
                                 char *err, size_t errlen);

/* Variables gathered for one export (tb_step_vars_add: "NAME=VALUE" copied), then put into
 * this process's environment at once (tb_step_vars_export: a new environ, the environment's
 * variables first, a gathered one replacing the one of its name, the last of a name winning;
 * the gathered list emptied). Linear in the count, where a setenv(3) each scans the whole
 * environment: the square of it (40,000 variables of a line: 7 s). Strings and arrays are
 * kept until exec. 0, or -1 with ERR (out of memory). */
typedef struct {
    char **add;
    size_t n, cap;
} tb_step_vars;
int tb_step_vars_add(tb_step_vars *v, const char *name, const char *value, char *err,
                     size_t errlen);
int tb_step_vars_export(tb_step_vars *v, char *err, size_t errlen);

/* The per-rank step: apply the fields of a rank's LINE (cut in place) to the calling process,
 * in their order: %cpus= (tb_step_bind), %mem= (tb_step_mempolicy), %thp=off (tb_step_thp),
 * %preload=LIB (LIB, a regular file, first in LD_PRELOAD, through SETENV_FN), NAME=VALUE
 * (SETENV_FN). The
 * binding and the memory policy are read back: what the kernel narrowed is refused. Used by
 * rankexec and the SPANK plugin alike. 0, or -1 with ERR (one line). */
int tb_step_apply(char *line, tb_step_setenv_fn setenv_fn, void *ctx, char *err, size_t errlen);

/* Bind the calling thread to the OS CPUs of LIST ("0-3,8"), then read the mask back: -1 with
 * ERR when the list is malformed, or any CPU of it is not allowed here (cgroup cpuset,
 * offline), or the kernel refuses it. */
int tb_step_bind(const char *list, char *err, size_t errlen);

#endif
