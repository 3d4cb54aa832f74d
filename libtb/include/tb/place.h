/*
 * tb/place.h - placement: CPU (OS index), NUMA node and affinity mask of every OpenMP thread,
 * the process's CPUs, NUMA nodes and last-level caches (code in src/tb_place.c: OpenMP).
 */
#ifndef TB_PLACE_H
#define TB_PLACE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <sched.h>

#include "tb/json.h"

typedef struct {
    int rank, thread, cpu, numa;
    cpu_set_t affinity;
} tb_place;

int tb_numa_of_cpu(int cpu); /* from /sys/devices/system/cpu/cpuN/nodeM; 0 if unknown */
void tb_place_self(tb_place *p, int rank, int thread);
/* One entry per OpenMP thread of a parallel region of omp_get_max_threads() threads;
 * returns the count, *out malloc'ed. */
int tb_place_omp(int rank, tb_place **out);
/* "placement": [...]; with_affinity adds "affinity", host (non-NULL) adds "host". */
void tb_json_placement(tb_json *j, const tb_place *p, int n, int with_affinity,
                       const char *host);
void tb_json_place_entry(tb_json *j, const tb_place *p, int with_affinity, const char *host);
/* Pin the calling thread to one CPU (OS index); returns 0 or errno. */
int tb_pin_self(int cpu);
/* CPUs (OS indexes) of the process affinity mask; returns the count, *out malloc'ed. */
int tb_process_cpus(int **out);
/* NUMA nodes present (with CPUs if need_cpus, with memory otherwise). */
int tb_numa_nodes(int need_cpus, int **out);
/* CPUs of NUMA node `node` that are in the process affinity mask. */
int tb_node_cpus(int node, int **out);
/* Total size in bytes of the distinct last-level cache instances (0 if unknown). */
long long tb_llc_total_bytes(void);

#endif
