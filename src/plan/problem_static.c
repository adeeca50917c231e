/* problem_static.c: how much static memory (weights, gradients, optimizer state) every plan must
 * hold, checked before any tuning: when it alone cannot fit, no recomputation, offload or
 * schedule helps.
 *
 * Uniform cluster (op_problem_static_floor): some device holds at least total / P, and the device
 * holding the heaviest layer holds all of it.
 *
 * Mixed cluster (op_problem_static_need), each device d with its own type's costs and its own
 * limit lim_d.  Let s_l = min over the types present of layer l's static bytes (a layer costs at
 * least that wherever it sits).  Any plan puts every layer on one device, so for the factor
 * a = max_d held_d / lim_d every plan has:
 *   - sum_l s_l <= sum_d held_d <= a x sum_d lim_d        (everything sits somewhere), and
 *   - layer l alone sits on some d: static_{type(d)}(l) <= held_d <= a x lim_d, so
 *     a >= min_d static_{type(d)}(l) / lim_d              (its best device).
 * The largest of these is the need: above 1, no plan fits static memory.  On one type with one
 * limit it is op_problem_static_floor / limit.  A device without a limit (0) holds anything. */
#include <math.h>

#include "octopipe/plan.h"

double op_problem_static_floor(const op_layer_cost *l, int n, int P) {
    double tot = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        tot += (double)l[i].static_bytes;
        if ((double)l[i].static_bytes > mx) mx = (double)l[i].static_bytes;
    }
    return tot / P > mx ? tot / P : mx;
}

/* Static bytes of layer l on device d's type. */
static double stat_on(const op_problem *pr, int d, int l) {
    return (double)op_problem_dev_layers(pr, d)[l].static_bytes;
}

double op_problem_static_need(const op_problem *pr, int *worst_layer) {
    double need = 0, sum_s = 0, sum_lim = 0;
    int unlimited = 0;
    if (worst_layer) *worst_layer = -1;
    for (int d = 0; d < pr->P; d++) {
        double lim = op_problem_dev_mem_limit(pr, d);
        if (lim > 0) sum_lim += lim;
        else unlimited = 1;
    }
    if (unlimited) return 0;
    for (int l = 0; l < pr->n_layers; l++) {
        double s = INFINITY, best = INFINITY;
        for (int d = 0; d < pr->P; d++) {
            double x = stat_on(pr, d, l);
            s = fmin(s, x);
            best = fmin(best, x / op_problem_dev_mem_limit(pr, d));
        }
        sum_s += s;
        if (best > need) {
            need = best;
            if (worst_layer) *worst_layer = l;
        }
    }
    if (sum_s / sum_lim > need) {
        need = sum_s / sum_lim;
        if (worst_layer) *worst_layer = -1;
    }
    return need;
}

double op_problem_static_floor_any(const op_problem *pr) {
    double tot = 0, mx = 0;
    for (int l = 0; l < pr->n_layers; l++) {
        double s = INFINITY;
        for (int d = 0; d < pr->P; d++) s = fmin(s, stat_on(pr, d, l));
        tot += s;
        mx = fmax(mx, s);
    }
    return fmax(tot / pr->P, mx);
}
