/* split_speed.c: the speed-proportional partition of a mixed cluster, what Metis-style
 * planners give: layers are cut so that every stage takes about the same time on the device
 * it is placed on, i.e. a faster device gets more layers.  Exact for the bottleneck up to the
 * greedy packing: bisection on the busiest stage's F+I+W time (as costed on its own device,
 * op_problem_dev_layers), each stage packed greedily with as many layers as fit while leaving
 * one layer for every later stage.  For one stage per device a second candidate also keeps
 * every stage within its device's memory (static bytes plus the activations of the
 * microbatches 1F1B holds in flight there), as Metis does. */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

/* Stage s's F+I+W of layers [a, b) on its device: pre[t] is the prefix sum of type t. */
static double stage_t(const double *pre, int L, int t, int a, int b) {
    return pre[(size_t)t * (size_t)(L + 1) + (size_t)b] - pre[(size_t)t * (size_t)(L + 1) + (size_t)a];
}

/* Memory of stages (optional): stage s may hold k[s] microbatches' activations on top of its
 * static bytes, within lim[s] (0 = none). */
typedef struct speed_mem {
    const int64_t *pst, *pact; /* [L+1] prefix sums of static and activation bytes */
    const double *k, *lim;     /* [S] */
} speed_mem;

static int mem_ok(const speed_mem *m, int s, int a, int b) {
    if (!m || m->lim[s] <= 0) return 1;
    double need = (double)(m->pst[b] - m->pst[a]) + m->k[s] * (double)(m->pact[b] - m->pact[a]);
    return need <= m->lim[s];
}

/* Greedy packing under bottleneck cap; fills first[] and returns 1 when every layer is
 * covered by the S stages. */
static int pack(const double *pre, int L, int S, const int *type, double cap, const speed_mem *m,
                int *first) {
    int l = 0;
    for (int s = 0; s < S; s++) {
        first[s] = l;
        int maxend = L - (S - s - 1);
        if (l >= maxend) return 0;
        int e = l + 1;
        if (stage_t(pre, L, type[s], l, e) > cap || !mem_ok(m, s, l, e)) return 0;
        while (e < maxend && stage_t(pre, L, type[s], l, e + 1) <= cap && mem_ok(m, s, l, e + 1)) e++;
        l = e;
    }
    first[S] = L;
    return l == L;
}

/* The split; m (optional) adds the memory of each stage.  Returns 0 when no split fits m. */
static int speed_split(const op_problem *pr, int S, const int *stage_dev, const speed_mem *m,
                       int *first) {
    int L = pr->n_layers, T = pr->n_types > 1 ? pr->n_types : 1;
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
    /* hi (the whole model on the slowest stage's device) packs unless memory forbids */
    int ok = pack(pre, L, S, type, hi * (1 + 1e-12), m, first);
    double lo = 0;
    for (int it = 0; ok && it < 100 && hi - lo > 1e-9 * (hi > 1 ? hi : 1); it++) {
        double mid = 0.5 * (lo + hi);
        if (pack(pre, L, S, type, mid, m, first)) hi = mid;
        else lo = mid;
    }
    if (ok) ok = pack(pre, L, S, type, hi * (1 + 1e-12), m, first);
    free(pre);
    free(type);
    return ok;
}

int op_sched_speed_split(const op_problem *pr, int S, const int *stage_dev, int *first,
                         op_err *err) {
    if (S < 1 || pr->n_layers < S)
        return op_errf(err, OP_EINVAL, "cannot split %d layers into %d non-empty stages",
                       pr->n_layers, S);
    /* the placement is the caller's: a device outside 0..P-1 indexes no device type */
    for (int s = 0; s < S; s++)
        if (stage_dev[s] < 0 || stage_dev[s] >= pr->P)
            return op_errf(err, OP_EINVAL, "stage %d is placed on device %d, not in 0..%d", s,
                           stage_dev[s], pr->P - 1);
    if (!speed_split(pr, S, stage_dev, NULL, first)) {
        /* the greedy's one-layer reserve can defeat it on odd costs: fall back to even */
        for (int s = 0; s <= S; s++) first[s] = (int)((long)s * pr->n_layers / S);
    }
    return OP_OK;
}

static int add(const op_problem *pr, const int *first, int S, const char *desc,
               sched_split_list *out) {
    op_err e = {0};
    if (sched_split_add_explicit(pr, first, S, out, &e) != OP_OK) return 0;
    snprintf(out->v[out->n - 1].desc, sizeof out->v[out->n - 1].desc, "%s", desc);
    return 1;
}

int sched_split_add_speed(const op_problem *pr, int S, sched_place pl, sched_split_list *out) {
    if (pr->n_types <= 1 || !pr->type_layers || !pr->dev_type || pr->n_layers < S) return 0;
    int L = pr->n_layers, P = pr->P;
    int *dev = op_xcalloc((size_t)S, sizeof *dev), *first = op_xcalloc((size_t)S + 1, sizeof *first);
    for (int s = 0; s < S; s++) dev[s] = sched_stage_dev(pl, P, s);
    op_err e = {0};
    int n = 0;
    if (op_sched_speed_split(pr, S, dev, first, &e) == OP_OK)
        n += add(pr, first, S, "speed-proportional", out);
    /* one stage per device (1F1B, ZB-H1/H2): a Metis-style planner also keeps each stage
     * within its device's memory, stage s holding P - s microbatches in flight */
    int limited = 0;
    for (int d = 0; d < P; d++) limited |= op_problem_dev_mem_limit(pr, d) > 0;
    if (limited && S == P && pl == SCHED_PLACE_LOOP) {
        int64_t *pst = op_xcalloc((size_t)L + 1, sizeof *pst), *pact = op_xcalloc((size_t)L + 1, sizeof *pact);
        double *k = op_xcalloc((size_t)S, sizeof *k), *lim = op_xcalloc((size_t)S, sizeof *lim);
        for (int l = 0; l < L; l++) {
            pst[l + 1] = pst[l] + pr->layers[l].static_bytes;
            pact[l + 1] = pact[l] + pr->layers[l].act_bytes;
        }
        for (int s = 0; s < S; s++) {
            k[s] = P - s < pr->M ? P - s : pr->M;
            lim[s] = op_problem_dev_mem_limit(pr, dev[s]);
        }
        speed_mem m = {pst, pact, k, lim};
        if (speed_split(pr, S, dev, &m, first)) n += add(pr, first, S, "speed-proportional+memory", out);
        free(pst);
        free(pact);
        free(k);
        free(lim);
    }
    free(dev);
    free(first);
    return n;
}
