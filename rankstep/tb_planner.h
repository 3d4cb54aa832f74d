/*
 * tb_planner.h - run `topobind plan ... --format rankexec` once a node and keep its step file
 * in memory, bounded in size and time; its error as one line. Used by the Flux shell plugin
 * (topobind_flux.c); the SPANK plugin (topobind_spank.c) has its own copy with Slurm's
 * set-user steps.
 */
#ifndef TB_PLANNER_H
#define TB_PLANNER_H

#include <stddef.h>

#include "spank_option.h"

#define TB_PLANNER_MAX (16 << 20)   /* bytes of a step file */
#define TB_PLANNER_TIMEOUT_MS 120000 /* a plan that takes longer is killed */

/* Run A (argv[0] looked up in PATH) with stdin /dev/null; 0 with *TEXT (malloc'd) a version 2
 * or 3 step file, or -1 with ERR (topobind's error line, or why it could not run). */
int tb_planner_run(tb_argv *a, const char *path, char **text, char *err, size_t errlen);

#endif
