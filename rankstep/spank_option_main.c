/*
 * tb-spank-option OPTION... - the SPANK plugin's option parser without Slurm, for tests: for
 * each OPTION, "ok threads=0|1 full=0|1" and the words `topobind plan` would get (one per
 * line), or "error: " and the message srun would print; an empty line after each. Exit 0
 * when all were accepted, 1 otherwise.
 */
#include "tb/option.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        char err[1024];
        if (tb_option_check(argv[i], err, sizeof err) != 0) {
            printf("error: %s\n\n", err);
            rc = 1;
            continue;
        }
        tb_argv a = {0};
        int threads = tb_option_args(&a, argv[i]);
        printf("ok threads=%d full=%d\n", threads, a.full);
        for (int k = 0; k < a.argc; k++)
            printf("%s\n", a.argv[k]);
        printf("\n");
    }
    return rc;
}
