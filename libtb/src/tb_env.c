/* tb_env.c - the launcher's environment: rank, rank count, "{rank}"/"{pid}" in paths (tb/env.h).
 * Linked into the kernels, rankexec and the LD_PRELOAD shim: libc only, no allocation. */
#include "tb/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const TB_LOCAL_RANK_VARS[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK",
                                          "MPI_LOCALRANKID", "FLUX_TASK_LOCAL_ID",
                                          "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                          "PMI_RANK", "FLUX_TASK_RANK", "SLURM_PROCID", NULL};
const char *const TB_RANK_VARS[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                    "FLUX_TASK_RANK", "SLURM_PROCID", NULL};
const char *const TB_SIZE_VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
                                    "FLUX_JOB_SIZE", "SLURM_NTASKS", NULL};

/* V as a number 0 .. TB_MAX_RANK written in ASCII digits alone; -1 otherwise. */
static long plain_number(const char *v)
{
    if (*v < '0' || *v > '9')
        return -1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return *end == '\0' && !errno && n >= 0 && n <= TB_MAX_RANK ? n : -1;
}

long tb_env_number(const char *const *names, const char **bad)
{
    if (bad)
        *bad = NULL;
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (!v || (!*v && !bad)) /* asked to judge (BAD): set and empty is unreadable */
            continue;
        long n = plain_number(v);
        if (n >= 0)
            return n;
        if (bad) {
            *bad = names[i];
            return -1;
        }
    }
    return -1;
}

int tb_env_rank(void)
{
    long r = tb_env_number(TB_RANK_VARS, NULL);
    return r < 0 ? 0 : (int)r;
}

int tb_env_ranks(void)
{
    long n = tb_env_number(TB_SIZE_VARS, NULL);
    return n < 1 ? 1 : (int)n;
}

int tb_expand_path(const char *in, char *out, size_t len)
{
    if (!len)
        return -1;
    size_t o = 0;
    for (const char *p = in; *p;) {
        char num[32];
        const char *rep = NULL;
        if (!strncmp(p, "{rank}", 6)) {
            snprintf(num, sizeof num, "%d", tb_env_rank());
            rep = num;
            p += 6;
        } else if (!strncmp(p, "{pid}", 5)) {
            snprintf(num, sizeof num, "%ld", (long)getpid());
            rep = num;
            p += 5;
        }
        size_t n = rep ? strlen(rep) : 1;
        if (o + n >= len) {
            out[0] = '\0';
            return -1;
        }
        if (rep) {
            memcpy(out + o, rep, n);
            o += n;
        } else
            out[o++] = *p++;
    }
    out[o] = '\0';
    return 0;
}
