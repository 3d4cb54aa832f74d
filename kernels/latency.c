/*
 * latency.c - memory load latency by a dependent random pointer chase, for topobind.
 *
 * For every working-set size the buffer's cache lines (64 B) are linked into ONE random
 * cycle (Sattolo's algorithm), so every load depends on the previous one and hardware
 * prefetchers cannot guess the next line. ns per load = time / loads, with the chase loop
 * unrolled 16x and enough loads for >= --min-time seconds per trial.
 *
 * --matrix: NUMA latency matrix (thread pinned to the first CPU of node i, memory bound to
 * node j); --bw-matrix: read-bandwidth matrix (all CPUs of node i reading an array on node j).
 */
#include "tb/kernel.h"

#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64

static void usage(FILE *f)
{
    fputs("usage: latency [--sizes LIST] [--min-time S] [--trials N] [--pages 1G|2M|thp|4k|auto]\n"
          "               [--strict] [--cpu C] [--mem-node M] [--matrix] [--bw-matrix]\n"
          "               [--bw-local]\n"
          "               [--matrix-size BYTES] [--bw-size BYTES] [--seed S] [--json FILE]\n"
          "\n"
          "Load-to-use memory latency (ns per dependent load) by a random pointer chase over\n"
          "one random cyclic permutation (Sattolo) of the 64-byte cache lines of a buffer,\n"
          "for several working-set sizes. Single thread. Prints one JSON document (schema\n"
          "topobind.result/1); headline = median ns at the largest working set.\n"
          "\n"
          "options:\n"
          "  --sizes LIST       working-set sizes, comma separated, binary suffixes K/M/G\n"
          "                     (default 16K,256K,2M,32M,256M,1G)\n"
          "  --min-time S       seconds per trial at least (default 0.1)\n"
          "  --trials N         trials per size (default 3)\n"
          "  --pages KIND       1G, 2M (hugetlbfs, must be reserved), thp, 4k, auto (default)\n"
          "  --strict           exit 3 with a hint when the requested page size is not obtained\n"
          "  --cpu C            pin the thread to CPU C (OS index) before touching the memory\n"
          "  --mem-node M       bind the buffer to NUMA node M (mbind MPOL_BIND before the\n"
          "                     first touch)\n"
          "  --matrix           also measure the NUMA latency matrix: thread on the first CPU of\n"
          "                     node i (rows), memory on node j (cols), at --matrix-size\n"
          "  --bw-matrix        also measure the NUMA read-bandwidth matrix (MB/s): one thread per\n"
          "                     CPU of node i reading an array bound to node j, --bw-size bytes\n"
          "  --bw-local         with --bw-matrix: only each node's CPUs reading their own node\n"
          "                     (the diagonal; the rest null): one pass a node, not one a pair\n"
          "  --matrix-size B    working set of the latency matrix (default: largest --sizes)\n"
          "  --bw-size B        array size of the bandwidth matrix (default: max(4 x LLC, 256M))\n"
          "  --seed S           seed of the random permutation (default 1)\n"
          "  --json FILE        write the JSON atomically to FILE ({rank}, {pid} expanded)\n"
          "  -h, --help         this text\n"
          "\n"
          "exit status: 0 ok, 2 bad arguments, 3 page size not obtained (--strict).\n"
          "\n"
          "examples:\n"
          "  latency --sizes 1G --pages 1G --strict --cpu 0 --mem-node 0\n"
          "  latency --sizes 256M --matrix --bw-matrix --pages thp --json numa.json\n",
          f);
}

/* Link the first `lines` cache lines of buf into one random cycle (Sattolo's algorithm). */
static void build_chain(char *buf, long long lines, uint64_t seed)
{
    uint32_t *perm = tb_xmalloc(sizeof(uint32_t) * (size_t)lines);
    uint64_t st = seed;
    for (long long i = 0; i < lines; i++)
        perm[i] = (uint32_t)i;
    for (long long i = lines - 1; i > 0; i--) {
        long long j = (long long)(tb_rand64(&st) % (uint64_t)i); /* 0 <= j < i */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    /* line i points to line perm[i]: Sattolo's permutation is a single cycle */
    for (long long i = 0; i < lines; i++)
        *(char **)(buf + (size_t)i * LINE) = buf + (size_t)perm[i] * LINE;
    free(perm);
}

#define STEP p = *(char **)p;
#define STEP16 STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP STEP

static void *volatile sink;

__attribute__((noinline)) static char *chase(char *p, long long loads)
{
    for (long long i = 0; i < loads; i += 16) {
        STEP16
    }
    return p;
}

/* Calibrate the number of loads for >= min_time, then time `trials` chases. */
static long long measure(char *buf, long long lines, double min_time, int trials, double *ns)
{
    char *p = buf;
    /* Warm-up: one pass over a buffer that may fit a cache (up to 64 MiB), so its timed
     * chases find it there; a larger one is warmed by the calibration's chases below (at
     * least min_time of them); a fixed 2^20 loads cost 0.23 s a size at 230 ns a load, a
     * quarter of a quick latency job, and on a node at 25 % of a CPU four times that. */
    long long warm = lines <= (1LL << 20) ? (lines + 15) / 16 * 16 : 0;
    p = chase(p, warm);
    long long loads = 4096;
    for (;;) {
        double t0 = tb_now();
        p = chase(p, loads);
        double t = tb_now() - t0;
        if (t >= min_time)
            break;
        double f = t > 0 ? 1.25 * min_time / t : 16.0;
        if (f < 2.0)
            f = 2.0;
        if (f > 64.0)
            f = 64.0;
        loads = ((long long)((double)loads * f) + 15) / 16 * 16;
    }
    for (int k = 0; k < trials; k++) {
        double t0 = tb_now();
        p = chase(p, loads);
        ns[k] = (tb_now() - t0) * 1e9 / (double)loads;
    }
    sink = p;
    return loads;
}

/* First touch of the bytes the chases use (the page they fall in is faulted whole: a 1 GiB
 * page for 1G or auto); the rest of a mapping rounded up to its page size is never read, and
 * writing it cost 0.15 CPU-s a run of a 1 MiB chase on a 1 GiB page. */
static void touch_single(tb_region *r)
{
    memset(r->base, 0, r->bytes);
}

static int in_list(int x, const int *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static double median_of(double *v, int n)
{
    double mn, mx, avg, med;
    tb_stats(v, n, &mn, &mx, &avg, &med);
    return med;
}

int main(int argc, char **argv)
{
    const char *sizes_arg = "16K,256K,2M,32M,256M,1G";
    double min_time = 0.1;
    int trials = 3, cpu = -1, mem_node = -1, do_matrix = 0, do_bw = 0, bw_local = 0;
    long long matrix_size = 0, bw_size = 0;
    uint64_t seed = 1;
    tb_opts co = {0};
    static const struct option opts[] = {
        {"sizes", required_argument, 0, 'S'},      {"min-time", required_argument, 0, 'm'},
        {"trials", required_argument, 0, 't'},     {"cpu", required_argument, 0, 'c'},
        {"mem-node", required_argument, 0, 'M'},   {"matrix", no_argument, 0, 'x'},
        {"bw-matrix", no_argument, 0, 'b'},        {"matrix-size", required_argument, 0, 'X'},
        {"bw-size", required_argument, 0, 'B'},    {"seed", required_argument, 0, 'e'},
        {"bw-local", no_argument, 0, 'L'},
        TB_OPTION_PAGES, TB_OPTION_STRICT, TB_OPTION_JSON, TB_OPTION_HELP, {0, 0, 0, 0}};
    tb_prog = "latency";
    for (int o; (o = tb_getopt(argc, argv, opts)) != -1;) {
        switch (o) {
        case 'S': sizes_arg = optarg; break;
        case 'm': min_time = tb_parse_double("--min-time", optarg, 1e-4, 100.0); break;
        case 't': trials = (int)tb_parse_count("--trials", optarg, 1, 1000); break;
        case 'c': cpu = (int)tb_parse_count("--cpu", optarg, 0, CPU_SETSIZE - 1); break;
        case 'M': mem_node = (int)tb_parse_count("--mem-node", optarg, 0, 1023); break;
        case 'x': do_matrix = 1; break;
        case 'b': do_bw = 1; break;
        case 'L': bw_local = 1; break;
        case 'X': matrix_size = tb_parse_bytes("--matrix-size", optarg); break;
        case 'B': bw_size = tb_parse_bytes("--bw-size", optarg); break;
        case 'e': seed = (uint64_t)tb_parse_count("--seed", optarg, 0, 1LL << 62); break;
        default: tb_common_option(o, &co, argv, usage);
        }
    }
    tb_no_operands(argc, argv);
    if (bw_local && !do_bw)
        tb_usage_error("--bw-local needs --bw-matrix");

    /* sizes */
    int nsizes = 0;
    long long sizes[64];
    {
        char *copy = strdup(sizes_arg), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nsizes == 64)
                tb_usage_error("--sizes: at most 64 sizes");
            long long b = tb_parse_bytes("--sizes", tok);
            if (b < 1024 || b > (1LL << 40))
                tb_usage_error("--sizes: each size must be between 1K and 1T, got '%s'", tok);
            b = b / LINE * LINE;
            for (int k = 0; k < nsizes; k++)
                if (sizes[k] == b)
                    tb_usage_error("--sizes: '%s' is listed twice", tok);
            sizes[nsizes++] = b;
        }
        free(copy);
        if (nsizes == 0)
            tb_usage_error("--sizes needs at least one size, got '%s'", sizes_arg);
    }
    long long maxsize = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];
    if ((maxsize / LINE) > 0xFFFFFFFFLL)
        tb_usage_error("--sizes: at most 256 GiB (2^32 cache lines)");
    if (!matrix_size)
        matrix_size = maxsize;
    matrix_size = matrix_size / LINE * LINE;

    int *pcpus, npcpus = tb_process_cpus(&pcpus);
    if (cpu >= 0 && !in_list(cpu, pcpus, npcpus))
        tb_usage_error("--cpu %d is not in this process's affinity mask", cpu);
    int *memnodes, nmem = tb_numa_nodes(0, &memnodes);
    if (mem_node >= 0 && !in_list(mem_node, memnodes, nmem))
        tb_usage_error("--mem-node %d is not a NUMA node with memory", mem_node);

    cpu_set_t orig_mask;
    pthread_getaffinity_np(pthread_self(), sizeof orig_mask, &orig_mask);

    /* pinned first: the evidence begun by tb_run_start takes the run's CPUs from the mask */
    if (cpu >= 0 && tb_pin_self(cpu) != 0)
        tb_die(1, "cannot pin to CPU %d", cpu);
    tb_run run;
    tb_run_start(&run, "latency");
    run.threads = 1;

    /* ---- sweep over sizes in one region sized for the largest */
    tb_region reg;
    tb_region_alloc(&reg, co.pages, (size_t)maxsize, co.strict, mem_node);
    touch_single(&reg);
    tb_region_probe(&reg);

    double *ns = tb_xcalloc((size_t)nsizes * (size_t)trials, sizeof(double));
    long long *loads = tb_xcalloc((size_t)nsizes, sizeof(long long));
    for (int i = 0; i < nsizes; i++) {
        long long lines = sizes[i] / LINE;
        build_chain(reg.base, lines, seed + (uint64_t)i);
        loads[i] = measure(reg.base, lines, min_time, trials, ns + (size_t)i * trials);
    }
    tb_place self;
    tb_place_self(&self, run.rank, 0);
    /* the evidence covers the sweep: ended while its region is mapped (numa_maps sees its
     * pages), before the matrices, which place their own threads and memory */
    tb_run_measured();
    tb_region_free(&reg);

    /* ---- NUMA matrices */
    int *cnodes = NULL, ncn = 0;
    double *latm = NULL, *bwm = NULL;
    if (do_matrix || do_bw)
        ncn = tb_numa_nodes(1, &cnodes);
    if (do_matrix) {
        latm = tb_xcalloc((size_t)ncn * (size_t)nmem, sizeof(double));
        for (int i = 0; i < ncn; i++) {
            /* node i's CPUs within the process's mask: the last row pinned this thread */
            pthread_setaffinity_np(pthread_self(), sizeof orig_mask, &orig_mask);
            int *nc, k = tb_node_cpus(cnodes[i], &nc);
            for (int jn = 0; jn < nmem; jn++) {
                latm[i * nmem + jn] = NAN;
                if (k == 0)
                    continue;
                tb_pin_self(nc[0]);
                tb_region m;
                tb_region_alloc(&m, co.pages, (size_t)matrix_size, co.strict, memnodes[jn]);
                touch_single(&m);
                tb_region_probe(&m);
                double *t = tb_xcalloc((size_t)trials, sizeof(double));
                build_chain(m.base, matrix_size / LINE, seed);
                measure(m.base, matrix_size / LINE, min_time, trials, t);
                latm[i * nmem + jn] = median_of(t, trials);
                free(t);
                tb_region_free(&m);
            }
            free(nc);
        }
        pthread_setaffinity_np(pthread_self(), sizeof orig_mask, &orig_mask);
    }
    long long llc = tb_llc_total_bytes();
    if (!bw_size) {
        bw_size = 4 * llc;
        if (bw_size < (256LL << 20))
            bw_size = 256LL << 20;
    }
    bw_size = bw_size / LINE * LINE;
    if (do_bw) {
        bwm = tb_xcalloc((size_t)ncn * (size_t)nmem, sizeof(double));
        for (int i = 0; i < ncn; i++) {
            /* as above: the last row's team pinned this thread (its thread 0) */
            pthread_setaffinity_np(pthread_self(), sizeof orig_mask, &orig_mask);
            int *nc, k = tb_node_cpus(cnodes[i], &nc);
            for (int jn = 0; jn < nmem; jn++) {
                bwm[i * nmem + jn] = NAN;
                if (k == 0 || (bw_local && memnodes[jn] != cnodes[i]))
                    continue;
                tb_region m;
                tb_region_alloc(&m, co.pages, (size_t)bw_size, co.strict, memnodes[jn]);
                double *a = (double *)m.base;
                long long n = bw_size / (long long)sizeof(double);
                double best = INFINITY, total = 0.0;
#pragma omp parallel num_threads(k)
                {
                    long long lo, hi;
                    tb_pin_self(nc[omp_get_thread_num()]);
                    tb_static_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
                    for (long long x = lo; x < hi; x++)
                        a[x] = 1.0;
                }
                tb_region_probe(&m);
                for (int t = 0; t < trials + 1; t++) {
                    double sum = 0.0, t0 = tb_now();
#pragma omp parallel num_threads(k) reduction(+ : sum)
                    {
                        long long lo, hi;
                        double s = 0.0;
                        tb_static_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
#pragma omp simd reduction(+ : s)
                        for (long long x = lo; x < hi; x++)
                            s += a[x];
                        sum += s;
                    }
                    double dt = tb_now() - t0;
                    total += sum;
                    if (t > 0 && dt < best) /* first pass = warm-up */
                        best = dt;
                }
                sink = (void *)(uintptr_t)(total > 0);
                bwm[i * nmem + jn] = 1e-6 * (double)bw_size / best;
                tb_region_free(&m);
            }
            free(nc);
        }
#pragma omp parallel
        pthread_setaffinity_np(pthread_self(), sizeof orig_mask, &orig_mask);
    }

    /* ---- JSON */
    tb_json j;
    tbj_init(&j);
    tb_json_header(&j, &run);
    tbj_obj_begin(&j, "params");
    tbj_arr_begin(&j, "sizes_bytes");
    for (int i = 0; i < nsizes; i++)
        tbj_int(&j, NULL, sizes[i]);
    tbj_arr_end(&j);
    tbj_arr_begin(&j, "size_metrics");
    for (int i = 0; i < nsizes; i++) {
        char lab[32], nm[48];
        tb_bytes_label(sizes[i], lab, sizeof lab);
        snprintf(nm, sizeof nm, "latency_%s", lab);
        tbj_str(&j, NULL, nm);
    }
    tbj_arr_end(&j);
    tbj_arr_begin(&j, "loads_per_trial");
    for (int i = 0; i < nsizes; i++)
        tbj_int(&j, NULL, loads[i]);
    tbj_arr_end(&j);
    tbj_int(&j, "line_bytes", LINE);
    tbj_dbl(&j, "min_time", min_time);
    tbj_int(&j, "trials", trials);
    tbj_int(&j, "seed", (long long)seed);
    if (cpu >= 0)
        tbj_int(&j, "cpu", cpu);
    else
        tbj_null(&j, "cpu");
    if (mem_node >= 0)
        tbj_int(&j, "mem_node", mem_node);
    else
        tbj_null(&j, "mem_node");
    tbj_str(&j, "method",
            "dependent loads over one random cycle of 64-byte lines (Sattolo), unrolled x16");
    if (do_matrix)
        tbj_int(&j, "matrix_size_bytes", matrix_size);
    if (do_bw) {
        tbj_int(&j, "bw_size_bytes", bw_size);
        tbj_bool(&j, "bw_local", bw_local);
    }
    tbj_obj_end(&j);
    tb_json_pages(&j, &reg);
    tbj_arr_begin(&j, "placement");
    tb_json_place_entry(&j, &self, 1, NULL);
    tbj_arr_end(&j);
    tbj_obj_begin(&j, "metrics");
    int imax = 0;
    for (int i = 0; i < nsizes; i++) {
        char lab[32], nm[48];
        tb_bytes_label(sizes[i], lab, sizeof lab);
        snprintf(nm, sizeof nm, "latency_%s", lab);
        tb_json_metric(&j, nm, "ns", 0, ns + (size_t)i * trials, trials, 0);
        if (sizes[i] >= sizes[imax])
            imax = i;
    }
    tbj_obj_end(&j);
    {
        char lab[32], nm[48];
        tb_bytes_label(sizes[imax], lab, sizeof lab);
        snprintf(nm, sizeof nm, "latency_%s", lab);
        tb_json_headline(&j, nm, "median", median_of(ns + (size_t)imax * trials, trials), "ns", 0);
    }
    if (do_matrix || do_bw) {
        tbj_obj_begin(&j, "matrices");
        if (do_matrix)
            tb_json_matrix(&j, "latency", "ns", "numa", "numa", cnodes, ncn, memnodes, nmem, latm);
        if (do_bw)
            tb_json_matrix(&j, "read_bw", "MB/s", "numa", "numa", cnodes, ncn, memnodes, nmem,
                           bwm);
        tbj_obj_end(&j);
    }
    int valid = 1;
    for (int i = 0; i < nsizes * trials; i++)
        if (!(ns[i] > 0 && isfinite(ns[i])))
            valid = 0;
    char vmsg[256];
    snprintf(vmsg, sizeof vmsg, "latency: %s", valid ? "all timings positive and finite"
                                                     : "some timings are not positive/finite");
    return tb_json_end(&j, valid, vmsg, co.json);
}
