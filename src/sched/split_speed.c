/* split_speed.c: the speed-proportional partition of a mixed cluster, what Metis-style
 * planners give: layers are cut so that every stage takes about the same time on the device
 * it is placed on, i.e. a faster device gets more layers.  Exact for the bottleneck up to the
 * greedy packing: bisection on the busiest stage's F+I+W time (as costed on its own device,
 * op_problem_dev_layers), each stage packed greedily with as many layers as fit while leaving
 * one layer for every later stage. */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

/* Stage s's F+I+W of layers [a, b) on its device: pre[t] is the prefix sum of type t. */
static double stage_t(const double *pre, int L, int t, int a, int b) {
    return pre[(size_t)t * (size_t)(L + 1) + (size_t)b] - pre[(size_t)t * (size_t)(L + 1) + (size_t)a];
}

/* Greedy packing under bottleneck cap; fills first[] and returns 1 when every layer is
 * covered by the S stages. */
static int pack(const double *pre, int L, int S, const int *type, double cap, int *first) {
    int l = 0;
    for (int s = 0; s < S; s++) {
        first[s] = l;
        int maxend = L - (S - s - 1);
        if (l >= maxend) return 0;
        int e = l + 1;
        if (stage_t(pre, L, type[s], l, e) > cap) return 0;
        while (e < maxend && stage_t(pre, L, type[s], l, e + 1) <= cap) e++;
        l = e;
    }
    first[S] = L;
    return l == L;
}

int op_sched_speed_split(const op_problem *pr, int S, const int *stage_dev, int *first,
                         op_err *err) {
    int L = pr->n_layers, T = pr->n_types > 1 ? pr->n_types : 1;
    if (S < 1 || L < S)
        return op_errf(err, OP_EINVAL, "cannot split %d layers into %d non-empty stages", L, S);
    /* per-type prefix sums of F+I+W: [T][L+1] */
    double *pre = op_xcalloc((size_t)T * (size_t)(L + 1), sizeof *pre);
    int *type = op_xcalloc((size_t)S, sizeof *type);
    for (int t = 0; t < T; t++) {
        const op_layer_cost *row = pr->n_types > 1 ? pr->type_layers + (size_t)t * (size_t)L : pr->layers;
        double *p = pre + (size_t)t * (size_t)(L + 1);
        for (int l = 0; l < L; l++) p[l + 1] = p[l] + row[l].f_ms + row[l].i_ms + row[l].w_ms;
    }
    double hi = 0;
    for (int s = 0; s < S; s++) {
        OP_ASSERT(stage_dev[s] >= 0 && stage_dev[s] < pr->P, "stage %d on device %d", s, stage_dev[s]);
        type[s] = pr->n_types > 1 && pr->dev_type ? pr->dev_type[stage_dev[s]] : 0;
        double all = stage_t(pre, L, type[s], 0, L);
        if (all > hi) hi = all;
    }
    /* hi (the whole model on the slowest stage's device) always packs */
    double lo = 0;
    for (int it = 0; it < 100 && hi - lo > 1e-9 * (hi > 1 ? hi : 1); it++) {
        double mid = 0.5 * (lo + hi);
        if (pack(pre, L, S, type, mid, first)) hi = mid;
        else lo = mid;
    }
    int ok = pack(pre, L, S, type, hi * (1 + 1e-12), first);
    if (!ok) { /* the greedy's one-layer reserve can defeat it on odd costs: fall back to even */
        for (int s = 0; s <= S; s++) first[s] = (int)((long)s * L / S);
    }
    free(pre);
    free(type);
    return OP_OK;
}

int sched_split_add_speed(const op_problem *pr, int S, sched_place pl, sched_split_list *out) {
    if (pr->n_types <= 1 || !pr->type_layers || !pr->dev_type || pr->n_layers < S) return 0;
    int *dev = op_xcalloc((size_t)S, sizeof *dev), *first = op_xcalloc((size_t)S + 1, sizeof *first);
    for (int s = 0; s < S; s++) dev[s] = sched_stage_dev(pl, pr->P, s);
    op_err e = {0};
    int n = 0;
    if (op_sched_speed_split(pr, S, dev, first, &e) == OP_OK &&
        sched_split_add_explicit(pr, first, S, out, &e) == OP_OK) {
        snprintf(out->v[out->n - 1].desc, sizeof out->v[out->n - 1].desc, "speed-proportional");
        n = 1;
    }
    free(dev);
    free(first);
    return n;
}
