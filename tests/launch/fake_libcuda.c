/*
 * fake_libcuda.c - a stand-in libcuda.so.1 for the tests (no GPU on the test machines),
 * built by tests/launch/test_gpu_launch.py into a temporary folder:
 *
 *   cc -std=c11 -shared -fPIC -o DIR/libcuda.so.1 fake_libcuda.c
 *
 * The node's GPUs come from TB_FAKE_CUDA_GPUS: "BUSID=UUID=SPEED;..." (UUID as GPU-xxxxxxxx-
 * xxxx-xxxx-xxxx-xxxxxxxxxxxx, SPEED a whole number, higher = faster). It follows CUDA's
 * rules for what a process sees, as measured on a real node (driver 580, one H200:
 * tests/launch/data/cuda-visible-h200.tsv, which test_fake_libcuda_follows_a_real_driver
 * replays against this file):
 *   - order: fastest first (ties: bus order) unless CUDA_DEVICE_ORDER=PCI_BUS_ID (bus order);
 *     CUDA_DEVICE_ORDER set to anything but FASTEST_FIRST or PCI_BUS_ID (empty, lower case)
 *     makes cuInit fail with CUDA_ERROR_INVALID_DEVICE (101);
 *     TB_FAKE_CUDA_IGNORE_ORDER=1: a runtime that lost CUDA_DEVICE_ORDER (fastest first);
 *   - CUDA_VISIBLE_DEVICES: a comma list, read left to right, of indexes into that order
 *     (blanks around one ignored, "00" is 0) or UUID prefixes ("GPU-1a2b"); the listing
 *     stops at the first invalid entry (an empty one, an index out of range or negative, a
 *     prefix matching no GPU or several, a GPU already listed under another name), but an
 *     index listed twice makes cuInit fail with 101;
 *   - cuInit returns CUDA_ERROR_NO_DEVICE (100) when nothing is visible.
 * Bus ids come back in upper case ("0000:3B:00.0"), as real drivers may print them.
 *
 * Faults (tests/fake_gpu_faults.h, prefix TB_FAKE_CUDA): TB_FAKE_CUDA_HANG, _CRASH, _FAIL
 * for dlopen (the library's constructor), cuInit, cuDeviceGetCount, cuDeviceGet,
 * cuDeviceGetPCIBusId, cuDeviceGetUuid_v2 (built
 * with -I tests); TB_FAKE_CUDA_COUNT=N: cuDeviceGetCount says N (INT_MAX...);
 * TB_FAKE_CUDA_GARBAGE=busid: the bus id fills the caller's buffer with no terminating NUL;
 * =name: cuGetErrorName's names hold control characters and no NUL within 64 bytes.
 * Built with -DTB_FAKE_UNLOADABLE: a library the loader refuses (an undefined symbol).
 */
#define _POSIX_C_SOURCE 200809L
#include "fake_gpu_faults.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 16

typedef struct {
    char bus[32];
    char uuid[64];
    long speed;
} fake_gpu;

static fake_gpu node[MAXG], seen[MAXG];
static int nnode, nseen, ready, init_rc;

static int by_bus(const void *a, const void *b)
{
    return strcmp(((const fake_gpu *)a)->bus, ((const fake_gpu *)b)->bus);
}

static int by_speed(const void *a, const void *b)
{
    const fake_gpu *x = a, *y = b;
    if (x->speed != y->speed)
        return x->speed > y->speed ? -1 : 1;
    return by_bus(a, b);
}

static void read_node(void)
{
    const char *spec = getenv("TB_FAKE_CUDA_GPUS");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok && nnode < MAXG;
         tok = strtok_r(NULL, ";", &save)) {
        fake_gpu g = {0};
        char *u = strchr(tok, '=');
        char *s = u ? strchr(u + 1, '=') : NULL;
        if (!u || !s)
            continue;
        *u = *s = 0;
        snprintf(g.bus, sizeof g.bus, "%s", tok);
        snprintf(g.uuid, sizeof g.uuid, "%s", u + 1);
        g.speed = strtol(s + 1, NULL, 10);
        for (char *c = g.bus; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        node[nnode++] = g;
    }
    const char *order = getenv("CUDA_DEVICE_ORDER");
    const char *ignore = getenv("TB_FAKE_CUDA_IGNORE_ORDER");
    int lost = ignore && strcmp(ignore, "1") == 0;
    int pci = order && strcmp(order, "PCI_BUS_ID") == 0 && !lost;
    if (order && !lost && !pci && strcmp(order, "FASTEST_FIRST") != 0)
        init_rc = 101; /* CUDA_ERROR_INVALID_DEVICE */
    qsort(node, (size_t)nnode, sizeof node[0], pci ? by_bus : by_speed);
}

/* the GPU an entry of CUDA_VISIBLE_DEVICES names, -1: invalid; *index: it was an index */
static int entry(const char *e, int *index)
{
    while (isspace((unsigned char)*e))
        e++;
    *index = isdigit((unsigned char)*e);
    if (*index) {
        char *end;
        long i = strtol(e, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        return (*end == 0 && i < nnode) ? (int)i : -1;
    }
    int found = -1;
    size_t n = strlen(e);
    while (n && isspace((unsigned char)e[n - 1]))
        n--;
    for (int i = 0; n > 4 && i < nnode; i++) {
        if (strncmp(node[i].uuid, e, n) == 0) {
            if (found >= 0)
                return -1; /* ambiguous prefix */
            found = i;
        }
    }
    return found;
}

static void visible(void)
{
    if (ready)
        return;
    ready = 1;
    read_node();
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        memcpy(seen, node, sizeof node);
        nseen = nnode;
        return;
    }
    char buf[1024];
    int used[MAXG] = {0}; /* 1: listed by UUID, 2: listed by index */
    snprintf(buf, sizeof buf, "%s", v);
    for (char *tok = buf, *next; tok && nseen < MAXG; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = 0;
        int by_index, i = entry(tok, &by_index);
        if (i >= 0 && by_index && used[i] == 2) {
            init_rc = 101; /* an index listed twice: CUDA_ERROR_INVALID_DEVICE */
            return;
        }
        if (i < 0 || used[i])
            break; /* CUDA stops at the first invalid entry (an empty one too) */
        used[i] = by_index ? 2 : 1;
        seen[nseen++] = node[i];
    }
}

#define FAULT(call, dev)                                                                  \
    do {                                                                                   \
        int rc_ = tb_fake_fault("TB_FAKE_CUDA", call, dev);                                \
        if (rc_)                                                                           \
            return rc_;                                                                    \
    } while (0)

#ifdef TB_FAKE_UNLOADABLE
extern int tb_fake_symbol_nobody_defines(void);
int tb_fake_unloadable(void) { return tb_fake_symbol_nobody_defines(); }
#endif

/* TB_FAKE_CUDA_HANG=dlopen / _CRASH=dlopen: the library's constructor hangs or crashes */
__attribute__((constructor)) static void on_load(void) { (void)tb_fake_fault("TB_FAKE_CUDA", "dlopen", -1); }

static int garbage(const char *what)
{
    const char *g = getenv("TB_FAKE_CUDA_GARBAGE");
    return g && strcmp(g, what) == 0;
}

int cuInit(unsigned flags)
{
    (void)flags;
    FAULT("cuInit", -1);
    visible();
    return init_rc ? init_rc : nseen ? 0 : 100;
}

int cuGetErrorName(int error, const char **name)
{
    static const char evil[64] = "CUDA_ERROR_\x1b[31mRED\n\rBELL\a"
                                  "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";
    if (garbage("name")) {
        *name = evil; /* 64 bytes, no NUL */
        return 0;
    }
    *name = error == 3     ? "CUDA_ERROR_NOT_INITIALIZED"
            : error == 34  ? "CUDA_ERROR_STUB_LIBRARY"
            : error == 46  ? "CUDA_ERROR_DEVICES_UNAVAILABLE"
            : error == 100 ? "CUDA_ERROR_NO_DEVICE"
            : error == 101 ? "CUDA_ERROR_INVALID_DEVICE"
            : error == 999 ? "CUDA_ERROR_UNKNOWN"
                           : NULL;
    return *name ? 0 : 1; /* CUDA_ERROR_INVALID_VALUE for a code it does not know */
}

int cuDeviceGetCount(int *count)
{
    FAULT("cuDeviceGetCount", -1);
    visible();
    *count = init_rc ? 0 : nseen;
    const char *n = getenv("TB_FAKE_CUDA_COUNT");
    if (n)
        *count = (int)strtol(n, NULL, 10);
    return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
    FAULT("cuDeviceGet", ordinal);
    visible();
    if (ordinal < 0 || ordinal >= nseen)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

int cuDeviceGetPCIBusId(char *out, int len, int dev)
{
    FAULT("cuDeviceGetPCIBusId", dev);
    if (dev < 0 || dev >= nseen || len < 1)
        return 101;
    if (garbage("busid")) {
        memset(out, 0xff, (size_t)len); /* no NUL anywhere */
        return 0;
    }
    snprintf(out, (size_t)len, "%s", seen[dev].bus);
    return 0;
}

int cuDeviceGetUuid_v2(unsigned char *bytes, int dev)
{
    FAULT("cuDeviceGetUuid_v2", dev);
    if (dev < 0 || dev >= nseen)
        return 101;
    const char *u = seen[dev].uuid;
    u += strncmp(u, "GPU-", 4) == 0 ? 4 : 0;
    for (int k = 0; k < 16 && *u;) {
        if (*u == '-') {
            u++;
            continue;
        }
        unsigned int x = 0;
        if (sscanf(u, "%2x", &x) != 1)
            return 1;
        bytes[k++] = (unsigned char)x;
        u += 2;
    }
    return 0;
}
