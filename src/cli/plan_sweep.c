/* plan_sweep.c: makespan against the per-device memory limit.  Users size clusters with it:
 * where the curve flattens, more memory buys nothing; where it climbs, recomputation is paying
 * for the missing memory.  Limits: from the static floor (weights + gradients + optimizer state
 * spread evenly: below it nothing fits) up to the device's memory, in ten steps, plus no limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/plan_sweep.h"

#define GIB 1073741824.0

int op_cli_mem_sweep(const op_cli_setup *s, const op_tune_opts *o) {
    const op_problem *pr = &s->pr;
    double stat = 0;
    for (int l = 0; l < pr->n_layers; l++) stat += (double)pr->layers[l].static_bytes;
    double lo = floor(stat / pr->P / GIB) + 1, hi = s->dev.mem_GiB;
    if (lo > hi) lo = hi;
    printf("model %s on %d x %s, %d microbatches: makespan against the memory limit\n",
           s->model.name, pr->P, s->dev.name, pr->M);
    printf("%10s %12s %8s %10s  %s\n", "limit_GiB", "makespan_ms", "gap%", "peak_GiB", "activations");
    /* a plan that fits a limit fits every higher one: each row is the best plan found at or
     * below its limit, so the table is a Pareto front even where the search is not monotone */
    double best_mk = 0, best_gap = 0, best_peak = 0;
    char best_pol[64] = "";
    for (int k = 0; k <= 10; k++) {
        op_problem q = *pr;
        double g = k < 10 ? lo + (hi - lo) * k / 9.0 : 0;
        if (k < 10 && k > 0 && g == lo) continue;
        q.mem_limit_bytes = g * GIB;
        q.dev_mem_limit = NULL; /* the swept limit on every device, mixed cluster or not */
        op_tune_opts oo = *o;
        op_tune_stats st;
        oo.stats = &st;
        op_plan p;
        op_err e = {0};
        char lim[32];
        if (k < 10) snprintf(lim, sizeof lim, "%.2f", g);
        else snprintf(lim, sizeof lim, "none");
        if (op_tune(&q, &oo, &p, &e) == OP_OK) {
            if (best_mk == 0 || p.pred.makespan_ms < best_mk) {
                best_mk = p.pred.makespan_ms;
                best_gap = 100 * (p.pred.makespan_ms / p.pred.lower_bound_ms - 1);
                best_peak = (double)p.pred.peak_bytes_max / GIB;
                snprintf(best_pol, sizeof best_pol, "%s", st.policies);
            }
            op_plan_free(&p);
        }
        if (best_mk == 0) printf("%10s %12s %8s %10s  no plan fits\n", lim, "-", "-", "-");
        else printf("%10s %12.2f %8.2f %10.2f  %s\n", lim, best_mk, best_gap, best_peak, best_pol);
        fflush(stdout);
    }
    return 0;
}
