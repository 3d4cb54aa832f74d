/*
 * whereami.c - placement probe for topobind.
 *
 * Every OpenMP thread spins for --spin-ms (so the OS scheduler has settled) and records its
 * rank, thread number, CPU (sched_getcpu, OS index), NUMA node, affinity mask (OS indexes,
 * pthread_getaffinity_np) and host; params.device_env holds the rank's GPU/NIC selection
 * variables (ROCR_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, ZE_AFFINITY_MASK,
 * ZE_FLAT_DEVICE_HIERARCHY, UCX_NET_DEVICES); params.gpu_runtime what the rank's own GPU
 * runtime shows it: the CUDA driver (libcuda.so.1) or HIP (libamdhip64.so), loaded with
 * dlopen at run time (no build-time dependency), each device's PCI bus id and UUID, in the
 * runtime's order; {"api": null} when neither library loads (no driver on this node).
 *
 *   whereami       rank from the launcher environment (OMPI_COMM_WORLD_RANK, PMIX_RANK,
 *                  PMI_RANK, SLURM_PROCID: tb_env_rank); every rank prints its own one-line
 *                  JSON document, so a multi-rank job's stdout is JSON Lines.
 *   whereami-mpi   (built with -DWITH_MPI) rank 0 gathers all ranks and prints ONE document.
 */
#include "tb_common.h"

#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <unistd.h>

#ifdef WITH_MPI
#include <mpi.h>
#define PROG "whereami-mpi"
#else
#define PROG "whereami"
#endif

typedef struct {
    tb_place p;
    int omp_place;
    char host[256];
} entry_t;

static void usage(FILE *f)
{
    fputs("usage: " PROG " [--spin-ms MS] [--json FILE]\n"
          "\n"
          "Placement probe: each OpenMP thread (OMP_NUM_THREADS; OMP_PLACES and OMP_PROC_BIND\n"
          "are honoured) spins for MS milliseconds, then records rank, thread, cpu (OS index\n"
          "from sched_getcpu), numa node, affinity mask (OS indexes) and host. Prints the\n"
          "topobind.result/1 JSON with kernel 'whereami' (no metrics, headline null).\n"
#ifdef WITH_MPI
          "MPI build: rank 0 gathers every rank's threads and prints ONE document for the job.\n"
#else
          "The rank comes from OMPI_COMM_WORLD_RANK / PMIX_RANK / PMI_RANK / SLURM_PROCID;\n"
          "every rank prints one line, so the output of a multi-rank launch is JSON Lines.\n"
#endif
          "\n"
          "options:\n"
          "  --spin-ms MS  busy-wait before sampling the CPU (default 20)\n"
          "  --json FILE   write the JSON atomically to FILE ({rank}, {pid} expanded"
#ifdef WITH_MPI
          "; rank 0 only"
#endif
          ")\n"
          "  -h, --help    this text\n"
          "\n"
          "examples:\n"
          "  OMP_NUM_THREADS=2 OMP_PLACES='{0},{1}' OMP_PROC_BIND=close whereami\n"
#ifdef WITH_MPI
          "  mpirun -np 2 --bind-to core whereami-mpi\n",
#else
          "  srun -n 4 -c 2 whereami > placement.jsonl\n",
#endif
          f);
}

static void spin(double seconds)
{
    double t0 = tb_now();
    volatile unsigned long x = 0;
    while (tb_now() - t0 < seconds)
        x++;
}

static const char *bind_name(omp_proc_bind_t b)
{
    switch (b) {
    case omp_proc_bind_false: return "false";
    case omp_proc_bind_true: return "true";
    case omp_proc_bind_master: return "primary";
    case omp_proc_bind_close: return "close";
    case omp_proc_bind_spread: return "spread";
    default: return "unknown";
    }
}

/* The memory policy this process runs under (get_mempolicy) and the NUMA node where a page it
 * touches lands (move_pages with no target: a query); fixed size, so MPI can gather it. */
#define MEM_NODES 1024
typedef struct {
    int rank;
    int mode; /* flagless MPOL_* mode, -1 unknown */
    int test_page_node; /* -1 unknown */
    unsigned long mask[MEM_NODES / (8 * sizeof(unsigned long))];
    char host[256];
} memory_t;

static void memory_probe(memory_t *m, int rank, const char *host)
{
    memset(m, 0, sizeof *m);
    m->rank = rank;
    snprintf(m->host, sizeof m->host, "%s", host);
    int mode = -1;
    if (syscall(SYS_get_mempolicy, &mode, m->mask, (unsigned long)MEM_NODES, NULL, 0UL) != 0)
        mode = -1;
    m->mode = mode < 0 ? -1 : (mode & ~((1 << 15) | (1 << 14) | (1 << 13)));
    m->test_page_node = -1;
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED) {
        page[0] = 1;
        void *pages[1] = {page};
        if (syscall(SYS_move_pages, 0, 1UL, pages, NULL, &m->test_page_node, 0) != 0)
            m->test_page_node = -1;
        munmap(page, 4096);
    }
}

/* "mempolicy", "mempolicy_nodes" and "test_page_node" of one rank's memory. */
static void memory_fields(tb_json *j, const memory_t *m)
{
    static const char *names[] = {"default", "preferred", "bind", "interleave", "local",
                                  "preferred_many", "weighted_interleave"};
    tbj_str(j, "mempolicy", m->mode >= 0 && m->mode < 7 ? names[m->mode] : "unknown");
    int ids[MEM_NODES], n = 0;
    const int bits = 8 * sizeof(unsigned long);
    for (int i = 0; i < MEM_NODES; i++)
        if (m->mask[i / bits] >> (i % bits) & 1UL)
            ids[n++] = i;
    tbj_int_array(j, "mempolicy_nodes", ids, n);
    tbj_int(j, "test_page_node", m->test_page_node);
}

static void env_param(tb_json *j, const char *name)
{
    const char *v = getenv(name);
    tbj_str(j, name, v);
}

#ifndef WITH_MPI
/* ---- the GPUs this rank's runtime shows (params.gpu_runtime) ---- */
#define TB_MAX_GPUS 64

typedef struct {
    const char *api;   /* "cuda", "hip", NULL: no runtime library loaded */
    const char *error; /* why the runtime listed nothing, NULL: it listed */
    int code;          /* the runtime's error code (cuInit's CUresult), 0: none */
    int n;
    char pci[TB_MAX_GPUS][32];
    char uuid[TB_MAX_GPUS][48];
} gpu_seen_t;

static void uuid_text(char *out, size_t len, const unsigned char b[16])
{
    snprintf(out, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* Why cuInit failed, in the driver's words (cuGetErrorName): a real driver answers
 * CUDA_ERROR_INVALID_DEVICE (101) to an invalid CUDA_DEVICE_ORDER (an empty one too) and to a
 * CUDA_VISIBLE_DEVICES naming an index twice, not only to a missing or broken driver
 * (measured on an H200 node: tests/launch/data/cuda-visible-h200.tsv). */
static const char *cuda_init_error(void *lib, int rc)
{
    static char why[96];
    typedef int (*name_f)(int, const char **);
    name_f name_of = (name_f)dlsym(lib, "cuGetErrorName");
    const char *name = NULL;
    if (!name_of || name_of(rc, &name) != 0 || !name)
        name = "unknown error";
    snprintf(why, sizeof why, "cuInit failed: %.60s (%d)", name, rc);
    return why;
}

/* The CUDA driver API, as a CUDA program's runtime sees it (CUDA_VISIBLE_DEVICES and
 * CUDA_DEVICE_ORDER apply): 1 when libcuda.so.1 loaded. */
static int cuda_devices(gpu_seen_t *g)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    typedef int (*init_f)(unsigned);
    typedef int (*count_f)(int *);
    typedef int (*get_f)(int *, int);
    typedef int (*bus_f)(char *, int, int);
    typedef int (*uuid_f)(unsigned char *, int);
    init_f init = (init_f)dlsym(lib, "cuInit");
    count_f count = (count_f)dlsym(lib, "cuDeviceGetCount");
    get_f get = (get_f)dlsym(lib, "cuDeviceGet");
    bus_f bus = (bus_f)dlsym(lib, "cuDeviceGetPCIBusId");
    uuid_f uuid = (uuid_f)dlsym(lib, "cuDeviceGetUuid_v2");
    if (!uuid)
        uuid = (uuid_f)dlsym(lib, "cuDeviceGetUuid");
    g->api = "cuda";
    int n = 0, rc;
    if (!init || !count || !get || !bus) {
        g->error = "libcuda.so.1 lacks cuInit/cuDeviceGetCount/cuDeviceGetPCIBusId";
    } else if ((rc = init(0)) != 0) {
        g->code = rc;
        g->error = rc == 100 ? "cuInit: no CUDA device visible (CUDA_ERROR_NO_DEVICE)"
                             : cuda_init_error(lib, rc);
    } else if (count(&n) != 0) {
        g->error = "cuDeviceGetCount failed";
    }
    for (int i = 0; !g->error && i < n && g->n < TB_MAX_GPUS; i++) {
        int dev = 0;
        unsigned char b[16];
        if (get(&dev, i) != 0 || bus(g->pci[g->n], 32, dev) != 0)
            continue;
        g->uuid[g->n][0] = 0;
        if (uuid && uuid(b, dev) == 0)
            uuid_text(g->uuid[g->n], sizeof g->uuid[0], b);
        g->n++;
    }
    return 1; /* libcuda stays loaded: unloading a driver library is not worth the risk */
}

/* HIP (ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES apply): 1 when libamdhip64 loaded. */
static int hip_devices(gpu_seen_t *g)
{
    static const char *names[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
    void *lib = NULL;
    for (size_t k = 0; !lib && k < sizeof names / sizeof names[0]; k++)
        lib = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    typedef int (*count_f)(int *);
    typedef int (*bus_f)(char *, int, int);
    count_f count = (count_f)dlsym(lib, "hipGetDeviceCount");
    bus_f bus = (bus_f)dlsym(lib, "hipDeviceGetPCIBusId");
    g->api = "hip";
    int n = 0;
    if (!count || !bus)
        g->error = "libamdhip64 lacks hipGetDeviceCount/hipDeviceGetPCIBusId";
    else if (count(&n) != 0)
        g->error = "hipGetDeviceCount failed (no device visible or no driver)";
    for (int i = 0; !g->error && i < n && g->n < TB_MAX_GPUS; i++) {
        if (bus(g->pci[g->n], 32, i) == 0) {
            g->uuid[g->n][0] = 0;
            g->n++;
        }
    }
    return 1;
}

static void gpu_runtime_fields(tb_json *j)
{
    static gpu_seen_t g; /* 64 x 80 bytes: not on the stack */
    memset(&g, 0, sizeof g);
    if (!cuda_devices(&g))
        hip_devices(&g);
    tbj_obj_begin(j, "gpu_runtime");
    tbj_str(j, "api", g.api);
    tbj_str(j, "error", g.error);
    if (g.code)
        tbj_int(j, "code", g.code);
    else
        tbj_str(j, "code", NULL);
    tbj_arr_begin(j, "devices");
    for (int i = 0; i < g.n; i++) {
        tbj_obj_begin(j, NULL);
        g.pci[i][31] = 0;
        tbj_str(j, "pci", g.pci[i]);
        tbj_str(j, "uuid", g.uuid[i][0] ? g.uuid[i] : NULL);
        tbj_obj_end(j);
    }
    tbj_arr_end(j);
    tbj_obj_end(j);
}
#endif

/* --help: the text, and MPI finalised before the exit */
static void help(FILE *f)
{
    usage(f);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
}

int main(int argc, char **argv)
{
    double spin_ms = 20.0;
    tb_opts co = {0};
    static const struct option opts[] = {
        {"spin-ms", required_argument, 0, 'S'}, TB_OPTION_JSON, TB_OPTION_HELP, {0, 0, 0, 0}};
    tb_prog = PROG;
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    for (int o; (o = tb_getopt(argc, argv, opts)) != -1;) {
        switch (o) {
        case 'S': spin_ms = tb_parse_double("--spin-ms", optarg, 0.0, 60000.0); break;
        default: tb_common_option(o, &co, argv, help);
        }
    }
    tb_no_operands(argc, argv);

    tb_run run;
    tb_run_start(&run, "whereami");
#ifdef WITH_MPI
    MPI_Comm_rank(MPI_COMM_WORLD, &run.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &run.ranks);
#endif
    int max = omp_get_max_threads(), n = 0;
    entry_t *mine = tb_xcalloc((size_t)max, sizeof(entry_t));
#pragma omp parallel num_threads(max)
    {
        int t = omp_get_thread_num();
#pragma omp single
        n = omp_get_num_threads();
        spin(spin_ms / 1000.0);
        if (t < max) {
            tb_place_self(&mine[t].p, run.rank, t);
            mine[t].omp_place = omp_get_place_num();
            snprintf(mine[t].host, sizeof mine[t].host, "%s", run.host);
        }
    }
    run.threads = n;
    memory_t memory;
    memory_probe(&memory, run.rank, run.host);
    memory_t *memories = &memory;
    int nmem = 1;

    entry_t *all = mine;
    int total = n;
#ifdef WITH_MPI
    int max_threads = n;
    int *counts = NULL, *displs = NULL, *bcounts = NULL;
    if (run.rank == 0) {
        counts = tb_xcalloc((size_t)run.ranks, sizeof(int));
        displs = tb_xcalloc((size_t)run.ranks, sizeof(int));
        bcounts = tb_xcalloc((size_t)run.ranks, sizeof(int));
    }
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (run.rank == 0) {
        total = 0;
        for (int r = 0; r < run.ranks; r++) {
            displs[r] = total * (int)sizeof(entry_t);
            bcounts[r] = counts[r] * (int)sizeof(entry_t);
            total += counts[r];
            if (counts[r] > max_threads)
                max_threads = counts[r];
        }
        all = tb_xcalloc((size_t)total, sizeof(entry_t));
    }
    MPI_Gatherv(mine, n * (int)sizeof(entry_t), MPI_BYTE, all, bcounts, displs, MPI_BYTE, 0,
                MPI_COMM_WORLD);
    if (run.rank == 0) {
        memories = tb_xcalloc((size_t)run.ranks, sizeof(memory_t));
        nmem = run.ranks;
    }
    MPI_Gather(&memory, (int)sizeof(memory_t), MPI_BYTE, memories, (int)sizeof(memory_t),
               MPI_BYTE, 0, MPI_COMM_WORLD);
    char libver[MPI_MAX_LIBRARY_VERSION_STRING];
    int lvlen = 0;
    MPI_Get_library_version(libver, &lvlen);
    libver[strcspn(libver, "\n,")] = '\0';
    if (run.rank != 0) {
        MPI_Finalize();
        return 0;
    }
    run.threads = max_threads;
#endif

    tb_json j;
    tbj_init(&j);
    tb_json_header(&j, &run);
    tbj_obj_begin(&j, "params");
    tbj_dbl(&j, "spin_ms", spin_ms);
#ifdef WITH_MPI
    tbj_bool(&j, "mpi", 1);
    tbj_str(&j, "mpi_library", libver);
#else
    tbj_bool(&j, "mpi", 0);
#endif
    env_param(&j, "OMP_NUM_THREADS");
    env_param(&j, "OMP_PLACES");
    env_param(&j, "OMP_PROC_BIND");
    /* the per-rank device variables of GPU plans (topobind verify checks them) */
    tbj_obj_begin(&j, "device_env");
    env_param(&j, "ROCR_VISIBLE_DEVICES");
    env_param(&j, "CUDA_VISIBLE_DEVICES");
    env_param(&j, "CUDA_DEVICE_ORDER");
    env_param(&j, "ZE_AFFINITY_MASK");
    env_param(&j, "ZE_FLAT_DEVICE_HIERARCHY");
    env_param(&j, "UCX_NET_DEVICES");
    tbj_obj_end(&j);
#ifndef WITH_MPI
    gpu_runtime_fields(&j); /* the MPI build gathers no GPUs: verify says UNVERIFIABLE */
#endif
    memory_fields(&j, &memory); /* this rank's (rank 0's in the MPI build) */
    /* every rank's memory, one object each (the MPI build gathers them to rank 0) */
    tbj_arr_begin(&j, "rank_memory");
    for (int r = 0; r < nmem; r++) {
        tbj_obj_begin(&j, NULL);
        tbj_int(&j, "rank", memories[r].rank);
        tbj_str(&j, "host", memories[r].host);
        memory_fields(&j, &memories[r]);
        tbj_obj_end(&j);
    }
    tbj_arr_end(&j);
    tbj_str(&j, "omp_proc_bind", bind_name(omp_get_proc_bind()));
    tbj_arr_begin(&j, "omp_places");
    for (int pl = 0; pl < omp_get_num_places(); pl++) {
        int np = omp_get_place_num_procs(pl);
        int *ids = tb_xcalloc((size_t)(np ? np : 1), sizeof(int));
        omp_get_place_proc_ids(pl, ids);
        tbj_int_array(&j, NULL, ids, np);
        free(ids);
    }
    tbj_arr_end(&j);
    tbj_arr_begin(&j, "thread_place");
    for (int i = 0; i < total; i++)
        tbj_int(&j, NULL, all[i].omp_place);
    tbj_arr_end(&j);
    tbj_obj_end(&j);
    tbj_null(&j, "pages");
    tbj_arr_begin(&j, "placement");
    for (int i = 0; i < total; i++)
        tb_json_place_entry(&j, &all[i].p, 1, all[i].host);
    tbj_arr_end(&j);
    tbj_obj_begin(&j, "metrics");
    tbj_obj_end(&j);
    tbj_null(&j, "headline");
    char vmsg[256];
    snprintf(vmsg, sizeof vmsg, "whereami: %d thread(s) of %d rank(s) placed", total,
#ifdef WITH_MPI
             run.ranks
#else
             1
#endif
    );
    tb_json_end(&j, 1, vmsg, co.json);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}
