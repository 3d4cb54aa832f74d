/*
 * tb_evidence.c - the evidence's signals, read at begin and end of a measured run (their
 * deltas), and the "evidence" object (tb/evidence.h; docs/results-format.md, "evidence").
 * Every file goes through tb_read_bounded(): regular files only, a bound on each.
 */
#include "tb/evidence.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tb/util.h"

#define MAX_CPUS 8192
#define MAX_LEVELS 32   /* cgroup levels read: the leaf and its ancestors */
#define MAX_DOMAINS 16  /* powercap packages */
#define MAX_LINKS 64    /* PCIe links reported */
#define MAX_PER_CPU 64  /* CPUs whose sysfs files are read (thermal, cpufreq): the run's first */
#define SMALL (1 << 16) /* a cgroup or sysfs file */
#define BIG (8 << 20)   /* /proc/stat, /proc/interrupts, numa_maps of a many-CPU node */

/* ---------------------------------------------------------------- bounded reads */
/* OUT = $VAR (a test tree) or DEFAULT, then /REL; "" when it does not fit */
static const char *rooted(char *out, size_t len, const char *var, const char *dflt,
                          const char *rel)
{
    const char *root = getenv(var);
    int n = snprintf(out, len, "%s/%s", root && *root ? root : dflt, rel);
    if (n < 0 || (size_t)n >= len)
        out[0] = '\0';
    return out;
}

const char *tb_sys_path(char *out, size_t len, const char *rel)
{
    return rooted(out, len, "TOPOBIND_SYSFS_ROOT", "/sys", rel);
}

const char *tb_proc_path(char *out, size_t len, const char *rel)
{
    return rooted(out, len, "TOPOBIND_PROCFS_ROOT", "/proc", rel);
}

static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISDIR(m) ? "a directory"
         : S_ISSOCK(m) ? "a socket" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

int tb_read_bounded(const char *path, size_t cap, char **out, size_t *len, char *why,
                    size_t wlen)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT || err == ENOTDIR)
            snprintf(why, wlen, "%s absent", path);
        else
            snprintf(why, wlen, "%s not readable: %s", path, strerror(err));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, wlen, "%s is %s, not a regular file", path, kind_of(st.st_mode));
        close(fd);
        return -1;
    }
    char *buf = tb_xmalloc(cap + 2);
    size_t n = 0;
    while (n <= cap) {
        ssize_t r = read(fd, buf + n, cap + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, wlen, "%s not readable: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > cap) {
        snprintf(why, wlen, "%s is larger than %zu bytes", path, cap);
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int tb_read_u64(const char *path, uint64_t *v, char *why, size_t wlen)
{
    char *buf, *end;
    size_t n;
    if (tb_read_bounded(path, 4096, &buf, &n, why, wlen) != 0)
        return -1;
    const char *s = buf + strspn(buf, " \t");
    errno = 0;
    *v = strtoull(s, &end, 10);
    int bad = end == s || *s == '-' || errno || (*end && *end != '\n' && *end != ' ');
    if (bad)
        snprintf(why, wlen, "%s is not a number: '%.20s'", path, s);
    free(buf);
    return bad ? -1 : 0;
}

/* "KEY VALUE" lines of TEXT (cpu.stat, vmstat, numastat): the value of KEY, 0 or -1. */
static int keyed(const char *text, const char *key, uint64_t *v)
{
    size_t k = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, key, k) && (l[k] == ' ' || l[k] == '\t')) {
            char *end;
            *v = strtoull(l + k + 1, &end, 10);
            return end == l + k + 1 ? -1 : 0;
        }
    return -1;
}

/* ---------------------------------------------------------------- the state */
enum {
    S_BUSY, S_STEAL, S_THROTTLED, S_THR_PERIODS, S_QUOTA, S_CTX, S_MIGR, S_MINF, S_MAJF,
    S_REMOTE, S_NUMA_MISS, S_NUMA_OTHER, S_COMPACT, S_THP_FB, S_SWAP, S_IRQ, S_THERMAL,
    S_CLOCK, S_CLOCK_MAX, S_EFF_CLOCK, S_ENERGY, S_N
};
static const char *const SIG_NAME[S_N] = {
    "busy_share", "steal_share", "throttled_share", "throttled_periods", "quota_cpus",
    "ctx_switches", "migrations", "minor_faults", "major_faults", "remote_page_share",
    "numa_miss", "numa_other_node", "compact_stall", "thp_fault_fallback", "swap_pages",
    "interrupts_on_cpus", "thermal_throttle_events", "clock_mhz", "clock_max_mhz",
    "effective_clock_ratio", "package_energy_j"};
/* 1: a count, written as an integer */
static const unsigned char SIG_INT[S_N] = {0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1,
                                           0, 0, 0, 0};

typedef struct { /* what is read at begin and again at end */
    double t;
    int stat_ok;
    uint64_t (*per)[3]; /* by CPU: busy and steal jiffies, interrupts; NOT_SEEN: no such CPU */
    int ru_ok;
    double own_s;
    uint64_t csw, minflt, majflt;
    int cg_ok[MAX_LEVELS];
    double cg_thr_s[MAX_LEVELS];
    uint64_t cg_nr[MAX_LEVELS];
    int numa_ok, vm_ok[3], irq_ok, therm_ok, nrg_n;
    uint64_t numa_miss, numa_other, vm[3], therm, nrg[MAX_DOMAINS], nrg_max[MAX_DOMAINS];
    char why[6][TB_EV_WHY]; /* 0 stat, 1 numastat, 2 vmstat, 3 interrupts, 4 thermal, 5 energy */
} snap;

typedef struct {
    char device[32], kind[8];
    double speed, max_speed;
    int width, max_width;
} pcie_link;

struct tb_evidence {
    pid_t pid;
    int ended;
    int *cpus, ncpu;   /* the run's CPUs: at begin, widened at the end by its threads' masks */
    int *cpus0, ncpu0; /* those at begin (thermal counts: read at begin and end on the same) */
    cpu_set_t *set;
    size_t setsize;
    int cg_v2, cg_n;
    char *cg_dir[MAX_LEVELS];
    char cg_why[TB_EV_WHY];
    snap b, e;
    tb_counters cs;
    double val[S_N];
    int have[S_N];
    char why[S_N][TB_EV_WHY];
    pcie_link links[MAX_LINKS];
    int nlinks;
    int nvidia;                /* an NVIDIA GPU in sysfs: NVML is asked (around a child only) */
    int nthr;                  /* gpu_throttle entries; -1: not asked */
    unsigned thr_index[MAX_LINKS];
    unsigned long long thr_mask[MAX_LINKS];
    char thr_why[TB_EV_WHY];
};

static void set_val(tb_evidence *e, int s, double v)
{
    e->val[s] = v;
    e->have[s] = 1;
}

static void set_why(tb_evidence *e, int s, const char *why)
{
    if (!e->have[s])
        snprintf(e->why[s], TB_EV_WHY, "%s", why);
}

static int in_run(const tb_evidence *e, long cpu)
{
    return cpu >= 0 && cpu < MAX_CPUS && CPU_ISSET_S((size_t)cpu, e->setsize, e->set);
}

/* ---------------------------------------------------------------- /proc/stat, rusage */
#define NOT_SEEN UINT64_MAX

/* Every CPU's line (the run's CPUs are known at the end: OpenMP binds its threads after). */
static void read_stat(snap *s)
{
    char p[512], *buf;
    size_t n;
    s->stat_ok = 0;
    for (int c = 0; c < MAX_CPUS; c++)
        s->per[c][0] = s->per[c][1] = NOT_SEEN;
    if (tb_read_bounded(tb_proc_path(p, sizeof p, "stat"), BIG, &buf, &n, s->why[0],
                        TB_EV_WHY) != 0)
        return;
    for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, "cpu", 3) || l[3] < '0' || l[3] > '9')
            continue;
        char *q;
        long cpu = strtol(l + 3, &q, 10);
        if (cpu < 0 || cpu >= MAX_CPUS)
            continue;
        unsigned long long f[8] = {0};
        for (int k = 0; k < 8; k++)
            f[k] = strtoull(q, &q, 10);
        s->per[cpu][0] = f[0] + f[1] + f[2] + f[5] + f[6]; /* user nice system irq softirq */
        s->per[cpu][1] = f[7];
        s->stat_ok = 1;
    }
    free(buf);
    if (!s->stat_ok)
        snprintf(s->why[0], TB_EV_WHY, "%.150s has no cpuN line", p);
}

/* The sum over the run's CPUs of the deltas of column K; -1 when no CPU of the run was seen in
 * both snapshots. */
static int per_cpu_delta(const tb_evidence *e, int k, uint64_t *sum)
{
    int seen = 0;
    *sum = 0;
    for (int i = 0; i < e->ncpu; i++) {
        uint64_t a = e->b.per[e->cpus[i]][k], b = e->e.per[e->cpus[i]][k];
        if (a == NOT_SEEN || b == NOT_SEEN)
            continue;
        *sum += b >= a ? b - a : 0;
        seen = 1;
    }
    return seen ? 0 : -1;
}

static void read_rusage(const tb_evidence *e, snap *s, const struct rusage *child)
{
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    s->ru_ok = 1;
    if (e->pid == 0)
        getrusage(RUSAGE_SELF, &ru);
    else if (child)
        ru = *child;
    else if (e->ended)
        s->ru_ok = 0;
    s->own_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    s->csw = (uint64_t)(ru.ru_nvcsw + ru.ru_nivcsw);
    s->minflt = (uint64_t)ru.ru_minflt;
    s->majflt = (uint64_t)ru.ru_majflt;
}

/* ---------------------------------------------------------------- cgroup */
/* The cgroup directories of the process, leaf first: cgroup v1's cpu controller where it is
 * mounted, else v2 (fs/cgroup, or fs/cgroup/unified on a hybrid layout). */
static void find_cgroup(tb_evidence *e)
{
    char p[512], *buf;
    size_t n;
    /* self, also around a child: it was forked here and is in this cgroup */
    if (tb_read_bounded(tb_proc_path(p, sizeof p, "self/cgroup"), SMALL, &buf, &n, e->cg_why,
                        TB_EV_WHY) != 0)
        return;
    char v1[4096] = "", v1mnt[256] = "", v2[4096] = "";
    int has_v2 = 0;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        if (!strncmp(l, "0:", 2) && c1[1] == '\0') {
            snprintf(v2, sizeof v2, "%s", c2 + 1);
            has_v2 = 1;
            continue;
        }
        char ctl[256];
        snprintf(ctl, sizeof ctl, ",%s,", c1 + 1);
        if (strstr(ctl, ",cpu,")) {
            snprintf(v1, sizeof v1, "%s", c2 + 1);
            snprintf(v1mnt, sizeof v1mnt, "%s", c1 + 1);
        }
    }
    free(buf);
    char base[1024] = "";
    const char *path = NULL;
    static const char *const mounts[] = {NULL, "cpu,cpuacct", "cpu", "cpuacct,cpu"};
    for (int i = 0; v1mnt[0] && i < 4 && !path; i++) {
        char r[300];
        snprintf(r, sizeof r, "fs/cgroup/%s", i ? mounts[i] : v1mnt);
        struct stat st;
        if (stat(tb_sys_path(base, sizeof base, r), &st) == 0 && S_ISDIR(st.st_mode))
            path = v1;
    }
    if (!path && has_v2) {
        struct stat st;
        char probe[1100];
        tb_sys_path(base, sizeof base, "fs/cgroup");
        snprintf(probe, sizeof probe, "%s/cgroup.controllers", base);
        if (stat(probe, &st) != 0)
            tb_sys_path(base, sizeof base, "fs/cgroup/unified");
        path = v2;
        e->cg_v2 = 1;
    }
    if (!path) {
        snprintf(e->cg_why, TB_EV_WHY, "%.150s names no cpu cgroup that sysfs has", p);
        return;
    }
    char cur[4096];
    snprintf(cur, sizeof cur, "%s", path);
    while (e->cg_n < MAX_LEVELS) {
        size_t len = strlen(base) + strlen(cur) + 2;
        e->cg_dir[e->cg_n] = tb_xmalloc(len);
        snprintf(e->cg_dir[e->cg_n++], len, "%s%s", base, strcmp(cur, "/") ? cur : "");
        char *slash = strrchr(cur, '/');
        if (!slash || cur[1] == '\0' || cur[0] == '\0')
            break;
        if (slash == cur)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

static void read_cgroup(const tb_evidence *e, snap *s)
{
    for (int i = 0; i < e->cg_n; i++) {
        char p[4200], *buf, why[TB_EV_WHY];
        size_t n;
        uint64_t t, nr;
        s->cg_ok[i] = 0;
        snprintf(p, sizeof p, "%s/cpu.stat", e->cg_dir[i]);
        if (tb_read_bounded(p, SMALL, &buf, &n, why, sizeof why) != 0)
            continue;
        if (keyed(buf, e->cg_v2 ? "throttled_usec" : "throttled_time", &t) == 0 &&
            keyed(buf, "nr_throttled", &nr) == 0) {
            s->cg_ok[i] = 1;
            s->cg_thr_s[i] = (double)t * (e->cg_v2 ? 1e-6 : 1e-9);
            s->cg_nr[i] = nr;
        }
        free(buf);
    }
}

/* The tightest quota over the levels (cpu.max; cfs_quota_us / cfs_period_us). */
static void cgroup_quota(tb_evidence *e)
{
    double best = -1;
    int readable = 0;
    for (int i = 0; i < e->cg_n; i++) {
        char p[4200], *buf, why[TB_EV_WHY];
        size_t n;
        double q = -1, per = 0;
        if (e->cg_v2) {
            snprintf(p, sizeof p, "%s/cpu.max", e->cg_dir[i]);
            if (tb_read_bounded(p, 256, &buf, &n, why, sizeof why) != 0)
                continue;
            readable = 1;
            if (strncmp(buf, "max", 3) != 0 && sscanf(buf, "%lf %lf", &q, &per) != 2)
                q = -1;
            free(buf);
        } else {
            uint64_t uper;
            long long quota;
            snprintf(p, sizeof p, "%s/cpu.cfs_quota_us", e->cg_dir[i]);
            if (tb_read_bounded(p, 256, &buf, &n, why, sizeof why) != 0)
                continue;
            quota = strtoll(buf, NULL, 10);
            free(buf);
            snprintf(p, sizeof p, "%s/cpu.cfs_period_us", e->cg_dir[i]);
            if (tb_read_u64(p, &uper, why, sizeof why) != 0)
                continue;
            readable = 1;
            q = (double)quota;
            per = (double)uper;
        }
        if (q > 0 && per > 0 && (best < 0 || q / per < best))
            best = q / per;
    }
    if (best > 0)
        set_val(e, S_QUOTA, best);
    else if (!readable)
        set_why(e, S_QUOTA,
                e->cg_n ? "no cpu.max or cpu.cfs_quota_us in the run's cgroup or its ancestors"
                        : e->cg_why);
}

static void cgroup_signals(tb_evidence *e, double window)
{
    int best = -1;
    double share = 0;
    for (int i = 0; i < e->cg_n; i++) {
        if (!e->b.cg_ok[i] || !e->e.cg_ok[i])
            continue;
        double d = (e->e.cg_thr_s[i] - e->b.cg_thr_s[i]) / window;
        if (best < 0 || d > share) {
            best = i;
            share = d;
        }
    }
    if (best >= 0) {
        /* the kernel sums the throttled time of the cgroup's run queues over the CPUs
         * (several throttled at once count twice): a share of the window, at most 1 */
        set_val(e, S_THROTTLED, share < 0 ? 0 : share > 1 ? 1 : share);
        set_val(e, S_THR_PERIODS, (double)(e->e.cg_nr[best] - e->b.cg_nr[best]));
    } else {
        const char *w = e->cg_n ? "no cpu.stat with throttling in the run's cgroup or its ancestors"
                                : e->cg_why;
        set_why(e, S_THROTTLED, w);
        set_why(e, S_THR_PERIODS, w);
    }
    cgroup_quota(e);
}

/* ---------------------------------------------------------------- node-wide counts */
static void read_numastat(snap *s)
{
    char p[512], rel[128];
    s->numa_ok = 0;
    s->numa_miss = s->numa_other = 0;
    DIR *d = opendir(tb_sys_path(p, sizeof p, "devices/system/node"));
    if (!d) {
        snprintf(s->why[1], TB_EV_WHY, "%.150s absent", p);
        return;
    }
    struct dirent *de;
    for (int k = 0; k < 4096 && (de = readdir(d)); k++) {
        if (strncmp(de->d_name, "node", 4) || de->d_name[4] < '0' || de->d_name[4] > '9')
            continue;
        char *buf;
        size_t n;
        uint64_t miss, other;
        snprintf(rel, sizeof rel, "devices/system/node/%.32s/numastat", de->d_name);
        if (tb_read_bounded(tb_sys_path(p, sizeof p, rel), SMALL, &buf, &n, s->why[1],
                            TB_EV_WHY) != 0)
            continue;
        if (keyed(buf, "numa_miss", &miss) == 0 && keyed(buf, "other_node", &other) == 0) {
            s->numa_miss += miss;
            s->numa_other += other;
            s->numa_ok = 1;
        }
        free(buf);
    }
    closedir(d);
    if (!s->numa_ok && !s->why[1][0])
        snprintf(s->why[1], TB_EV_WHY, "no node*/numastat in sysfs");
}

static void read_vmstat(snap *s)
{
    static const char *const keys[3] = {"compact_stall", "thp_fault_fallback", NULL};
    char p[512], *buf;
    size_t n;
    memset(s->vm_ok, 0, sizeof s->vm_ok);
    if (tb_read_bounded(tb_proc_path(p, sizeof p, "vmstat"), SMALL, &buf, &n, s->why[2],
                        TB_EV_WHY) != 0)
        return;
    for (int i = 0; i < 2; i++)
        s->vm_ok[i] = keyed(buf, keys[i], &s->vm[i]) == 0;
    uint64_t in, out;
    if (keyed(buf, "pswpin", &in) == 0 && keyed(buf, "pswpout", &out) == 0) {
        s->vm[2] = in + out;
        s->vm_ok[2] = 1;
    }
    free(buf);
    snprintf(s->why[2], TB_EV_WHY, "%.150s has no such line", p);
}

/* The interrupts on the run's CPUs: /proc/interrupts' columns are named CPUn in its header. */
static void read_interrupts(snap *s)
{
    char p[512], *buf;
    size_t n;
    s->irq_ok = 0;
    for (int c = 0; c < MAX_CPUS; c++)
        s->per[c][2] = NOT_SEEN;
    if (tb_read_bounded(tb_proc_path(p, sizeof p, "interrupts"), BIG, &buf, &n, s->why[3],
                        TB_EV_WHY) != 0)
        return;
    int col[MAX_CPUS], ncol = 0;
    char *save = NULL, *l = strtok_r(buf, "\n", &save);
    for (char *q = l ? strstr(l, "CPU") : NULL; q && ncol < MAX_CPUS; q = strstr(q, "CPU")) {
        int c = atoi(q + 3);
        col[ncol++] = c >= 0 && c < MAX_CPUS ? c : 0;
        s->per[col[ncol - 1]][2] = 0;
        q += 3;
    }
    while ((l = strtok_r(NULL, "\n", &save))) {
        char *q = strchr(l, ':');
        if (!q)
            continue;
        q++;
        for (int c = 0; c < ncol; c++) {
            char *end;
            unsigned long long v = strtoull(q, &end, 10);
            if (end == q)
                break;
            q = end;
            s->per[col[c]][2] += v;
        }
    }
    free(buf);
    s->irq_ok = ncol > 0;
    if (!ncol)
        snprintf(s->why[3], TB_EV_WHY, "%.150s has no CPU columns", p);
}

static void read_thermal(const tb_evidence *e, snap *s)
{
    static const char *const f[2] = {"core_throttle_count", "package_throttle_count"};
    s->therm_ok = 0;
    s->therm = 0;
    s->why[4][0] = '\0';
    for (int i = 0; i < e->ncpu0 && i < MAX_PER_CPU; i++)
        for (int k = 0; k < 2; k++) {
            char rel[128], p[512];
            uint64_t v;
            snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/thermal_throttle/%s", e->cpus0[i],
                     f[k]);
            char w[TB_EV_WHY];
            if (tb_read_u64(tb_sys_path(p, sizeof p, rel), &v, w, sizeof w) == 0) {
                s->therm += v;
                s->therm_ok = 1;
            } else if (!s->why[4][0]) {
                snprintf(s->why[4], TB_EV_WHY, "%s", w);
            }
        }
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

/* Package energy: powercap intel-rapl:N (the packages, not their sub-zones). */
static void read_energy(snap *s)
{
    char p[512];
    s->nrg_n = 0;
    DIR *d = opendir(tb_sys_path(p, sizeof p, "class/powercap"));
    if (!d) {
        snprintf(s->why[5], TB_EV_WHY, "powercap not readable: %.150s absent", p);
        return;
    }
    struct dirent *de;
    char names[MAX_DOMAINS][40];
    int nn = 0;
    for (int k = 0; k < 4096 && nn < MAX_DOMAINS && (de = readdir(d)); k++) {
        int a, used = 0;
        if (sscanf(de->d_name, "intel-rapl:%d%n", &a, &used) == 1 && de->d_name[used] == '\0')
            snprintf(names[nn++], 40, "%.39s", de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, 40, by_name);
    for (int i = 0; i < nn; i++) {
        char rel[200];
        uint64_t v, mx = 0;
        snprintf(rel, sizeof rel, "class/powercap/%.39s/energy_uj", names[i]);
        if (tb_read_u64(tb_sys_path(p, sizeof p, rel), &v, s->why[5], TB_EV_WHY) != 0) {
            s->nrg_n = 0;
            return;
        }
        snprintf(rel, sizeof rel, "class/powercap/%.39s/max_energy_range_uj", names[i]);
        char w[TB_EV_WHY];
        if (tb_read_u64(tb_sys_path(p, sizeof p, rel), &mx, w, sizeof w) != 0)
            mx = 0;
        s->nrg[s->nrg_n] = v;
        s->nrg_max[s->nrg_n++] = mx;
    }
    if (!nn)
        snprintf(s->why[5], TB_EV_WHY, "powercap has no intel-rapl zone");
}

static void snapshot(tb_evidence *e, snap *s, const struct rusage *child)
{
    read_stat(s);
    read_cgroup(e, s);
    read_numastat(s);
    read_vmstat(s);
    read_interrupts(s);
    read_thermal(e, s);
    read_energy(s);
    read_rusage(e, s, child);
}

/* ---------------------------------------------------------------- read at the end only */
/* The NUMA nodes of the run's CPUs into NODES (flags by node number); how many. */
static int run_nodes(const tb_evidence *e, unsigned char *nodes, int max)
{
    char p[512], rel[128];
    int found = 0;
    DIR *d = opendir(tb_sys_path(p, sizeof p, "devices/system/node"));
    if (!d)
        return 0;
    struct dirent *de;
    for (int k = 0; k < 4096 && (de = readdir(d)); k++) {
        int node, used = 0;
        if (sscanf(de->d_name, "node%d%n", &node, &used) != 1 || de->d_name[used] || node >= max)
            continue;
        char *buf;
        size_t n;
        char why[TB_EV_WHY];
        snprintf(rel, sizeof rel, "devices/system/node/%.32s/cpulist", de->d_name);
        if (tb_read_bounded(tb_sys_path(p, sizeof p, rel), SMALL, &buf, &n, why, sizeof why))
            continue;
        int *cpus = NULL, nc = tb_list_parse(buf, &cpus);
        free(buf);
        for (int i = 0; i < nc; i++)
            if (in_run(e, cpus[i])) {
                nodes[node] = 1;
                found = 1;
            }
        free(cpus);
    }
    closedir(d);
    return found;
}

/* Share of the process's resident pages (KiB-weighted) on nodes other than its CPUs'. */
static void remote_pages(tb_evidence *e)
{
    if (e->pid) {
        set_why(e, S_REMOTE, "the program had exited: its numa_maps is gone");
        return;
    }
    unsigned char nodes[4096] = {0};
    if (!run_nodes(e, nodes, 4096)) {
        set_why(e, S_REMOTE, "no NUMA node in sysfs lists the run's CPUs");
        return;
    }
    char p[512], *buf, why[TB_EV_WHY];
    size_t n;
    if (tb_read_bounded(tb_proc_path(p, sizeof p, "self/numa_maps"), BIG, &buf, &n, why,
                        sizeof why) != 0) {
        set_why(e, S_REMOTE, why);
        return;
    }
    double total = 0, remote = 0;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *k = strstr(l, "kernelpagesize_kB=");
        double kib = k ? atof(k + 18) : 4;
        for (char *q = strstr(l, " N"); q; q = strstr(q + 1, " N")) {
            int node, used = 0;
            long pages;
            if (sscanf(q + 2, "%d=%ld%n", &node, &pages, &used) != 2 || used == 0)
                continue;
            total += (double)pages * kib;
            if (node < 0 || node >= 4096 || !nodes[node])
                remote += (double)pages * kib;
        }
    }
    free(buf);
    if (total > 0)
        set_val(e, S_REMOTE, remote / total);
    else
        set_why(e, S_REMOTE, "numa_maps lists no resident page per node");
}

/* The mean of cpufreq file NAME over the run's CPUs (MAX: their largest), in MHz; 0, or -1
 * with WHY (the first CPU's reason). */
static int cpu_mhz(const tb_evidence *e, const char *name, int max, double *out, char *why)
{
    double sum = 0;
    int n = 0;
    why[0] = '\0';
    for (int i = 0; i < e->ncpu && i < MAX_PER_CPU; i++) {
        char rel[128], p[512], w[TB_EV_WHY];
        uint64_t v;
        snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/cpufreq/%s", e->cpus[i], name);
        if (tb_read_u64(tb_sys_path(p, sizeof p, rel), &v, w, sizeof w) != 0) {
            if (!why[0])
                snprintf(why, TB_EV_WHY, "%s", w);
            continue;
        }
        double mhz = (double)v / 1000.0;
        sum = max ? (mhz > sum ? mhz : sum) : sum + mhz;
        n++;
    }
    if (!n) {
        if (!why[0])
            snprintf(why, TB_EV_WHY, "the run has no CPU");
        return -1;
    }
    *out = max ? sum : sum / n;
    return 0;
}

static void clocks(tb_evidence *e)
{
    char why[TB_EV_WHY];
    double v;
    if (cpu_mhz(e, "scaling_cur_freq", 0, &v, why) == 0)
        set_val(e, S_CLOCK, v);
    else
        set_why(e, S_CLOCK, why);
    if (cpu_mhz(e, "cpuinfo_max_freq", 1, &v, why) == 0)
        set_val(e, S_CLOCK_MAX, v);
    else
        set_why(e, S_CLOCK_MAX, why);
}

/* "16.0 GT/s PCIe" -> 16.0; 0 when unknown. */
static double link_field(const char *dir, const char *name, int *ok)
{
    char p[600], *buf, why[TB_EV_WHY];
    size_t n;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *ok = 0;
    if (tb_read_bounded(p, 256, &buf, &n, why, sizeof why) != 0)
        return 0;
    char *end;
    double v = strtod(buf, &end);
    *ok = end != buf && v > 0;
    free(buf);
    return v;
}

/* The PCIe links of the node's GPUs (class 0x03, 0x12) and NICs (0x02). */
static void pcie_links(tb_evidence *e)
{
    char base[512];
    DIR *d = opendir(tb_sys_path(base, sizeof base, "bus/pci/devices"));
    if (!d)
        return;
    struct dirent *de;
    for (int k = 0; k < 4096 && e->nlinks < MAX_LINKS && (de = readdir(d)); k++) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= 32)
            continue;
        char dir[600], p[700], why[TB_EV_WHY];
        uint64_t cls = 0;
        snprintf(dir, sizeof dir, "%s/%s", base, de->d_name);
        snprintf(p, sizeof p, "%s/class", dir);
        char *buf;
        size_t n;
        if (tb_read_bounded(p, 64, &buf, &n, why, sizeof why) != 0)
            continue;
        cls = strtoull(buf, NULL, 16) >> 16;
        free(buf);
        const char *kind = cls == 0x03 || cls == 0x12 ? "gpu" : cls == 0x02 ? "nic" : NULL;
        if (!kind)
            continue;
        snprintf(p, sizeof p, "%s/vendor", dir);
        uint64_t vendor = 0;
        if (cls == 0x03 && tb_read_bounded(p, 64, &buf, &n, why, sizeof why) == 0) {
            vendor = strtoull(buf, NULL, 16);
            free(buf);
        }
        e->nvidia |= vendor == 0x10de;
        pcie_link *l = &e->links[e->nlinks];
        int ok[4];
        l->speed = link_field(dir, "current_link_speed", &ok[0]);
        l->width = (int)link_field(dir, "current_link_width", &ok[1]);
        l->max_speed = link_field(dir, "max_link_speed", &ok[2]);
        l->max_width = (int)link_field(dir, "max_link_width", &ok[3]);
        if (!ok[0] || !ok[1] || !ok[2] || !ok[3])
            continue;
        snprintf(l->device, sizeof l->device, "%s", de->d_name);
        snprintf(l->kind, sizeof l->kind, "%s", kind);
        e->nlinks++;
    }
    closedir(d);
}

/* ---------------------------------------------------------------- GPU throttle (NVML) */
/* NVML's clock event (throttle) reasons, bit by bit (nvml.h, nvmlClocksEventReason*). */
static const char *const THROTTLE_NAME[] = {
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
    "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
    "display_clock_setting"};
#define NTHROTTLE (sizeof THROTTLE_NAME / sizeof THROTTLE_NAME[0])

/* In the forked child: each GPU's reasons as "INDEX MASK" lines on FD, or "E why". */
static void nvml_child(int fd)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        dprintf(fd, "E cannot load libnvidia-ml.so.1\n");
        _exit(0);
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    int (*handle)(unsigned, void **) =
        (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    void *r = dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!r)
        r = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    int (*reasons)(void *, unsigned long long *) = (int (*)(void *, unsigned long long *))r;
    unsigned n = 0;
    int rc;
    if (!init || !count || !handle || !reasons)
        dprintf(fd, "E libnvidia-ml.so.1 lacks the calls asked\n");
    else if ((rc = init()) != 0)
        dprintf(fd, "E nvmlInit_v2 returned %d\n", rc);
    else if ((rc = count(&n)) != 0)
        dprintf(fd, "E nvmlDeviceGetCount_v2 returned %d\n", rc);
    for (unsigned i = 0; i < n && i < MAX_LINKS; i++) {
        void *d;
        unsigned long long mask;
        if (handle(i, &d) == 0 && reasons(d, &mask) == 0)
            dprintf(fd, "%u %llu\n", i, mask);
    }
    _exit(0);
}

static double nvml_timeout(void)
{
    const char *v = getenv("TOPOBIND_GPU_LIBS_TIMEOUT");
    double t = v ? atof(v) : 10.0;
    return t > 0 && t <= 600 ? t : 10.0;
}

/* NVML asked in a forked child bounded in time (a hang or a crash is a reason, never the
 * run's); its answer bounded in size. */
static void gpu_throttle(tb_evidence *e)
{
    int fds[2];
    e->nthr = -1;
    if (pipe(fds) != 0) {
        snprintf(e->thr_why, TB_EV_WHY, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        nvml_child(fds[1]);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        snprintf(e->thr_why, TB_EV_WHY, "fork: %s", strerror(errno));
        return;
    }
    char buf[4096];
    size_t len = 0;
    double limit = nvml_timeout(), t0 = tb_now();
    int done = 0;
    while (!done && len < sizeof buf - 1) {
        int left = (int)((limit - (tb_now() - t0)) * 1000);
        struct pollfd pf = {fds[0], POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            break;
        ssize_t r = read(fds[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            done = 1;
        else
            len += (size_t)r;
    }
    close(fds[0]);
    buf[len] = '\0';
    int st = 0;
    if (!done)
        kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    if (!done) {
        snprintf(e->thr_why, TB_EV_WHY, "NVML did not answer in %g s (TOPOBIND_GPU_LIBS_TIMEOUT)",
                 limit);
        return;
    }
    if (WIFSIGNALED(st)) {
        snprintf(e->thr_why, TB_EV_WHY, "NVML crashed (signal %d)", WTERMSIG(st));
        return;
    }
    if (buf[0] == 'E') {
        snprintf(e->thr_why, TB_EV_WHY, "%.*s", (int)strcspn(buf + 2, "\n"), buf + 2);
        return;
    }
    e->nthr = 0;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l && e->nthr < MAX_LINKS;
         l = strtok_r(NULL, "\n", &save))
        if (sscanf(l, "%u %llu", &e->thr_index[e->nthr], &e->thr_mask[e->nthr]) == 2)
            e->nthr++;
}

static void gpu_throttle_json(tb_json *j, const tb_evidence *e)
{
    tbj_arr_begin(j, "gpu_throttle");
    for (int i = 0; i < e->nthr; i++) {
        tbj_obj_begin(j, NULL);
        tbj_int(j, "index", e->thr_index[i]);
        tbj_arr_begin(j, "reasons");
        for (unsigned b = 0; b < NTHROTTLE; b++)
            if (e->thr_mask[i] & (1ULL << b))
                tbj_str(j, NULL, THROTTLE_NAME[b]);
        tbj_arr_end(j);
        tbj_obj_end(j);
    }
    tbj_arr_end(j);
}

/* ---------------------------------------------------------------- begin, end */
static int disabled(void)
{
    const char *v = getenv("TOPOBIND_EVIDENCE");
    return v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no"));
}

tb_evidence *tb_evidence_begin(pid_t pid)
{
    if (disabled())
        return NULL;
    tb_evidence *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->pid = pid;
    e->set = CPU_ALLOC(MAX_CPUS);
    e->setsize = CPU_ALLOC_SIZE(MAX_CPUS);
    e->cpus = calloc(MAX_CPUS, sizeof(int));
    e->cpus0 = calloc(MAX_CPUS, sizeof(int));
    e->b.per = calloc(MAX_CPUS, sizeof *e->b.per);
    e->e.per = calloc(MAX_CPUS, sizeof *e->e.per);
    if (!e->set || !e->cpus || !e->cpus0 || !e->b.per || !e->e.per) {
        tb_evidence_free(e);
        return NULL;
    }
    CPU_ZERO_S(e->setsize, e->set);
    if (sched_getaffinity(pid, e->setsize, e->set) == 0)
        for (int c = 0; c < MAX_CPUS; c++)
            if (CPU_ISSET_S((size_t)c, e->setsize, e->set))
                e->cpus0[e->ncpu0++] = e->cpus[e->ncpu++] = c;
    find_cgroup(e);
    snapshot(e, &e->b, NULL);
    tb_counters_open(&e->cs, pid);
    e->b.t = tb_now();
    return e;
}

static uint64_t delta(uint64_t a, uint64_t b) { return b >= a ? b - a : 0; }

static void shares(tb_evidence *e, double window)
{
    double tck = (double)sysconf(_SC_CLK_TCK), cap = window * (e->ncpu ? e->ncpu : 1);
    uint64_t busy_j, steal_j;
    if (e->b.stat_ok && e->e.stat_ok && tck > 0 && per_cpu_delta(e, 0, &busy_j) == 0 &&
        per_cpu_delta(e, 1, &steal_j) == 0) {
        double own = e->e.ru_ok ? e->e.own_s - e->b.own_s : 0;
        double sh = ((double)busy_j / tck - own) / cap;
        set_val(e, S_BUSY, sh < 0 ? 0 : sh > 1 ? 1 : sh);
        sh = (double)steal_j / tck / cap;
        set_val(e, S_STEAL, sh > 1 ? 1 : sh);
    } else {
        const char *w = !e->b.stat_ok   ? e->b.why[0]
                        : !e->e.stat_ok ? e->e.why[0]
                                        : "/proc/stat has no line for the run's CPUs";
        set_why(e, S_BUSY, w);
        set_why(e, S_STEAL, w);
    }
    if (e->e.ru_ok) {
        set_val(e, S_CTX, (double)delta(e->b.csw, e->e.csw));
        set_val(e, S_MINF, (double)delta(e->b.minflt, e->e.minflt));
        set_val(e, S_MAJF, (double)delta(e->b.majflt, e->e.majflt));
    } else {
        for (int s = S_CTX; s <= S_MAJF; s++)
            set_why(e, s, "the child's rusage was not given");
    }
}

/* A delta of two snapshots' counts, or the reason of the one that failed. */
static void count(tb_evidence *e, int s, int ok0, int ok1, uint64_t a, uint64_t b, int wi)
{
    if (ok0 && ok1)
        set_val(e, s, (double)delta(a, b));
    else
        set_why(e, s, ok0 ? e->e.why[wi] : e->b.why[wi]);
}

static void energy(tb_evidence *e)
{
    if (!e->b.nrg_n || e->b.nrg_n != e->e.nrg_n) {
        set_why(e, S_ENERGY, e->b.nrg_n ? e->e.why[5] : e->b.why[5]);
        return;
    }
    double j = 0;
    for (int i = 0; i < e->b.nrg_n; i++) {
        uint64_t a = e->b.nrg[i], b = e->e.nrg[i], mx = e->e.nrg_max[i];
        j += (double)(b >= a ? b - a : mx > a ? mx - a + b : 0) * 1e-6; /* wrapped once */
    }
    set_val(e, S_ENERGY, j);
}

static void derived(tb_evidence *e, double window)
{
    shares(e, window);
    cgroup_signals(e, window);
    count(e, S_NUMA_MISS, e->b.numa_ok, e->e.numa_ok, e->b.numa_miss, e->e.numa_miss, 1);
    count(e, S_NUMA_OTHER, e->b.numa_ok, e->e.numa_ok, e->b.numa_other, e->e.numa_other, 1);
    count(e, S_COMPACT, e->b.vm_ok[0], e->e.vm_ok[0], e->b.vm[0], e->e.vm[0], 2);
    count(e, S_THP_FB, e->b.vm_ok[1], e->e.vm_ok[1], e->b.vm[1], e->e.vm[1], 2);
    count(e, S_SWAP, e->b.vm_ok[2], e->e.vm_ok[2], e->b.vm[2], e->e.vm[2], 2);
    uint64_t irq;
    if (e->b.irq_ok && e->e.irq_ok && per_cpu_delta(e, 2, &irq) == 0)
        set_val(e, S_IRQ, (double)irq);
    else
        set_why(e, S_IRQ,
                !e->b.irq_ok   ? e->b.why[3]
                : !e->e.irq_ok ? e->e.why[3]
                               : "/proc/interrupts has no column for the run's CPUs");
    count(e, S_THERMAL, e->b.therm_ok, e->e.therm_ok, e->b.therm, e->e.therm, 4);
    energy(e);
    uint64_t v, cyc, ref;
    if (tb_counters_value(&e->cs, "cpu_migrations", &v) == 0)
        set_val(e, S_MIGR, (double)v);
    else
        set_why(e, S_MIGR, "needs the cpu-migrations software counter, which did not count");
    if (tb_counters_value(&e->cs, "cycles", &cyc) == 0 &&
        tb_counters_value(&e->cs, "ref_cycles", &ref) == 0 && ref > 0)
        set_val(e, S_EFF_CLOCK, (double)cyc / (double)ref);
    else
        set_why(e, S_EFF_CLOCK, "needs the cycles and ref_cycles counters, which did not count");
}

static int by_device(const void *a, const void *b)
{
    return strcmp(((const pcie_link *)a)->device, ((const pcie_link *)b)->device);
}

/* The run's CPUs widened by every thread's mask (self: OpenMP bound its threads after begin). */
static void widen_cpus(tb_evidence *e)
{
    char p[512];
    if (e->pid)
        return;
    DIR *d = opendir(tb_proc_path(p, sizeof p, "self/task"));
    struct dirent *de;
    cpu_set_t *t = CPU_ALLOC(MAX_CPUS);
    for (int k = 0; d && t && k < 65536 && (de = readdir(d)); k++) {
        pid_t tid = (pid_t)atoi(de->d_name);
        CPU_ZERO_S(e->setsize, t);
        if (tid > 0 && sched_getaffinity(tid, e->setsize, t) == 0)
            CPU_OR_S(e->setsize, e->set, e->set, t);
    }
    if (d)
        closedir(d);
    if (t)
        CPU_FREE(t);
    e->ncpu = 0;
    for (int c = 0; c < MAX_CPUS; c++)
        if (CPU_ISSET_S((size_t)c, e->setsize, e->set))
            e->cpus[e->ncpu++] = c;
}

void tb_evidence_end(tb_evidence *e, const struct rusage *child)
{
    if (!e || e->ended)
        return;
    double t = tb_now();
    tb_counters_read(&e->cs);
    e->ended = 1;
    snapshot(e, &e->e, child);
    e->e.t = t;
    widen_cpus(e);
    double window = e->e.t - e->b.t;
    if (window <= 0)
        window = 1e-9;
    derived(e, window);
    remote_pages(e);
    clocks(e);
    pcie_links(e);
    qsort(e->links, (size_t)e->nlinks, sizeof e->links[0], by_device);
    e->nthr = -1;
    if (e->pid && e->nvidia) /* around a program (a GPU job's): the kernels are CPU kernels */
        gpu_throttle(e);
}

/* ---------------------------------------------------------------- the JSON */
void tb_evidence_json(tb_json *j, const char *key, tb_evidence *e)
{
    if (!e)
        return;
    tb_evidence_end(e, NULL);
    tbj_obj_begin(j, key);
    tbj_int(j, "version", TB_EVIDENCE_VERSION);
    tbj_dbl(j, "window_s", e->e.t - e->b.t);
    tbj_int_array(j, "cpus", e->cpus, e->ncpu);
    tbj_obj_begin(j, "signals");
    for (int s = 0; s < S_N; s++)
        if (e->have[s] && SIG_INT[s])
            tbj_int(j, SIG_NAME[s], (long long)e->val[s]);
        else if (e->have[s])
            tbj_dbl(j, SIG_NAME[s], e->val[s]);
    tbj_obj_end(j);
    tbj_obj_begin(j, "unavailable");
    for (int s = 0; s < S_N; s++)
        if (!e->have[s] && e->why[s][0])
            tbj_str(j, SIG_NAME[s], e->why[s]);
    if (e->thr_why[0])
        tbj_str(j, "gpu_throttle", e->thr_why);
    tbj_obj_end(j);
    tb_counters_json(j, &e->cs);
    tbj_arr_begin(j, "links");
    for (int i = 0; i < e->nlinks; i++) {
        const pcie_link *l = &e->links[i];
        tbj_obj_begin(j, NULL);
        tbj_str(j, "device", l->device);
        tbj_str(j, "kind", l->kind);
        tbj_dbl(j, "speed_gts", l->speed);
        tbj_int(j, "width", l->width);
        tbj_dbl(j, "max_speed_gts", l->max_speed);
        tbj_int(j, "max_width", l->max_width);
        tbj_bool(j, "degraded", l->width < l->max_width || l->speed < l->max_speed);
        tbj_obj_end(j);
    }
    tbj_arr_end(j);
    if (e->nthr >= 0)
        gpu_throttle_json(j, e);
    tbj_obj_end(j);
}

void tb_evidence_free(tb_evidence *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->cg_n; i++)
        free(e->cg_dir[i]);
    if (e->set)
        CPU_FREE(e->set);
    free(e->cpus);
    free(e->cpus0);
    free(e->b.per);
    free(e->e.per);
    free(e);
}
