/*
 * tb_planner.h - run `topobind plan ... --format rankexec` once a node and keep its step file
 * in memory, bounded in size and time; its error as one line. Used by the Flux shell plugin
 * (topobind_flux.c: tb_planner_run) and the SPANK plugin (topobind_spank.c: its own fork with
 * Slurm's set-user steps, then tb_planner_collect and tb_planner_error_line).
 */
#ifndef TB_PLANNER_H
#define TB_PLANNER_H

#include <stddef.h>
#include <sys/types.h>

#include "tb/option.h"

#define TB_PLANNER_MAX (16 << 20)   /* bytes of a step file */
#define TB_PLANNER_TIMEOUT_MS 120000 /* a plan that takes longer is killed */

/* Run A (argv[0] looked up in PATH) with stdin /dev/null; 0 with *TEXT (malloc'd) a version 2
 * or 3 step file, or -1 with ERR (topobind's error line, or why it could not run). */
int tb_planner_run(tb_argv *a, const char *path, char **text, char *err, size_t errlen);

/* Read the child PID's stdout OUT (the step file, into *TEXT, malloc'd, at most
 * TB_PLANNER_MAX bytes) and stderr ERR (its message, into MSG) until both close, killing it
 * past TB_PLANNER_TIMEOUT_MS or the size bound; 0, or -1 with MSG saying why. */
int tb_planner_collect(int out, int err, pid_t pid, char **text, char *msg, size_t msglen);

/* The first line of topobind's message MSG that says "error:" (else its first line). */
void tb_planner_error_line(const char *msg, char *out, size_t outlen);

#endif
