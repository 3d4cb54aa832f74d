/*
 * dgemm.c - C = A * B with OpenBLAS cblas_dgemm, N x N doubles, for topobind.
 *
 * A, B and C live in one memory region whose page size is chosen with --pages and are
 * first-touched in parallel by the OpenMP threads (static block partition). GFLOP/s per
 * repetition = 2 N^3 / t / 1e9; the headline is the median over the repetitions. The result
 * is checked against a long-double dot product for --checks random entries.
 */
#include "tb/kernel.h"

#include <cblas.h>
#include <dlfcn.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: dgemm [--n N] [--reps R] [--checks K] [--seed S] [--pages 1G|2M|thp|4k|auto]\n"
          "             [--strict] [--json FILE]\n"
          "\n"
          "Dense matrix multiply C = A*B (cblas_dgemm from OpenBLAS, row major, doubles).\n"
          "The matrices are first-touched by the OpenMP threads (OMP_NUM_THREADS); OpenBLAS is\n"
          "told to use omp_get_max_threads() threads (openblas_set_num_threads). Prints one\n"
          "JSON document (schema topobind.result/1); headline = median GFLOP/s.\n"
          "\n"
          "options:\n"
          "  --n N         matrix order (suffix k = 1e3; default 2048)\n"
          "  --reps R      timed repetitions (default 10); one untimed warm-up call precedes them\n"
          "  --checks K    random entries of C checked against a dot product (default 64)\n"
          "  --seed S      seed of the matrix contents and of the checked positions (default 1)\n"
          "  --pages KIND  page size of the matrices: 1G, 2M (hugetlbfs, must be reserved),\n"
          "                thp, 4k, auto (1G, 2M, thp, 4k in that order; default)\n"
          "  --strict      exit 3 with a hint when the requested page size is not obtained\n"
          "  --json FILE   write the JSON atomically to FILE ({rank}, {pid} expanded)\n"
          "  -h, --help    this text\n"
          "\n"
          "check: max over checked entries of |C_ij - sum_k A_ik B_kj| / sum_k |A_ik B_kj|\n"
          "must stay below 1e-10 (a correct dgemm gives ~1e-16).\n"
          "exit status: 0 ok, 2 bad arguments, 3 page size not obtained (--strict),\n"
          "4 check failed (JSON still written with valid=false).\n"
          "\n"
          "example:\n"
          "  OMP_NUM_THREADS=2 dgemm --n 2048 --reps 10 --pages 1G --strict --json dgemm.json\n",
          f);
}

/* Deterministic element value in [-0.5, 0.5) from (seed, index): parallel-init friendly. */
static inline double elem(uint64_t seed, uint64_t idx)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + idx;
    uint64_t r = tb_rand64(&s);
    return (double)(r >> 11) * 0x1.0p-53 - 0.5;
}

static const char *blas_parallel_name(int p)
{
    return p == 0 ? "sequential" : p == 1 ? "pthreads" : p == 2 ? "openmp" : "unknown";
}

/* A and B: reproducible values in [-0.5, 0.5) from the seed; C: zero */
static double initial(int array, long long i, const void *seed)
{
    uint64_t s = *(const uint64_t *)seed;
    return array == 2 ? 0.0 : elem(array == 0 ? s : s + 0x5bd1e995ULL, (uint64_t)i);
}

int main(int argc, char **argv)
{
    long long n = 2048;
    int reps = 10, checks = 64;
    uint64_t seed = 1;
    tb_opts co = {0};
    static const struct option opts[] = {
        {"n", required_argument, 0, 'n'},      {"reps", required_argument, 0, 'r'},
        {"checks", required_argument, 0, 'c'}, {"seed", required_argument, 0, 'S'},
        TB_OPTION_PAGES, TB_OPTION_STRICT, TB_OPTION_JSON, TB_OPTION_HELP, {0, 0, 0, 0}};
    tb_prog = "dgemm";
    for (int o; (o = tb_getopt(argc, argv, opts)) != -1;) {
        switch (o) {
        case 'n': n = tb_parse_count("--n", optarg, 1, 100000); break;
        case 'r': reps = (int)tb_parse_count("--reps", optarg, 1, 100000); break;
        case 'c': checks = (int)tb_parse_count("--checks", optarg, 1, 1000000); break;
        case 'S': seed = (uint64_t)tb_parse_count("--seed", optarg, 0, 1LL << 62); break;
        default: tb_common_option(o, &co, argv, usage);
        }
    }
    tb_no_operands(argc, argv);

    tb_run run;
    tb_run_start(&run, "dgemm");
    long long nn = n * n;
    tb_region reg;
    double *arrays[3];
    tb_alloc_arrays(&reg, &co, nn, 3, arrays);
    double *A = arrays[0], *B = arrays[1], *C = arrays[2];

    run.threads = tb_first_touch(nn, arrays, 3, initial, &seed);
    tb_region_probe(&reg);

    openblas_set_num_threads(omp_get_max_threads());
    int blas_threads = openblas_get_num_threads();
    int blas_par = openblas_get_parallel();
    cpu_set_t main_mask;
    if (blas_par == 1 && blas_threads > 1 && sched_getaffinity(0, sizeof main_mask, &main_mask) == 0 &&
        CPU_COUNT(&main_mask) < blas_threads)
        /* libgomp binds the main thread at start-up (OMP_PROC_BIND/OMP_PLACES), before a
         * pthreads OpenBLAS starts its workers, which inherit that mask (measured on 2 cores:
         * half the GFLOP/s). An OpenMP OpenBLAS runs on the bound OpenMP team instead. */
        fprintf(stderr, "dgemm: warning: pthreads OpenBLAS with %d threads, but the main thread is "
                        "bound to %d PU(s): its workers inherit that binding; link the OpenMP "
                        "OpenBLAS (kernels/Makefile) or unset OMP_PROC_BIND\n",
                blas_threads, CPU_COUNT(&main_mask));
    const char *blas_lib = NULL;
    Dl_info info;
    if (dladdr((void *)cblas_dgemm, &info) && info.dli_fname)
        blas_lib = info.dli_fname;

    const int N = (int)n;
    double t0 = tb_now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, A, N, B, N, 0.0, C, N);
    double warm = tb_now() - t0;
    double *gf = tb_xcalloc((size_t)reps, sizeof(double));
    double *secs = tb_xcalloc((size_t)reps, sizeof(double));
    double flops = 2.0 * (double)n * (double)n * (double)n;
    for (int r = 0; r < reps; r++) {
        t0 = tb_now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, A, N, B, N, 0.0, C,
                    N);
        secs[r] = tb_now() - t0;
        gf[r] = flops / secs[r] / 1e9;
    }

    tb_place *place;
    int nplace = tb_place_omp(run.rank, &place);

    /* check random entries against a long-double dot product */
    const double tol = 1e-10;
    double maxrel = 0.0;
    int worst_i = 0, worst_j = 0;
    uint64_t st = seed ^ 0xC0FFEEULL;
    for (int c = 0; c < checks; c++) {
        int i = (int)(tb_rand64(&st) % (uint64_t)n), jj = (int)(tb_rand64(&st) % (uint64_t)n);
        long double ref = 0.0L, mag = 0.0L;
        for (long long k = 0; k < n; k++) {
            long double p = (long double)A[(long long)i * n + k] * (long double)B[k * n + jj];
            ref += p;
            mag += p < 0 ? -p : p;
        }
        double rel = (double)(fabsl((long double)C[(long long)i * n + jj] - ref) /
                              (mag > 0 ? mag : 1.0L));
        if (!(rel <= maxrel)) { /* also catches NaN */
            maxrel = rel;
            worst_i = i;
            worst_j = jj;
        }
    }
    int valid = maxrel < tol;
    char vmsg[512];
    snprintf(vmsg, sizeof vmsg,
             "DGEMM: %s: %d random entries of C checked against a long-double dot product, max "
             "relative error %.3e (tolerance %.0e, worst C[%d][%d])",
             valid ? "result validates" : "FAILED", checks, maxrel, tol, worst_i, worst_j);

    double mn, mx, avg, med;
    tb_stats(gf, reps, &mn, &mx, &avg, &med);

    tb_json j;
    tbj_init(&j);
    tb_json_header(&j, &run);
    tbj_obj_begin(&j, "params");
    tbj_int(&j, "n", n);
    tbj_int(&j, "reps", reps);
    tbj_int(&j, "warmup_calls", 1);
    tbj_dbl(&j, "warmup_seconds", warm);
    tbj_dbl(&j, "flops_per_rep", flops);
    tbj_int(&j, "bytes_per_matrix", nn * (long long)sizeof(double));
    tbj_str(&j, "layout_order", "row-major, no transpose, alpha=1, beta=0");
    tbj_str(&j, "blas", "OpenBLAS");
    tbj_str(&j, "blas_library", blas_lib);
    tbj_str(&j, "blas_config", openblas_get_config());
    tbj_str(&j, "blas_corename", openblas_get_corename());
    tbj_int(&j, "blas_threads", blas_threads);
    tbj_str(&j, "blas_parallel", blas_parallel_name(blas_par));
    tbj_int(&j, "checks", checks);
    tbj_dbl(&j, "max_rel_error", maxrel);
    tbj_dbl(&j, "tolerance", tol);
    tbj_int(&j, "seed", (long long)seed);
    tbj_str(&j, "placement_note",
            blas_par == 2 ? "placement = OpenMP threads (first touch and BLAS)"
                          : "placement = OpenMP threads that first-touched the matrices; the "
                            "OpenBLAS worker threads are separate pthreads");
    tbj_obj_end(&j);
    tb_json_pages(&j, &reg);
    tb_json_placement(&j, place, nplace, 1, NULL);
    tbj_obj_begin(&j, "metrics");
    tb_json_metric(&j, "gflops", "GFLOP/s", 1, gf, reps, 0);
    tb_json_metric(&j, "seconds", "s", 0, secs, reps, 0);
    tbj_obj_end(&j);
    tb_json_headline(&j, "gflops", "median", med, "GFLOP/s", 1);
    int status = tb_json_end(&j, valid, vmsg, co.json);
    tb_region_free(&reg);
    return status;
}
