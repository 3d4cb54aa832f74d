/*
 * tb/planner.h - the node's `topobind plan ... --format rankexec` command (tb_plan_argv), run
 * once a node with its step file kept in memory, bounded in size and time, its error as one
 * line (tb_planner_run). The Flux shell plugin (rankstep/topobind_flux.c) and the SPANK plugin
 * (rankstep/topobind_spank.c) both call these two. Code in src/tb_planner.c.
 */
#ifndef TB_PLANNER_H
#define TB_PLANNER_H

#include <stddef.h>

#include "tb/option.h"

#define TB_PLANNER_MAX (16 << 20)   /* bytes of a step file */
#define TB_PLANNER_TIMEOUT_MS 120000 /* a plan that takes longer is killed */

/* A's words: CMD plan --topology TOPOLOGY --format rankexec --slurm-cores CORES --ranks TASKS,
 * then OPT's words (a checked LAYOUT[:NAME=VALUE,...], tb_option_args), then --threads THREADS
 * when OPT gives no threads= and THREADS > 0. Each "%n" in TOPOLOGY becomes this host's name
 * up to its first '.' (a topology exported once a node: /etc/topobind/%n.xml). */
void tb_plan_argv(tb_argv *a, const char *cmd, const char *topology, const char *cores,
                  long tasks, const char *opt, long threads);

/* How a plugin runs the planner. */
typedef struct {
    const char *path;      /* the PATH argv[0] is looked up in and the planner runs with */
    const char *run_hint;  /* after "cannot run CMD: ERROR" (where the user names topobind) */
    const char *size_hint; /* after "the topobind command is longer than ..." (or NULL) */
    int become_user;       /* the child takes its effective ids as real and saved ones too
                            * (slurmstepd drops only the effective ones) */
    int step_file;         /* the output must be a version-2 or 3 step file */
} tb_planner_how;

/* Run A with stdin /dev/null, as HOW says; 0 with *TEXT (malloc'd) its output and ERR the
 * first line of its stderr ("" when none: a note, e.g. which tune record --layout auto used),
 * or -1 with ERR (topobind's error line, or why it could not run). MISSING (or NULL): set when the command
 * was not found (exit status 127). */
int tb_planner_run(tb_argv *a, const tb_planner_how *how, char **text, char *err,
                   size_t errlen, int *missing);

#endif
