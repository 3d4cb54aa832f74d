/* tb_step.c - read topobind's per-rank step file from memory (see tb/step.h). */
#include "tb/step.h"
#include "tb/env.h"
#include "tb/util.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <unistd.h>

extern char **environ;

static const char *control_name(unsigned char ch)
{
    switch (ch) {
    case 0: return " (NUL)";
    case '\r': return " (CR: a DOS line ending?)";
    case 0x1b: return " (ESC)";
    case 0x7f: return " (DEL)";
    default: return "";
    }
}

int tb_step_check_text(const char *text, size_t len, char *err, size_t errlen)
{
    long line = 1;
    size_t start = 0; /* where the line begins */
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            line++;
            start = i + 1;
        } else if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            snprintf(err, errlen, "line %ld, column %zu: control byte 0x%02x%s; a step file holds "
                     "text, a TAB between fields and a newline after each line: write it again "
                     "with topobind", line, i - start + 1, ch, control_name(ch));
            return -1;
        }
    }
    return 0;
}

/* Does the "@a,b,c" group line name this host (its name, or its name up to the first '.')? */
static int names_host(const char *list, const char *host)
{
    size_t hl = strlen(host), sl = strcspn(host, ".");
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if ((n == hl || n == sl) && strncmp(p, host, n) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* The local rank a line starts with: ASCII digits (no sign, no space), 0 .. TB_MAX_RANK,
 * followed by a TAB or the end of the line; -1 otherwise ("+0", "-1", " 0", "0x1"). */
static long line_rank(const char *line)
{
    long r = 0;
    const char *p = line;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((r = r * 10 + (*p - '0')) > TB_MAX_RANK)
            return -1;
    return p == line || (*p != '\t' && *p != '\0') ? -1 : r;
}

int tb_step_choose(char *text, const char *host, long rank, tb_step_choice *out, char *err,
                   size_t errlen)
{
    tb_step_choice c = {0};
    char *own_line = NULL, *any_line = NULL; /* the rank's line in this host's group / "@*" */
    int own = 0, any = 0;                      /* how many lines the rank has in each */
    int in_own = 0, in_any = 1, host_has_group = 0; /* before any "@": every host */
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || (strcmp(line, "topobind-rankexec 1") != 0 &&
                  strcmp(line, "topobind-rankexec 2") != 0 &&
                  strcmp(line, "topobind-rankexec 3") != 0)) {
        snprintf(err, errlen, "not a topobind-rankexec 1, 2 or 3 file");
        return TB_STEP_NOT_STEP_FILE;
    }
    while ((line = strtok_r(NULL, "\n", &save))) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (line[0] == '%') {
            char *dir = strchr(line, ' ');
            char *ms = dir ? strrchr(dir + 1, ' ') : NULL;
            if (strncmp(line, "%sample ", 8) != 0 || !ms) {
                snprintf(err, errlen, "unknown directive %.40s", line);
                return -1;
            }
            *ms = '\0';
            c.sample_dir = dir + 1;
            char *end;
            errno = 0;
            c.sample_ms = strtol(ms + 1, &end, 10);
            /* the directory topobind made (absolute, never "" or "/": a root sampler would
               write into /), and a delay within topobind's --sample-ms bound */
            if (c.sample_dir[0] != '/' || strspn(c.sample_dir, "/") == strlen(c.sample_dir) ||
                end == ms + 1 || *end || errno || c.sample_ms < 0 ||
                c.sample_ms > TB_STEP_MAX_SAMPLE_MS) {
                snprintf(err, errlen, "malformed %%sample line (%%sample DIR MS: DIR an absolute "
                         "directory, not /; MS 0 .. %d)", TB_STEP_MAX_SAMPLE_MS);
                return -1;
            }
            continue;
        }
        if (line[0] == '@') {
            in_any = strcmp(line + 1, "*") == 0;
            in_own = !in_any && names_host(line + 1, host);
            host_has_group |= in_own;
            continue;
        }
        long r = line_rank(line);
        if (r < 0) {
            snprintf(err, errlen, "malformed line %.40s (a line starts with its local rank: "
                     "ASCII digits, 0 .. %ld)", line, TB_MAX_RANK);
            return -1;
        }
        if (r != rank)
            continue;
        if (in_own && !own++)
            own_line = line;
        else if (in_any && !any++)
            any_line = line;
    }
    int lines = host_has_group ? own : any;
    if (lines > 1) {
        snprintf(err, errlen, "local rank %ld has %d lines for this host (in %s): a rank takes "
                 "one line; remove the duplicates", rank, lines,
                 host_has_group ? "the groups naming it" : "the @* groups");
        return -1;
    }
    c.line = host_has_group ? own_line : any_line;
    *out = c;
    return 0;
}

int tb_step_fields(char *line, tb_step_field_fn fn, void *ctx, char *err, size_t errlen)
{
    long fields = 0; /* counted before any is applied: a line over the bound applies nothing */
    for (const char *t = strchr(line, '\t'); t; t = strchr(t + 1, '\t'))
        if (++fields > TB_STEP_MAX_FIELDS) {
            snprintf(err, errlen, "the line has more than %d fields (the bound of a step-file "
                     "line); plan fewer variables a rank", TB_STEP_MAX_FIELDS);
            return -1;
        }
    char *save = NULL;
    char *tok = strtok_r(line, "\t", &save); /* the rank number */
    while ((tok = strtok_r(NULL, "\t", &save))) {
        int directive = tok[0] == '%';
        char *name = tok + directive;
        char *eq = strchr(name, '=');
        if (!eq || eq == name) {
            snprintf(err, errlen, "malformed field %.40s", tok);
            return -1;
        }
        *eq = '\0';
        if (fn(ctx, name, eq + 1, directive, err, errlen) != 0)
            return -1;
    }
    return 0;
}

int tb_step_bind(const char *list, char *err, size_t errlen)
{
    int *cpus = NULL;
    int n = tb_list_parse(list, &cpus);
    if (n <= 0) {
        snprintf(err, errlen, "malformed CPU list %.40s", list);
        free(cpus);
        return -1;
    }
    int top = 0;
    for (int i = 0; i < n; i++)
        top = cpus[i] > top ? cpus[i] : top;
    size_t count = (size_t)top + 1 > 1024 ? (size_t)top + 1 : 1024;
    cpu_set_t *want = CPU_ALLOC(count), *got = CPU_ALLOC(count);
    size_t size = CPU_ALLOC_SIZE(count);
    int rc = -1;
    if (!want || !got) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    CPU_ZERO_S(size, want);
    CPU_ZERO_S(size, got);
    for (int i = 0; i < n; i++)
        CPU_SET_S((size_t)cpus[i], size, want);
    if (sched_setaffinity(0, size, want) != 0) {
        snprintf(err, errlen, "cannot bind to CPUs %.60s: %s (CPUs outside this task's set?)",
                 list, strerror(errno));
        goto out;
    }
    if (sched_getaffinity(0, size, got) != 0) {
        snprintf(err, errlen, "cannot read back the CPU mask: %s", strerror(errno));
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (!CPU_ISSET_S((size_t)cpus[i], size, got)) {
            snprintf(err, errlen,
                     "CPU %d of the planned CPUs %.60s is outside the CPUs this task may use here "
                     "(cgroup cpuset or offline)",
                     cpus[i], list);
            goto out;
        }
    rc = 0;
out:
    CPU_FREE(want);
    CPU_FREE(got);
    free(cpus);
    return rc;
}

/* set_mempolicy(2) modes (linux/mempolicy.h), called by number: no libnuma. */
enum { TB_MPOL_PREFERRED = 1, TB_MPOL_BIND = 2, TB_MPOL_INTERLEAVE = 3,
       TB_MPOL_PREFERRED_MANY = 5 };
#define TB_MAX_NUMA 1024
#define TB_LONG_BITS (8 * sizeof(unsigned long))

/* The nodes of MASK as a list "0,5" (at most LEN bytes, "..." when cut). */
static void mask_list(const unsigned long *mask, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t n = 0; n < TB_MAX_NUMA && o + 1 < len; n++)
        if (mask[n / TB_LONG_BITS] & (1UL << (n % TB_LONG_BITS))) {
            int w = snprintf(out + o, len - o, "%s%zu", o ? "," : "", n);
            if (w < 0 || (size_t)w >= len - o) {
                snprintf(out + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
                return;
            }
            o += (size_t)w;
        }
}

static const char *mode_name(int mode)
{
    switch (mode) {
    case TB_MPOL_BIND: return "bind";
    case TB_MPOL_INTERLEAVE: return "interleave";
    case TB_MPOL_PREFERRED: return "preferred";
    case TB_MPOL_PREFERRED_MANY: return "preferred";
    case 0: return "default";
    case 4: return "local";
    default: return "another mode";
    }
}

/* The kernel keeps the nodes of the mask that exist and that this task may use (cpuset) and
 * drops the others without a word (set_mempolicy fails only when none is left): read the
 * policy back (get_mempolicy) and refuse one that is not the one asked for. */
static int check_policy(const char *spec, int mode, const unsigned long *want, char *err,
                        size_t errlen)
{
    unsigned long got[TB_MAX_NUMA / TB_LONG_BITS] = {0};
    int now = -1;
    if (syscall(SYS_get_mempolicy, &now, got, (unsigned long)TB_MAX_NUMA + 1, NULL, 0UL) != 0) {
        snprintf(err, errlen, "cannot read back the memory policy %.40s: %s", spec,
                 strerror(errno));
        return -1;
    }
    now &= ~(1 << 15 | 1 << 14 | 1 << 13); /* MPOL_F_STATIC_NODES and the other mode flags */
    unsigned long lost[TB_MAX_NUMA / TB_LONG_BITS] = {0};
    int differs = now != mode;
    for (size_t i = 0; i < TB_MAX_NUMA / TB_LONG_BITS; i++) {
        lost[i] = want[i] & ~got[i];
        differs |= want[i] != got[i];
    }
    if (!differs)
        return 0;
    char dropped[96], kept[96];
    mask_list(lost, dropped, sizeof dropped);
    mask_list(got, kept, sizeof kept);
    if (dropped[0])
        snprintf(err, errlen, "memory policy %.40s: the kernel dropped NUMA node%s %s (not on "
                 "this node, or not allowed to this task: cpuset) and kept %s:%s; refused",
                 spec, strchr(dropped, ',') ? "s" : "", dropped, mode_name(now), kept);
    else
        snprintf(err, errlen, "memory policy %.40s: the kernel set %s:%s instead; refused", spec,
                 mode_name(now), kept);
    return -1;
}

int tb_step_mempolicy(const char *spec, char *err, size_t errlen)
{
    static const struct { const char *name; int mode; } modes[] = {
        {"bind:", TB_MPOL_BIND}, {"interleave:", TB_MPOL_INTERLEAVE},
        {"preferred:", TB_MPOL_PREFERRED_MANY}};
    int mode = -1;
    const char *list = NULL;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strncmp(spec, modes[i].name, strlen(modes[i].name)) == 0) {
            mode = modes[i].mode;
            list = spec + strlen(modes[i].name);
        }
    int *nodes = NULL;
    int n = list ? tb_list_parse(list, &nodes) : 0;
    unsigned long mask[TB_MAX_NUMA / TB_LONG_BITS] = {0};
    int rc = -1;
    if (mode < 0 || n <= 0) {
        snprintf(err, errlen, "malformed memory policy %.40s (bind|interleave|preferred:NODES)",
                 spec);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (nodes[i] < 0 || nodes[i] >= TB_MAX_NUMA) {
            snprintf(err, errlen, "NUMA node %d of %.40s is out of range", nodes[i], spec);
            goto out;
        }
        mask[(size_t)nodes[i] / TB_LONG_BITS] |= 1UL << ((size_t)nodes[i] % TB_LONG_BITS);
    }
    long r = syscall(SYS_set_mempolicy, mode, mask, (unsigned long)TB_MAX_NUMA + 1);
    if (r != 0 && mode == TB_MPOL_PREFERRED_MANY && errno == EINVAL) {
        /* before Linux 5.15: one preferred node, the first (what is then read back) */
        memset(mask, 0, sizeof mask);
        mask[(size_t)nodes[0] / TB_LONG_BITS] = 1UL << ((size_t)nodes[0] % TB_LONG_BITS);
        mode = TB_MPOL_PREFERRED;
        r = syscall(SYS_set_mempolicy, mode, mask, (unsigned long)TB_MAX_NUMA + 1);
    }
    if (r != 0) {
        snprintf(err, errlen, "cannot set the memory policy %.40s: %s (NUMA nodes this task "
                 "may not use here?)", spec, strerror(errno));
        goto out;
    }
    rc = check_policy(spec, mode, mask, err, errlen);
out:
    free(nodes);
    return rc;
}

int tb_step_thp(const char *value, char *err, size_t errlen)
{
    if (strcmp(value, "off") != 0) {
        snprintf(err, errlen, "unknown THP setting %.20s (only %%thp=off)", value);
        return -1;
    }
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        snprintf(err, errlen, "cannot turn transparent huge pages off: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ variables, at once */
int tb_step_vars_add(tb_step_vars *v, const char *name, const char *value, char *err,
                     size_t errlen)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *kv = malloc(nl + vl + 2);
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        char **bigger = kv ? realloc(v->add, cap * sizeof *bigger) : NULL;
        if (bigger) {
            v->add = bigger;
            v->cap = cap;
        }
    }
    if (!kv || v->n == v->cap) {
        free(kv);
        snprintf(err, errlen, "out of memory for the variable %.40s", name);
        return -1;
    }
    memcpy(kv, name, nl);
    kv[nl] = '=';
    memcpy(kv + nl + 1, value, vl + 1);
    v->add[v->n++] = kv;
    return 0;
}

static uint64_t name_hash(const char *kv, size_t *len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over the name, up to its '=' */
    size_t n = 0;
    for (; kv[n] && kv[n] != '='; n++)
        h = (h ^ (unsigned char)kv[n]) * 1099511628211ULL;
    *len = n;
    return h;
}

/* The slot of KV's name in TABLE (SIZE slots, a power of two, holding index + 1 into ADD,
 * 0 free): the slot that holds it, or the free one where it goes. */
static size_t slot_of(const size_t *table, size_t size, char *const *add, const char *kv)
{
    size_t len;
    size_t s = (size_t)name_hash(kv, &len) & (size - 1);
    while (table[s]) {
        const char *other = add[table[s] - 1];
        if (strncmp(other, kv, len) == 0 && other[len] == '=')
            return s;
        s = (s + 1) & (size - 1);
    }
    return s;
}

int tb_step_vars_export(tb_step_vars *v, char *err, size_t errlen)
{
    if (!v->n)
        return 0;
    size_t size = 64, old = 0;
    while (size < 2 * v->n)
        size *= 2;
    while (environ && environ[old])
        old++;
    size_t *table = calloc(size, sizeof *table);
    char **env = malloc((old + v->n + 1) * sizeof *env);
    if (!table || !env) {
        free(table);
        free(env);
        snprintf(err, errlen, "out of memory for %zu variables", v->n);
        return -1;
    }
    for (size_t i = 0; i < v->n; i++) /* the last of a name wins */
        table[slot_of(table, size, v->add, v->add[i])] = i + 1;
    size_t k = 0;
    for (size_t j = 0; j < old; j++)
        if (!strchr(environ[j], '=') || !table[slot_of(table, size, v->add, environ[j])])
            env[k++] = environ[j];
    for (size_t i = 0; i < v->n; i++)
        if (table[slot_of(table, size, v->add, v->add[i])] == i + 1)
            env[k++] = v->add[i];
    env[k] = NULL;
    environ = env; /* the old array and the replaced strings stay: the process execs soon */
    free(table);
    v->n = 0;
    return 0;
}

/* ------------------------------------------------------------ one rank's line */
typedef struct {
    tb_step_setenv_fn setenv_fn;
    void *ctx;
} apply_ctx;

/* %preload=LIB: LIB first in LD_PRELOAD. A LIB that is not a regular file is refused: the
 * dynamic loader would skip it with a warning and run the rank without it. */
static int preload(apply_ctx *a, const char *lib, char *err, size_t errlen)
{
    struct stat st;
    int bad = stat(lib, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? -1 : 0;
    if (bad) {
        snprintf(err, errlen, "%%preload=%.200s: %s; rebuild it (make kernels) or plan "
                 "without it (--pages none)", lib, bad > 0 ? strerror(bad) : "not a regular file");
        return -1;
    }
    return a->setenv_fn(a->ctx, "LD_PRELOAD", lib, 1, err, errlen);
}

static int apply_field(void *ctx, const char *name, const char *value, int directive, char *err,
                       size_t errlen)
{
    apply_ctx *a = ctx;
    if (!directive)
        return a->setenv_fn(a->ctx, name, value, 0, err, errlen);
    if (strcmp(name, "cpus") == 0)
        return tb_step_bind(value, err, errlen);
    if (strcmp(name, "mem") == 0)
        return tb_step_mempolicy(value, err, errlen);
    if (strcmp(name, "thp") == 0)
        return tb_step_thp(value, err, errlen);
    if (strcmp(name, "preload") == 0)
        return preload(a, value, err, errlen);
    snprintf(err, errlen, "unknown field %%%.40s (a step file newer than this step: rebuild it "
             "with this topobind)", name);
    return -1;
}

int tb_step_apply(char *line, tb_step_setenv_fn setenv_fn, void *ctx, char *err, size_t errlen)
{
    apply_ctx a = {setenv_fn, ctx};
    return tb_step_fields(line, apply_field, &a, err, errlen);
}
