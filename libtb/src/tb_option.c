/* tb_option.c - the plugins' --topobind option (see tb/option.h). */
#include "tb/option.h"

#include <stdio.h>
#include <string.h>

void tb_argv_add(tb_argv *a, const char *s, size_t n)
{
    if (a->argc >= TB_OPT_MAX_ARGS || a->used + n + 1 > sizeof a->words) {
        a->full = 1;
        return;
    }
    char *w = a->words + a->used;
    memcpy(w, s, n);
    w[n] = '\0';
    a->used += n + 1;
    a->argv[a->argc++] = w;
    a->argv[a->argc] = NULL;
}

void tb_argv_add_s(tb_argv *a, const char *s) { tb_argv_add(a, s, strlen(s)); }

static int word_ok(const char *s, size_t n, const char *extra)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              (s[i] && strchr(extra, s[i]))))
            return 0;
    return 1;
}

/* The length of LAYOUT in ARG: up to the first ':', or past a ':N' size (l3-groups:32). */
static size_t layout_len(const char *arg)
{
    size_t n = strcspn(arg, ":");
    if (arg[n] == ':' && arg[n + 1] >= '0' && arg[n + 1] <= '9') {
        n++;
        while (arg[n] >= '0' && arg[n] <= '9')
            n++;
    }
    return n;
}

/* What the plugin sets itself (from the step, or to read the output): an option NAME equal to
 * one of these, or a prefix of one (argparse takes --top for --topology), is refused. */
static const char *const RESERVED[] = {"ranks", "slurm-cores", "topology", "format", "layout",
                                       "check", "rankfile", "force", "host", "help", NULL};

static int reserved(const char *name, size_t n)
{
    for (int i = 0; RESERVED[i]; i++)
        if (strncmp(RESERVED[i], name, n) == 0)
            return 1;
    return 0;
}

int tb_option_check(const char *arg, char *err, size_t errlen)
{
    size_t n = strlen(arg);
    size_t lay = layout_len(arg);
    if (n > TB_OPT_MAX || !word_ok(arg, lay, ":") || arg[0] < 'a' || arg[0] > 'z') {
        snprintf(err, errlen,
                 "--topobind=%.80s: give LAYOUT[:NAME=VALUE,...], e.g. "
                 "--topobind=every-other-core or --topobind=spread:threads=2",
                 arg);
        return -1;
    }
    for (const char *p = arg + lay; *p;) {
        p++; /* ':' or ',' */
        size_t len = strcspn(p, ",");
        size_t name = strcspn(p, ",=");
        if (p[0] == '-' && p[1] >= '0' && p[1] <= '9') { /* l3-groups:-1 */
            snprintf(err, errlen, "--topobind=%.80s: '%.*s' is neither a size (a layout's size "
                     "is a positive number: l3-groups:32) nor an option NAME", arg, (int)len, p);
            return -1;
        }
        if (!word_ok(p, name, "") || p[0] < 'a' || p[0] > 'z' ||
            (name < len && !word_ok(p + name + 1, len - name - 1,
                                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ_.:/+"))) {
            snprintf(err, errlen, "--topobind=%.80s: option '%.*s' is not NAME or NAME=VALUE", arg,
                     (int)len, p);
            return -1;
        }
        if (reserved(p, name)) {
            snprintf(err, errlen,
                     "--topobind=%.80s: option '%.*s' is set by the plugin from the step "
                     "(ranks: the tasks, cores: the step's, the topology: plugstack.conf)",
                     arg, (int)name, p);
            return -1;
        }
        p += len;
    }
    return 0;
}

int tb_option_args(tb_argv *a, const char *opt)
{
    const char *p = opt;
    size_t lay = layout_len(p);
    tb_argv_add_s(a, "--layout");
    tb_argv_add(a, p, lay);
    int threads_given = 0;
    for (p += lay; *p;) {
        p++;
        size_t len = strcspn(p, ","), name = strcspn(p, ",=");
        char word[TB_OPT_MAX + 8];
        snprintf(word, sizeof word, "--%.*s", (int)len, p); /* --NAME or --NAME=VALUE */
        threads_given |= name == 7 && strncmp(p, "threads", 7) == 0;
        tb_argv_add_s(a, word);
        p += len;
    }
    return threads_given;
}
