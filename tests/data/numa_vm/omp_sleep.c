/* A user's program for the multi-NUMA guest tests (tests/test_numa_vm.py): every OpenMP
 * thread (OMP_NUM_THREADS, bound by OMP_PLACES / OMP_PROC_BIND as the launch sets them)
 * touches its share of MIB mebibytes, then sleeps MS milliseconds, so that topobind run
 * --verify-running samples live threads without spinning the emulated CPUs.
 *   usage: omp_sleep MS [MIB]          build: cc -O1 -fopenmp omp_sleep.c -o omp_sleep */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: omp_sleep MS [MIB]\n");
        return 2;
    }
    long ms = strtol(argv[1], NULL, 10);
    long mib = argc == 3 ? strtol(argv[2], NULL, 10) : 0;
    if (ms < 0 || ms > 600000 || mib < 0 || mib > 4096) {
        fprintf(stderr, "omp_sleep: MS must be 0..600000 and MIB 0..4096\n");
        return 2;
    }
#pragma omp parallel
    {
        int n = omp_get_num_threads();
        size_t share = (size_t)mib * 1024 * 1024 / (size_t)n;
        char *buf = share ? malloc(share) : NULL;
        if (buf)
            memset(buf, 1, share); /* first touch: the pages land by this thread's policy */
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&t, &t) != 0) {
        }
        if (buf)
            free(buf);
    }
    return 0;
}
