/* tb_planner.c - the node's planner command, run once a node by a plugin (see tb/planner.h). */
#include "tb/planner.h"
#include "tb/step.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Read the child PID's stdout OUT (the step file, into *TEXT, malloc'd, at most
 * TB_PLANNER_MAX bytes) and stderr ERR (its message, into MSG) until both close, killing it
 * past TB_PLANNER_TIMEOUT_MS or the size bound; 0, or -1 with MSG saying why. */
static int collect(int out, int err, pid_t pid, char **text, size_t *text_len, char *msg,
                   size_t msglen)
{
    size_t cap = 65536, len = 0, mlen = 0;
    char *buf = malloc(cap);
    struct pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    double start = now_ms();
    int open_fds = 2, rc = 0;
    msg[0] = '\0';
    while (buf && open_fds > 0) {
        int left = TB_PLANNER_TIMEOUT_MS - (int)(now_ms() - start);
        if (left <= 0 || poll(fds, 2, left) == 0) {
            kill(pid, SIGKILL);
            snprintf(msg, msglen, "topobind plan took more than %d s: killed",
                     TB_PLANNER_TIMEOUT_MS / 1000);
            rc = -1;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !fds[i].revents)
                continue;
            ssize_t n;
            if (i == 0) {
                if (len + 4096 > cap) {
                    char *bigger = cap < TB_PLANNER_MAX ? realloc(buf, cap * 2) : NULL;
                    if (!bigger) {
                        kill(pid, SIGKILL);
                        snprintf(msg, msglen, "topobind's step file is larger than %d MiB",
                                 TB_PLANNER_MAX >> 20);
                        rc = -1;
                        goto done;
                    }
                    buf = bigger;
                    cap *= 2;
                }
                n = read(out, buf + len, cap - len - 1);
                if (n > 0)
                    len += (size_t)n;
            } else {
                char tmp[4096];
                n = read(err, tmp, sizeof tmp);
                for (ssize_t k = 0; k < n && mlen + 1 < msglen; k++)
                    msg[mlen++] = tmp[k];
                msg[mlen] = '\0';
            }
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
done:
    if (!buf) {
        snprintf(msg, msglen, "out of memory");
        rc = -1;
    }
    if (buf)
        buf[len] = '\0';
    *text = buf;
    *text_len = len;
    return rc;
}

/* The first line of topobind's message MSG that says "error:" (else its first line). */
static void error_line(const char *msg, char *out, size_t outlen)
{
    const char *line = strstr(msg, "error:");
    if (line)
        while (line > msg && line[-1] != '\n')
            line--;
    else
        line = msg;
    snprintf(out, outlen, "%.*s", (int)strcspn(line, "\n"), line);
}

/* TOPOLOGY with each "%n" the host name (up to its first '.') into OUT. */
static const char *topology_here(const char *topology, char *out, size_t len)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    host[strcspn(host, ".")] = '\0';
    size_t o = 0;
    for (const char *p = topology; *p && o + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'n') {
            o += (size_t)snprintf(out + o, len - o, "%s", host);
            p++;
        } else
            out[o++] = *p;
        if (o >= len)
            o = len - 1;
    }
    out[o] = '\0';
    return out;
}

void tb_plan_argv(tb_argv *a, const char *cmd, const char *topology, const char *cores,
                  long tasks, const char *opt, long threads)
{
    char num[32], topo[1100];
    tb_argv_add_s(a, cmd);
    tb_argv_add_s(a, "plan");
    tb_argv_add_s(a, "--topology");
    tb_argv_add_s(a, topology_here(topology, topo, sizeof topo));
    tb_argv_add_s(a, "--format");
    tb_argv_add_s(a, "rankexec");
    tb_argv_add_s(a, "--slurm-cores");
    tb_argv_add_s(a, cores);
    snprintf(num, sizeof num, "%ld", tasks);
    tb_argv_add_s(a, "--ranks");
    tb_argv_add_s(a, num);
    if (!tb_option_args(a, opt) && threads > 0) {
        snprintf(num, sizeof num, "%ld", threads);
        tb_argv_add_s(a, "--threads");
        tb_argv_add_s(a, num);
    }
}

/* The planner's process (after fork): stdin /dev/null, stdout OUT, stderr ERR, PATH, exec. */
static void exec_planner(tb_argv *a, const tb_planner_how *how, int out, int err)
{
    if (how->become_user) {
        gid_t g = getegid();
        uid_t u = geteuid();
        if (setresgid(g, g, g) != 0 || setresuid(u, u, u) != 0)
            _exit(126);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        _exit(126);
    static char path_var[8192];
    snprintf(path_var, sizeof path_var, "PATH=%s", how->path);
    char *env[] = {path_var, "LC_ALL=C.UTF-8", NULL};
    setenv("PATH", how->path, 1); /* where a bare topobind is looked up */
    execvpe(a->argv[0], a->argv, env);
    int e = errno;
    dprintf(2, "topobind: error: cannot run %s: %s (%s)\n", a->argv[0], strerror(e),
            how->run_hint);
    _exit(e == ENOENT ? 127 : 126);
}

int tb_planner_run(tb_argv *a, const tb_planner_how *how, char **text, char *errline,
                   size_t errlen, int *missing)
{
    int out[2], err[2];
    *text = NULL;
    if (missing)
        *missing = 0;
    if (a->full) {
        snprintf(errline, errlen, "topobind: error: the topobind command is longer than %d "
                 "words or %zu bytes%s%s%s", TB_OPT_MAX_ARGS, sizeof a->words,
                 how->size_hint ? " (" : "", how->size_hint ? how->size_hint : "",
                 how->size_hint ? ")" : "");
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        snprintf(errline, errlen, "topobind: error: pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(errline, errlen, "topobind: error: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_planner(a, how, out[1], err[1]);
    close(out[1]);
    close(err[1]);
    char msg[1024];
    size_t len = 0;
    int rc = collect(out[0], err[0], pid, text, &len, msg, sizeof msg);
    close(out[0]);
    close(err[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (missing)
        *missing = WIFEXITED(status) && WEXITSTATUS(status) == 127;
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char first[1024];
        error_line(msg, first, sizeof first);
        snprintf(errline, errlen, "%s",
                 first[0] ? first : "topobind: error: topobind plan failed with no message");
        rc = -1;
    } else if (rc != 0)
        snprintf(errline, errlen, "topobind: error: %.990s", msg); /* cut to the line */
    if (rc == 0 && how->step_file && strncmp(*text, "topobind-rankexec 2\n", 20) != 0 &&
        strncmp(*text, "topobind-rankexec 3\n", 20) != 0) {
        snprintf(errline, errlen, "topobind: error: %s printed no version-2 or 3 step file (a "
                 "topobind older than this plugin? it needs 'plan --format rankexec')",
                 a->argv[0]);
        rc = -1;
    }
    char bad[512]; /* a control byte (a NUL would cut a task's line short): the file's rule */
    if (rc == 0 && how->step_file && tb_step_check_text(*text, len, bad, sizeof bad) != 0) {
        snprintf(errline, errlen, "topobind: error: %s's step file, %s", a->argv[0], bad);
        rc = -1;
    }
    if (rc != 0) {
        free(*text);
        *text = NULL;
    } else
        error_line(msg, errline, errlen); /* its note, if any (--layout auto's record) */
    return rc;
}
