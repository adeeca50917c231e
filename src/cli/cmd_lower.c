/* cmd_lower.c: `octopipe lower PLAN`: prints the per-rank instruction lists the executor runs. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "octopipe/out.h"
#include "octopipe/exec.h"


static void usage(FILE *f) {
    fprintf(f,
           "usage: octopipe lower PLAN [--rank R] [--bytes-scale X] [--recv-window N]\n\n"
           "Prints each rank's instruction list: compute ops (COMP) in plan order, receives posted\n"
           "early (RECV), waited for right before the op that needs them (WAIT), sends right after\n"
           "the producing op (SEND), buffers released after their last use (FREE).  Stages on one\n"
           "rank hand over in memory (a COMP's out buffer is a later COMP's in buffer).  Tags are\n"
           "(mb << 12) | (stage << 1) | grad.  A deadlocking plan is refused with its cycle.\n\n"
           "options:\n"
           "  --rank R          only rank R\n"
           "  --bytes-scale X   multiply message sizes by X (default 1)\n"
           "  --recv-window N   post receives up to N compute ops ahead (default 8)\n\n"
           "example:\n  octopipe lower plan.json --rank 0\n");
}

int cmd_lower(int argc, char **argv) {
    const char *path = NULL;
    int rank = -1;
    op_lower_opts lo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--rank") || !strcmp(a, "--recv-window")) {
            long x = -1;
            if (op_parse_long(v, &x) || x < (a[2] == 'r' && a[3] == 'a' ? 0 : 1) || x > 1000000) {
                /* the range is said: "needs a non-negative integer (got '2000000')" read wrong */
                fprintf(stderr, "octopipe lower: %s needs an integer in [%d, 1000000] (got '%s')\n", a,
                        a[3] == 'a' ? 0 : 1, v ? v : "");
                return 2;
            }
            if (a[3] == 'a') rank = (int)x;
            else lo.recv_window = (int)x;
            i++;
        } else if (!strcmp(a, "--bytes-scale")) {
            double x = -1;
            if (op_cli_decimal(v, &x) || !(x > 0 && x <= 1e6)) {
                fprintf(stderr, "octopipe lower: --bytes-scale needs a number in (0, 1e6] (got '%s')\n", v ? v : "");
                return 2;
            }
            lo.bytes_scale = x;
            i++;
        } else if (a[0] == '-' && a[1]) {
            char dym[160];
            fprintf(stderr, "octopipe lower: unknown flag '%s'%s (octopipe lower --help)\n", a,
                    op_cli_suggest(usage, a, dym, sizeof dym));
            return 2;
        } else if (!path) {
            path = a;
            op_out_protect(a);
        } else {
            fprintf(stderr, "octopipe lower: one plan file only\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "octopipe lower: missing PLAN (octopipe lower --help)\n");
        return 2;
    }
    op_plan p;
    op_err e = {0};
    if (op_plan_read(path, &p, &e)) {
        fprintf(stderr, "octopipe lower: %s\n", e.msg);
        return 2;
    }
    if (rank >= p.P) {
        fprintf(stderr, "octopipe lower: --rank %d but %s has %d devices\n", rank, path, p.P);
        op_plan_free(&p);
        return 2;
    }
    op_lowered l;
    int rc = op_exec_lower(&p, &lo, &l, &e);
    if (rc) {
        fprintf(stderr, "octopipe lower: %s: %s\n", path, e.msg);
        op_plan_free(&p);
        return 2;
    }
    op_buf b = {0};
    op_lowered_print(&l, &b);
    const char *s = b.data;
    if (rank >= 0) { /* print only that rank's block */
        char hdr[32];
        snprintf(hdr, sizeof hdr, "rank %d:", rank);
        s = strstr(b.data, hdr);
        snprintf(hdr, sizeof hdr, "\nrank %d:", rank + 1);
        char *endp = strstr(s, hdr);
        if (endp) endp[1] = 0;
    }
    fputs(s, stdout);
    op_buf_free(&b);
    op_lowered_free(&l);
    op_plan_free(&p);
    return 0;
}
