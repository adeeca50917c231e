/* tune_advise.c: when no plan fits, the smallest change that would (op_tune_advise).
 *
 * Each suggestion is computed, not guessed: the model is re-costed with the change (a TP
 * degree, ZeRO-1 over a data-parallel group) or the problem widened (more devices, a higher
 * limit) and tuned briefly with recomputation allowed; a change is suggested only if that tune
 * returns a plan that fits.  Static memory is checked first with a bound every plan obeys: some
 * device holds at least total/P of it, and the device holding the heaviest layer holds all of
 * that layer's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/tune.h"

#define GIB 1073741824.0

double op_tune_static_floor(const op_layer_cost *l, int n, int P) {
    double tot = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        tot += (double)l[i].static_bytes;
        if ((double)l[i].static_bytes > mx) mx = (double)l[i].static_bytes;
    }
    return tot / P > mx ? tot / P : mx;
}

/* A brief tune of pr; returns the makespan of a plan that fits, else 0 (and *peak the
 * smallest peak found, when the tune reports one). */
static double quick(const op_problem *pr, double *peak) {
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.max_evals = 300;
    op_plan p;
    op_err e = {0};
    if (op_tune(pr, &o, &p, &e) != OP_OK) return 0;
    double mk = p.pred.makespan_ms;
    if (peak) *peak = (double)p.pred.peak_bytes_max;
    op_plan_free(&p);
    return mk;
}

/* Re-costs m under t and tunes pr with those layers; makespan if a plan fits, else 0. */
static double with_cfg(const op_model *m, const op_train_cfg *t, const op_device *d,
                       const op_problem *pr) {
    op_layer_cost *lc = op_xcalloc((size_t)m->n_layers, sizeof *lc);
    op_err e = {0};
    double mk = 0;
    if (op_cost_layers(m, t, d, lc, &e) == OP_OK &&
        op_tune_static_floor(lc, m->n_layers, pr->P) <= pr->mem_limit_bytes) {
        op_problem q = *pr;
        q.layers = lc;
        q.n_layers = m->n_layers;
        mk = quick(&q, NULL);
    }
    free(lc);
    return mk;
}

int op_tune_advise(const op_model *m, const op_train_cfg *t, const op_device *d,
                   const op_problem *pr, char *buf, size_t n) {
    size_t k = 0;
    int count = 0;
    buf[0] = 0;
#define SAY(...)                                                                                   \
    do {                                                                                           \
        if (k < n) k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__);                             \
        count++;                                                                                   \
    } while (0)
    double lim = pr->mem_limit_bytes;
    if (lim <= 0) return 0;
    double sf = op_tune_static_floor(pr->layers, pr->n_layers, pr->P);
    if (sf > lim)
        SAY("static memory (weights, gradients, optimizer state) alone needs at least %.2f GiB "
            "on some device of %d, over the %.2f GiB limit: no recomputation or schedule helps\n",
            sf / GIB, pr->P, lim / GIB);
    if (m && t && d) {
        for (int tp = t->tp * 2; tp <= 8; tp *= 2) { /* TP stays inside a node of 8 */
            op_train_cfg tt = *t;
            tt.tp = tp;
            double mk = with_cfg(m, &tt, d, pr);
            if (mk > 0) {
                SAY("--tp %d: a plan fits (%.1f ms per iteration; each pipeline rank becomes %d GPUs)\n",
                    tp, mk, tp);
                break;
            }
        }
        if (!t->zero1) {
            op_train_cfg tt = *t;
            tt.dp = t->dp > 1 ? t->dp : 2;
            tt.zero1 = 1;
            double mk = with_cfg(m, &tt, d, pr);
            if (mk > 0)
                SAY("--dp %d --zero1: optimizer state sharded over the data-parallel group, a plan "
                    "fits (%.1f ms)\n", tt.dp, mk);
        }
    }
    for (int P2 = pr->P + (pr->P + 1) / 2; P2 <= 4 * pr->P; P2 += (pr->P + 1) / 2) {
        if (P2 > pr->n_layers) break;
        op_problem q = *pr;
        q.P = P2;
        if (op_tune_static_floor(pr->layers, pr->n_layers, P2) > lim) continue;
        double mk = quick(&q, NULL);
        if (mk > 0) {
            SAY("--devices %d: a plan fits (%.1f ms)\n", P2, mk);
            break;
        }
    }
    /* the lowest limit on a ladder from the static floor up (x1.1 a step) at which a plan
     * with recomputation fits; capped by the peak of the best plan without any limit */
    op_problem q = *pr;
    q.mem_limit_bytes = 0;
    double peak = 0, mk = quick(&q, &peak);
    for (double g = ceil(sf * 1.05 / GIB * 100) / 100; mk > 0 && g * GIB < peak; g = ceil(g * 110) / 100) {
        q.mem_limit_bytes = g * GIB;
        double m2 = quick(&q, NULL);
        if (m2 > 0) {
            SAY("--mem-limit %.2f: a plan fits (%.1f ms)\n", g, m2);
            mk = 0;
        }
    }
    if (mk > 0 && peak > 0)
        SAY("--mem-limit %.2f: the best plan found without a limit peaks there (%.1f ms)\n",
            ceil(peak / GIB * 100) / 100, mk);
#undef SAY
    return count;
}
