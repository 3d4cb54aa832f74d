/*
 * topobind_flux.c - a Flux shell plugin, the SPANK plugin's twin (topobind_spank.c):
 * `flux run -o topobind=LAYOUT[,NAME=VALUE...] PROGRAM` places every task of the job with
 * topobind's plan, with no wrapper (NAME: threads, mem, pages, smt, or any 'topobind plan'
 * option; the SPANK spelling LAYOUT:NAME=VALUE,... is taken too).
 *
 * Installed where the job shell loads plugins (its initrc loads every *.so of
 * conf.shell_pluginpath: PREFIX/lib/flux/shell/plugins/ by default; a site adds a folder with
 * `flux start -Sconf.shell_pluginpath=DIR` or its broker config). Without -o topobind it does
 * nothing.
 *
 * A site's initrc may load it with a topology instead of the live one (as the SPANK plugin's
 * topology= argument): plugin.load { file = "topobind.so", conf = { topology = "SRC" } },
 * "%n" in SRC the host name.
 *
 * When loaded with the option it switches Flux's own binding off (cpu-affinity=off,
 * gpu-affinity=off: the builtins read their options later, at shell.init). Once per node per
 * job (shell.init, in the job shell as the job's user) it runs
 *   topobind plan --topology live --format rankexec --slurm-cores CORES --ranks LOCAL_TASKS
 *                 [--threads CORES_PER_SLOT] --layout LAYOUT [--NAME=VALUE...]
 * (topobind from the job's PATH; CORES: the job's cores on this node, Flux's ids are hwloc's
 * logical core indexes as Slurm's are) and keeps its output, a version 2/3 step file, in
 * memory. Per task: task.init (in the shell, before the fork) sets the line's variables in the
 * task's command (exact OMP_PLACES, OMP_PROC_BIND, OMP_NUM_THREADS, device variables,
 * LD_PRELOAD first for the hugepage shim); task.exec (in the task, just before exec) binds it
 * to the line's CPUs and sets its memory policy and THP through tb_step_apply, each read back.
 * No file is read or written per task.
 *
 * Errors: a bad option value (empty, an unknown layout, separators or shell characters), a
 * plan that fails (fewer cores than the plan needs) or no line for a task raise a job
 * exception of type "topobind" with one line, and the job ends before any task runs; a binding
 * the kernel refuses in a task prints one line on the task's stderr and the task exits 1.
 */
#define FLUX_SHELL_PLUGIN_NAME "topobind"

#include <flux/shell.h>

#include "tb/option.h"
#include "tb/planner.h"
#include "tb/step.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ERR_LEN 1024

static char *opt_value; /* the option in the SPANK spelling LAYOUT[:NAME=VALUE,...] */
static char *shown;     /* the option as the user gave it, for messages */
static char opt_error[ERR_LEN];
static char *plan_text; /* the node's step file, in memory */
static char *task_line; /* this task's line (task.init -> task.exec: the fork keeps it) */
static int task_id = -1;
static long plan_us;
static int bench; /* TOPOBIND_FLUX_BENCH=1 in the job: task.exec prints its own time */
static char topology[1024] = "live"; /* the plugin's conf: topology=SRC (%n: the host name) */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One line in the job's exception (the job ends), and -1 for the shell's caller. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    char line[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    line[strcspn(line, "\n")] = '\0'; /* one line */
    flux_shell_raise("topobind", 0, "%s", line);
    return -1;
}

/* -o topobind=VALUE checked, and put in the SPANK plugin's spelling for the shared parser:
 * the first ',' after the layout (and its :N size) becomes ':'. */
static void read_option(flux_shell_t *shell)
{
    const char *value = NULL;
    int rc = flux_shell_getopt_unpack(shell, "topobind", "s", &value);
    if (rc == 0)
        return; /* not asked for */
    if (rc < 0 || !value) {
        snprintf(opt_error, sizeof opt_error,
                 "-o topobind needs LAYOUT[,NAME=VALUE...] as a string, e.g. "
                 "-o topobind=spread,threads=2");
        return;
    }
    shown = strdup(value);
    size_t n = strlen(value);
    char *spelled = malloc(n + 1);
    if (!shown || !spelled) {
        snprintf(opt_error, sizeof opt_error, "out of memory");
        free(spelled);
        return;
    }
    memcpy(spelled, value, n + 1);
    size_t lay = strcspn(spelled, ":,");
    if (spelled[lay] == ':' && spelled[lay + 1] >= '0' && spelled[lay + 1] <= '9')
        lay += 1 + strspn(spelled + lay + 1, "0123456789"); /* l3-groups:32 */
    if (spelled[lay] == ',')
        spelled[lay] = ':';
    char err[ERR_LEN];
    if (tb_option_check(spelled, err, sizeof err) != 0) {
        /* the shared parser names the SPANK option: name Flux's and the value as given */
        const char *why = strstr(err, ": ");
        if (!why || strstr(why, "give LAYOUT"))
            why = ": give LAYOUT[,NAME=VALUE...] in letters, digits and '-', e.g. "
                  "-o topobind=every-other-core or -o topobind=spread,threads=2";
        char clean[81]; /* the value as given, its control characters (a newline) as '?' */
        size_t k = 0;
        for (; value[k] && k < sizeof clean - 1; k++)
            clean[k] = (unsigned char)value[k] < 0x20 || value[k] == 0x7f ? '?' : value[k];
        clean[k] = '\0';
        snprintf(opt_error, sizeof opt_error, "-o topobind=%s%s", clean, why);
        free(spelled);
        return;
    }
    opt_value = spelled;
}

static int shell_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
    (void)topic;
    (void)args;
    (void)data;
    flux_shell_t *shell = flux_plugin_get_shell(p);
    if (opt_error[0])
        return fail("topobind: %s", opt_error);
    double start = now_us();
    int ntasks = 0, cores_per_slot = 0;
    const char *cores = NULL;
    if (flux_shell_rank_info_unpack(shell, -1, "{s:i s:{s:s}}", "ntasks", &ntasks, "resources",
                                    "cores", &cores) < 0 ||
        !cores || ntasks < 1)
        return fail("topobind: Flux gave no task count and cores for this node");
    if (flux_shell_jobspec_info_unpack(shell, "{s:i}", "cores_per_slot", &cores_per_slot) < 0)
        cores_per_slot = 0;
    tb_argv a = {0};
    tb_plan_argv(&a, "topobind", topology, cores, ntasks, opt_value, cores_per_slot);
    const char *path = flux_shell_getenv(shell, "PATH");
    tb_planner_how how = {path ? path : "/usr/local/bin:/usr/bin:/bin",
                          "put topobind on the job's PATH", NULL, 0, 1};
    char err[ERR_LEN];
    if (tb_planner_run(&a, &how, &plan_text, err, sizeof err, NULL) != 0) {
        const char *msg = strncmp(err, "topobind: error: ", 17) == 0 ? err + 17 : err;
        return fail("topobind: -o topobind=%.80s: %s", shown, msg);
    }
    if (strncmp(opt_value, "auto", 4) == 0 && (opt_value[4] == '\0' || opt_value[4] == ':'))
        shell_log("%s", err[0] ? err : "topobind: --layout auto: no word of a tune record");
    plan_us = (long)(now_us() - start);
    const char *b = flux_shell_getenv(shell, "TOPOBIND_FLUX_BENCH");
    bench = b && strcmp(b, "1") == 0;
    return 0;
}

/* task.init's way into the task's command: its environment (LD_PRELOAD: the shim first). */
static int cmd_env(void *ctx, const char *name, const char *value, int prepend, char *err,
                   size_t errlen)
{
    flux_cmd_t *cmd = ctx;
    const char *old = prepend ? flux_cmd_getenv(cmd, name) : NULL;
    int rc = old && old[0] ? flux_cmd_setenvf(cmd, 1, name, "%s:%s", value, old)
                           : flux_cmd_setenvf(cmd, 1, name, "%s", value);
    if (rc < 0) {
        snprintf(err, errlen, "cannot set %.60s in the task's environment", name);
        return -1;
    }
    return 0;
}

/* The variables of a line (NAME=VALUE, %preload=LIB), set in the task's command. */
static int set_variable(void *ctx, const char *name, const char *value, int directive,
                        char *err, size_t errlen)
{
    if (!directive)
        return cmd_env(ctx, name, value, 0, err, errlen);
    if (strcmp(name, "preload") == 0)
        return cmd_env(ctx, "LD_PRELOAD", value, 1, err, errlen);
    return 0; /* %cpus, %mem, %thp: task.exec, in the task */
}

static int task_init(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
    (void)topic;
    (void)args;
    (void)data;
    double start = now_us();
    flux_shell_t *shell = flux_plugin_get_shell(p);
    flux_shell_task_t *task = flux_shell_current_task(shell);
    flux_cmd_t *cmd = task ? flux_shell_task_cmd(task) : NULL;
    int id = -1;
    if (!cmd || flux_shell_task_info_unpack(task, "{s:i}", "localid", &id) < 0)
        return fail("topobind: Flux gave no task to place");
    char err[ERR_LEN], num[64];
    char *text = strdup(plan_text); /* tb_step_choose cuts its text */
    tb_step_choice c = {0};
    if (!text || tb_step_choose(text, "", id, &c, err, sizeof err) != 0 || !c.line) {
        if (text && !c.line)
            snprintf(err, sizeof err, "the plan has no line for local task %d", id);
        free(text);
        return fail("topobind: %s", err);
    }
    free(task_line);
    task_line = strdup(c.line);
    task_id = id;
    if (!task_line || tb_step_fields(c.line, set_variable, cmd, err, sizeof err) != 0) {
        free(text);
        return fail("topobind: local task %d: %s", id, task_line ? err : "out of memory");
    }
    free(text);
    snprintf(num, sizeof num, "%ld %ld", plan_us, (long)(now_us() - start));
    flux_cmd_setenvf(cmd, 1, "TOPOBIND_FLUX_US", "%s", num); /* planning (a node), this task */
    return 0;
}

/* In the task: its variables are already in its command; bind, memory policy, THP here. */
static int no_env(void *ctx, const char *name, const char *value, int prepend, char *err,
                  size_t errlen)
{
    (void)ctx, (void)name, (void)value, (void)prepend, (void)err, (void)errlen;
    return 0;
}

static int task_exec(flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args, void *data)
{
    (void)p;
    (void)topic;
    (void)args;
    (void)data;
    char err[ERR_LEN];
    double start = bench ? now_us() : 0;
    if (!task_line || tb_step_apply(task_line, no_env, NULL, err, sizeof err) != 0) {
        /* task.exec's failures are only logged by the shell: end the task instead of running
         * it unplaced */
        dprintf(2, "topobind: error: local task %d: %s\n", task_id,
                task_line ? err : "no line of the plan");
        _exit(1);
    }
    if (bench) /* the task's stderr: make bench-flux reads it (scripts/bench-flux.py) */
        dprintf(2, "topobind-flux-exec-us %d %ld\n", task_id, (long)(now_us() - start));
    return 0;
}

__attribute__((visibility("default"))) int flux_plugin_init(flux_plugin_t *p)
{
    flux_shell_t *shell = flux_plugin_get_shell(p);
    if (flux_plugin_set_name(p, FLUX_SHELL_PLUGIN_NAME) < 0 || !shell)
        return -1;
    read_option(shell);
    if (!opt_value && !opt_error[0])
        return 0; /* no -o topobind: nothing to do */
    /* A site's initrc may give the topology: plugin.load { file = "topobind.so",
     * conf = { topology = "/etc/topobind/%n.xml" } } (default: live, hwloc's lstopo a job). */
    const char *topo = NULL;
    if (flux_plugin_conf_unpack(p, "{s:s}", "topology", &topo) == 0 && topo && topo[0])
        snprintf(topology, sizeof topology, "%s", topo);
    /* Flux's own binding stands down: topobind binds each task (the builtins read these at
     * shell.init, after every plugin is loaded). */
    if (flux_shell_setopt_pack(shell, "cpu-affinity", "s", "off") < 0 ||
        flux_shell_setopt_pack(shell, "gpu-affinity", "s", "off") < 0)
        return -1;
    if (flux_plugin_add_handler(p, "shell.init", shell_init, NULL) < 0 ||
        flux_plugin_add_handler(p, "task.init", task_init, NULL) < 0 ||
        flux_plugin_add_handler(p, "task.exec", task_exec, NULL) < 0)
        return -1;
    return 0;
}
