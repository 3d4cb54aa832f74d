/*
 * fake_libamdhip64.c - a stand-in HIP runtime (libamdhip64.so.6) for the tests (no GPU on
 * the test machines), built by tests/launch/test_gpu_probe.py into a temporary folder:
 *
 *   cc -std=c11 -shared -fPIC -I tests -o DIR/libamdhip64.so.6 fake_libamdhip64.c
 *
 * The node's AMD GPUs come from TB_FAKE_HIP_GPUS: "BUSID;BUSID..." in bus order (ROCm's
 * order). ROCR_VISIBLE_DEVICES, a comma list of indexes into that order, selects what the
 * process sees (the listing stops at the first invalid entry); nothing visible:
 * hipGetDeviceCount returns hipErrorNoDevice (100) and a count of 0, as HIP does.
 * Faults (tests/fake_gpu_faults.h, prefix TB_FAKE_HIP) for hipGetDeviceCount, hipDeviceGet,
 * hipDeviceGetPCIBusId; TB_FAKE_HIP_COUNT=N: the count is N.
 */
#define _POSIX_C_SOURCE 200809L
#include "fake_gpu_faults.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 16

static char node[MAXG][32], seen[MAXG][32];
static int nnode, nseen, ready;

static void visible(void)
{
    if (ready)
        return;
    ready = 1;
    char buf[4096];
    const char *spec = getenv("TB_FAKE_HIP_GPUS");
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok && nnode < MAXG;
         tok = strtok_r(NULL, ";", &save))
        snprintf(node[nnode++], sizeof node[0], "%s", tok);
    const char *v = getenv("ROCR_VISIBLE_DEVICES");
    if (!v) {
        memcpy(seen, node, sizeof node);
        nseen = nnode;
        return;
    }
    char list[1024];
    snprintf(list, sizeof list, "%s", v);
    for (char *tok = list, *next; tok && nseen < MAXG; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = 0;
        char *end;
        long i = strtol(tok, &end, 10);
        if (end == tok || *end || i < 0 || i >= nnode)
            break;
        snprintf(seen[nseen++], sizeof seen[0], "%s", node[i]);
    }
}

#define FAULT(call, dev)                                                                  \
    do {                                                                                   \
        int rc_ = tb_fake_fault("TB_FAKE_HIP", call, dev);                                 \
        if (rc_)                                                                           \
            return rc_;                                                                    \
    } while (0)

const char *hipGetErrorName(int error)
{
    return error == 100 ? "hipErrorNoDevice"
           : error == 101 ? "hipErrorInvalidDevice"
           : error == 35  ? "hipErrorInsufficientDriver"
                          : "hipErrorUnknown";
}

int hipGetDeviceCount(int *count)
{
    FAULT("hipGetDeviceCount", -1);
    visible();
    *count = nseen;
    const char *n = getenv("TB_FAKE_HIP_COUNT");
    if (n)
        *count = (int)strtol(n, NULL, 10);
    return *count ? 0 : 100;
}

int hipDeviceGet(int *dev, int ordinal)
{
    FAULT("hipDeviceGet", ordinal);
    visible();
    if (ordinal < 0 || ordinal >= nseen)
        return 101;
    *dev = ordinal;
    return 0;
}

int hipDeviceGetPCIBusId(char *out, int len, int dev)
{
    FAULT("hipDeviceGetPCIBusId", dev);
    visible();
    if (dev < 0 || dev >= nseen || len < 1)
        return 101;
    snprintf(out, (size_t)len, "%s", seen[dev]);
    return 0;
}
