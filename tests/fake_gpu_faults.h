/*
 * fake_gpu_faults.h - the faults every stand-in GPU library of the tests can play (the fake
 * CUDA driver, HIP, NVML and ROCm SMI: tests/launch/fake_libcuda.c, fake_libamdhip64.c,
 * tests/topo/fake_libnvidia_ml.c, fake_librocm_smi64.c), each chosen by environment
 * variables named PREFIX_HANG, PREFIX_CRASH and PREFIX_FAIL (PREFIX: TB_FAKE_CUDA,
 * TB_FAKE_HIP, TB_FAKE_NVML, TB_FAKE_RSMI):
 *
 *   PREFIX_HANG=cuInit,cuDeviceGetCount   these calls never return
 *   PREFIX_CRASH=cuDeviceGetPCIBusId      these calls die with SIGSEGV
 *   PREFIX_FAIL=cuInit=46,cuDeviceGet@1=999
 *                                          these calls return the code (CALL@N: only for
 *                                          device N), negative codes too
 *
 * A library calls tb_fake_fault(PREFIX, CALL, DEVICE) first in each function (DEVICE -1:
 * not about one device) and returns what it returns when it is not 0.
 */
#ifndef TB_FAKE_GPU_FAULTS_H
#define TB_FAKE_GPU_FAULTS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 when CALL (or CALL@DEVICE) is an item of the comma list in variable PREFIX_WHAT;
 * *code: the number after '=' (0 when none) */
static int tb_fake_listed(const char *prefix, const char *what, const char *call, int device,
                          long *code)
{
    char name[64], buf[1024], mine[96];
    snprintf(name, sizeof name, "%s_%s", prefix, what);
    const char *v = getenv(name);
    if (!v)
        return 0;
    snprintf(buf, sizeof buf, "%s", v);
    snprintf(mine, sizeof mine, "%s@%d", call, device);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq++ = 0;
        if (strcmp(tok, call) == 0 || (device >= 0 && strcmp(tok, mine) == 0)) {
            *code = eq ? strtol(eq, NULL, 10) : 0;
            return 1;
        }
    }
    return 0;
}

static int tb_fake_fault(const char *prefix, const char *call, int device)
{
    long code = 0;
    if (tb_fake_listed(prefix, "HANG", call, device, &code))
        for (;;)
            pause();
    if (tb_fake_listed(prefix, "CRASH", call, device, &code))
        raise(SIGSEGV);
    if (tb_fake_listed(prefix, "FAIL", call, device, &code))
        return (int)code;
    return 0;
}

#endif
