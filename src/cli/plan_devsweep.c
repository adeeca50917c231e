/* plan_devsweep.c: makespan against the number of devices (`octopipe plan --device-sweep`).
 * Users size jobs with it: tokens/s per device falls where added devices mostly wait (a layer
 * that runs whole on one device, the fill and drain of a deep pipeline), and climbs back only
 * where fewer devices had to recompute for want of memory.  Counts: the given P, then halves
 * of it down to the fewest whose static memory fits, and the count at which the lower bound
 * stops falling (op_problem_bound_devices), each a full tune of the same problem on that many
 * devices (the first k of a measured cluster file).  Uniform clusters only: on a mixed one,
 * which devices to drop is a choice of its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_out.h"
#include "cli/plan_sweep.h"
#include "octopipe/sim.h"

#define GIB 1073741824.0

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int op_cli_device_sweep(const op_cli_setup *s, const op_tune_opts *o, FILE *f, op_plan *at_p,
                        op_tune_stats *at_p_st) {
    const op_problem *pr = &s->pr;
    const int P = pr->P;
    const int kb = op_problem_bound_devices(pr, 1e-3, NULL, NULL);
    /* the counts: P, P/2, P/4, ... while static memory fits (the first that does not is a row
     * of its own, so the table says where it stops), and kb */
    int cnt[40], n = 0, no_fit = 0;
    cnt[n++] = P;
    for (int k = P / 2; k >= 1 && n < 32; k /= 2) {
        int fits = !(pr->mem_limit_bytes > 0) ||
                   op_problem_static_floor(pr->layers, pr->n_layers, k) <= pr->mem_limit_bytes;
        if (!fits) {
            no_fit = k;
            break;
        }
        cnt[n++] = k;
    }
    int have_kb = 0;
    for (int i = 0; i < n; i++) have_kb |= cnt[i] == kb;
    if (!have_kb && kb > no_fit) cnt[n++] = kb;
    qsort(cnt, (size_t)n, sizeof *cnt, cmp_int);
    fprintf(f, "model %s on up to %d x %s, %d microbatches: makespan against the number of devices\n",
            s->model.name, P, s->dev.name, pr->M);
    fprintf(f, "%8s %12s %11s %10s %8s %7s %9s  %s\n", "devices", "makespan_ms", "tokens/s", "tok/s/dev",
            "bubble%", "gap%", "peak_GiB", "activations");
    if (no_fit)
        fprintf(f, "%8d %12s %11s %10s %8s %7s %9s  static memory does not fit (%.2f GiB on some device)\n",
                no_fit, "-", "-", "-", "-", "-", "-",
                op_problem_static_floor(pr->layers, pr->n_layers, no_fit) / GIB);
    /* --time-budget is the whole sweep's: each row an equal share of what is left */
    const double deadline = op_cli_sweep_deadline(o);
    int handed = 0;
    for (int i = 0; i < n; i++) {
        const int k = cnt[i];
        op_problem q = *pr;
        q.P = k;
        /* measured links: the first k devices' k x k corner of the matrix */
        double *sub = NULL;
        if (pr->comm.pair_n > k) {
            const int N = pr->comm.pair_n;
            sub = op_xmalloc(sizeof *sub * 2 * (size_t)k * (size_t)k);
            for (int a = 0; a < k; a++)
                for (int b = 0; b < k; b++) {
                    sub[a * k + b] = pr->comm.pair_lat_ms[a * N + b];
                    sub[k * k + a * k + b] = pr->comm.pair_bw_GBps[a * N + b];
                }
            q.comm.pair_n = k, q.comm.pair_lat_ms = sub, q.comm.pair_bw_GBps = sub + k * k;
        }
        if (q.comm.host_n > k) q.comm.host_n = k; /* indexed by device: the first k stay right */
        op_tune_stats st;
        op_tune_opts oo = op_cli_sweep_row(o, deadline, n - i, &st);
        /* a row can take a minute: the tuner's progress lines, named for the row, go to stderr
         * while the table goes to stdout (not when both would share stderr, --out -) */
        char label[64];
        snprintf(label, sizeof label, "octopipe plan --device-sweep (%d devices)", k);
        oo.label = label;
        oo.verbose = o->verbose && f == stdout;
        op_plan p;
        op_err e = {0};
        char dv[16];
        snprintf(dv, sizeof dv, "%d%s", k, k == P ? "*" : k == kb ? "=" : "");
        int rc = op_tune(&q, &oo, &p, &e);
        free(sub); /* a plan copies the links it keeps */
        if (o->cancel && *o->cancel) { /* Ctrl-C: this row's search was cut short */
            if (rc == OP_OK) op_plan_free(&p);
            fprintf(f, "%8s  interrupted\n", dv);
            break;
        }
        if (rc != OP_OK) {
            fprintf(f, "%8s %12s %11s %10s %8s %7s %9s  %s\n", dv, "-", "-", "-", "-", "-", "-",
                    rc == OP_ETIMEOUT ? "none found within --time-budget"
                    : rc == OP_ENOMEM ? "no plan fits"
                                      : e.msg);
            fflush(f);
            continue;
        }
        const op_pred *pd = &p.pred;
        char pk[16] = "-";
        if (op_cli_mem_modelled(pr->layers, pr->n_layers))
            snprintf(pk, sizeof pk, "%.2f", (double)pd->peak_bytes_max / GIB);
        fprintf(f, "%8s %12.2f %11.0f %10.0f %8.2f %7.2f %9s  %s\n", dv, pd->makespan_ms,
                pd->tokens_per_s, pd->tokens_per_s / k, 100 * pd->bubble_ratio,
                100 * (pd->makespan_ms / pd->lower_bound_ms - 1), pk, st.policies);
        fflush(f);
        if (k == P && at_p) {
            *at_p = p;
            *at_p_st = st;
            handed = 1;
        } else {
            op_plan_free(&p);
        }
    }
    fprintf(f, "* the devices `octopipe plan` tunes for and writes its plan for (--devices)\n");
    if (kb < P)
        fprintf(f, "= the fewest with the lower bound of all %d (within 0.1%%): the others cannot "
                   "lower it\n",
                P);
    return handed;
}
