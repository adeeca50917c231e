/* tune_seed.c: the tuner's problem precomputation, candidates, and seed placements and
 * partitions (what each restart of the search starts from). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"

void tn_prob_init(tn_prob *pb, const op_problem *pr) {
    memset(pb, 0, sizeof *pb);
    pb->pr = pr;
    pb->L = pr->n_layers;
    pb->P = pr->P;
    pb->M = pr->M;
    size_t n = (size_t)pb->L + 1;
    pb->pf = op_xcalloc(n, sizeof(double));
    pb->pi = op_xcalloc(n, sizeof(double));
    pb->pw = op_xcalloc(n, sizeof(double));
    pb->pact = op_xcalloc(n, sizeof(int64_t));
    pb->pactw = op_xcalloc(n, sizeof(int64_t));
    pb->pstat = op_xcalloc(n, sizeof(int64_t));
    pb->pacti = op_xcalloc(n, sizeof(int64_t));
    pb->psel = op_xcalloc(n, sizeof(int64_t));
    pb->pfsel = op_xcalloc(n, sizeof(double));
    double tl = 1e300;
    for (int l = 0; l < pb->L; l++) {
        const op_layer_cost *c = &pr->layers[l];
        pb->pf[l + 1] = pb->pf[l] + c->f_ms;
        pb->pi[l + 1] = pb->pi[l] + c->i_ms;
        pb->pw[l + 1] = pb->pw[l] + c->w_ms;
        pb->pact[l + 1] = pb->pact[l] + c->act_bytes;
        pb->pactw[l + 1] = pb->pactw[l] + c->act_w_bytes;
        pb->pstat[l + 1] = pb->pstat[l] + c->static_bytes;
        pb->pacti[l + 1] = pb->pacti[l] + c->act_i_bytes;
        int64_t sel = op_layer_stash_bytes(c, OP_ACT_SELECTIVE);
        pb->psel[l + 1] = pb->psel[l] + sel;
        pb->pfsel[l + 1] = pb->pfsel[l] + op_layer_recompute_ms(c, OP_ACT_SELECTIVE);
        double w = c->f_ms + c->i_ms + c->w_ms;
        if (w < tl) tl = w;
    }
    /* stage 0's input under full: the token ids (op_stage_in_bytes' rule) */
    double ids = 4.0 * ceil(pr->tokens_per_mb);
    pb->in0 = pr->tokens_per_mb > 0 ? (ids < OP_MAX_BYTES ? ((int64_t)ids + 15) / 16 * 16
                                                          : (int64_t)OP_MAX_BYTES)
                                    : pr->layers[0].out_bytes;
    pb->lb = op_problem_lower_bound(pr); /* over each device's own speed on mixed clusters */
    pb->ovh = pr->op_overhead_ms;
    pb->mem_limit = pr->mem_limit_bytes;
    pb->t_layer = tl;
    tn_mixed_init(pb); /* mixed clusters: per-type costs, per-device limits */
}

void tn_prob_free(tn_prob *pb) {
    tn_mixed_free(pb);
    free(pb->pf);
    free(pb->pi);
    free(pb->pw);
    free(pb->pact);
    free(pb->pactw);
    free(pb->pstat);
    free(pb->pacti);
    free(pb->psel);
    free(pb->pfsel);
    memset(pb, 0, sizeof *pb);
}

void tn_cand_alloc(tn_cand *c, const tn_prob *pb) {
    memset(c, 0, sizeof *c);
    c->first = op_xcalloc((size_t)pb->L + 1, sizeof(int));
    c->dev = op_xcalloc((size_t)pb->L, sizeof(int));
    c->cap = op_xcalloc((size_t)pb->P, sizeof(int));
    c->wlim = op_xcalloc((size_t)pb->P, sizeof(int));
    c->pol = op_xcalloc((size_t)pb->L, sizeof(uint8_t));
}

void tn_cand_free(tn_cand *c) {
    free(c->first);
    free(c->dev);
    free(c->cap);
    free(c->wlim);
    free(c->pol);
    memset(c, 0, sizeof *c);
}

void tn_cand_copy(tn_cand *dst, const tn_cand *src, const tn_prob *pb) {
    dst->S = src->S;
    dst->split = src->split;
    dst->fmode = src->fmode;
    dst->ffirst = src->ffirst;
    dst->look = src->look;
    dst->imode = src->imode;
    dst->memres = src->memres;
    memcpy(dst->first, src->first, sizeof(int) * (size_t)(src->S + 1));
    memcpy(dst->dev, src->dev, sizeof(int) * (size_t)src->S);
    memcpy(dst->cap, src->cap, sizeof(int) * (size_t)pb->P);
    memcpy(dst->wlim, src->wlim, sizeof(int) * (size_t)pb->P);
    memcpy(dst->pol, src->pol, (size_t)src->S);
}

void tn_place_loop(tn_cand *c, int P, int S) {
    c->S = S;
    for (int s = 0; s < S; s++) c->dev[s] = s % P;
}

void tn_place_v(tn_cand *c, int P, int S) {
    c->S = S;
    for (int s = 0; s < S; s++) {
        int round = s / P, pos = s % P;
        c->dev[s] = round % 2 == 0 ? pos : P - 1 - pos;
    }
}

const char *tn_shape_of(const int *dev, int S, int P) {
    int loop = S % P == 0, v = S % P == 0;
    for (int s = 0; s < S; s++) {
        int round = s / P, pos = s % P;
        if (dev[s] != pos) loop = 0;
        if (dev[s] != (round % 2 == 0 ? pos : P - 1 - pos)) v = 0;
    }
    if (loop) return S == P ? "seq" : "loop";
    if (v) return "v";
    return "irregular";
}

const char *tn_shape(const tn_cand *c, int P) { return tn_shape_of(c->dev, c->S, P); }

int tn_shape_allowed(const char *shape, op_tune_placement mode) {
    if (mode == OP_TUNE_PLACE_LOOP) return !strcmp(shape, "loop") || !strcmp(shape, "seq");
    if (mode == OP_TUNE_PLACE_V) return !strcmp(shape, "v");
    return 1;
}

/* One greedy pass: cut stage s when its work is closest to the device's remaining budget
 * shared over its remaining stages.  target[d] is the work device d should end up with. */
static void greedy_cut(const tn_prob *pb, tn_cand *c, const double *target, double *load,
                       int *left, double front, const int *keep) {
    int S = c->S, L = pb->L, P = pb->P;
    for (int d = 0; d < P; d++) load[d] = 0, left[d] = 0;
    for (int s = 0; s < S; s++) left[c->dev[s]]++;
    int l = 0;
    for (int s = 0; s < S; s++) {
        int d = c->dev[s];
        c->first[s] = l;
        int maxend = L - (S - s - 1); /* leave one layer per later stage */
        if (s == S - 1) {
            l = L;
        } else {
            double budget = (target[d] - load[d]) / left[d];
            /* front > 0: a device's first stage gets that share of its work, so the pipeline
             * fills fast (short warm-up) and the later stages carry the rest */
            if (front > 0 && load[d] == 0 && left[d] >= 2) budget = front * target[d];
            int e = l + 1;
            if (keep && load[d] == 0 && left[d] >= 2) { /* first stage keeps its layer count */
                e = l + (keep[s + 1] - keep[s]);
                if (e > maxend) e = maxend;
            } else
            while (e < maxend) {
                double cur = tn_work(pb, l, e), nxt = tn_work(pb, l, e + 1);
                if (fabs(nxt - budget) < fabs(cur - budget)) e++;
                else break;
            }
            l = e;
        }
        load[d] += tn_work(pb, c->first[s], l);
        left[d]--;
    }
    c->first[S] = L;
}

void tn_partition_targets(const tn_prob *pb, tn_cand *c, const double *want, double front) {
    int P = pb->P, S = c->S;
    int *keep = NULL;
    if (front < 0) { /* keep each device's first stage as it is (a short ramp stays short) */
        keep = op_xmalloc(sizeof(int) * (size_t)(S + 1));
        memcpy(keep, c->first, sizeof(int) * (size_t)(S + 1));
        front = 0;
    }
    double *target = op_xcalloc((size_t)P, sizeof(double));
    double *load = op_xcalloc((size_t)P, sizeof(double));
    int *left = op_xcalloc((size_t)P, sizeof(int));
    int *best = op_xcalloc((size_t)S + 1, sizeof(int));
    double bestdev = 1e300;
    memcpy(target, want, sizeof(double) * (size_t)P);
    /* Re-aim the targets: a device that ended heavy (it holds the head, say) gets a smaller
     * budget for its earlier stages next pass. */
    for (int it = 0; it < 12; it++) {
        greedy_cut(pb, c, target, load, left, front, keep);
        double dev = 0;
        for (int d = 0; d < P; d++) dev = fmax(dev, load[d] - want[d]);
        if (dev < bestdev - 1e-12) {
            bestdev = dev;
            memcpy(best, c->first, sizeof(int) * (size_t)(S + 1));
        }
        for (int d = 0; d < P; d++)
            if (target[d] > 0) target[d] -= 0.7 * (load[d] - want[d]);
    }
    memcpy(c->first, best, sizeof(int) * (size_t)(S + 1));
    free(keep);
    free(target);
    free(load);
    free(left);
    free(best);
}

void tn_partition_balanced(const tn_prob *pb, tn_cand *c, double front) {
    int P = pb->P, used = 0;
    int *cnt = op_xcalloc((size_t)P, sizeof(int));
    double *want = op_xcalloc((size_t)P, sizeof(double));
    for (int s = 0; s < c->S; s++) cnt[c->dev[s]]++;
    for (int d = 0; d < P; d++) used += cnt[d] > 0;
    double mean = tn_work(pb, 0, pb->L) / (used ? used : 1);
    for (int d = 0; d < P; d++) want[d] = cnt[d] ? mean : 0;
    tn_partition_targets(pb, c, want, front);
    free(cnt);
    free(want);
}
