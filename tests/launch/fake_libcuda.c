/*
 * fake_libcuda.c - a stand-in libcuda.so.1 for the tests (no GPU on the test machines),
 * built by tests/launch/test_gpu_launch.py into a temporary folder:
 *
 *   cc -std=c11 -shared -fPIC -o DIR/libcuda.so.1 fake_libcuda.c
 *
 * The node's GPUs come from TB_FAKE_CUDA_GPUS: "BUSID=UUID=SPEED;..." (UUID as GPU-xxxxxxxx-
 * xxxx-xxxx-xxxx-xxxxxxxxxxxx, SPEED a whole number, higher = faster). It follows CUDA's
 * rules for what a process sees:
 *   - order: fastest first (ties: bus order) unless CUDA_DEVICE_ORDER=PCI_BUS_ID (bus order);
 *     TB_FAKE_CUDA_IGNORE_ORDER=1: a runtime that lost CUDA_DEVICE_ORDER (fastest first);
 *   - CUDA_VISIBLE_DEVICES: a comma list of indexes into that order or UUID prefixes
 *     ("GPU-1a2b"), the listing stopping at the first invalid entry (an index out of range,
 *     a prefix matching no GPU or several, a GPU already listed);
 *   - cuInit returns CUDA_ERROR_NO_DEVICE (100) when nothing is visible.
 * Bus ids come back in upper case ("0000:3B:00.0"), as real drivers may print them.
 */
#define _POSIX_C_SOURCE 200809L
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
static int nnode, nseen, ready;

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
    int pci = order && strcmp(order, "PCI_BUS_ID") == 0 && !(ignore && strcmp(ignore, "1") == 0);
    qsort(node, (size_t)nnode, sizeof node[0], pci ? by_bus : by_speed);
}

/* the GPU an entry of CUDA_VISIBLE_DEVICES names, -1: invalid */
static int entry(const char *e)
{
    while (isspace((unsigned char)*e))
        e++;
    if (isdigit((unsigned char)*e)) {
        char *end;
        long i = strtol(e, &end, 10);
        return (*end == 0 && i >= 0 && i < nnode) ? (int)i : -1;
    }
    int found = -1;
    size_t n = strlen(e);
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
    int used[MAXG] = {0};
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && nseen < MAXG;
         tok = strtok_r(NULL, ",", &save)) {
        int i = entry(tok);
        if (i < 0 || used[i])
            break; /* CUDA stops at the first invalid entry */
        used[i] = 1;
        seen[nseen++] = node[i];
    }
}

int cuInit(unsigned flags)
{
    (void)flags;
    visible();
    return nseen ? 0 : 100;
}

int cuDeviceGetCount(int *count)
{
    visible();
    *count = nseen;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
    visible();
    if (ordinal < 0 || ordinal >= nseen)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

int cuDeviceGetPCIBusId(char *out, int len, int dev)
{
    if (dev < 0 || dev >= nseen || len < 1)
        return 101;
    snprintf(out, (size_t)len, "%s", seen[dev].bus);
    return 0;
}

int cuDeviceGetUuid_v2(unsigned char *bytes, int dev)
{
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
