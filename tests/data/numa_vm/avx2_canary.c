/* Built with -mavx2 by tests/launch/test_numa_vm.py: an AVX2 instruction the guest's CPU
 * (scripts/numa-vm: qemu64 with the x86-64-v2 features, no AVX) must refuse with SIGILL, as
 * it would refuse a -march=native binary of any host. */
#include <immintrin.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    volatile int in = argc;
    __m256i a = _mm256_set1_epi32(in), b = _mm256_add_epi32(a, a);
    volatile int out[8];
    _mm256_storeu_si256((__m256i *)out, b);
    printf("%d\n", out[3]);
    return 0;
}
