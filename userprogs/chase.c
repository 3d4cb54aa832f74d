/*
 * chase.c - a plain memory-latency program: one pointer chase through a random cycle over a
 * working set (default 1 GiB), one cache line per step, so every load waits for the one
 * before. Written as a user would (malloc); it knows nothing of topobind.
 *
 *   chase [MIB] [LOADS]     prints: chase_ns_per_load=...
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void) /* xorshift64* */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    long loads = argc > 2 ? atol(argv[2]) : 20000000L;
    if (mib < 1 || mib > (1L << 20) || loads < 1) {
        fprintf(stderr, "usage: chase [MIB 1..1048576] [LOADS>=1]\n");
        return 2;
    }
    size_t lines = ((size_t)mib << 20) / LINE;
    char *buf = malloc(lines * LINE);
    /* the order of the cycle, in a scratch mapping given back before the chase */
    uint32_t *order = mmap(NULL, lines * sizeof *order, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!buf || order == MAP_FAILED) {
        fprintf(stderr, "chase: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < lines; i++)
        order[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: one cycle through every line */
        size_t j = (size_t)(next_random() % i);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        *(void **)(buf + (size_t)order[i] * LINE) = buf + (size_t)order[(i + 1) % lines] * LINE;
    munmap(order, lines * sizeof *order);
    void **p = (void **)buf;
    for (long i = 0; i < loads / 10; i++) /* warm-up */
        p = (void **)*p;
    double t = now();
    for (long i = 0; i < loads; i++)
        p = (void **)*p;
    t = now() - t;
    printf("chase_ns_per_load=%.1f end=%p\n", t * 1e9 / (double)loads, (void *)p);
    free(buf);
    return 0;
}
