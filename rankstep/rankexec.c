/*
 * rankexec.c - topobind's per-rank step: export this rank's prepared environment, then exec.
 *
 *   rankexec FILE [--] PROGRAM [ARGS...]
 *
 * `topobind run` writes FILE once, on the batch host, in its 0700 scratch directory; every
 * rank of the job runs `rankexec FILE PROGRAM ...`, which picks the line of its local rank,
 * applies it and execs PROGRAM. No interpreter, one open(2) and one read(2) of FILE.
 *
 * FILE's format, which line a rank takes, and the refusals (one line, exit 125): the one
 * reference is docs/step-file.md. The line is applied by the step library (tb_step_apply,
 * tb_step.c: binding, memory policy and THP, each read back; variables), as the SPANK
 * plugin applies it. FILE must be a regular file owned by the user running rankexec and not
 * writable by group or others (per-rank environment from a file someone else can change
 * would be a way into every job). Built for the architecture's baseline (Makefile,
 * STEP_CFLAGS): it runs on every node of a job.
 *
 * With %sample, a detached process (double fork: not a child of the program) waits MS ms,
 * finds the program and its descendants (one pass over /proc: a wrapper such as
 * /usr/bin/time, perf stat or a shell runs the real program as its child), reads
 * /proc/PID/task/TID/{stat,status} of each (the CPU each thread last ran on, field 39 of
 * stat, and Cpus_allowed_list) and writes one JSON line in the whereami format to
 * DIR/sample-HOST-PID.json: each thread with its process id and name and whether that
 * process is a wrapper (has children), and the CPUs the rank was started on ("started_on").
 * While the program's threads (those of processes without children) are fewer than
 * OMP_NUM_THREADS of the rank's line, or (a rank over several CPUs) fewer than that many
 * distinct masks narrower than the rank are held (the OpenMP team's places, not yet taken
 * while a slow MPI_Init runs), it samples again every 100 ms (up to 10 s), keeping the last sample taken
 * while the program ran ("ended": it was gone at the last look). Its memory is that of the
 * rank's process with the most resident anonymous memory.
 */
#include "tb/env.h"
#include "tb/json.h"
#include "tb/step.h"
#include "tb/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_STEP 125 /* the step itself failed (bad file, rank not planned) */
#define MAX_FILE (64L << 20)
#define MAX_VARS 64
#define MAX_TASKS 4096

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++) /* quoted file text: one line, whatever it holds */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    fprintf(stderr, "topobind rankexec: error: %s\n", msg);
    exit(EXIT_STEP);
}

/* The first of NAMES that is set: its value, a number 0 .. TB_MAX_RANK; -1 when none is set
 * (tb_env_number, libtb/src/tb_env.c: the kernels and the hugepage shim read the rank
 * with it too). A launcher's rank variable that is set but is no plain decimal number
 * (OMPI_COMM_WORLD_LOCAL_RANK= holding a Unicode digit, "1x", "-1") is an error, not a reason
 * to take the next variable or rank 0's line. */
static long env_rank(const char *const *names)
{
    const char *bad;
    long n = tb_env_number(names, &bad);
    if (bad)
        fail("%s=%.40s is not a rank number (0 .. %ld): the launcher's variable is "
             "unreadable; unset it or launch through topobind run", bad, getenv(bad),
             TB_MAX_RANK);
    return n;
}

/* Read FILE after checking, on the open descriptor, who owns it and who may write it. Opened
   non-blocking, so a FIFO does not block the open; blocking again once it is known to be a
   regular file. */
static char *read_plan(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        fail("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0)
        fail("cannot stat %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        fail("%s is not a regular file", path);
    if (fcntl(fd, F_SETFL, 0) != 0)
        fail("cannot read %s: %s", path, strerror(errno));
    if (st.st_uid != geteuid())
        fail("%s is owned by uid %ld, not by this user (uid %ld): refused", path,
             (long)st.st_uid, (long)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        fail("%s is writable by group or others (mode %04o): refused", path,
             (unsigned)(st.st_mode & 07777));
    if (st.st_size <= 0 || st.st_size > MAX_FILE)
        fail("%s has %lld bytes (expected 1 .. %ld)", path, (long long)st.st_size, MAX_FILE);
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        fail("out of memory");
    ssize_t got = 0;
    while (got < st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)(st.st_size - got));
        if (n <= 0)
            fail("cannot read %s: %s", path, n ? strerror(errno) : "file shrank");
        got += n;
    }
    close(fd);
    buf[got] = '\0';
    char err[512];
    if (tb_step_check_text(buf, (size_t)got, err, sizeof err) != 0)
        fail("%s: %s", path, err);
    return buf;
}

/* The rank's line of the step file (the shared reader, tb_step.c); an error names PATH. */
static tb_step_choice choose(char *text, const char *path, const char *host, long rank)
{
    tb_step_choice c = {0};
    char err[256];
    int rc = tb_step_choose(text, host, rank, &c, err, sizeof err);
    if (rc == TB_STEP_NOT_STEP_FILE)
        fail("%s is %s", path, err);
    if (rc != 0)
        fail("%s: %s", path, err);
    return c; /* c.line NULL: no line for this rank on this host */
}

/* The step library's way into this process's environment (LD_PRELOAD: the shim first): the
 * variables gathered and exported at once (tb_step_vars: linear in their number), those
 * before a prepended one exported first (it reads what they set). */
static int export_env(void *ctx, const char *name, const char *value, int prepend, char *err,
                      size_t errlen)
{
    tb_step_vars *vars = ctx;
    if (!prepend)
        return tb_step_vars_add(vars, name, value, err, errlen);
    if (tb_step_vars_export(vars, err, errlen) != 0)
        return -1;
    char buf[8192];
    const char *old = prepend ? getenv(name) : NULL;
    if (old && *old) {
        if ((size_t)snprintf(buf, sizeof buf, "%s:%s", value, old) >= sizeof buf) {
            snprintf(err, errlen, "%.40s would be longer than %zu bytes", name, sizeof buf);
            return -1;
        }
        value = buf;
    }
    if (setenv(name, value, 1) != 0) {
        snprintf(err, errlen, "cannot set %.60s: %s", name, strerror(errno));
        return -1;
    }
    return 0;
}

/* The rank's line applied by the step library: binding, memory policy, THP, variables. */
static void export_line(char *line, long rank)
{
    char err[512];
    tb_step_vars vars = {0};
    if (tb_step_apply(line, export_env, &vars, err, sizeof err) != 0 ||
        tb_step_vars_export(&vars, err, sizeof err) != 0)
        fail("local rank %ld: %s", rank, err);
}

/* ---------------------------------------------------------------- sampler */
static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return (int)n;
}

static int count_tasks(pid_t pid, int *tids, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            tids[n++] = atoi(e->d_name);
    closedir(d);
    return n;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------- the rank's processes (sampler) */
/* A launch wrapper (/usr/bin/time, perf stat, a shell, taskset ...) runs the real program as
 * its child: the sampler takes the program rankexec execs and every descendant of it, found
 * in one bounded pass over /proc (Linux without CONFIG_PROC_CHILDREN has no children list).
 * A process with children of its own is marked a wrapper; the others run the program. */
#define MAX_PROCS 64   /* processes of one rank sampled */
#define MAX_SCAN 65536 /* /proc entries read looking for them */

typedef struct {
    pid_t pid;
    int children; /* child processes found: a process with children is a wrapper */
    char comm[32];
} proc_t;

/* PID's parent and command name from /proc/PID/stat; -1 when it is gone or a zombie. */
static pid_t parent_of(pid_t pid, char *comm, size_t len)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (read_small(path, buf, sizeof buf) < 0)
        return -1;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close < open || close[1] != ' ' || close[2] == '\0')
        return -1;
    if (close[2] == 'Z' || close[2] == 'X') /* ended, not yet reaped */
        return -1;
    if (comm)
        snprintf(comm, len, "%.*s", (int)(close - open - 1), open + 1);
    return (pid_t)strtol(close + 4, NULL, 10);
}

/* Whether COMM names a helper an MPI runtime forks from the program: OpenMPI 4's singleton
 * (a program started without mpirun) forks orted at MPI_Init, PRRTE's is prted. The helper
 * unbinds itself; it is not the rank, and the program is no wrapper for having it. */
static int mpi_helper(const char *comm)
{
    return strcmp(comm, "orted") == 0 || strcmp(comm, "prted") == 0;
}

/* ROOT and its descendants (MPI helpers left out), breadth first, at most MAX: 0 when ROOT
 * is gone. */
static int rank_processes(pid_t root, proc_t *out, int max)
{
    static pid_t pids[MAX_SCAN], ppids[MAX_SCAN];
    out[0] = (proc_t){.pid = root};
    if (parent_of(root, out[0].comm, sizeof out[0].comm) < 0)
        return 0;
    int scanned = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && scanned < MAX_SCAN && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        pid_t p = (pid_t)atoi(e->d_name), pp;
        if (p != root && (pp = parent_of(p, NULL, 0)) > 0) {
            pids[scanned] = p;
            ppids[scanned++] = pp;
        }
    }
    if (d)
        closedir(d);
    int n = 1;
    char comm[sizeof out[0].comm];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < scanned; k++) {
            if (ppids[k] != out[i].pid || parent_of(pids[k], comm, sizeof comm) <= 0)
                continue;
            if (mpi_helper(comm))
                continue; /* the MPI runtime's helper: neither the rank nor its child */
            out[i].children++;
            if (n < max) {
                out[n] = (proc_t){.pid = pids[k]};
                memcpy(out[n].comm, comm, sizeof comm);
                n++;
            }
        }
    return n;
}

/* One thread as a whereami placement entry; 0 when the thread is gone. */
static int thread_json(FILE *f, const proc_t *proc, int tid, long rank, int index,
                       const char *host, int *allowed, unsigned long long *hash)
{
    char path[96], buf[8192];
    snprintf(path, sizeof path, "/proc/%ld/task/%d/stat", (long)proc->pid, tid);
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p)
        return 0;
    long cpu = -1;
    /* after ')' come fields 3, 4, ...: field 39 is the 37th of them */
    for (int field = 3; field <= 39 && p; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 39)
            cpu = strtol(p + 1, NULL, 10);
    }
    snprintf(path, sizeof path, "/proc/%ld/task/%d/status", (long)proc->pid, tid);
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
    char *a = strstr(buf, "Cpus_allowed_list:");
    int *cpus = NULL, ncpus = 0;
    if (a) {
        a += strlen("Cpus_allowed_list:");
        while (*a == ' ' || *a == '\t')
            a++;
        a[strcspn(a, "\n")] = '\0';
        ncpus = tb_list_parse(a, &cpus);
    }
    fprintf(f, "%s{\"rank\":%ld,\"thread\":%d,\"tid\":%d,\"pid\":%ld,\"process\":",
            index ? "," : "", rank, index, tid, (long)proc->pid);
    tbj_fput_string(f, proc->comm);
    fprintf(f, ",\"wrapper\":%s,\"cpu\":%ld,\"affinity\":[", proc->children ? "true" : "false",
            cpu);
    for (int i = 0; i < ncpus; i++)
        fprintf(f, "%s%d", i ? "," : "", cpus[i]);
    fputs("],\"host\":", f);
    tbj_fput_string(f, host);
    fputc('}', f);
    *allowed = ncpus;
    *hash = 1469598103934665603ULL; /* FNV-1a of the mask's CPUs: tells masks apart */
    for (int i = 0; i < ncpus; i++)
        *hash = (*hash ^ (unsigned long long)cpus[i]) * 1099511628211ULL;
    free(cpus);
    return 1;
}

/* ---------------------------------------------------------------- memory sample */
#define TB_MAX_NODES 1024 /* NUMA nodes counted in a memory sample */
#define LARGE_BYTES (64ULL << 20) /* a "large" mapping: the shim's threshold */
#define MAX_LARGE 32
#define MAX_PAGE_SIZES 8

/* The program's resident anonymous memory from /proc/PID/numa_maps, as the JSON member
 * "memory": bytes per NUMA node ("nodes"), per page size in KiB ("pages"), transparent huge
 * pages (smaps_rollup's AnonHugePages, "thp"), and each anonymous mapping of 64 MiB or more
 * resident ("large": page size, bytes, policy as numa_maps shows it). */
static void sample_memory(FILE *out, pid_t pid)
{
    static unsigned long long node_bytes[TB_MAX_NODES];
    unsigned long long kib_of[MAX_PAGE_SIZES] = {0}, kib_bytes[MAX_PAGE_SIZES] = {0};
    struct { unsigned long long kib, bytes; char policy[48]; } large[MAX_LARGE];
    int nlarge = 0, nsizes = 0, top = -1;
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/numa_maps", (long)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(out, ",\"memory\":{\"error\":\"cannot read %s\"}", path);
        return;
    }
    memset(node_bytes, 0, sizeof node_bytes);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        char *save = NULL, *tok = strtok_r(line, " \n", &save); /* the address */
        char *policy = strtok_r(NULL, " \n", &save);
        int anon = 0, pages_at[64], nodes_at[64], n = 0;
        unsigned long long kib = 4, pages = 0;
        while ((tok = strtok_r(NULL, " \n", &save))) {
            if (strncmp(tok, "anon=", 5) == 0 || !strcmp(tok, "heap") || !strcmp(tok, "stack") ||
                !strcmp(tok, "huge"))
                anon = 1;
            else if (strncmp(tok, "kernelpagesize_kB=", 18) == 0)
                kib = strtoull(tok + 18, NULL, 10);
            else if (tok[0] == 'N' && tok[1] >= '0' && tok[1] <= '9' && n < 64) {
                char *eq = strchr(tok, '=');
                int node = atoi(tok + 1);
                if (eq && node >= 0 && node < TB_MAX_NODES) {
                    nodes_at[n] = node;
                    pages_at[n++] = atoi(eq + 1);
                }
            }
        }
        if (!anon)
            continue;
        for (int i = 0; i < n; i++) {
            node_bytes[nodes_at[i]] += (unsigned long long)pages_at[i] * kib * 1024;
            pages += (unsigned long long)pages_at[i];
            top = nodes_at[i] > top ? nodes_at[i] : top;
        }
        int k = 0;
        while (k < nsizes && kib_of[k] != kib)
            k++;
        if (k == nsizes && nsizes < MAX_PAGE_SIZES)
            kib_of[nsizes++] = kib;
        if (k < nsizes)
            kib_bytes[k] += pages * kib * 1024;
        if (pages * kib * 1024 >= LARGE_BYTES && nlarge < MAX_LARGE) {
            large[nlarge].kib = kib;
            large[nlarge].bytes = pages * kib * 1024;
            snprintf(large[nlarge].policy, sizeof large[nlarge].policy, "%s",
                     policy ? policy : "?");
            large[nlarge].policy[strcspn(large[nlarge].policy, "\"\\")] = '\0';
            nlarge++;
        }
    }
    free(line);
    fclose(f);
    fprintf(out, ",\"memory\":{\"nodes\":{");
    for (int i = 0, first = 1; i <= top; i++)
        if (node_bytes[i]) {
            fprintf(out, "%s\"%d\":%llu", first ? "" : ",", i, node_bytes[i]);
            first = 0;
        }
    fprintf(out, "},\"pages\":{");
    for (int k = 0; k < nsizes; k++)
        fprintf(out, "%s\"%llu\":%llu", k ? "," : "", kib_of[k], kib_bytes[k]);
    char buf[8192];
    unsigned long long thp = 0;
    snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", (long)pid);
    if (read_small(path, buf, sizeof buf) > 0) {
        char *a = strstr(buf, "AnonHugePages:");
        if (a)
            thp = strtoull(a + 14, NULL, 10) * 1024;
    }
    fprintf(out, "},\"thp\":%llu,\"large\":[", thp);
    for (int i = 0; i < nlarge; i++)
        fprintf(out, "%s{\"kib\":%llu,\"bytes\":%llu,\"policy\":\"%s\"}", i ? "," : "",
                large[i].kib, large[i].bytes, large[i].policy);
    fprintf(out, "]}");
}

typedef struct {
    char *text; /* the placement entries (JSON, without the brackets) */
    size_t len;
    int procs;   /* processes sampled: the program and its descendants */
    int threads; /* threads of the processes that are not wrappers (the program's) */
    int bound;   /* distinct masks narrower than the CPUs the rank was started on (places) */
    unsigned long long masks[MAX_TASKS]; /* those masks (hashes) */
    proc_t list[MAX_PROCS];
} snap_t;

/* Threads of the processes of S that are not wrappers, now; -1 when the program is gone. A
 * cheap look between full ones: no pass over /proc. */
static int program_threads(const snap_t *s)
{
    static int tids[MAX_TASKS];
    if (parent_of(s->list[0].pid, NULL, 0) < 0)
        return -1;
    int total = 0;
    for (int k = 0; k < s->procs; k++) {
        int n = s->list[k].children ? 0 : count_tasks(s->list[k].pid, tids, MAX_TASKS);
        total += n > 0 ? n : 0;
    }
    return total;
}

/* Every thread of the rank's processes, as whereami placement entries; 0 when the program
 * is gone (S then holds nothing). */
static int snapshot(pid_t pid, long rank, const char *host, int started, snap_t *s)
{
    static int tids[MAX_TASKS];
    proc_t *procs = s->list;
    *s = (snap_t){0};
    s->procs = rank_processes(pid, procs, MAX_PROCS);
    if (s->procs == 0)
        return 0;
    FILE *f = open_memstream(&s->text, &s->len);
    if (!f)
        _exit(1);
    int index = 0;
    for (int k = 0; k < s->procs && index < MAX_TASKS; k++) {
        int n = count_tasks(procs[k].pid, tids, MAX_TASKS - index);
        if (n > 0)
            qsort(tids, (size_t)n, sizeof tids[0], cmp_int);
        for (int i = 0; i < n; i++) {
            int allowed = 0, seen = 0;
            unsigned long long hash = 0;
            int got = thread_json(f, &procs[k], tids[i], rank, index, host, &allowed, &hash);
            index += got;
            s->threads += got && !procs[k].children;
            for (int m = 0; m < s->bound && !seen; m++)
                seen = s->masks[m] == hash;
            if (got && allowed > 0 && allowed < started && !seen)
                s->masks[s->bound++] = hash;
        }
    }
    if (fclose(f) != 0)
        _exit(1);
    return 1;
}

/* The process whose memory the sample reports: the one of the rank's processes (wrappers
 * included: a program that forked a helper has children) with the most resident anonymous
 * memory (RssAnon), which holds the rank's data; else the process rankexec exec'd. */
static pid_t program_pid(const snap_t *s, pid_t pid)
{
    pid_t best = pid;
    long most = -1;
    for (int k = 0; k < s->procs; k++) {
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/status", (long)s->list[k].pid);
        const char *a = read_small(path, buf, sizeof buf) > 0 ? strstr(buf, "RssAnon:") : NULL;
        long kib = a ? strtol(a + strlen("RssAnon:"), NULL, 10) : -1;
        if (kib > most) {
            most = kib;
            best = s->list[k].pid;
        }
    }
    return best;
}

/* The CPUs this process may run on (the sampler's: those the rank was started on), as a
 * count, and as JSON into F when F is given; from /proc (no 1024-CPU limit). */
static int started_cpus(FILE *f)
{
    char buf[8192];
    int *cpus = NULL, n = 0;
    char *a = read_small("/proc/self/status", buf, sizeof buf) > 0
                  ? strstr(buf, "Cpus_allowed_list:")
                  : NULL;
    if (a) {
        a += strlen("Cpus_allowed_list:");
        a += strspn(a, " \t");
        a[strcspn(a, "\n")] = '\0';
        n = tb_list_parse(a, &cpus);
    }
    for (int i = 0; f && i < n; i++)
        fprintf(f, "%s%d", i ? "," : "", cpus[i]);
    free(cpus);
    return n > 0 ? n : 0;
}

/* The sample file's name: DIR/sample-HOST-PID.json, HOST cut to safe characters. */
static void sample_path(char *path, size_t len, const char *dir, const char *host, pid_t pid)
{
    char safe[256];
    size_t i = 0;
    for (; host[i] && i < sizeof safe - 1; i++) {
        char c = host[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_';
        safe[i] = ok ? c : '_';
    }
    safe[i] = '\0';
    snprintf(path, len, "%s/sample-%s-%ld.json", dir, safe, (long)pid);
}

/* MS ms after the start, the rank's threads; while the program has fewer threads than
 * OMP_NUM_THREADS, it looks again every 100 ms (up to 10 s: its own processes' thread counts,
 * a full sample when they reach OMP_NUM_THREADS and at least every second, for a child a
 * wrapper starts late), keeping the last full sample taken while the program ran. "ended":
 * the program was gone at the last look (before the first one: nothing seen). */
static void sample(pid_t pid, const char *dir, long ms, long rank, long ranks, const char *host)
{
    long want = tb_env_number((const char *const[]){"OMP_NUM_THREADS", NULL}, NULL);
    int started = started_cpus(NULL);
    /* MS is bounded (tb_step_choose); the wait ends early when the program does: no sampler
       sleeps on after its program */
    for (long slept = 0; slept < ms && parent_of(pid, NULL, 0) >= 0; slept += 100) {
        long step = ms - slept < 100 ? ms - slept : 100;
        struct timespec ts = {0, step * 1000000L};
        nanosleep(&ts, NULL);
    }
    static snap_t best, now;
    int alive = snapshot(pid, rank, host, started, &best);
    long waited = 0;
    /* the team: OMP_NUM_THREADS threads bound to distinct masks narrower than the rank when
     * the rank spans several places (an MPI library's threads, started before the team, keep
     * the rank's CPUs or the first place's, where the OpenMP runtime put the main thread) */
    int team = want > 1 && started > 1;
    while (alive && (best.threads < want || (team && best.bound < want)) && waited < 10000) {
        struct timespec step = {0, 100 * 1000000L};
        nanosleep(&step, NULL);
        waited += 100;
        int threads = program_threads(&best);
        if (threads < 0)
            alive = 0;
        else if (threads >= want || waited % 1000 == 0) {
            alive = snapshot(pid, rank, host, started, &now);
            if (alive) {
                free(best.text);
                best = now;
            } else
                free(now.text);
        }
    }
    char path[4096], tmp[4200];
    sample_path(path, sizeof path, dir, host, pid);
    snprintf(tmp, sizeof tmp, "%s.part", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        _exit(1);
    FILE *f = fdopen(fd, "w");
    if (!f)
        _exit(1);
    fputs("{\"kernel\":\"whereami\",\"sampled\":true,\"host\":", f);
    tbj_fput_string(f, host);
    fprintf(f, ",\"rank\":%ld,\"ranks\":%ld,\"pid\":%ld,\"after_ms\":%ld,\"waited_ms\":%ld,"
            "\"threads_wanted\":%ld,\"processes\":%d,\"ended\":%s,\"placement\":[%s]",
            rank, ranks, (long)pid, ms, waited, want, best.procs, alive ? "false" : "true",
            best.text ? best.text : "");
    fputs(",\"started_on\":[", f);
    started_cpus(f);
    fputc(']', f);
    if (alive) /* a program gone before its sample has no memory to read */
        sample_memory(f, program_pid(&best, pid));
    fputs("}\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        _exit(1);
    _exit(0);
}

/* A detached sampler: the grandchild is adopted by init, the program never sees it. */
static void start_sampler(const tb_step_choice *c, long rank, const char *host)
{
    pid_t self = getpid();
    long global = env_rank(TB_RANK_VARS);
    long ranks = env_rank(TB_SIZE_VARS);
    pid_t child = fork();
    if (child < 0)
        fail("cannot fork the sampler: %s", strerror(errno));
    if (child == 0) {
        /* Out of the launch's process group before the program starts (the parent waits for
         * this child): a launcher that kills the group when the program ends (topobind's
         * runner does) must not take the sampler with it, so a program that ends before its
         * sample still gets its (empty) report; the sampler ends right after it. */
        setsid();
        if (fork() != 0)
            _exit(0);
        close(0); /* keep no pipe of the launcher open */
        close(1);
        close(2);
        sample(self, c->sample_dir, c->sample_ms, global >= 0 ? global : rank, ranks, host);
    }
    waitpid(child, NULL, 0);
}

int main(int argc, char **argv)
{
    tb_prog = "rankexec";
    if (argc < 3 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs("usage: rankexec FILE [--] PROGRAM [ARGS...]\n"
              "topobind's per-rank step: export the local rank's line of FILE, exec PROGRAM\n",
              argc < 3 ? stderr : stdout);
        return argc < 3 ? EXIT_STEP : 0;
    }
    int prog = 2;
    if (strcmp(argv[prog], "--") == 0)
        prog++;
    if (prog >= argc)
        fail("no program given after %s", argv[1]);
    long rank = env_rank(TB_LOCAL_RANK_VARS);
    if (rank < 0)
        rank = 0; /* no launcher variable: a single process */
    char host[256] = "localhost";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    char *text = read_plan(argv[1]);
    const char *node = getenv("SLURMD_NODENAME"); /* Slurm's name, if not the host's */
    if (node && (!*node || strcmp(node, host) == 0))
        node = NULL;
    char *again = node ? strdup(text) : NULL; /* choose() cuts the text into lines */
    tb_step_choice c = choose(text, argv[1], host, rank);
    if (!c.line && again) {
        c = choose(again, argv[1], node, rank);
        snprintf(host, sizeof host, "%s", node);
    }
    if (!c.line)
        fail("%s plans no local rank %ld on %s (more ranks on this node than planned?)",
             argv[1], rank, host);
    export_line(c.line, rank);
    if (c.sample_dir)
        start_sampler(&c, rank, host);
    execvp(argv[prog], argv + prog);
    int err = errno;
    fprintf(stderr, "topobind: error: cannot run %s: %s%s\n", argv[prog], strerror(err),
            err == E2BIG ? " (a variable over 128 KiB, or arguments and environment over the "
                           "kernel's bound: pass less)" : "");
    return err == ENOENT ? 127 : 126;
}
