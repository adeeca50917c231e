/* plan_sweep.c: makespan against the per-device memory limit.  Users size clusters with it:
 * where the curve flattens, more memory buys nothing; where it climbs, recomputation is paying
 * for the missing memory.  Limits: from the static floor (weights + gradients + optimizer state
 * spread evenly: below it nothing fits) up to the device's memory, in ten steps, plus no limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/plan_sweep.h"
#include "octopipe/sim.h"

#define GIB 1073741824.0

double op_cli_sweep_deadline(const op_tune_opts *o) {
    return o->time_budget_s > 0 ? (o->started_s > 0 ? o->started_s : op_now_s()) + o->time_budget_s : 0;
}

op_tune_opts op_cli_sweep_row(const op_tune_opts *o, double deadline, int rows_left, op_tune_stats *st) {
    op_tune_opts oo = *o;
    if (deadline > 0) {
        oo.started_s = op_now_s();
        oo.time_budget_s = fmax((deadline - oo.started_s) / rows_left, 0.01);
    }
    memset(st, 0, sizeof *st); /* a failed tune leaves it unwritten */
    oo.stats = st;
    return oo;
}

int op_cli_mem_sweep(const op_cli_setup *s, const op_tune_opts *o, FILE *f, op_plan *at_set,
                     op_tune_stats *at_set_st) {
    const op_problem *pr = &s->pr;
    double stat = 0;
    for (int l = 0; l < pr->n_layers; l++) stat += (double)pr->layers[l].static_bytes;
    /* listed devices have their own memory (a cluster file's mem_GiB), and the one limit swept
     * holds for every device: up to the smallest.  s->dev is device 0's preset: 40 GiB H100s
     * were swept to 80 GiB, and h200:4,h100:4 to 141 where h100:4,h200:4 stopped at 80 */
    double lo = floor(stat / pr->P / GIB) + 1, hi = op_cli_min_mem_GiB(s);
    if (lo > hi) lo = hi;
    if (op_cli_mixed(s)) /* the swept limit holds for every device, whatever its memory */
        fprintf(f, "model %s on %d mixed devices, %d microbatches: makespan against one memory limit for all\n",
               s->model.name, pr->P, pr->M);
    else
        fprintf(f, "model %s on %d x %s (%.3g GiB), %d microbatches: makespan against the memory limit\n",
               s->model.name, pr->P, s->dev.name, hi, pr->M); /* a cluster file's memory, not the preset's */
    fprintf(f, "%10s %12s %8s %10s  %s\n", "limit_GiB", "makespan_ms", "gap%", "peak_GiB", "activations");
    /* a plan that fits a limit fits every higher one: each row is the best plan found at or
     * below its limit, so the table is a Pareto front even where the search is not monotone */
    double best_mk = 0, best_gap = 0, best_peak = 0;
    char best_pol[64] = "";
    op_plan best; /* the fastest so far, while the set limit is still ahead (at_set) */
    op_tune_stats best_st;
    int have_best = 0, handed = 0;
    /* the limit `plan` tunes at (--mem-limit, or the default) is a row of its own, marked, so
     * the row a user compares with the plan written is that plan's; mixed clusters sweep one
     * limit for all devices, which is not theirs */
    double set = op_cli_mixed(s) ? 0 : pr->mem_limit_bytes / GIB;
    /* the ends too: --mem-limit 80 on 80 GiB devices (or at the floor) was a row unmarked, and
     * the plan for --out was tuned again after the sweep */
    int in_range = set >= lo && set <= hi;
    /* the limits: ten from lo to hi with the set one among them (it replaces a rung within
     * 0.005 GiB of it), then none (0) */
    double rung[12];
    int nr = 0, at = -1;
    for (int k = 0; k < 10; k++) {
        double g = lo + (hi - lo) * k / 9.0;
        if (k > 0 && g == lo) continue;
        if (at < 0 && in_range && g >= set) {
            at = nr;
            rung[nr++] = set;
            if (fabs(g - set) <= 0.005) continue;
        }
        rung[nr++] = g;
    }
    /* --mem-limit none is the last row's: unmarked, the plan for --out was tuned again after
     * the sweep, and the table did not say which row the plan written was */
    if (!(pr->mem_limit_bytes > 0) && !pr->dev_mem_limit) at = nr;
    rung[nr++] = 0;
    /* --time-budget is the whole sweep's, not each row's: each row gets an equal share of
     * what is left (a row that finds nothing spends all of its share), and a row whose share
     * found nothing says so rather than "no plan fits" */
    const double deadline = op_cli_sweep_deadline(o);
    for (int i = 0; i < nr; i++) {
        op_problem q = *pr;
        double g = rung[i];
        int mark = i == at;
        q.mem_limit_bytes = g * GIB;
        q.dev_mem_limit = NULL; /* the swept limit on every device, mixed cluster or not */
        op_tune_stats st;
        op_tune_opts oo = op_cli_sweep_row(o, deadline, nr - i, &st);
        op_plan p;
        op_err e = {0};
        char lim[32];
        if (g > 0) snprintf(lim, sizeof lim, "%.2f%s", g, mark ? "*" : "");
        else snprintf(lim, sizeof lim, "none%s", mark ? "*" : "");
        int rc = op_tune(&q, &oo, &p, &e), tuned = rc == OP_OK;
        if (o->cancel && *o->cancel) { /* Ctrl-C: this row's search was cut short */
            if (tuned) op_plan_free(&p);
            fprintf(f, "%10s  interrupted\n", lim);
            break;
        }
        if (tuned) {
            if (best_mk == 0 || p.pred.makespan_ms < best_mk) {
                best_mk = p.pred.makespan_ms;
                best_gap = 100 * op_gap(p.pred.makespan_ms, p.pred.lower_bound_ms);
                best_peak = (double)p.pred.peak_bytes_max / GIB;
                snprintf(best_pol, sizeof best_pol, "%s", st.policies);
                if (at_set && !handed) {
                    if (have_best) op_plan_free(&best);
                    op_plan_copy(&best, &p);
                    best_st = st;
                    have_best = 1;
                }
            }
            op_plan_free(&p);
        }
        if (mark && at_set && have_best) { /* the plan of this row, at the limit it names */
            best.mem_limit_bytes = pr->mem_limit_bytes;
            op_err e2 = {0};
            OP_ASSERT(op_sim_replay(&best, NULL, &e2) == OP_OK, "re-simulating a tuned plan: %s",
                      e2.msg);
            *at_set = best;
            *at_set_st = best_st;
            /* the bar is the baselines at this limit (a plan from a lower one met theirs) */
            at_set_st->best_baseline_ms = st.best_baseline_ms;
            memcpy(at_set_st->best_baseline, st.best_baseline, sizeof st.best_baseline);
            have_best = 0;
            handed = 1;
        }
        if (best_mk == 0)
            fprintf(f, "%10s %12s %8s %10s  %s\n", lim, "-", "-", "-",
                    rc == OP_ETIMEOUT ? "none found within --time-budget" : "no plan fits");
        else fprintf(f, "%10s %12.2f %8.2f %10.2f  %s\n", lim, best_mk, best_gap, best_peak, best_pol);
        fflush(f);
    }
    if (at >= 0)
        fprintf(f, "* the limit `octopipe plan` tunes at and writes its plan for (--mem-limit; default "
               "%.0f%% of the GPU's memory)\n"
               "  each row is the best plan found at or below its limit: the marked one can be faster\n"
               "  than a plain `octopipe plan` at that limit, which runs that limit's search alone\n",
               100 * OP_MEM_HEADROOM);
    if (have_best) op_plan_free(&best);
    return handed;
}
