/*
 * tb_kernel.c - the main() scaffolding every kernel shares: the command-line options all of
 * them take (--json, --help; --pages and --strict for kernels with a big buffer) and getopt's
 * errors, the page-aligned arrays of one memory region, and the end of the result envelope.
 */
#include "tb/kernel.h"

#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int tb_getopt(int argc, char **argv, const struct option *opts)
{
    opterr = 0;
    return getopt_long(argc, argv, ":h", opts, NULL);
}

void tb_common_option(int o, tb_opts *c, char **argv, void (*help)(FILE *))
{
    switch (o) {
    case TB_OPT_PAGES:
        if (tb_parse_pages(optarg, &c->pages) != 0)
            tb_usage_error("--pages must be one of 1G, 2M, thp, 4k, auto, got '%s'", optarg);
        break;
    case TB_OPT_STRICT: c->strict = 1; break;
    case TB_OPT_JSON: c->json = optarg; break;
    case 'h':
        help(stdout);
        exit(0);
    case ':': tb_usage_error("option %s needs a value", argv[optind - 1]);
    default: tb_usage_error("unknown option '%s'", argv[optind - 1]);
    }
}

void tb_no_operands(int argc, char **argv)
{
    if (optind < argc)
        tb_usage_error("unexpected argument '%s'", argv[optind]);
}

void tb_alloc_arrays(tb_region *reg, const tb_opts *c, long long elems, int count,
                     double **arrays)
{
    size_t stride = ((size_t)elems * sizeof(double) + 4095) / 4096 * 4096; /* page-aligned */
    tb_region_alloc(reg, c->pages, (size_t)count * stride, c->strict, -1);
    for (int i = 0; i < count; i++)
        arrays[i] = (double *)((char *)reg->base + (size_t)i * stride);
}

int tb_first_touch(long long elems, double **arrays, int count,
                   double (*value)(int array, long long i, const void *ctx), const void *ctx)
{
    int nthreads = 1;
#pragma omp parallel
    {
        long long lo, hi;
#pragma omp single
        nthreads = omp_get_num_threads();
        tb_static_range(elems, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (long long i = lo; i < hi; i++)
            for (int k = 0; k < count; k++)
                arrays[k][i] = value(k, i, ctx);
    }
    return nthreads;
}

int tb_json_end(tb_json *j, int valid, const char *validation, const char *path)
{
    tb_json_evidence(j);
    tbj_bool(j, "valid", valid);
    tbj_str(j, "validation", validation);
    tbj_obj_end(j);
    tb_emit(j, path);
    tbj_free(j);
    return valid ? 0 : TB_EXIT_INVALID;
}
