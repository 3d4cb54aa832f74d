/*
 * triad.c - a plain memory-bandwidth program of the STREAM kind (triad a = b + s*c), written
 * as any user would: malloc, an OpenMP loop, wall-clock time. It knows nothing of topobind;
 * `make bench-memory` runs it through `topobind run --pages 4k|2M|1G`.
 *
 *   triad [ELEMENTS] [REPEATS]     prints: triad_best_MBps=... triad_avg_MBps=...
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1L << 24;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1024 || reps < 1) {
        fprintf(stderr, "usage: triad [ELEMENTS>=1024] [REPEATS>=1]\n");
        return 2;
    }
    double *a = malloc(3 * (size_t)n * sizeof *a); /* one block for the three arrays */
    double *b = a + n, *c = a + 2 * n;
    if (!a) {
        fprintf(stderr, "triad: out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) { /* first touch by the threads that use the pages */
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    const double s = 3.0;
    double best = 1e30, total = 0.0;
    for (int r = 0; r < reps; r++) {
        double t = now();
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
        t = now() - t;
        best = t < best ? t : best;
        if (r > 0) /* the first pass warms up */
            total += t;
    }
    double bytes = 3.0 * sizeof(double) * (double)n;
    double check = 0.0;
    for (long i = 0; i < n; i += n / 16)
        check += a[i];
    printf("triad_best_MBps=%.1f triad_avg_MBps=%.1f check=%.1f\n", bytes / best / 1e6,
           reps > 1 ? bytes / (total / (reps - 1)) / 1e6 : bytes / best / 1e6, check);
    free(a);
    return 0;
}
