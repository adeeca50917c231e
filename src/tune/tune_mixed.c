/* tune_mixed.c: the tuner on mixed clusters (devices of several GPU types, per-device memory
 * limits, nodes joined by a slower fabric).
 *
 * Costs: a stage's F, I, W durations are those of the device it is placed on, so the engine's
 * uniform per-stage sums (prefix sums of row 0) are replaced, stage by stage, by the prefix
 * sums of the stage's device type, its policy's recompute included (selective's f_sel or
 * full's F on that type, before I, as the simulator times it), so the per-stage policy search
 * (tune_mem.c) runs on mixed clusters too.  Memory: each device is checked against its own
 * limit (tn_dev_lim).
 * Seeds: the device order of the pipeline decides which stages (the head, the embedding, the
 * middle) land on fast devices and which boundaries cross the slow inter-node link, so the
 * seeds try a few orders (as given; nodes reversed; fast devices first or last inside each
 * node) with sequential, looped and V placements over them, and the chain whose first device
 * also takes a last stage (embedding and head on the fastest device), each cut by the speed-proportional
 * split (op_sched_speed_split: every stage about equally long on its own device).  The local
 * search then moves stages and layers as usual, the engine scoring every move with per-device
 * costs.  Layers two of which fill a device get their own seeds (tune_mixed_heavy.c). */
#include <stdlib.h>
#include <string.h>

#include "octopipe/sched.h"
#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

struct tn_mixed {
    int T;                /* device types */
    const int *dev_type;  /* [P] */
    double *pf, *pi, *pw; /* [T * (L+1)] prefix sums of F, I, W per type */
    double *pfsel;        /* [T * (L+1)] prefix sums of f_sel_ms (selective's recompute) */
};

void tn_mixed_init(tn_prob *pb) {
    const op_problem *pr = pb->pr;
    int P = pb->P, L = pb->L;
    if (pr->dev_mem_limit) {
        pb->dev_lim = op_xcalloc((size_t)P, sizeof(double));
        for (int d = 0; d < P; d++) pb->dev_lim[d] = op_problem_dev_mem_limit(pr, d);
    }
    if (pr->n_types <= 1 || !pr->type_layers || !pr->dev_type) return;
    tn_mixed *mx = op_xcalloc(1, sizeof *mx);
    mx->T = pr->n_types;
    mx->dev_type = pr->dev_type;
    size_t n = (size_t)mx->T * (size_t)(L + 1);
    mx->pf = op_xcalloc(n, sizeof(double));
    mx->pi = op_xcalloc(n, sizeof(double));
    mx->pw = op_xcalloc(n, sizeof(double));
    mx->pfsel = op_xcalloc(n, sizeof(double));
    for (int t = 0; t < mx->T; t++) {
        const op_layer_cost *row = pr->type_layers + (size_t)t * (size_t)L;
        size_t o = (size_t)t * (size_t)(L + 1);
        for (int l = 0; l < L; l++) {
            mx->pf[o + l + 1] = mx->pf[o + l] + row[l].f_ms;
            mx->pi[o + l + 1] = mx->pi[o + l] + row[l].i_ms;
            mx->pw[o + l + 1] = mx->pw[o + l] + row[l].w_ms;
            mx->pfsel[o + l + 1] = mx->pfsel[o + l] + op_layer_recompute_ms(&row[l], OP_ACT_SELECTIVE);
        }
    }
    pb->mx = mx;
}

void tn_mixed_free(tn_prob *pb) {
    if (pb->mx) {
        free(pb->mx->pf);
        free(pb->mx->pi);
        free(pb->mx->pw);
        free(pb->mx->pfsel);
        free(pb->mx);
    }
    free(pb->dev_lim);
    pb->mx = NULL;
    pb->dev_lim = NULL;
}

void tn_mixed_stage_times(const tn_prob *pb, const tn_cand *c, double *tf, double *ti, double *tw) {
    const tn_mixed *mx = pb->mx;
    for (int s = 0; s < c->S; s++) {
        size_t o = (size_t)mx->dev_type[c->dev[s]] * (size_t)(pb->L + 1);
        int a = c->first[s], b = c->first[s + 1];
        double f = mx->pf[o + b] - mx->pf[o + a], i = mx->pi[o + b] - mx->pi[o + a];
        double w = mx->pw[o + b] - mx->pw[o + a];
        /* the policy's recompute runs before I on the stage's own device (plan.h), as the
         * engine's uniform setup adds row 0's */
        if (c->pol[s] == OP_ACT_FULL) i += f;
        else if (c->pol[s] == OP_ACT_SELECTIVE) i += mx->pfsel[o + b] - mx->pfsel[o + a];
        tf[s] = f + pb->ovh;
        if (c->split) {
            ti[s] = i + pb->ovh;
            tw[s] = w + pb->ovh;
        } else {
            ti[s] = i + w + pb->ovh;
            tw[s] = 0;
        }
    }
}

double tn_mixed_work(const tn_prob *pb, int d, int a, int b) {
    const tn_mixed *mx = pb->mx;
    size_t o = (size_t)mx->dev_type[d] * (size_t)(pb->L + 1);
    return (mx->pf[o + b] - mx->pf[o + a]) + (mx->pi[o + b] - mx->pi[o + a]) + (mx->pw[o + b] - mx->pw[o + a]);
}

double tn_mixed_fwd(const tn_prob *pb, int d, int a, int b) {
    size_t o = (size_t)pb->mx->dev_type[d] * (size_t)(pb->L + 1);
    return pb->mx->pf[o + b] - pb->mx->pf[o + a];
}

/* Relative time of device d: its type's total F+I+W over row 0's (smaller = faster). */
static double dev_time(const tn_prob *pb, int d) {
    const tn_mixed *mx = pb->mx;
    size_t o = (size_t)mx->dev_type[d] * (size_t)(pb->L + 1), L = (size_t)pb->L;
    return mx->pf[o + L] + mx->pi[o + L] + mx->pw[o + L];
}

static int node_of(const tn_prob *pb, int d) {
    int n = pb->pr->comm.nodes_of;
    return n > 0 ? d / n : 0;
}

/* Device orders: 0 as given, 1 nodes reversed, 2 fastest first inside each node (nodes as
 * given), 3 slowest first inside each node, 4 nodes reversed with fastest first.  A stable
 * insertion sort on (node rank, speed rank). */
static void device_order(const tn_prob *pb, int kind, int *ord) {
    int P = pb->P, nn = node_of(pb, P - 1) + 1;
    double *key = op_xcalloc((size_t)P, sizeof(double));
    double tmax = 0;
    for (int d = 0; d < P; d++) tmax = dev_time(pb, d) > tmax ? dev_time(pb, d) : tmax;
    for (int d = 0; d < P; d++) {
        int node = node_of(pb, d);
        if (kind == 1 || kind == 4) node = nn - 1 - node;
        double sp = dev_time(pb, d) / (tmax > 0 ? tmax : 1); /* in (0, 1] */
        key[d] = node * 4.0 + (kind == 2 || kind == 4 ? sp : kind == 3 ? 2 - sp : 0);
        ord[d] = d;
    }
    for (int i = 1; i < P; i++)
        for (int j = i; j > 0 && key[ord[j]] < key[ord[j - 1]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    free(key);
}

void tn_mixed_seeds(tn_search *st, void (*offer)(tn_search *, void *, tn_cand *, const char *),
                    void *ctx) {
    const tn_prob *pb = st->pb;
    if (!pb->mx) return;
    int P = pb->P, L = pb->L;
    int *ord = op_xcalloc((size_t)P, sizeof(int)), *prev = op_xcalloc((size_t)P * 5, sizeof(int));
    tn_cand c;
    tn_cand_alloc(&c, pb);
    int vmax = L / P < 4 ? L / P : 4;
    /* --placement loop or v means stage s on device s mod P (or the V over 0..P-1): only the
     * given order keeps that promise (Megatron's layout export relies on it) */
    int kinds = st->mode == OP_TUNE_PLACE_ANY ? 5 : 1;
    for (int kind = 0; kind < kinds && !tn_out_of_budget(st); kind++) {
        device_order(pb, kind, ord);
        int dup = 0; /* orders that coincide (one type per node) are seeded once */
        for (int k = 0; k < kind && !dup; k++) dup = !memcmp(prev + (size_t)k * P, ord, sizeof(int) * (size_t)P);
        memcpy(prev + (size_t)kind * P, ord, sizeof(int) * (size_t)P);
        if (dup) continue;
        for (int v = 1; v <= vmax; v++) {
            for (int shape = 0; shape < 3; shape++) {
                /* 0: sequential / looped; 1: V (two stages per device); 2: the chain with the
                 * order's first device also holding a last stage (the embedding and the head
                 * both on the fastest device) */
                int S = shape == 2 ? P + 1 : v * P;
                if (shape == 1 && v != 2) continue;
                if (shape == 2 && (v != 1 || L < P + 1 || st->mode != OP_TUNE_PLACE_ANY)) continue;
                if (shape == 0 && st->mode == OP_TUNE_PLACE_V) continue;
                if (shape == 1 && st->mode == OP_TUNE_PLACE_LOOP) continue;
                c.S = S;
                for (int s = 0; s < S; s++)
                    c.dev[s] = ord[shape != 1 ? s % P : (s < P ? s : 2 * P - 1 - s)];
                op_err e = {0};
                if (op_sched_speed_split(pb->pr, S, c.dev, c.first, &e) != OP_OK) continue;
                offer(st, ctx, &c, shape == 1 ? "v" : shape == 2 ? "irregular" : v == 1 ? "seq" : "loop");
            }
        }
    }
    tn_cand_free(&c);
    free(ord);
    free(prev);
    tn_mixed_heavy_seeds(st, offer, ctx); /* layers two of which fill a device */
}
