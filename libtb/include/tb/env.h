/*
 * tb/env.h - the launcher's environment, read the same way by the benchmark kernels, the
 * per-rank step (rankstep/rankexec.c) and the LD_PRELOAD shim (rankstep/hugepreload.c):
 * rank and rank count, and "{rank}"/"{pid}" in a file path. Code in src/tb_env.c; libc only.
 */
#ifndef TB_ENV_H
#define TB_ENV_H

#include <stddef.h>

/* The launchers' variables, innermost launcher first: an mpirun inside a Slurm job passes the
 * batch step's SLURM_PROCID=0, SLURM_LOCALID=0 and SLURM_NTASKS to every rank it starts, so
 * OpenMPI's own variables (set only by mpirun/prterun), PMIx's and Hydra's (MPICH, Intel MPI)
 * win over Slurm's. The same lists as topobind.launch.mpi_launchers.local_rank_vars(), rank_vars()
 * and size_vars() (tests/launch/test_launchers.py compares them). */
extern const char *const TB_LOCAL_RANK_VARS[]; /* the local-rank variables, then the rank's */
extern const char *const TB_RANK_VARS[];
extern const char *const TB_SIZE_VARS[];

/* The largest rank number read from the environment. */
#define TB_MAX_RANK 100000000L

/* The first of NAMES (NULL-terminated) that is set, read as a number: plain ASCII decimal
 * digits, 0 .. TB_MAX_RANK. Returns it, or -1 when none is set. A set value that is no such
 * number ("", "1x", "-1", " 1", "../x", 10^30, a Unicode digit): with BAD NULL it is skipped
 * and the next variable read; else the search stops there, *BAD gets the variable's name and
 * -1 is returned (*BAD is NULL on every other return; docs/step-file.md, "Which line"). */
long tb_env_number(const char *const *names, const char **bad);

int tb_env_rank(void);  /* the first readable of TB_RANK_VARS, else 0 */
int tb_env_ranks(void); /* the first readable of TB_SIZE_VARS if >= 1, else 1 */

/* IN with "{rank}" replaced by tb_env_rank() and "{pid}" by the process id, into OUT (LEN
 * bytes): only digits are ever pasted in. Returns 0, or -1 (OUT then "") when the expanded
 * path does not fit in LEN bytes. */
int tb_expand_path(const char *in, char *out, size_t len);

#endif
