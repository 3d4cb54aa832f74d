/*
 * whereami.c - placement probe for topobind.
 *
 * Every OpenMP thread spins for --spin-ms (so the OS scheduler has settled) and records its
 * rank, thread number, CPU (sched_getcpu, OS index), NUMA node, affinity mask (OS indexes,
 * pthread_getaffinity_np) and host; params.device_env holds the rank's GPU/NIC selection
 * variables (ROCR_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, ZE_AFFINITY_MASK,
 * ZE_FLAT_DEVICE_HIERARCHY, UCX_NET_DEVICES); params.gpu_runtimes what the rank's own GPU
 * runtimes show it: the CUDA driver (libcuda.so.1) and HIP (libamdhip64.so), each loaded
 * with dlopen at run time (no build-time dependency) in a child bounded in time, each
 * device's PCI bus id and UUID (or why it could not be read), in the runtime's order; one
 * object per library found, [] when neither is (no driver on this node).
 *
 *   whereami       rank from the launcher environment (OMPI_COMM_WORLD_RANK, PMIX_RANK,
 *                  PMI_RANK, SLURM_PROCID: tb_env_rank); every rank prints its own one-line
 *                  JSON document, so a multi-rank job's stdout is JSON Lines.
 *   whereami-mpi   (built with -DWITH_MPI) rank 0 gathers all ranks and prints ONE document.
 */
#include "tb/kernel.h"

#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dlfcn.h>
#include <signal.h>
#include <time.h>
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
/* ---- the GPUs this rank's runtimes show (params.gpu_runtimes) ----
 * Each runtime is asked in a child process (fork, before any thread starts) that writes into
 * shared memory, so a driver that never returns or crashes cannot hang or kill the probe: the
 * child gets TOPOBIND_GPU_PROBE_TIMEOUT seconds (default 60; cuInit of a large node without
 * the persistence daemon takes seconds), then is killed, and the call it was in is named.
 * The count is bounded (TB_MAX_GPUS devices read); a device that cannot be read is listed
 * with its error, never skipped; every string from a driver is cut and escaped to printable
 * ASCII (\xNN). */
#define TB_MAX_GPUS 64
#define TB_GPU_TEXT 160

typedef struct {
    int present;   /* the library was found (loaded, or refused by the loader) */
    int loaded;    /* dlopen succeeded */
    int has_code;  /* the runtime's error code of the call that failed */
    int code;
    int has_count; /* what the runtime's count said (it may exceed TB_MAX_GPUS) */
    int count;
    int n;                  /* devices listed (read or not) */
    char call[40];          /* the call in progress: what hung or crashed */
    char error[TB_GPU_TEXT]; /* why the runtime listed nothing; "" when it listed */
    char pci[TB_MAX_GPUS][32];
    char uuid[TB_MAX_GPUS][48];
    char dev_error[TB_MAX_GPUS][96]; /* "": read */
} gpu_seen_t;

/* src (at most max bytes, NUL or not) as printable ASCII, others as \xNN, into out */
static void clean_text(char *out, size_t len, const char *src, size_t max)
{
    size_t o = 0;
    for (size_t i = 0; src && i < max && src[i] && o + 5 < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c >= 0x20 && c < 0x7f)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
    }
    out[o] = 0;
}

static void uuid_text(char *out, size_t len, const unsigned char b[16])
{
    snprintf(out, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

typedef struct {
    const char *api;               /* "cuda", "hip" */
    const char *const *libraries;  /* names tried, in order */
    const char *init, *count, *get, *bus; /* symbols; init NULL: none (HIP) */
} runtime_t;

static const char *const cuda_libs[] = {"libcuda.so.1", NULL};
static const char *const hip_libs[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so",
                                       NULL};
static const runtime_t RUNTIMES[] = {
    {"cuda", cuda_libs, "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetPCIBusId"},
    {"hip", hip_libs, NULL, "hipGetDeviceCount", "hipDeviceGet", "hipDeviceGetPCIBusId"},
};
#define N_RUNTIMES ((int)(sizeof RUNTIMES / sizeof RUNTIMES[0]))

/* The runtime's name of error code rc (cuGetErrorName, hipGetErrorName), cleaned */
static void error_name(void *lib, const runtime_t *rt, int rc, char *out, size_t len)
{
    const char *name = NULL;
    if (strcmp(rt->api, "cuda") == 0) {
        typedef int (*name_f)(int, const char **);
        name_f f = (name_f)dlsym(lib, "cuGetErrorName");
        if (!f || f(rc, &name) != 0)
            name = NULL;
    } else {
        typedef const char *(*name_f)(int);
        name_f f = (name_f)dlsym(lib, "hipGetErrorName");
        name = f ? f(rc) : NULL;
    }
    char text[80];
    clean_text(text, sizeof text, name ? name : "unknown error", 48);
    snprintf(out, len, "%s (%d)", text, rc);
}

static void set_call(gpu_seen_t *g, const char *call, int dev)
{
    if (dev < 0)
        snprintf(g->call, sizeof g->call, "%s", call);
    else
        snprintf(g->call, sizeof g->call, "%s(device %d)", call, dev);
}

/* dlopen the runtime's library: 1 when loaded; a library the loader refused: present, with
 * the loader's words in g->error; none found: not present */
static void *open_runtime(const runtime_t *rt, gpu_seen_t *g)
{
    for (int k = 0; rt->libraries[k]; k++) {
        snprintf(g->call, sizeof g->call, "dlopen(%.28s)", rt->libraries[k]);
        void *lib = dlopen(rt->libraries[k], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            g->present = g->loaded = 1;
            return lib;
        }
        const char *why = dlerror();
        char missing[96];
        snprintf(missing, sizeof missing, "%s: cannot open shared object file", rt->libraries[k]);
        if (why && strncmp(why, missing, strlen(missing)) != 0 && !g->present) {
            g->present = 1;
            const char *sep = why[0] == '/' ? strstr(why, ": ") : NULL;
            char text[120]; /* the loader's reason, without the library's path */
            clean_text(text, sizeof text, sep ? sep + 2 : why, 110);
            snprintf(g->error, sizeof g->error, "%.24s failed to load: %.110s", rt->libraries[k],
                     text);
        }
    }
    return NULL;
}

/* One runtime's devices into g (run in the child) */
static void query_runtime(const runtime_t *rt, gpu_seen_t *g)
{
    void *lib = open_runtime(rt, g);
    if (!lib)
        return;
    typedef int (*init_f)(unsigned);
    typedef int (*count_f)(int *);
    typedef int (*get_f)(int *, int);
    typedef int (*bus_f)(char *, int, int);
    typedef int (*uuid_f)(unsigned char *, int);
    init_f init = rt->init ? (init_f)dlsym(lib, rt->init) : NULL;
    count_f count = (count_f)dlsym(lib, rt->count);
    get_f get = (get_f)dlsym(lib, rt->get);
    bus_f bus = (bus_f)dlsym(lib, rt->bus);
    uuid_f uuid = NULL;
    if (strcmp(rt->api, "cuda") == 0) {
        uuid = (uuid_f)dlsym(lib, "cuDeviceGetUuid_v2");
        if (!uuid)
            uuid = (uuid_f)dlsym(lib, "cuDeviceGetUuid");
    }
    char name[96];
    int n = 0, rc;
    if ((rt->init && !init) || !count || !get || !bus) {
        snprintf(g->error, sizeof g->error, "%s lacks %s/%s/%s", rt->libraries[0],
                 rt->count, rt->get, rt->bus);
        return;
    }
    if (init) {
        set_call(g, rt->init, -1);
        if ((rc = init(0)) != 0) {
            g->has_code = 1, g->code = rc;
            error_name(lib, rt, rc, name, sizeof name);
            snprintf(g->error, sizeof g->error, "%.24s failed: %.90s", rt->init, name);
            return;
        }
    }
    set_call(g, rt->count, -1);
    if ((rc = count(&n)) != 0) {
        g->has_code = 1, g->code = rc;
        error_name(lib, rt, rc, name, sizeof name);
        snprintf(g->error, sizeof g->error, "%.24s failed: %.90s", rt->count, name);
        return;
    }
    g->has_count = 1, g->count = n;
    for (int i = 0; i < n && i < TB_MAX_GPUS; i++) {
        int dev = 0;
        unsigned char b[16];
        const char *failed = NULL;
        set_call(g, rt->get, i);
        if ((rc = get(&dev, i)) != 0)
            failed = rt->get;
        else {
            set_call(g, rt->bus, i);
            char raw[32];
            memset(raw, 0, sizeof raw);
            if ((rc = bus(raw, (int)sizeof raw, dev)) != 0)
                failed = rt->bus;
            else
                clean_text(g->pci[i], sizeof g->pci[i], raw, 20);
        }
        if (failed) {
            error_name(lib, rt, rc, name, sizeof name);
            snprintf(g->dev_error[i], sizeof g->dev_error[i], "%s: %.70s", failed, name);
        } else if (uuid) {
            set_call(g, "cuDeviceGetUuid", i);
            if (uuid(b, dev) == 0)
                uuid_text(g->uuid[i], sizeof g->uuid[i], b);
        }
        g->n = i + 1;
    }
    g->call[0] = 0; /* libraries stay loaded: the child exits */
}

static double probe_timeout(void)
{
    const char *v = getenv("TOPOBIND_GPU_PROBE_TIMEOUT");
    char *end = NULL;
    double t = v ? strtod(v, &end) : 0.0;
    return (v && end != v && *end == 0 && t >= 0.01 && t <= 3600.0) ? t : 60.0;
}

/* Ask one runtime in a child bounded by probe_timeout(); g in shared memory */
static void ask_bounded(const runtime_t *rt, gpu_seen_t *g)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        g->present = 1;
        snprintf(g->error, sizeof g->error, "fork failed: the runtime was not asked");
        return;
    }
    if (pid == 0) {
        query_runtime(rt, g);
        _exit(0);
    }
    double limit = probe_timeout(), t0 = tb_now();
    int status = 0, timed_out = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (tb_now() - t0 > limit) {
            timed_out = 1;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    char call[sizeof g->call];
    snprintf(call, sizeof call, "%s", g->call[0] ? g->call : "the runtime");
    if (timed_out) {
        g->present = 1, g->n = 0;
        snprintf(g->error, sizeof g->error, "%s did not answer within %g s", call, limit);
    } else if (WIFSIGNALED(status)) {
        g->present = 1, g->n = 0;
        snprintf(g->error, sizeof g->error, "%s crashed (signal %d)", call, WTERMSIG(status));
    }
    if (g->present && !g->error[0] && g->loaded && !g->has_count)
        snprintf(g->error, sizeof g->error, "%s ended without an answer", call);
}

static gpu_seen_t *gpu_seen; /* N_RUNTIMES, shared with the children */

/* Ask every runtime, before any thread starts (main: right after the options) */
static void gpu_probe(void)
{
    size_t size = N_RUNTIMES * sizeof(gpu_seen_t);
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        tb_die(1, "mmap of %zu bytes for the GPU probe failed", size);
    gpu_seen = m;
    memset(gpu_seen, 0, size);
    for (int r = 0; r < N_RUNTIMES; r++)
        ask_bounded(&RUNTIMES[r], &gpu_seen[r]);
}

static void gpu_runtime_fields(tb_json *j)
{
    tbj_arr_begin(j, "gpu_runtimes");
    for (int r = 0; r < N_RUNTIMES; r++) {
        const gpu_seen_t *g = &gpu_seen[r];
        if (!g->present)
            continue; /* no library: the node has no driver of this vendor */
        tbj_obj_begin(j, NULL);
        tbj_str(j, "api", RUNTIMES[r].api);
        tbj_bool(j, "loaded", g->loaded);
        tbj_str(j, "error", g->error[0] ? g->error : NULL);
        if (g->has_code)
            tbj_int(j, "code", g->code);
        else
            tbj_str(j, "code", NULL);
        if (g->has_count)
            tbj_int(j, "count", g->count);
        else
            tbj_str(j, "count", NULL);
        tbj_arr_begin(j, "devices");
        for (int i = 0; i < g->n && i < TB_MAX_GPUS; i++) {
            tbj_obj_begin(j, NULL);
            tbj_str(j, "pci", g->dev_error[i][0] ? NULL : g->pci[i]);
            tbj_str(j, "uuid", g->uuid[i][0] ? g->uuid[i] : NULL);
            tbj_str(j, "error", g->dev_error[i][0] ? g->dev_error[i] : NULL);
            tbj_obj_end(j);
        }
        tbj_arr_end(j);
        tbj_obj_end(j);
    }
    tbj_arr_end(j);
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
#ifndef WITH_MPI
    gpu_probe(); /* forks: before the OpenMP threads start */
#endif

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
