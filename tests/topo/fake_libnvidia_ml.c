/*
 * fake_libnvidia_ml.c - a stand-in libnvidia-ml.so.1 for tests/topo/test_gpu_live.py (no GPU
 * on the test machines), built by the test into a temporary folder:
 *
 *   cc -std=c11 -shared -fPIC -o DIR/libnvidia-ml.so.1 fake_libnvidia_ml.c
 *
 * The node's GPUs come from TB_FAKE_NVML_GPUS: "BUSID=UUID[=MIG-UUID,MIG-UUID...];..." in
 * NVML's order; a GPU with MIG UUIDs is in MIG mode. Bus ids are returned as NVML writes them
 * (an 8-digit domain: "00000000:41:00.0"). Only what topobind.topo.gpu_live and libtb's
 * evidence (the throttle reasons, TB_FAKE_NVML_THROTTLE) call.
 * Faults (tests/fake_gpu_faults.h, prefix TB_FAKE_NVML; built with -I tests) for every
 * function (nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetUUID...);
 * TB_FAKE_NVML_COUNT=N: the count is N (handles past the GPUs listed fail);
 * TB_FAKE_NVML_GARBAGE=uuid: UUIDs hold control characters and fill the buffer, no NUL.
 */
#define _POSIX_C_SOURCE 200809L
#include "fake_gpu_faults.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 8
#define MAXM 7

typedef struct {
    char bus[32];
    char uuid[64];
    char mig[MAXM][64];
    int nmig;
} fake_gpu;

static fake_gpu gpus[MAXG];
static int ngpus;

typedef struct { /* nvmlPciInfo_t (v3) */
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_info;

#define FAULT(call, dev)                                                                  \
    do {                                                                                   \
        int rc_ = tb_fake_fault("TB_FAKE_NVML", call, dev);                                \
        if (rc_)                                                                           \
            return rc_;                                                                    \
    } while (0)

int nvmlInit_v2(void)
{
    FAULT("nvmlInit_v2", -1);
    char buf[4096];
    const char *spec = getenv("TB_FAKE_NVML_GPUS");
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    ngpus = 0;
    for (char *s1 = NULL, *tok = strtok_r(buf, ";", &s1); tok && ngpus < MAXG;
         tok = strtok_r(NULL, ";", &s1)) {
        fake_gpu *g = &gpus[ngpus];
        memset(g, 0, sizeof *g);
        char *uuid = strchr(tok, '=');
        if (!uuid)
            continue;
        *uuid++ = 0;
        char *migs = strchr(uuid, '=');
        if (migs)
            *migs++ = 0;
        unsigned d = 0, b = 0, dev = 0, fn = 0;
        if (sscanf(tok, "%x:%x:%x.%x", &d, &b, &dev, &fn) != 4)
            continue;
        snprintf(g->bus, sizeof g->bus, "%08x:%02x:%02x.%x", d, b, dev, fn);
        snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
        for (char *s2 = NULL, *m = migs ? strtok_r(migs, ",", &s2) : NULL; m && g->nmig < MAXM;
             m = strtok_r(NULL, ",", &s2))
            snprintf(g->mig[g->nmig++], sizeof g->mig[0], "%s", m);
        ngpus++;
    }
    return 0;
}

int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned int *n)
{
    FAULT("nvmlDeviceGetCount_v2", -1);
    *n = (unsigned int)ngpus;
    const char *c = getenv("TB_FAKE_NVML_COUNT");
    if (c)
        *n = (unsigned int)strtoul(c, NULL, 10);
    return 0;
}

/* a handle: 1 + 16 * gpu + (mig + 1), never NULL */
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h)
{
    FAULT("nvmlDeviceGetHandleByIndex_v2", (int)i);
    if (i >= (unsigned int)ngpus)
        return 2;
    *h = (void *)(uintptr_t)(1 + 16 * i);
    return 0;
}

static int gpu_of(void *h) { return (int)(((uintptr_t)h - 1) / 16); }
static int mig_of(void *h) { return (int)(((uintptr_t)h - 1) % 16) - 1; }

int nvmlDeviceGetPciInfo_v3(void *h, pci_info *p)
{
    FAULT("nvmlDeviceGetPciInfo_v3", gpu_of(h));
    memset(p, 0, sizeof *p);
    snprintf(p->busId, sizeof p->busId, "%s", gpus[gpu_of(h)].bus);
    return 0;
}

int nvmlDeviceGetUUID(void *h, char *out, unsigned int len)
{
    FAULT("nvmlDeviceGetUUID", gpu_of(h));
    const fake_gpu *g = &gpus[gpu_of(h)];
    const char *garbage = getenv("TB_FAKE_NVML_GARBAGE");
    if (garbage && strcmp(garbage, "uuid") == 0) {
        memset(out, '\x1b', len); /* escape characters and no NUL */
        memcpy(out, "GPU-", 4);
        return 0;
    }
    snprintf(out, len, "%s", mig_of(h) < 0 ? g->uuid : g->mig[mig_of(h)]);
    return 0;
}

int nvmlDeviceGetMigMode(void *h, unsigned int *current, unsigned int *pending)
{
    FAULT("nvmlDeviceGetMigMode", gpu_of(h));
    *current = *pending = gpus[gpu_of(h)].nmig > 0;
    return 0;
}

int nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *n)
{
    *n = (unsigned int)gpus[gpu_of(h)].nmig;
    return 0;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int i, void **mig)
{
    if (i >= (unsigned int)gpus[gpu_of(h)].nmig)
        return 2;
    *mig = (void *)((uintptr_t)h + 1 + i);
    return 0;
}

/* The clock event (throttle) reasons of each GPU: TB_FAKE_NVML_THROTTLE="MASK,MASK,..." by
 * GPU index (0 past the list); libtb's evidence asks it (tests/measure/test_evidence_c.py). */
int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *reasons)
{
    FAULT("nvmlDeviceGetCurrentClocksEventReasons", gpu_of(h));
    char buf[512];
    const char *v = getenv("TB_FAKE_NVML_THROTTLE");
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    *reasons = 0;
    int i = 0;
    for (char *s1 = NULL, *tok = strtok_r(buf, ",", &s1); tok; tok = strtok_r(NULL, ",", &s1))
        if (i++ == gpu_of(h))
            *reasons = strtoull(tok, NULL, 0);
    return 0;
}
