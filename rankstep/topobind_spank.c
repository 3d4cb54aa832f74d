/*
 * topobind_spank.c - a Slurm SPANK plugin: `srun --topobind=LAYOUT[:OPT,...] PROGRAM` places
 * every task of the step with topobind's plan, with no wrapper in the job script.
 *
 * plugstack.conf:  required /path/topobind_spank.so topobind=/path/to/topobind [check=no]
 *                  [topology=/etc/topobind/%n.xml]   (default: live, hwloc's lstopo per step)
 *
 * In srun (local context, init_post_opt) `topobind plan --check` refuses an unknown layout or
 * option before the step starts (check=no: leave it to the nodes).
 *
 * Once per node per step (slurm_spank_user_init, in slurmstepd as the job's user, before the
 * tasks are forked) the plugin runs
 *   topobind plan --topology live --slurm-cores STEP_CORES --ranks LOCAL_TASKS
 *                 --threads T --layout LAYOUT [--OPT VALUE...] --format rankexec
 * (T: the CPUs the step gives each task here, its --cpus-per-task or its cores here shared among
 * its tasks here when that is more: step_cpus_per_task) and keeps its output, a version-2 step
 * file (the format rankstep/rankexec.c reads: one line
 * per local task with %cpus= and the task's variables), in memory. Each node plans its own
 * share (its task count and the cores the step holds there). Per task (slurm_spank_task_init,
 * in the task just before exec, after task/affinity's own binding) it picks the line of the
 * task's local id from that memory, binds the task to the line's CPUs (reading the mask back:
 * a CPU the task may not use fails the task) and sets the line's variables (exact OMP_PLACES,
 * OMP_PROC_BIND, OMP_NUM_THREADS, device variables) in the task's environment; version-3
 * lines' memory fields (%mem= policy, %thp=off, %preload=LIB) too. No file is read per task.
 *
 * Errors (bad option, unknown layout, a plan that fails, a CPU outside the task's set) are
 * printed on the task's stderr, which srun shows (by local task 0 of each node for a plan
 * that fails), and the task exits 1: the step fails instead of running unbound.
 * Without --topobind the plugin does nothing.
 */
#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "tb/option.h"
#include "tb/planner.h"
#include "tb/step.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Built with -fvisibility=hidden (the shared helpers stay inside the plugin); what Slurm
 * looks up is exported. */
#pragma GCC visibility push(default)
SPANK_PLUGIN(topobind, 1);

#define ERR_LEN 1024

static char *opt_value;                     /* LAYOUT[:OPT,...] as given to srun */
static char topobind_cmd[1024] = "topobind"; /* plugin argument topobind=PATH */
static char *plan_text;                     /* the node's step file, in memory */
static char plan_error[ERR_LEN];            /* why planning failed, reported by the tasks */
static long plan_us;
static int srun_check = 1;                  /* plugin argument check=no turns srun's off */
static char topology[1024] = "live";        /* plugin argument topology=SRC (%n: node name) */
static unsigned cpus_per_task;              /* what the step gives each task on this node */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ------------------------------------------------------------ version check at load time */
/* Slurm itself refuses a SPANK plugin whose major.minor differs from its own (plugin.c: it
 * logs "Incompatible Slurm plugin ... version (X)", naming only the plugin's side). Which
 * Slurm is running is not exported as a number, but its libslurm API generation is
 * (slurm_api_version(): 38 for 22.05, one more per release), and the Makefile records the
 * generation of the libslurm this plugin was built with (TB_SLURM_API). This constructor runs
 * when the plugin is opened, before Slurm's check, and names both sides. */
#ifndef TB_SLURM_API
#define TB_SLURM_API 0
#endif
__attribute__((constructor)) static void check_slurm_version(void)
{
    long (*api)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "slurm_api_version");
    if (!api || TB_SLURM_API == 0)
        return;
    long running = (api() >> 16) & 0xffff;
    if (running != TB_SLURM_API)
        fprintf(stderr,
                "topobind_spank: error: built for Slurm %d.%02d (libslurm API %d), but this "
                "Slurm's libslurm API is %ld (another release): rebuild the plugin against this "
                "Slurm's slurm/spank.h (Debian: libslurm-dev; make -C rankstep spank)\n",
                SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
                SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER), TB_SLURM_API, running);
}

/* ------------------------------------------------------------ the option */
static int option_cb(int val, const char *optarg, int remote)
{
    (void)val;
    char err[ERR_LEN];
    if (!optarg || tb_option_check(optarg, err, sizeof err) != 0) {
        if (!optarg)
            snprintf(err, sizeof err, "--topobind needs a layout");
        if (!remote)
            slurm_error("topobind: %s", err);
        else
            snprintf(plan_error, sizeof plan_error, "%s", err);
        return remote ? 0 : -1; /* remote: the tasks report it and fail */
    }
    free(opt_value);
    opt_value = strdup(optarg);
    return 0;
}

struct spank_option spank_options[] = {
    {"topobind", "LAYOUT[:OPT,...]",
     "Place every task with topobind's plan for LAYOUT (compact, spread, every-other-core, "
     "per-l3, ...; OPTs: threads=T, smt, or any 'topobind plan' option as NAME=VALUE)",
     1, 0, option_cb},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "topobind=", 9) == 0)
            snprintf(topobind_cmd, sizeof topobind_cmd, "%s", av[i] + 9);
        else if (strcmp(av[i], "check=no") == 0 || strcmp(av[i], "check=yes") == 0)
            srun_check = av[i][6] == 'y';
        else if (strncmp(av[i], "topology=", 9) == 0 && av[i][9])
            snprintf(topology, sizeof topology, "%s", av[i] + 9);
        else {
            slurm_error("topobind: unknown plugin argument '%s' in plugstack.conf "
                        "(known: topobind=PATH, topology=SRC, check=yes|no)",
                        av[i]);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ planning, once per node */
/* Run topobind (argv A) as the user, its output into *TEXT; 0, or -1 with ERRLINE (its
 * error line, or why it could not run). STEP_FILE: the output must be a step file. MISSING
 * (or NULL): set when the command is not here. */
static int run_topobind(tb_argv *a, int step_file, char **text, char *errline, size_t errlen,
                        int *missing)
{
    /* slurmstepd dropped only its effective ids: the planner becomes the user entirely, an
     * ordinary process of the user (no secure-exec mode, no root left). */
    tb_planner_how how = {"/usr/local/bin:/usr/bin:/bin", "plugstack.conf: topobind=PATH",
                          "plugstack.conf's topobind= or topology=?", 1, step_file};
    return tb_planner_run(a, &how, text, errline, errlen, missing);
}

/* In srun (local context), before anything starts: `topobind plan --check --layout ...`
 * refuses an unknown layout or option with one line. Skipped when topobind is not installed
 * on this host (the nodes still plan, and fail the step on their own). */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_LOCAL || !opt_value || !srun_check)
        return 0;
    tb_argv a = {0};
    tb_argv_add_s(&a, topobind_cmd);
    tb_argv_add_s(&a, "plan");
    tb_argv_add_s(&a, "--check");
    tb_option_args(&a, opt_value);
    char *text = NULL, line[ERR_LEN];
    int missing = 0;
    if (run_topobind(&a, 0, &text, line, sizeof line, &missing) == 0 || missing) {
        free(text);
        return 0;
    }
    const char *msg = strncmp(line, "topobind: error: ", 17) == 0 ? line + 17 : line;
    slurm_error("topobind: %s", msg);
    return -1;
}

/* How many of LIST ("0-3,8", up to LEN bytes) there are; 0 for an empty or malformed list. */
static unsigned long list_count(const char *list, size_t len)
{
    unsigned long n = 0;
    const char *p = list, *end = list + len;
    while (p < end) {
        char *e;
        unsigned long a = strtoul(p, &e, 10), b = a;
        if (e == p)
            return 0;
        if (e < end && *e == '-') {
            p = e + 1;
            b = strtoul(p, &e, 10);
            if (e == p || b < a)
                return 0;
        }
        n += b - a + 1;
        if (e < end && *e != ',')
            return 0;
        p = e + 1;
    }
    return n;
}

/* The CPUs the step gives each task on this node, as task/affinity does for a plain step:
 * its --cpus-per-task, or its cores here shared among its tasks here when that is more (Slurm
 * 22.05's srun does not pass the job's #SBATCH --cpus-per-task to a step, whose tasks still
 * get the job's cores). */
static unsigned step_cpus_per_task(uint32_t cpt, const char *cores, uint32_t tasks)
{
    unsigned long share = tasks ? list_count(cores, strlen(cores)) / tasks : 0;
    unsigned long n = share > cpt ? share : cpt;
    return n ? (unsigned)(n < 1048576 ? n : 1048576) : 1;
}

/* Once per node (local task 0): say that the plan gives the task fewer CPUs than the step
 * holds for each task (a layout that places fewer threads, or threads=T), rather than leave
 * them idle without a word. */
static void note_unused(const char *line, int id)
{
    const char *f = strstr(line, "\t%cpus=");
    if (id != 0 || !f || !cpus_per_task)
        return;
    f += 7;
    unsigned long got = list_count(f, strcspn(f, "\t"));
    if (got && got < cpus_per_task)
        fprintf(stderr, "topobind: note: --topobind=%s gives local task 0 %lu CPU%s of the %u "
                "the step holds for each task; the others stay idle (threads=T, or srun -c, "
                "to change it)\n", opt_value, got, got == 1 ? "" : "s", cpus_per_task);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!opt_value || plan_error[0])
        return 0;
    double start = now_us();
    uint32_t tasks = 0, cpt = 1, step = 0;
    char *cores = NULL;
    if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step >= 0xfffffff0u) {
        free(opt_value); /* a batch or extern step: nothing to place */
        opt_value = NULL;
        return 0;
    }
    if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_STEP_CPUS_PER_TASK, &cpt) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_STEP_ALLOC_CORES, &cores) != ESPANK_SUCCESS || !cores) {
        snprintf(plan_error, sizeof plan_error,
                 "topobind: error: Slurm did not give the step's tasks, CPUs per task and cores "
                 "on this node");
        return 0;
    }
    cpus_per_task = step_cpus_per_task(cpt, cores, tasks);
    tb_argv a = {0};
    tb_plan_argv(&a, topobind_cmd, topology, cores, tasks, opt_value, cpus_per_task);
    run_topobind(&a, 1, &plan_text, plan_error, sizeof plan_error, NULL);
    plan_us = (long)(now_us() - start);
    return 0;
}

/* ------------------------------------------------------------ per task */
typedef struct {
    spank_t sp;
} task_ctx;

/* The step library's way into the task's environment (LD_PRELOAD: the shim first, before
 * what the user preloads). */
static int task_env(void *ctx, const char *name, const char *value, int prepend, char *err,
                    size_t errlen)
{
    task_ctx *t = ctx;
    char old[4096], both[8192];
    if (prepend && spank_getenv(t->sp, name, old, sizeof old) == ESPANK_SUCCESS && old[0]) {
        snprintf(both, sizeof both, "%s:%s", value, old);
        value = both;
    }
    if (spank_setenv(t->sp, name, value, 1) != ESPANK_SUCCESS) {
        snprintf(err, errlen, "cannot set %.60s in the task's environment", name);
        return -1;
    }
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!opt_value && !plan_error[0])
        return 0;
    double start = now_us();
    int id = -1;
    spank_get_item(sp, S_TASK_ID, &id);
    if (plan_error[0]) {
        if (id == 0) /* once per node */
            fprintf(stderr, "%s%s\n", strncmp(plan_error, "topobind", 8) ? "topobind: error: " : "",
                    plan_error);
        return -1;
    }
    char err[ERR_LEN];
    tb_step_choice c = {0};
    /* The task is a fork of slurmstepd: its copy of the text is its own to cut up. */
    if (tb_step_choose(plan_text, "", id, &c, err, sizeof err) != 0 || !c.line) {
        if (!c.line && plan_text)
            snprintf(err, sizeof err, "the plan has no line for local task %d", id);
        fprintf(stderr, "topobind: error: local task %d: %s\n", id, err);
        return -1;
    }
    note_unused(c.line, id);
    task_ctx t = {sp};
    if (tb_step_apply(c.line, task_env, &t, err, sizeof err) != 0) {
        fprintf(stderr, "topobind: error: local task %d: %s\n", id, err);
        return -1;
    }
    char num[64];
    snprintf(num, sizeof num, "%ld %ld", plan_us, (long)(now_us() - start));
    spank_setenv(sp, "TOPOBIND_SPANK_US", num, 1); /* planning (per node), this task */
    return 0;
}
