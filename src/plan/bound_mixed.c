/* bound_mixed.c: lower bound on the makespan of any plan on a cluster of unequal devices
 * (device d of type dev_type[d], layer costs row dev_type[d] of type_layers).
 *
 * Two parts, each valid for every partition, placement, policy and op order:
 *
 * 1. The uniform bound (op_lower_bound) over the "fastest" layers: layer l with f, i and w each
 *    the least over the types present.  Every term of op_lower_bound (chains, per-layer terms,
 *    pigeonhole over the heaviest layers) only needs each layer's times to be at most what they
 *    are on whatever device the plan put it, which taking the least over types guarantees.  Its
 *    work / P term is weak here (it pretends every device is the fastest); part 2 replaces it.
 *
 * 2. The work bound over unequal speeds, by LP duality.  A plan puts each layer l on one device,
 *    so on one type: x[l][t] = 1 for that type, 0 else.  Type t has c[t] devices, and each runs
 *    M * w[t][l] (w = f + i + w, all microbatches) for each layer it holds, so
 *        c[t] * T >= load[t] = M * sum_l x[l][t] * w[t][l]      for every type t.
 *    For any weights y[t] >= 0, not all 0, summing the rows weighted by y:
 *        T * sum_t y[t] c[t] >= M * sum_l sum_t x[l][t] y[t] w[t][l] >= M * sum_l min_t y[t] w[t][l]
 *    (the x of a layer sum to 1), so
 *        T >= M * sum_l min_t (y[t] w[t][l]) / sum_t y[t] c[t].                  (*)
 *    (*) holds for EVERY y, so the bound stays valid however y is chosen; choosing well only
 *    makes it tighter.  The best y is the dual of the fractional assignment LP.  With one type,
 *    (*) is M * work / P.  With two types, fix y[0] = 1: the right side of (*) is a piecewise
 *    linear concave numerator over a positive linear denominator in y[1], whose maximum lies at
 *    a breakpoint y[1] = w[0][l] / w[1][l] (or at an end, where (*) gives no more than at the
 *    last breakpoint), so trying every breakpoint gives the LP optimum exactly.  With more types
 *    the same search runs per coordinate for a few rounds (still valid, maybe not the optimum).
 *
 * Communication, overheads and memory are ignored: they only add time, so leaving them out
 * keeps the bound valid (the same choice as op_lower_bound). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/plan.h"

static double layer_work(const op_layer_cost *c) { return c->f_ms + c->i_ms + c->w_ms; }

/* (*) for weights y: w[t * L + l] the per-type work, cnt[t] the devices of type t. */
static double dual_bound(const double *w, const int *cnt, const double *y, int T, int L, int M) {
    double den = 0, num = 0;
    for (int t = 0; t < T; t++) den += y[t] * cnt[t];
    if (!(den > 0)) return 0;
    for (int l = 0; l < L; l++) {
        double best = INFINITY;
        for (int t = 0; t < T; t++)
            if (cnt[t] > 0) best = fmin(best, y[t] * w[(size_t)t * L + l]);
        num += best;
    }
    return (double)M * num / den;
}

double op_lower_bound_mixed(const op_layer_cost *type_layers, int n_types, int n_layers,
                            const int *dev_type, int P, int M) {
    if (n_types <= 1 || !dev_type) return op_lower_bound(type_layers, n_layers, P, M);
    const int T = n_types, L = n_layers;
    int *cnt = op_xcalloc((size_t)T, sizeof *cnt);
    for (int d = 0; d < P; d++)
        if (dev_type[d] >= 0 && dev_type[d] < T) cnt[dev_type[d]]++;
    /* part 1: the fastest layer of each kind */
    op_layer_cost *fast = op_xmalloc(sizeof *fast * (size_t)L);
    double *w = op_xmalloc(sizeof(double) * (size_t)T * (size_t)L);
    for (int l = 0; l < L; l++) {
        int first = 1;
        for (int t = 0; t < T; t++) {
            const op_layer_cost *c = &type_layers[(size_t)t * L + l];
            w[(size_t)t * L + l] = layer_work(c);
            if (!cnt[t]) continue;
            if (first) {
                fast[l] = *c;
                first = 0;
            } else {
                fast[l].f_ms = fmin(fast[l].f_ms, c->f_ms);
                fast[l].i_ms = fmin(fast[l].i_ms, c->i_ms);
                fast[l].w_ms = fmin(fast[l].w_ms, c->w_ms);
            }
        }
        OP_ASSERT(!first, "no device of any type");
    }
    double best = op_lower_bound(fast, L, P, M);
    /* part 2: coordinate search over y, starting from y[t] = 1 (the fastest-everywhere work / P) */
    double *y = op_xmalloc(sizeof(double) * (size_t)T);
    for (int t = 0; t < T; t++) y[t] = 1;
    double cur = dual_bound(w, cnt, y, T, L, M);
    for (int round = 0; round < 8; round++) {
        double before = cur;
        for (int t = 1; t < T; t++) {
            if (!cnt[t]) continue;
            double keep = y[t], arg = keep;
            /* breakpoints: where y[t] w[t][l] meets the least other weighted time of layer l */
            for (int l = 0; l < L; l++) {
                double wt = w[(size_t)t * L + l];
                if (!(wt > 0)) continue;
                double other = INFINITY;
                for (int u = 0; u < T; u++)
                    if (u != t && cnt[u]) other = fmin(other, y[u] * w[(size_t)u * L + l]);
                if (!(other > 0) || !isfinite(other)) continue;
                y[t] = other / wt;
                double v = dual_bound(w, cnt, y, T, L, M);
                if (v > cur) {
                    cur = v;
                    arg = y[t];
                }
            }
            y[t] = arg;
        }
        if (!(cur > before * (1 + 1e-12))) break;
    }
    best = fmax(best, cur);
    free(y);
    free(w);
    free(fast);
    free(cnt);
    return best;
}

double op_problem_lower_bound(const op_problem *pr) {
    if (pr->n_types > 1 && pr->type_layers && pr->dev_type)
        return op_lower_bound_mixed(pr->type_layers, pr->n_types, pr->n_layers, pr->dev_type, pr->P,
                                    pr->M);
    return op_lower_bound(pr->layers, pr->n_layers, pr->P, pr->M);
}

double op_plan_lower_bound_mixed(const op_plan *p) {
    return op_lower_bound_mixed(p->type_layers, p->n_types, p->n_layers, p->dev_type, p->P, p->M);
}
