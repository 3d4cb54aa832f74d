/*
 * stream.c - STREAM Copy/Scale/Add/Triad (OpenMP) for topobind.
 *
 * Conventions follow McCalpin's STREAM: 8-byte doubles; bytes counted per iteration are
 * 2 arrays for Copy/Scale and 3 arrays for Add/Triad; MB/s = 1e6 bytes/s; the best rate
 * uses the minimum time over the trials excluding the first; results are checked with the
 * reference checkSTREAMresults algorithm (epsilon 1e-13).
 *
 * The three arrays live in one memory region whose page size is chosen with --pages; every
 * thread first-touches exactly the block of elements it later computes on (static block
 * partition, identical for initialisation and the four kernels).
 */
#include "tb/kernel.h"

#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <immintrin.h>
#define TB_HAVE_NT 1
#if defined(__AVX512F__)
#define NT_BYTES 64
#define NT_METHOD "_mm512_stream_pd intrinsics (AVX-512 non-temporal stores)"
#elif defined(__AVX__)
#define NT_BYTES 32
#define NT_METHOD "_mm256_stream_pd intrinsics (AVX non-temporal stores)"
#else
#define NT_BYTES 16
#define NT_METHOD "_mm_stream_pd intrinsics (SSE2 non-temporal stores)"
#endif
#else
#define TB_HAVE_NT 0
#define NT_METHOD NULL
#endif

static const double SCALAR = 3.0;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: stream [--elements N] [--trials N] [--nontemporal] [--pages 1G|2M|thp|4k|auto]\n"
            "              [--strict] [--json FILE]\n"
            "\n"
            "STREAM memory bandwidth (Copy, Scale, Add, Triad) with OpenMP threads\n"
            "(OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND are honoured). Prints one JSON\n"
            "document (schema topobind.result/1); headline = Triad best rate in MB/s (1e6 B/s).\n"
            "\n"
            "options:\n"
            "  --elements N   elements per array (suffix k/M/G = 1e3/1e6/1e9). Default: at least\n"
            "                 4x the total last-level cache size (all distinct LLC instances from\n"
            "                 /sys/devices/system/cpu) per array, and at least 10M.\n"
            "  --trials N     repetitions of the four kernels (default 20, >= 2); the first one is\n"
            "                 a warm-up excluded from best/avg/min/max (kept in 'trials').\n"
            "  --nontemporal  write the destination arrays with non-temporal (streaming) stores\n"
            "                 (%s).\n"
            "  --pages KIND   page size of the arrays: 1G, 2M (hugetlbfs, must be reserved),\n"
            "                 thp (madvise), 4k, auto (1G, 2M, thp, 4k in that order; default).\n"
            "  --strict       exit 3 with a hint when the requested page size is not obtained.\n"
            "  --json FILE    write the JSON atomically to FILE ({rank}, {pid} are expanded)\n"
            "                 instead of stdout.\n"
            "  -h, --help     this text.\n"
            "\n"
            "exit status: 0 ok, 2 bad arguments, 3 page size not obtained (--strict),\n"
            "4 results do not validate (JSON still written with valid=false).\n"
            "\n"
            "example:\n"
            "  OMP_NUM_THREADS=2 OMP_PLACES=cores OMP_PROC_BIND=close \\\n"
            "    stream --elements 20M --trials 10 --pages 2M --strict --json stream.json\n",
            TB_HAVE_NT ? NT_METHOD : "not available on this architecture");
}

#if TB_HAVE_NT
#if NT_BYTES == 64
#define VLOAD _mm512_loadu_pd
#define VSTREAM _mm512_stream_pd
#define VSET1 _mm512_set1_pd
#define VADD _mm512_add_pd
#define VMUL _mm512_mul_pd
typedef __m512d vd;
#elif NT_BYTES == 32
#define VLOAD _mm256_loadu_pd
#define VSTREAM _mm256_stream_pd
#define VSET1 _mm256_set1_pd
#define VADD _mm256_add_pd
#define VMUL _mm256_mul_pd
typedef __m256d vd;
#else
#define VLOAD _mm_loadu_pd
#define VSTREAM _mm_stream_pd
#define VSET1 _mm_set1_pd
#define VADD _mm_add_pd
#define VMUL _mm_mul_pd
typedef __m128d vd;
#endif
#define VLEN (NT_BYTES / 8)

/* op: 0 copy d=x, 1 scale d=s*x, 2 add d=x+y, 3 triad d=x+s*y ; non-temporal stores. */
static void nt_kernel(int op, double *restrict d, const double *restrict x,
                      const double *restrict y, long long lo, long long hi)
{
    long long j = lo;
    vd vs = VSET1(SCALAR);
    for (; j < hi && ((uintptr_t)&d[j] & (NT_BYTES - 1)); j++) {
        d[j] = op == 0 ? x[j] : op == 1 ? SCALAR * x[j] : op == 2 ? x[j] + y[j]
                                                                   : x[j] + SCALAR * y[j];
    }
    switch (op) {
    case 0:
        for (; j + VLEN <= hi; j += VLEN)
            VSTREAM(&d[j], VLOAD(&x[j]));
        break;
    case 1:
        for (; j + VLEN <= hi; j += VLEN)
            VSTREAM(&d[j], VMUL(vs, VLOAD(&x[j])));
        break;
    case 2:
        for (; j + VLEN <= hi; j += VLEN)
            VSTREAM(&d[j], VADD(VLOAD(&x[j]), VLOAD(&y[j])));
        break;
    default:
        for (; j + VLEN <= hi; j += VLEN)
            VSTREAM(&d[j], VADD(VLOAD(&x[j]), VMUL(vs, VLOAD(&y[j]))));
        break;
    }
    for (; j < hi; j++)
        d[j] = op == 0 ? x[j] : op == 1 ? SCALAR * x[j] : op == 2 ? x[j] + y[j]
                                                                   : x[j] + SCALAR * y[j];
    _mm_sfence();
}
#endif

/* The plain kernels, on a thread's block [lo, hi): op 0 copy c=a, 1 scale b=s*c, 2 add
 * c=a+b, 3 triad a=b+s*c. Their vector path is chosen at run time where the compiler can
 * clone (GCC's and Clang's target_clones on x86-64): a build for the baseline (the wheel's,
 * -march=x86-64) carries AVX-512F and AVX2 copies of this function beside its baseline one,
 * and the loader's resolver (an ifunc) takes the best the CPU has; vector_path() names it, by
 * the same CPU test, for the result. A -march=native build's default copy is the native one. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define TB_HAVE_CLONES 1
#define TB_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef TB_HAVE_CLONES
#define TB_HAVE_CLONES 0
#define TB_CLONES
#endif

TB_CLONES static void block_kernel(int op, double *restrict a, double *restrict b,
                                   double *restrict c, long long lo, long long hi)
{
    switch (op) {
    case 0:
        for (long long j = lo; j < hi; j++)
            c[j] = a[j];
        break;
    case 1:
        for (long long j = lo; j < hi; j++)
            b[j] = SCALAR * c[j];
        break;
    case 2:
        for (long long j = lo; j < hi; j++)
            c[j] = a[j] + b[j];
        break;
    default:
        for (long long j = lo; j < hi; j++)
            a[j] = b[j] + SCALAR * c[j];
        break;
    }
}

/* Which copy of block_kernel the resolver took: "avx512f", "avx2" or "default" (the build's
 * own flags; the only one where the compiler cannot clone). */
static const char *vector_path(void)
{
#if TB_HAVE_CLONES
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return "avx512f";
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
#endif
    return "default";
}

/* One timed kernel over all threads. */
static double run_kernel(int op, int nt, double *restrict a, double *restrict b,
                         double *restrict c, long long n)
{
    double t0 = tb_now();
#pragma omp parallel
    {
        long long lo, hi;
        tb_static_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
#if TB_HAVE_NT
        if (nt) {
            switch (op) {
            case 0: nt_kernel(0, c, a, NULL, lo, hi); break;
            case 1: nt_kernel(1, b, c, NULL, lo, hi); break;
            case 2: nt_kernel(2, c, a, b, lo, hi); break;
            default: nt_kernel(3, a, b, c, lo, hi); break;
            }
        } else
#endif
        {
            (void)nt;
            block_kernel(op, a, b, c, lo, hi);
        }
    }
    return tb_now() - t0;
}

/* McCalpin's checkSTREAMresults (STREAM 5.10), epsilon 1e-13 for 8-byte doubles. */
static int check_results(const double *a, const double *b, const double *c, long long n,
                         int ntimes, char *msg, size_t msglen)
{
    double aj = 1.0, bj = 2.0, cj = 0.0, scalar = SCALAR;
    double asum = 0.0, bsum = 0.0, csum = 0.0;
    const double epsilon = 1.e-13;
    int err = 0;
    aj = 2.0E0 * aj;
    for (int k = 0; k < ntimes; k++) {
        cj = aj;
        bj = scalar * cj;
        cj = aj + bj;
        aj = bj + scalar * cj;
    }
#pragma omp parallel for reduction(+ : asum, bsum, csum)
    for (long long j = 0; j < n; j++) {
        asum += fabs(a[j] - aj);
        bsum += fabs(b[j] - bj);
        csum += fabs(c[j] - cj);
    }
    double aavg = asum / (double)n, bavg = bsum / (double)n, cavg = csum / (double)n;
    const double avg[3] = {aavg, bavg, cavg}, exp[3] = {aj, bj, cj};
    const double *arr[3] = {a, b, c};
    const char *names = "abc";
    size_t used = 0;
    msg[0] = '\0';
    for (int v = 0; v < 3; v++) {
        if (fabs(avg[v] / exp[v]) > epsilon) {
            long long ierr = 0;
            for (long long j = 0; j < n; j++)
                if (fabs(arr[v][j] / exp[v] - 1.0) > epsilon)
                    ierr++;
            err++;
            used += (size_t)snprintf(msg + used, msglen > used ? msglen - used : 0,
                                     "%sFailed Validation on array %c[], AvgRelAbsErr > epsilon "
                                     "(%e): expected value %e, AvgAbsErr %e, AvgRelAbsErr %e, "
                                     "%lld of %lld elements over epsilon",
                                     used ? "; " : "STREAM: ", names[v], epsilon, exp[v], avg[v],
                                     fabs(avg[v] / exp[v]), ierr, n);
        }
    }
    if (!err)
        snprintf(msg, msglen,
                 "STREAM: solution validates: avg error less than %e on all three arrays "
                 "(a=%.6e b=%.6e c=%.6e after %d trials)",
                 epsilon, aj, bj, cj, ntimes);
    return err == 0;
}

/* STREAM's initial values: a = 1, b = 2, c = 0 */
static double initial(int array, long long i, const void *ctx)
{
    (void)i;
    (void)ctx;
    return array == 0 ? 1.0 : array == 1 ? 2.0 : 0.0;
}

int main(int argc, char **argv)
{
    long long elements = 0;
    int trials = 20, nontemporal = 0;
    tb_opts co = {0};
    static const struct option opts[] = {
        {"elements", required_argument, 0, 'n'}, {"trials", required_argument, 0, 't'},
        {"nontemporal", no_argument, 0, 'N'},    TB_OPTION_PAGES,
        TB_OPTION_STRICT, TB_OPTION_JSON, TB_OPTION_HELP, {0, 0, 0, 0}};
    tb_prog = "stream";
    for (int o; (o = tb_getopt(argc, argv, opts)) != -1;) {
        switch (o) {
        case 'n': elements = tb_parse_count("--elements", optarg, 1000, 1LL << 40); break;
        case 't': trials = (int)tb_parse_count("--trials", optarg, 2, 100000); break;
        case 'N': nontemporal = 1; break;
        default: tb_common_option(o, &co, argv, usage);
        }
    }
    tb_no_operands(argc, argv);
    if (nontemporal && !TB_HAVE_NT)
        tb_usage_error("--nontemporal is not available on this architecture");

    tb_run run;
    tb_run_start(&run, "stream");
    long long llc = tb_llc_total_bytes();
    long long min_elems = llc > 0 ? (4 * llc + 7) / 8 : 0;
    if (elements == 0)
        elements = min_elems > 10000000 ? min_elems : 10000000;
    long long n = elements;
    tb_region reg;
    double *abc[3];
    tb_alloc_arrays(&reg, &co, n, 3, abc);
    double *a = abc[0], *b = abc[1], *c = abc[2];

    /* first touch: each thread initialises the block it computes on */
    run.threads = tb_first_touch(n, abc, 3, initial, NULL);
    tb_region_probe(&reg);

    /* STREAM's a = 2*a pass (its clock-granularity probe), part of the expected values */
    double tgran = tb_now();
#pragma omp parallel
    {
        long long lo, hi;
        tb_static_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (long long j = lo; j < hi; j++)
            a[j] = 2.0E0 * a[j];
    }
    tgran = tb_now() - tgran;

    static const char *names[4] = {"copy", "scale", "add", "triad"};
    static const int arrays[4] = {2, 2, 3, 3};
    double *times[4], *rates[4];
    for (int k = 0; k < 4; k++) {
        times[k] = tb_xcalloc((size_t)trials, sizeof(double));
        rates[k] = tb_xcalloc((size_t)trials, sizeof(double));
    }
    for (int t = 0; t < trials; t++)
        for (int k = 0; k < 4; k++) {
            times[k][t] = run_kernel(k, nontemporal, a, b, c, n);
            rates[k][t] = 1e-6 * (double)arrays[k] * sizeof(double) * (double)n / times[k][t];
        }

    /* placement recorded after the trials: where the threads ran while being measured */
    tb_place *place;
    int nplace = tb_place_omp(run.rank, &place);

    char vmsg[1024];
    int valid = check_results(a, b, c, n, trials, vmsg, sizeof vmsg);

    tb_json j;
    tbj_init(&j);
    tb_json_header(&j, &run);
    tbj_obj_begin(&j, "params");
    tbj_int(&j, "array_elements", n);
    tbj_int(&j, "bytes_per_array", n * (long long)sizeof(double));
    tbj_int(&j, "bytes_total", 3 * n * (long long)sizeof(double));
    tbj_int(&j, "element_bytes", (long long)sizeof(double));
    tbj_int(&j, "ntimes", trials);
    tbj_bool(&j, "nontemporal", nontemporal);
    tbj_str(&j, "nontemporal_method", nontemporal ? NT_METHOD : NULL);
    /* the plain kernels' copy the CPU got (--nontemporal: nontemporal_method says it) */
    tbj_str(&j, "vector_path", nontemporal ? NULL : vector_path());
    tbj_bool(&j, "vector_clones", TB_HAVE_CLONES);
    tbj_dbl(&j, "scalar", SCALAR);
    tbj_int(&j, "llc_bytes_total", llc);
    tbj_bool(&j, "elements_at_least_4x_llc", llc > 0 && n >= min_elems);
    tbj_str(&j, "partition", "static block per thread, same for first touch and kernels");
    tbj_dbl(&j, "a_scale_pass_seconds", tgran);
    tbj_str(&j, "rate_convention", "MB/s = 1e6 bytes/s; best uses the minimum time of trials 2..N");
    tbj_obj_end(&j);
    tb_json_pages(&j, &reg);
    tb_json_placement(&j, place, nplace, 1, NULL);
    tbj_obj_begin(&j, "metrics");
    for (int k = 0; k < 4; k++)
        tb_json_metric(&j, names[k], "MB/s", 1, rates[k], trials, 1);
    for (int k = 0; k < 4; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%s_time", names[k]);
        tb_json_metric(&j, nm, "s", 0, times[k], trials, 1);
    }
    tbj_obj_end(&j);
    double best = 0.0;
    for (int t = 1; t < trials; t++)
        if (rates[3][t] > best)
            best = rates[3][t];
    tb_json_headline(&j, "triad", "best", best, "MB/s", 1);
    int status = tb_json_end(&j, valid, vmsg, co.json);
    tb_region_free(&reg);
    return status;
}
