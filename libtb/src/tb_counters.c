/*
 * tb_counters.c - the hardware and software counters of the evidence (tb/evidence.h), through
 * perf_event_open(2) on the measured process with inherit (its threads, created after the
 * open, are counted and summed by the kernel into the reads).
 *
 * Each event is opened on its own (inherit cannot be read as a group) with
 * PERF_FORMAT_TOTAL_TIME_ENABLED|RUNNING: time_running below time_enabled means the event
 * shared its counter (multiplexed) and the value is scaled by enabled/running; perf's 64-bit
 * counts do not wrap. Unprivileged at perf_event_paranoid 2 (the kernel's default) counts the
 * process's own user space: an open refused with kernel counting included is retried with
 * exclude_kernel and exclude_hv.
 *
 * l2_lines_in is read first from the core PMU's sysfs events/ (its own name), then from this
 * table of Intel's perfmon lists (L2_LINES_IN.ALL), keyed by family 6 model (CPUID):
 *   0x3F 0x4F 0x56 (Haswell-X, Broadwell-X/DE)         event 0xF1 umask 0x07
 *   0x55 (Skylake-X, Cascade Lake, Cooper Lake)        event 0xF1 umask 0x1F
 *   0x6A 0x6C 0x8F 0xCF (Ice Lake-SP, Sapphire and Emerald Rapids)  event 0x25 umask 0x1F
 * Elsewhere (AMD, Arm, other Intel models) it is "missing" with that reason.
 * DRAM traffic: every uncore_imc* PMU's cas_count_read/cas_count_write (sysfs events/), opened
 * on one CPU of each socket (its cpumask), needs perf_event_paranoid <= 0 or CAP_PERFMON:
 * node-wide bytes = CAS x 64.
 */
#include "tb/evidence.h"
#include "tb/util.h"

#include <dirent.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int refuse_all(void)
{
    const char *v = getenv("TOPOBIND_EVIDENCE_PERF");
    return v && !strcmp(v, "refuse");
}

static int perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
    if (refuse_all()) {
        errno = EACCES;
        return -1;
    }
    int fd = (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && !a->exclude_kernel) {
        a->exclude_kernel = a->exclude_hv = 1; /* paranoid 2: the process's user space */
        fd = (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    }
    return fd;
}

static void attr_init(struct perf_event_attr *a, uint32_t type, uint64_t config, pid_t pid)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = type;
    a->config = config;
    a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    a->disabled = 1;
    a->inherit = 1;
    if (pid > 0)
        a->enable_on_exec = 1;
}

/* perf_event_paranoid (may be -1), 99 when unreadable. */
static int paranoid(void)
{
    char p[512], why[64], *buf;
    size_t n;
    if (tb_read_bounded(tb_proc_path(p, sizeof p, "sys/kernel/perf_event_paranoid"), 64, &buf,
                        &n, why, sizeof why) != 0)
        return 99;
    char *end;
    long v = strtol(buf, &end, 10);
    int ok = end != buf;
    free(buf);
    return ok ? (int)v : 99;
}

static tb_counter *add(tb_counters *cs, const char *name)
{
    tb_counter *c = &cs->c[cs->n++];
    memset(c, 0, sizeof *c);
    c->name = name;
    return c;
}

static void open_one(tb_counters *cs, tb_counter *c, uint32_t type, uint64_t config, pid_t pid)
{
    struct perf_event_attr a;
    attr_init(&a, type, config, pid);
    int fd = perf_open(&a, pid, -1);
    if (fd < 0) {
        int err = errno;
        const char *name = err == ENOENT       ? "ENOENT"
                           : err == EACCES     ? "EACCES"
                           : err == EPERM      ? "EPERM"
                           : err == EOPNOTSUPP ? "EOPNOTSUPP"
                           : err == EINVAL     ? "EINVAL"
                                               : "error";
        snprintf(c->why, sizeof c->why, "perf_event_open: %s (%s)", strerror(err), name);
        return;
    }
    c->fds[c->nfd++] = fd;
    if (type != PERF_TYPE_SOFTWARE)
        cs->hw_opened = 1;
}

/* ---------------------------------------------------------------- sysfs events */
/* The core PMU: cpu (x86), cpu_core (hybrid Intel), armv8_pmuv3* (Arm). */
static void core_pmu(tb_counters *cs)
{
    char p[512];
    static const char *const names[] = {"cpu", "cpu_core", NULL};
    for (int i = 0; names[i]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "bus/event_source/devices/%s/type", names[i]);
        uint64_t t;
        char why[64];
        if (tb_read_u64(tb_sys_path(p, sizeof p, rel), &t, why, sizeof why) == 0) {
            snprintf(cs->pmu, sizeof cs->pmu, "%s", names[i]);
            return;
        }
    }
    DIR *d = opendir(tb_sys_path(p, sizeof p, "bus/event_source/devices"));
    if (!d)
        return;
    struct dirent *de;
    for (int k = 0; k < 4096 && (de = readdir(d)); k++)
        if (!strncmp(de->d_name, "armv8", 5) || !strncmp(de->d_name, "armv9", 5)) {
            snprintf(cs->pmu, sizeof cs->pmu, "%.63s", de->d_name);
            break;
        }
    closedir(d);
}

/* Bit placement of format term NAME of PMU ("config:0-7,32-35"); 0 and *ok=0 when not config. */
static uint64_t place_bits(const char *pmu, const char *name, uint64_t v, int *ok)
{
    char rel[256], p[512], *buf, why[64];
    size_t n;
    snprintf(rel, sizeof rel, "bus/event_source/devices/%s/format/%s", pmu, name);
    *ok = 0;
    if (tb_read_bounded(tb_sys_path(p, sizeof p, rel), 256, &buf, &n, why, sizeof why) != 0)
        return 0;
    uint64_t out = 0;
    if (!strncmp(buf, "config:", 7)) {
        *ok = 1;
        char *s = buf + 7;
        while (*s && *s != '\n') {
            long lo = strtol(s, &s, 10), hi = lo;
            if (*s == '-')
                hi = strtol(s + 1, &s, 10);
            if (lo < 0 || hi > 63 || hi < lo) {
                *ok = 0;
                break;
            }
            int w = (int)(hi - lo + 1);
            out |= (v & (w == 64 ? ~0ULL : ((1ULL << w) - 1))) << lo;
            v = w == 64 ? 0 : v >> w;
            if (*s == ',')
                s++;
            else
                break;
        }
    }
    free(buf);
    return out;
}

/* "event=0x25,umask=0x1f" of PMU into *config; 0, or -1 with WHY. */
static int sysfs_config(const char *pmu, const char *spec, uint64_t *config, char *why, size_t wl)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", spec);
    *config = 0;
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",\n", &save); t; t = strtok_r(NULL, ",\n", &save)) {
        char *eq = strchr(t, '=');
        uint64_t v = 1;
        if (eq) {
            *eq = '\0';
            v = strtoull(eq + 1, NULL, 0);
        }
        int ok;
        uint64_t bits = place_bits(pmu, t, v, &ok);
        if (!ok) {
            snprintf(why, wl, "term %.40s of %.40s has no config format in sysfs", t, pmu);
            return -1;
        }
        *config |= bits;
    }
    return 0;
}

static int pmu_type(const char *pmu, uint32_t *type)
{
    char rel[256], p[512], why[64];
    uint64_t t;
    snprintf(rel, sizeof rel, "bus/event_source/devices/%s/type", pmu);
    if (tb_read_u64(tb_sys_path(p, sizeof p, rel), &t, why, sizeof why) != 0)
        return -1;
    *type = (uint32_t)t;
    return 0;
}

/* The spec of event NAME in PMU's sysfs events/ into SPEC; 0 or -1. */
static int sysfs_event(const char *pmu, const char *name, char *spec, size_t len)
{
    char rel[256], p[512], *buf, why[64];
    size_t n;
    snprintf(rel, sizeof rel, "bus/event_source/devices/%s/events/%s", pmu, name);
    if (tb_read_bounded(tb_sys_path(p, sizeof p, rel), 256, &buf, &n, why, sizeof why) != 0)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(spec, len, "%s", buf);
    free(buf);
    return 0;
}

/* Intel's L2_LINES_IN.ALL by family 6 model (the table above), from CPUID (not /proc/cpuinfo:
 * reading it asks every CPU its clock, milliseconds on a big node). */
static const char *l2_table(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x756e6547 || d != 0x49656e69 || c != 0x6c65746e)
        return NULL; /* not "GenuineIntel" */
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return NULL;
    unsigned family = (a >> 8) & 0xf, model = ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4);
    if (family != 6)
        return NULL;
    switch (model) {
    case 0x3F: case 0x4F: case 0x56: return "event=0xf1,umask=0x07";
    case 0x55: return "event=0xf1,umask=0x1f";
    case 0x6A: case 0x6C: case 0x8F: case 0xCF: return "event=0x25,umask=0x1f";
    default: return NULL;
    }
#else
    return NULL;
#endif
}

static void open_l2(tb_counters *cs, tb_counter *c, pid_t pid)
{
    char spec[256];
    uint32_t type;
    uint64_t config;
    if (!cs->pmu[0]) {
        snprintf(c->why, sizeof c->why, "no core PMU in sysfs (bus/event_source/devices/cpu)");
        return;
    }
    const char *t = NULL;
    if (sysfs_event(cs->pmu, "l2_lines_in", spec, sizeof spec) == 0 ||
        sysfs_event(cs->pmu, "l2_lines_in.all", spec, sizeof spec) == 0)
        t = spec;
    else
        t = l2_table();
    if (!t) {
        snprintf(c->why, sizeof c->why,
                 "no such event on this CPU (sysfs events/ has no l2_lines_in, not in the table)");
        return;
    }
    if (pmu_type(cs->pmu, &type) != 0 || sysfs_config(cs->pmu, t, &config, c->why, sizeof c->why))
        return;
    open_one(cs, c, type, config, pid);
}

/* ---------------------------------------------------------------- uncore IMC */
static void open_imc_event(tb_counter *c, const char *pmu, const char *ev)
{
    char spec[256], rel[256], p[512], *buf, why[64];
    uint32_t type;
    uint64_t config;
    size_t n;
    if (sysfs_event(pmu, ev, spec, sizeof spec) != 0 || pmu_type(pmu, &type) != 0 ||
        sysfs_config(pmu, spec, &config, c->why, sizeof c->why) != 0) {
        if (!c->why[0])
            snprintf(c->why, sizeof c->why, "%s has no %s event in sysfs", pmu, ev);
        return;
    }
    snprintf(rel, sizeof rel, "bus/event_source/devices/%s/cpumask", pmu);
    if (tb_read_bounded(tb_sys_path(p, sizeof p, rel), 4096, &buf, &n, why, sizeof why) != 0)
        return;
    int *cpus = NULL, nc = tb_list_parse(buf, &cpus);
    free(buf);
    for (int i = 0; i < nc && c->nfd < 64; i++) {
        struct perf_event_attr a;
        attr_init(&a, type, config, 0);
        a.inherit = 0;
        int fd = perf_open(&a, -1, cpus[i]);
        if (fd < 0) {
            snprintf(c->why, sizeof c->why, "%s on CPU %d: perf_event_open: %s", pmu, cpus[i],
                     strerror(errno));
            continue;
        }
        c->fds[c->nfd++] = fd;
    }
    free(cpus);
}

static void open_imc(tb_counters *cs, tb_counter *rd, tb_counter *wr)
{
    char p[512];
    DIR *d = opendir(tb_sys_path(p, sizeof p, "bus/event_source/devices"));
    int found = 0;
    struct dirent *de;
    for (int k = 0; d && k < 4096 && (de = readdir(d)); k++) {
        if (strncmp(de->d_name, "uncore_imc", 10) != 0)
            continue;
        found = 1;
        open_imc_event(rd, de->d_name, "cas_count_read");
        open_imc_event(wr, de->d_name, "cas_count_write");
    }
    if (d)
        closedir(d);
    if (!found)
        snprintf(cs->dram_why, sizeof cs->dram_why, "no uncore_imc PMU in sysfs");
    else if (!rd->nfd)
        snprintf(cs->dram_why, sizeof cs->dram_why, "%s", rd->why);
}

/* ---------------------------------------------------------------- open, read, write */
static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} GENERIC[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"ref_cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"llc_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"dtlb_misses", PERF_TYPE_HW_CACHE,
     PERF_COUNT_HW_CACHE_DTLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
         (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
    {"context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
};

/* Why the hardware events did not count: the first one's errno, the PMU, the paranoid level. */
static void hardware_why(tb_counters *cs)
{
    int lvl = paranoid();
    char lv[32] = "unknown";
    if (lvl != 99)
        snprintf(lv, sizeof lv, "%d", lvl);
    const char *e = cs->c[0].why;
    if (refuse_all())
        snprintf(cs->why, sizeof cs->why,
                 "perf_event_open refused (EACCES, forced by TOPOBIND_EVIDENCE_PERF=refuse); "
                 "perf_event_paranoid=%s", lv);
    else if (strstr(e, "ENOENT") || strstr(e, "EOPNOTSUPP"))
        snprintf(cs->why, sizeof cs->why,
                 "no hardware PMU (a VM without a virtual PMU?): hardware events %s%s; "
                 "perf_event_paranoid=%s",
                 strstr(e, "ENOENT") ? "not supported (ENOENT)" : "not supported (EOPNOTSUPP)",
                 cs->pmu[0] ? "" : ", no bus/event_source/devices/cpu in sysfs", lv);
    else if (strstr(e, "EACCES") || strstr(e, "EPERM"))
        snprintf(cs->why, sizeof cs->why,
                 "perf_event_open refused (%s) at perf_event_paranoid=%s: lower it to 2 or "
                 "grant CAP_PERFMON", strstr(e, "EACCES") ? "EACCES" : "EPERM", lv);
    else
        snprintf(cs->why, sizeof cs->why, "hardware events: %s; perf_event_paranoid=%s", e, lv);
}

void tb_counters_open(tb_counters *cs, pid_t pid)
{
    memset(cs, 0, sizeof *cs);
    core_pmu(cs);
    for (size_t i = 0; i < sizeof GENERIC / sizeof GENERIC[0]; i++)
        open_one(cs, add(cs, GENERIC[i].name), GENERIC[i].type, GENERIC[i].config, pid);
    open_l2(cs, add(cs, "l2_lines_in"), pid);
    tb_counter *rd = add(cs, "dram_read"), *wr = add(cs, "dram_write");
    open_imc(cs, rd, wr);
    if (!cs->hw_opened)
        hardware_why(cs);
    /* around a child, its own events start at its exec (enable_on_exec); the memory
     * controllers' (node-wide, not the child's) now */
    for (int i = 0; i < cs->n; i++)
        if (pid <= 0 || !strncmp(cs->c[i].name, "dram_", 5))
            for (int k = 0; k < cs->c[i].nfd; k++)
                ioctl(cs->c[i].fds[k], PERF_EVENT_IOC_ENABLE, 0);
}

/* Read and close C's descriptors: the sum of their values, scaled where multiplexed. */
static void read_counter(tb_counter *c)
{
    uint64_t sum = 0;
    int ok = 0;
    for (int k = 0; k < c->nfd; k++) {
        uint64_t v[3];
        if (read(c->fds[k], v, sizeof v) == (ssize_t)sizeof v) {
            if (v[2] == 0 && v[1] > 0) {
                snprintf(c->why, sizeof c->why, "never scheduled (all counters busy)");
            } else {
                if (v[2] < v[1]) {
                    c->multiplexed = 1;
                    v[0] = (uint64_t)((double)v[0] * (double)v[1] / (double)v[2]);
                }
                sum += v[0];
                ok = 1;
            }
        } else if (!c->why[0]) {
            snprintf(c->why, sizeof c->why, "read: %s", strerror(errno));
        }
        close(c->fds[k]);
    }
    c->nfd = 0;
    c->value = sum;
    c->counted = ok;
}

void tb_counters_read(tb_counters *cs)
{
    for (int i = 0; i < cs->n; i++) {
        tb_counter *c = &cs->c[i];
        if (!c->nfd)
            continue;
        for (int k = 0; k < c->nfd; k++)
            ioctl(c->fds[k], PERF_EVENT_IOC_DISABLE, 0);
        read_counter(c);
        cs->available |= c->counted;
        cs->multiplexed |= c->multiplexed;
    }
    uint64_t r, w;
    if (tb_counters_value(cs, "dram_read", &r) == 0 &&
        tb_counters_value(cs, "dram_write", &w) == 0) {
        cs->dram_counted = 1;
        cs->dram_read = r * 64;
        cs->dram_write = w * 64;
    }
    if (!cs->available && !cs->why[0])
        snprintf(cs->why, sizeof cs->why, "no counter opened: %s",
                 cs->c[cs->n ? cs->n - 1 : 0].why);
}

int tb_counters_value(const tb_counters *cs, const char *name, uint64_t *v)
{
    for (int i = 0; i < cs->n; i++)
        if (!strcmp(cs->c[i].name, name) && cs->c[i].counted) {
            *v = cs->c[i].value;
            return 0;
        }
    return -1;
}

static void put_u64(tb_json *j, const char *key, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        tbj_int(j, key, (long long)v);
    else
        tbj_dbl(j, key, (double)v);
}

void tb_counters_json(tb_json *j, const tb_counters *cs)
{
    tbj_obj_begin(j, "counters");
    tbj_str(j, "source", "perf_event_open");
    tbj_bool(j, "available", cs->available);
    tbj_str(j, "why", cs->why);
    tbj_str(j, "pmu", cs->pmu);
    tbj_obj_begin(j, "events");
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].counted && strncmp(cs->c[i].name, "dram_", 5) != 0)
            put_u64(j, cs->c[i].name, cs->c[i].value);
    tbj_obj_end(j);
    tbj_obj_begin(j, "missing");
    for (int i = 0; i < cs->n; i++)
        if (!cs->c[i].counted && strncmp(cs->c[i].name, "dram_", 5) != 0)
            tbj_str(j, cs->c[i].name, cs->c[i].why[0] ? cs->c[i].why : "not opened");
    if (!cs->dram_counted)
        tbj_str(j, "dram_bytes", cs->dram_why[0] ? cs->dram_why : "not counted");
    tbj_obj_end(j);
    tbj_bool(j, "multiplexed", cs->multiplexed);
    if (cs->dram_counted) {
        tbj_obj_begin(j, "dram_bytes");
        put_u64(j, "read", cs->dram_read);
        put_u64(j, "write", cs->dram_write);
        tbj_obj_end(j);
    }
    tbj_obj_end(j);
}
