/* A user's program for the multi-NUMA guest tests (tests/launch/test_numa_vm.py): every OpenMP
 * thread (OMP_NUM_THREADS, bound by OMP_PLACES / OMP_PROC_BIND as the launch sets them)
 * touches its share of MIB mebibytes, then sleeps MS milliseconds, so that topobind run
 * --verify-running samples live threads without spinning the emulated CPUs. With MIB > 0 the
 * first thread prints, once every share is touched, where the process's anonymous pages are
 * (its own reading of /proc/self/numa_maps, for the tests to check without topobind):
 *   numa_maps rank R: N0=PAGES N1=PAGES ...   (mappings of 1 MiB or more; R: the MPI rank)
 *   usage: omp_sleep MS [MIB]          build: cc -O1 -fopenmp omp_sleep.c -o omp_sleep */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_NODES 64

static void print_nodes(void) {
    long pages[MAX_NODES] = {0};
    char line[4096];
    FILE *f = fopen("/proc/self/numa_maps", "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *anon = strstr(line, " anon=");
        if (!anon || strtol(anon + 6, NULL, 10) < 256)
            continue;
        for (char *p = line; (p = strstr(p, " N")) != NULL; p++) {
            char *end;
            long node = strtol(p + 2, &end, 10);
            if (end != p + 2 && *end == '=' && node >= 0 && node < MAX_NODES)
                pages[node] += strtol(end + 1, NULL, 10);
        }
    }
    fclose(f);
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    printf("numa_maps rank %s:", rank ? rank : "0");
    for (int n = 0; n < MAX_NODES; n++)
        if (pages[n])
            printf(" N%d=%ld", n, pages[n]);
    printf("\n");
    fflush(stdout);
}

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
        /* volatile: the compiler may not drop a buffer nothing reads */
        volatile char *buf = share ? malloc(share) : NULL;
        for (size_t i = 0; buf && i < share; i += 4096)
            buf[i] = 1; /* first touch: the pages land by this thread's memory policy */
#pragma omp barrier
#pragma omp master
        if (mib)
            print_nodes();
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&t, &t) != 0) {
        }
        free((void *)buf);
    }
    return 0;
}
