/*
 * fake_librocm_smi64.c - a stand-in ROCm SMI (librocm_smi64.so.7) for tests/topo/
 * test_gpu_live_faults.py (no GPU on the test machines), built by the test:
 *
 *   cc -std=c11 -shared -fPIC -I tests -o DIR/librocm_smi64.so.7 fake_librocm_smi64.c
 *
 * The node's AMD GPUs come from TB_FAKE_RSMI_GPUS: "BUSID=UNIQUEID(hex);..." in ROCm SMI's
 * order. Faults (tests/fake_gpu_faults.h, prefix TB_FAKE_RSMI) for every function;
 * TB_FAKE_RSMI_COUNT=N: the count is N (devices past those listed fail).
 */
#define _POSIX_C_SOURCE 200809L
#include "fake_gpu_faults.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 16

static uint64_t bdf[MAXG], uid[MAXG];
static unsigned n;

#define FAULT(call, dev)                                                                  \
    do {                                                                                   \
        int rc_ = tb_fake_fault("TB_FAKE_RSMI", call, dev);                                \
        if (rc_)                                                                           \
            return rc_;                                                                    \
    } while (0)

int rsmi_init(uint64_t flags)
{
    (void)flags;
    FAULT("rsmi_init", -1);
    char buf[4096];
    const char *spec = getenv("TB_FAKE_RSMI_GPUS");
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok && n < MAXG;
         tok = strtok_r(NULL, ";", &save)) {
        unsigned d = 0, b = 0, dev = 0, fn = 0;
        unsigned long long u = 0;
        if (sscanf(tok, "%x:%x:%x.%x=%llx", &d, &b, &dev, &fn, &u) != 5)
            continue;
        bdf[n] = ((uint64_t)d << 32) | (b << 8) | (dev << 3) | fn;
        uid[n++] = u;
    }
    return 0;
}

int rsmi_shut_down(void) { return 0; }

int rsmi_num_monitor_devices(uint32_t *count)
{
    FAULT("rsmi_num_monitor_devices", -1);
    *count = n;
    const char *c = getenv("TB_FAKE_RSMI_COUNT");
    if (c)
        *count = (uint32_t)strtoul(c, NULL, 10);
    return 0;
}

int rsmi_dev_pci_id_get(uint32_t i, uint64_t *out)
{
    FAULT("rsmi_dev_pci_id_get", (int)i);
    if (i >= n)
        return 2; /* RSMI_STATUS_INVALID_ARGS */
    *out = bdf[i];
    return 0;
}

int rsmi_dev_unique_id_get(uint32_t i, uint64_t *out)
{
    FAULT("rsmi_dev_unique_id_get", (int)i);
    if (i >= n)
        return 2;
    *out = uid[i];
    return 0;
}
