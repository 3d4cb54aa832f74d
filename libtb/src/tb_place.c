/* tb_place.c - placement of threads (CPU, NUMA node, affinity) and sysfs topology readers. */
#include "tb/place.h"
#include "tb/util.h"

#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tb_numa_of_cpu(int cpu)
{
    char path[128];
    int node = 0;
    if (cpu < 0)
        return -1;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d", cpu);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int m;
        char extra;
        if (sscanf(e->d_name, "node%d%c", &m, &extra) == 1) {
            node = m;
            break;
        }
    }
    closedir(d);
    return node;
}

void tb_place_self(tb_place *p, int rank, int thread)
{
    memset(p, 0, sizeof *p);
    p->rank = rank;
    p->thread = thread;
    p->cpu = sched_getcpu();
    p->numa = tb_numa_of_cpu(p->cpu);
    CPU_ZERO(&p->affinity);
    if (pthread_getaffinity_np(pthread_self(), sizeof p->affinity, &p->affinity) != 0)
        CPU_ZERO(&p->affinity);
}

int tb_place_omp(int rank, tb_place **out)
{
    int max = omp_get_max_threads(), n = 0;
    tb_place *p = tb_xcalloc((size_t)max, sizeof *p);
#pragma omp parallel num_threads(max)
    {
        int t = omp_get_thread_num();
#pragma omp single
        n = omp_get_num_threads();
        if (t < max)
            tb_place_self(&p[t], rank, t);
    }
    *out = p;
    return n;
}

void tb_json_place_entry(tb_json *j, const tb_place *p, int with_affinity, const char *host)
{
    tbj_obj_begin(j, NULL);
    tbj_int(j, "rank", p->rank);
    tbj_int(j, "thread", p->thread);
    tbj_int(j, "cpu", p->cpu);
    tbj_int(j, "numa", p->numa);
    if (with_affinity)
        tbj_cpuset(j, "affinity", &p->affinity);
    if (host)
        tbj_str(j, "host", host);
    tbj_obj_end(j);
}

void tb_json_placement(tb_json *j, const tb_place *p, int n, int with_affinity,
                       const char *host)
{
    tbj_arr_begin(j, "placement");
    for (int i = 0; i < n; i++)
        tb_json_place_entry(j, &p[i], with_affinity, host);
    tbj_arr_end(j);
}

int tb_pin_self(int cpu)
{
    cpu_set_t s;
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return EINVAL;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

int tb_process_cpus(int **out)
{
    cpu_set_t s;
    int n = 0;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        tb_die(1, "sched_getaffinity failed: %s", strerror(errno));
    int *v = tb_xmalloc(sizeof(int) * (size_t)CPU_COUNT(&s));
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &s))
            v[n++] = c;
    *out = v;
    return n;
}

static int read_list_file(const char *path, int **out)
{
    char b[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = '\0';
    if (n == 0 || b[0] == '\n') { /* empty list */
        *out = tb_xmalloc(sizeof(int));
        return 0;
    }
    return tb_list_parse(b, out);
}

int tb_numa_nodes(int need_cpus, int **out)
{
    int n = read_list_file(need_cpus ? "/sys/devices/system/node/has_cpu"
                                     : "/sys/devices/system/node/has_memory",
                           out);
    if (n <= 0) {
        if (n == 0)
            free(*out);
        *out = tb_xmalloc(sizeof(int));
        (*out)[0] = 0;
        n = 1;
    }
    return n;
}

int tb_node_cpus(int node, int **out)
{
    char path[128];
    int *all, *mine, n, m = 0;
    cpu_set_t s;
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    n = read_list_file(path, &all);
    if (n < 0) { /* no sysfs NUMA information: every CPU is on node 0 */
        if (node != 0) {
            *out = tb_xmalloc(sizeof(int));
            return 0;
        }
        return tb_process_cpus(out);
    }
    CPU_ZERO(&s);
    sched_getaffinity(0, sizeof s, &s);
    mine = tb_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        if (all[i] < CPU_SETSIZE && CPU_ISSET(all[i], &s))
            mine[m++] = all[i];
    free(all);
    *out = mine;
    return m;
}

static long long parse_cache_size(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end == 'K')
        v *= 1024;
    else if (*end == 'M')
        v *= 1024 * 1024;
    else if (*end == 'G')
        v *= 1024LL * 1024 * 1024;
    return v;
}

static int read_line(const char *path, char *b, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(b, (int)len, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    b[strcspn(b, "\n")] = '\0';
    return 0;
}

long long tb_llc_total_bytes(void)
{
    /* Distinct (shared_cpu_list) instances of the highest-level data/unified cache. */
    int best_level = 0, ninst = 0, cap = 0;
    long long total = 0;
    char (*seen)[256] = NULL;
    DIR *d = opendir("/sys/devices/system/cpu");
    if (!d)
        return 0;
    struct dirent *e;
    /* two passes: find the highest level, then sum its distinct instances */
    for (int pass = 0; pass < 2; pass++) {
        rewinddir(d);
        while ((e = readdir(d))) {
            int cpu;
            char extra;
            if (sscanf(e->d_name, "cpu%d%c", &cpu, &extra) != 1)
                continue;
            for (int idx = 0; idx < 16; idx++) {
                char path[256], b[256], list[256];
                snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/level",
                         cpu, idx);
                if (read_line(path, b, sizeof b) != 0)
                    break;
                int level = atoi(b);
                snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/type",
                         cpu, idx);
                if (read_line(path, b, sizeof b) != 0 || !strcmp(b, "Instruction"))
                    continue;
                if (pass == 0) {
                    if (level > best_level)
                        best_level = level;
                    continue;
                }
                if (level != best_level)
                    continue;
                snprintf(path, sizeof path,
                         "/sys/devices/system/cpu/cpu%d/cache/index%d/shared_cpu_list", cpu, idx);
                if (read_line(path, list, sizeof list) != 0)
                    continue;
                int dup = 0;
                for (int k = 0; k < ninst && !dup; k++)
                    dup = !strcmp(seen[k], list);
                if (dup)
                    continue;
                snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/size",
                         cpu, idx);
                if (read_line(path, b, sizeof b) != 0)
                    continue;
                if (ninst == cap) {
                    cap = cap ? cap * 2 : 16;
                    seen = realloc(seen, sizeof *seen * (size_t)cap);
                    if (!seen)
                        tb_die(1, "out of memory reading caches");
                }
                snprintf(seen[ninst++], sizeof seen[0], "%s", list);
                total += parse_cache_size(b);
            }
        }
    }
    closedir(d);
    free(seen);
    return total;
}
