/*
 * tb/evidence.h - the evidence around a measured run: what the node's own files said and what
 * the hardware counters counted between tb_evidence_begin() and tb_evidence_end(), written as
 * the result document's "evidence" object (docs/results-format.md, "evidence").
 *
 *  - signals (src/tb_evidence.c): /proc/stat (other processes' share of the run's CPUs, steal),
 *    the run's cgroup and its ancestors (throttling, quota; v1 and v2), getrusage (context
 *    switches, faults), numa_maps (remote pages), numastat, vmstat, /proc/interrupts,
 *    thermal_throttle, cpufreq, powercap, the PCIe links of the node's GPUs and NICs;
 *  - counters (src/tb_counters.c): perf_event_open(2) on the process (inherit: threads created
 *    after begin are counted), generic hardware events, software events, CPU-specific ones by
 *    their sysfs names or a small table, the memory controllers' CAS counts (uncore_imc).
 *
 * Nothing here fails a run: a file that is missing, unreadable, not a regular file (a FIFO, a
 * device), larger than its bound or not as documented moves its signal into "unavailable"
 * with a one-line reason. /sys and /proc are replaced by TOPOBIND_SYSFS_ROOT and
 * TOPOBIND_PROCFS_ROOT (the tests' fake trees), as topobind's Python readers do.
 *
 * TOPOBIND_EVIDENCE=0 (or off, no) collects nothing (tb_evidence_begin returns NULL; the
 * benchmark's "without"); TOPOBIND_EVIDENCE_PERF=refuse makes every perf_event_open fail with
 * EACCES, as a kernel at perf_event_paranoid=3 does (the tests' hook).
 */
#ifndef TB_EVIDENCE_H
#define TB_EVIDENCE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "tb/json.h"

#define TB_EVIDENCE_VERSION 1

typedef struct tb_evidence tb_evidence;

/* Start collecting around the calling process (PID 0; its threads, present and future) or
 * around process PID (a child the caller created: its counters start when it calls exec,
 * enable_on_exec). NULL when TOPOBIND_EVIDENCE turns it off or memory is short. */
tb_evidence *tb_evidence_begin(pid_t pid);
/* Stop: read the signals again and the counters. CHILD: the child's rusage from wait4 (PID
 * mode; NULL in self mode, where getrusage(RUSAGE_SELF) is read). Idempotent. */
void tb_evidence_end(tb_evidence *e, const struct rusage *child);
/* The "evidence" object under KEY (NULL inside an array); nothing when E is NULL. Ends E
 * first when it was not ended. */
void tb_evidence_json(tb_json *j, const char *key, tb_evidence *e);
void tb_evidence_free(tb_evidence *e);

/* ---------------------------------------------------------------- shared helpers */
/* The bounded read every evidence source goes through: the regular file PATH (opened
 * non-blocking, so a FIFO is never waited on), at most CAP bytes, into a malloc'ed buffer
 * ending in '\0' (*OUT; *LEN its length). Returns 0, or -1 with a one-line reason in WHY
 * (WLEN bytes): "absent", "not readable: Permission denied", "a FIFO, not a regular file",
 * "larger than CAP bytes". */
int tb_read_bounded(const char *path, size_t cap, char **out, size_t *len, char *why,
                    size_t wlen);
/* /sys/REL or /proc/REL under the test roots (TOPOBIND_SYSFS_ROOT, TOPOBIND_PROCFS_ROOT);
 * REL starts without '/'. Returns OUT, "" when it does not fit. */
const char *tb_sys_path(char *out, size_t len, const char *rel);
const char *tb_proc_path(char *out, size_t len, const char *rel);
/* One unsigned decimal number from a small file (bounded); 0 or -1 with WHY. */
int tb_read_u64(const char *path, uint64_t *v, char *why, size_t wlen);

/* ---------------------------------------------------------------- counters (tb_counters.c) */
#define TB_EV_NCOUNTERS 16
#define TB_EV_WHY 200

typedef struct {
    const char *name;
    int fds[64]; /* one for a process event; one per CPU of an uncore PMU's cpumask */
    int nfd;
    uint64_t value;  /* scaled when multiplexed */
    int counted;     /* opened and read */
    int multiplexed; /* time_running < time_enabled */
    char why[TB_EV_WHY];
} tb_counter;

typedef struct {
    int available; /* at least one counter counted */
    int multiplexed;
    int hw_opened;          /* a hardware event opened */
    char pmu[64];           /* the core PMU's sysfs name, "" when none */
    char why[2 * TB_EV_WHY]; /* why the hardware ones (or all) did not count */
    tb_counter c[TB_EV_NCOUNTERS];
    int n;
    int dram_counted;
    uint64_t dram_read, dram_write; /* bytes (CAS x 64) */
    char dram_why[TB_EV_WHY];
} tb_counters;

void tb_counters_open(tb_counters *cs, pid_t pid);
void tb_counters_read(tb_counters *cs); /* and close */
/* The counted value of event NAME, or -1 when it did not count. */
int tb_counters_value(const tb_counters *cs, const char *name, uint64_t *v);
void tb_counters_json(tb_json *j, const tb_counters *cs);

#endif
