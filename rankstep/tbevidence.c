/*
 * tbevidence.c - the evidence (libtb's tb/evidence.h) around a program that is not a kernel.
 *
 *   tb-evidence [--json FILE] [--] PROGRAM [ARGS...]
 *   tb-evidence --loop N [--json FILE]
 *
 * With PROGRAM: forks, opens the counters on the child (they start when it execs: the wait
 * for the parent's go is not counted), reads the signals, lets the child exec PROGRAM, waits
 * for it, reads them again and writes one JSON document (schema "topobind.evidence/1": host,
 * rank, command, status, evidence) to FILE ({rank} and {pid} expanded; atomically) or to
 * stdout. The exit status is PROGRAM's (128+N when killed by signal N; 127 when it could not
 * be started; 2 on a bad command line). SIGINT, SIGTERM and SIGHUP are passed on to it.
 * `topobind run --evidence` puts it between the per-rank step and the program of each rank.
 *
 * With --loop N: N times tb_evidence_begin+end+write in this process (the evidence of the
 * last one written), and one line on stderr: "tb-evidence: N runs, X ms per run, Y ms of
 * CPU" (wall and CPU time per begin+end+write; what
 * `make bench-evidence` reads). Built for the baseline, like rankexec.
 */
#include "tb/env.h"
#include "tb/evidence.h"
#include "tb/json.h"
#include "tb/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child_pid;

static void pass_on(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tb-evidence [--json FILE] [--] PROGRAM [ARGS...]\n"
               "       tb-evidence --loop N [--json FILE]\n"
               "the evidence (signals, counters) around PROGRAM as one JSON document\n"
               "(docs/results-format.md, \"evidence\"); exit status: PROGRAM's\n");
}

static void header(tb_json *j, const char *command)
{
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    tbj_obj_begin(j, NULL);
    tbj_str(j, "schema", "topobind.evidence/1");
    tbj_str(j, "host", host);
    tbj_int(j, "rank", tb_env_rank());
    tbj_str(j, "command", command);
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int loop(long n, const char *json)
{
    tb_json j;
    double t0 = tb_now(), c0 = cpu_s();
    for (long i = 0; i < n; i++) {
        tb_evidence *e = tb_evidence_begin(0);
        tbj_init(&j);
        header(&j, NULL);
        tb_evidence_json(&j, "evidence", e);
        tbj_obj_end(&j);
        tb_evidence_free(e);
        if (i + 1 < n)
            tbj_free(&j);
    }
    double ms = (tb_now() - t0) * 1e3 / (double)n, cpu = (cpu_s() - c0) * 1e3 / (double)n;
    if (json)
        tb_emit(&j, json);
    tbj_free(&j);
    fprintf(stderr, "tb-evidence: %ld runs, %.3f ms per run, %.3f ms of CPU\n", n, ms, cpu);
    return 0;
}

/* The child: waits for the parent's go (the counters opened), then execs. */
static void run_child(int go, char **argv)
{
    char c;
    while (read(go, &c, 1) < 0 && errno == EINTR)
        ;
    close(go);
    execvp(argv[0], argv);
    fprintf(stderr, "tb-evidence: error: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int wrap(char **argv, const char *json)
{
    int fds[2];
    if (pipe(fds) != 0)
        tb_die(127, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        tb_die(127, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[1]);
        run_child(fds[0], argv);
    }
    close(fds[0]);
    child_pid = pid;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pass_on;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    tb_evidence *e = tb_evidence_begin(pid);
    if (write(fds[1], "g", 1) != 1)
        tb_die(127, "cannot start %s: %s", argv[0], strerror(errno));
    close(fds[1]);
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
        ;
    tb_evidence_end(e, &ru);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
    tb_json j;
    tbj_init(&j);
    header(&j, argv[0]);
    tbj_int(&j, "status", status);
    tb_evidence_json(&j, "evidence", e);
    tbj_obj_end(&j);
    tb_emit(&j, json);
    tbj_free(&j);
    tb_evidence_free(e);
    return status;
}

int main(int argc, char **argv)
{
    tb_prog = "tb-evidence";
    const char *json = NULL;
    long n = 0;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json = argv[++i];
        } else if (!strcmp(argv[i], "--loop") && i + 1 < argc) {
            n = (long)tb_parse_count("--loop", argv[++i], 1, 1000000);
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            tb_usage_error("unknown option or missing value: '%s'", argv[i]);
        }
    }
    if (n > 0) {
        if (i < argc)
            tb_usage_error("--loop takes no program");
        return loop(n, json);
    }
    if (i >= argc)
        tb_usage_error("no program to run");
    return wrap(argv + i, json);
}
