/* tb-bigalloc - test helper for libtbhugepages.so: allocate SIZE bytes with malloc (or
 * calloc / realloc / posix_memalign / aligned_alloc, by the second argument), touch every
 * 4 KiB, check the contents, free. Prints the address and the sum so nothing is elided.
 *
 *   usage: tb-bigalloc SIZE_MIB [malloc|calloc|realloc|posix_memalign|aligned_alloc]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: tb-bigalloc SIZE_MIB [malloc|calloc|realloc|posix_memalign|"
                        "aligned_alloc]\n");
        return 2;
    }
    char *end;
    double mib = strtod(argv[1], &end);
    if (end == argv[1] || *end || mib <= 0) {
        fprintf(stderr, "tb-bigalloc: error: SIZE_MIB must be a positive number, got '%s'\n",
                argv[1]);
        return 2;
    }
    const char *how = argc == 3 ? argv[2] : "malloc";
    size_t n = (size_t)(mib * 1048576.0);
    unsigned char *p = NULL;
    if (!strcmp(how, "malloc"))
        p = malloc(n);
    else if (!strcmp(how, "calloc"))
        p = calloc(n / 8, 8);
    else if (!strcmp(how, "realloc")) {
        p = malloc(4096);
        if (p) {
            memset(p, 0x5a, 4096);
            p = realloc(p, n);
            if (p && p[4095] != 0x5a) {
                fprintf(stderr, "tb-bigalloc: error: realloc lost the contents\n");
                return 1;
            }
        }
    } else if (!strcmp(how, "posix_memalign")) {
        void *q = NULL;
        if (posix_memalign(&q, 4096, n) != 0)
            q = NULL;
        p = q;
    } else if (!strcmp(how, "aligned_alloc"))
        p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    else {
        fprintf(stderr, "tb-bigalloc: error: unknown allocator '%s'\n", how);
        return 2;
    }
    if (!p) {
        fprintf(stderr, "tb-bigalloc: error: %s of %zu bytes failed\n", how, n);
        return 1;
    }
    if (!strcmp(how, "calloc"))
        for (size_t i = 0; i < n / 8 * 8; i += 4096)
            if (p[i]) {
                fprintf(stderr, "tb-bigalloc: error: calloc memory not zero\n");
                return 1;
            }
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (unsigned char)(i >> 12);
    unsigned long long sum = 0;
    for (size_t i = 0; i < n; i += 4096)
        sum += p[i];
    printf("%s %zu bytes at %p (alignment %zu) sum %llu\n", how, n, (void *)p,
           (size_t)((uintptr_t)p & (uintptr_t) - (uintptr_t)p), sum);
    free(p);
    return 0;
}
