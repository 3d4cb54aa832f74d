/*
 * c2c.c - core-to-core latency for topobind.
 *
 * Two threads pinned to CPUs a and b (OS indexes) play ping-pong on ONE cache line with
 * contended compare-and-swap (C11 <stdatomic.h>): the thread on a turns the counter from 2r to
 * 2r+1, the thread on b from 2r+1 to 2r+2, both spinning on CAS. One round trip moves the line
 * a->b->a; the reported latency is round trip / 2 in ns, median of --samples samples of
 * --iters round trips. Every unordered pair of the CPUs is measured once (the matrix is
 * mirrored, diagonal null).
 */
#include "tb/kernel.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: c2c [--cpus LIST] [--iters N] [--samples S] [--json FILE]\n"
          "\n"
          "Core-to-core latency: a contended compare-and-swap ping-pong on one cache line\n"
          "between two threads pinned (pthread_setaffinity_np) to CPUs a and b, for every pair\n"
          "of CPUs. Latency = round trip / 2 in ns, median of the samples. Prints one JSON\n"
          "document (schema topobind.result/1) with the matrix 'c2c' (rows/cols = CPU OS\n"
          "indexes, diagonal null); headline = median over the pairs.\n"
          "\n"
          "options:\n"
          "  --cpus LIST    CPUs (OS indexes) to measure, e.g. 0,1,4-7 (default: every CPU of\n"
          "                 the process affinity mask; at least two)\n"
          "  --iters N      round trips per sample (default 5000)\n"
          "  --samples S    samples per pair (default 7); the pair's value is their median\n"
          "  --json FILE    write the JSON atomically to FILE ({rank}, {pid} expanded)\n"
          "  -h, --help     this text\n"
          "\n"
          "The number of pairs grows as n(n-1)/2: on big nodes pass a subset with --cpus.\n"
          "\n"
          "example:\n"
          "  c2c --cpus 0,1 --samples 9 --json c2c.json\n",
          f);
}

typedef struct {
    _Alignas(64) atomic_long flag;
    char pad[64 - sizeof(atomic_long)];
} cacheline_t;

typedef struct {
    cacheline_t *line;
    atomic_int *ready;
    int cpu, role, samples;
    long iters, warmup;
    int observed_cpu, pinned_ok;
    double *ns; /* samples (role 0 only) */
} worker_t;

static void wait_turn(atomic_long *flag, long from, long to)
{
    long e = from;
    while (!atomic_compare_exchange_weak_explicit(flag, &e, to, memory_order_acq_rel,
                                                  memory_order_relaxed))
        e = from;
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    w->observed_cpu = sched_getcpu();
    w->pinned_ok = w->observed_cpu == w->cpu;
    atomic_fetch_add(w->ready, 1);
    while (atomic_load(w->ready) < 2)
        ;
    atomic_long *flag = &w->line->flag;
    long r = 0, total = w->warmup + (long)w->samples * w->iters;
    if (w->role == 0) {
        for (; r < w->warmup; r++)
            wait_turn(flag, 2 * r, 2 * r + 1);
        for (int s = 0; s < w->samples; s++) {
            double t0 = tb_now();
            for (long k = 0; k < w->iters; k++, r++)
                wait_turn(flag, 2 * r, 2 * r + 1);
            /* the last round trip ends when the partner has answered */
            while (atomic_load_explicit(flag, memory_order_acquire) != 2 * r)
                ;
            w->ns[s] = (tb_now() - t0) * 1e9 / (double)w->iters / 2.0;
        }
    } else {
        for (; r < total; r++)
            wait_turn(flag, 2 * r + 1, 2 * r + 2);
    }
    return NULL;
}

static int start_pinned(pthread_t *t, worker_t *w)
{
    pthread_attr_t attr;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    int e = pthread_create(t, &attr, worker, w);
    pthread_attr_destroy(&attr);
    return e;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int *cpus = NULL, ncpus = 0, samples = 7;
    long iters = 5000;
    tb_opts co = {0};
    static const struct option opts[] = {
        {"cpus", required_argument, 0, 'c'}, {"iters", required_argument, 0, 'i'},
        {"samples", required_argument, 0, 's'}, TB_OPTION_JSON, TB_OPTION_HELP, {0, 0, 0, 0}};
    tb_prog = "c2c";
    for (int o; (o = tb_getopt(argc, argv, opts)) != -1;) {
        switch (o) {
        case 'c': ncpus = tb_parse_intlist("--cpus", optarg, &cpus); break;
        case 'i': iters = (long)tb_parse_count("--iters", optarg, 1, 100000000); break;
        case 's': samples = (int)tb_parse_count("--samples", optarg, 1, 10000); break;
        default: tb_common_option(o, &co, argv, usage);
        }
    }
    tb_no_operands(argc, argv);

    int *pcpus, npc = tb_process_cpus(&pcpus);
    if (!cpus) {
        cpus = pcpus;
        ncpus = npc;
    } else {
        for (int i = 0; i < ncpus; i++) {
            int ok = 0;
            for (int k = 0; k < npc; k++)
                ok |= pcpus[k] == cpus[i];
            if (!ok)
                tb_usage_error("--cpus: CPU %d is not in this process's affinity mask", cpus[i]);
            for (int k = 0; k < i; k++)
                if (cpus[k] == cpus[i])
                    tb_usage_error("--cpus: CPU %d is listed twice", cpus[i]);
        }
    }
    if (ncpus < 2)
        tb_usage_error("need at least two CPUs, got %d (use --cpus or a wider affinity mask)",
                       ncpus);

    tb_run run;
    tb_run_start(&run, "c2c");
    run.threads = 2;
    int npairs = ncpus * (ncpus - 1) / 2;
    double *mat = tb_xcalloc((size_t)ncpus * (size_t)ncpus, sizeof(double));
    double *pair_med = tb_xcalloc((size_t)npairs, sizeof(double));
    double *pair_samples = tb_xcalloc((size_t)npairs * (size_t)samples, sizeof(double));
    tb_place *place = tb_xcalloc((size_t)ncpus, sizeof(tb_place));
    int *placed = tb_xcalloc((size_t)ncpus, sizeof(int));
    int all_pinned = 1;
    cacheline_t *line = aligned_alloc(64, sizeof(cacheline_t));
    if (!line)
        tb_die(1, "out of memory");
    int p = 0;
    for (int a = 0; a < ncpus; a++) {
        mat[a * ncpus + a] = NAN;
        for (int b = a + 1; b < ncpus; b++, p++) {
            atomic_int ready = 0;
            worker_t w[2];
            pthread_t th[2];
            atomic_store(&line->flag, 0);
            for (int k = 0; k < 2; k++) {
                memset(&w[k], 0, sizeof w[k]);
                w[k].line = line;
                w[k].ready = &ready;
                w[k].cpu = k ? cpus[b] : cpus[a];
                w[k].role = k;
                w[k].samples = samples;
                w[k].iters = iters;
                w[k].warmup = iters / 10 + 100;
                w[k].ns = pair_samples + (size_t)p * samples;
                int e = start_pinned(&th[k], &w[k]);
                if (e)
                    tb_die(1, "cannot start a thread pinned to CPU %d: %s", w[k].cpu,
                           strerror(e));
            }
            pthread_join(th[0], NULL);
            pthread_join(th[1], NULL);
            for (int k = 0; k < 2; k++) {
                int idx = k ? b : a;
                all_pinned &= w[k].pinned_ok;
                if (!placed[idx]) {
                    placed[idx] = 1;
                    place[idx].rank = run.rank;
                    place[idx].thread = idx;
                    place[idx].cpu = w[k].observed_cpu;
                    place[idx].numa = tb_numa_of_cpu(w[k].observed_cpu);
                    CPU_ZERO(&place[idx].affinity);
                    CPU_SET(w[k].cpu, &place[idx].affinity);
                }
            }
            double *s = malloc(sizeof(double) * (size_t)samples);
            memcpy(s, w[0].ns, sizeof(double) * (size_t)samples);
            qsort(s, (size_t)samples, sizeof(double), cmp_dbl);
            double med = samples % 2 ? s[samples / 2]
                                     : 0.5 * (s[samples / 2 - 1] + s[samples / 2]);
            free(s);
            pair_med[p] = med;
            mat[a * ncpus + b] = mat[b * ncpus + a] = med;
        }
    }
    double mn, mx, avg, med;
    tb_stats(pair_med, npairs, &mn, &mx, &avg, &med);
    int valid = all_pinned;
    for (int i = 0; i < npairs; i++)
        valid &= pair_med[i] > 0 && isfinite(pair_med[i]);

    tb_json j;
    tbj_init(&j);
    tb_json_header(&j, &run);
    tbj_obj_begin(&j, "params");
    tbj_int_array(&j, "cpus", cpus, ncpus);
    tbj_int(&j, "iters", iters);
    tbj_int(&j, "samples", samples);
    tbj_int(&j, "warmup_round_trips", iters / 10 + 100);
    tbj_str(&j, "method",
            "contended C11 atomic_compare_exchange ping-pong on one 64-byte line; value = round "
            "trip / 2");
    tbj_bool(&j, "symmetric", 1);
    tbj_arr_begin(&j, "pairs");
    for (int a = 0; a < ncpus; a++)
        for (int b = a + 1; b < ncpus; b++) {
            int pr[2] = {cpus[a], cpus[b]};
            tbj_int_array(&j, NULL, pr, 2);
        }
    tbj_arr_end(&j);
    tbj_arr_begin(&j, "pair_samples_ns");
    for (int i = 0; i < npairs; i++)
        tbj_dbl_array(&j, NULL, pair_samples + (size_t)i * samples, samples);
    tbj_arr_end(&j);
    tbj_obj_end(&j);
    tbj_null(&j, "pages");
    tb_json_placement(&j, place, ncpus, 1, NULL);
    tbj_obj_begin(&j, "metrics");
    tb_json_metric(&j, "c2c", "ns", 0, pair_med, npairs, 0);
    tbj_obj_end(&j);
    tb_json_headline(&j, "c2c", "median", med, "ns", 0);
    tbj_obj_begin(&j, "matrices");
    tb_json_matrix(&j, "c2c", "ns", "cpu", "cpu", cpus, ncpus, cpus, ncpus, mat);
    tbj_obj_end(&j);
    char vmsg[256];
    snprintf(vmsg, sizeof vmsg, "c2c: %s",
             valid ? "every pair measured with both threads on their CPUs, latencies positive"
             : all_pinned ? "some latencies are not positive/finite"
                          : "a thread did not run on the CPU it was pinned to");
    return tb_json_end(&j, valid, vmsg, co.json);
}
