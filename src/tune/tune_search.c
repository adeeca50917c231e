/* tune_search.c: the bubble-guided local search (the paper's Algorithm 1, extended).
 *
 * Each round reads the simulated bubbles of the current plan per device:
 *   bubble[d] = makespan - busy[d];  boundary[d] = leading + trailing idle;  residual = rest.
 * If the bubbles differ across devices by more than one layer's work (t_layer x M), the
 * partition phase goes first (move layers across stage boundaries toward idle devices); else
 * if warm-up/cool-down idle dominates, the placement phase (move or swap stages, split or merge
 * stages); else the schedule phase (warm-up depth per device, W deferral, F order, fused B).
 * Unlike the paper, a phase without an improving move falls through to the others, and a
 * stalled search is kicked by a few seeded random moves (iterated local search), so it does not
 * stop in one phase.  Only strict simulated improvements are accepted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"

enum { MV_SHIFT, MV_MOVE, MV_SWAP, MV_SPLIT, MV_MERGE, MV_CAP, MV_CAPALL, MV_WLIM, MV_FMODE,
       MV_SPLITMODE, MV_FFIRST, MV_LOOK, MV_REBAL, MV_IMODE, MV_LPT, MV_PAIR, MV_RAMP, MV_POL,
       MV_PSPLIT, MV_MEMRES };

typedef struct tn_move {
    int type, a, b;
    double prio;
} tn_move;

typedef struct tn_moves {
    tn_move *v;
    int n, cap;
} tn_moves;

static void mv_add(tn_moves *m, int type, int a, int b, double prio, op_rng *rng) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->v = op_xrealloc(m->v, sizeof(tn_move) * (size_t)m->cap);
    }
    /* a tiny seeded jitter breaks ties differently per seed */
    m->v[m->n++] = (tn_move){type, a, b, prio + 1e-9 * op_rng_uniform(rng)};
}

static int mv_cmp(const void *x, const void *y) {
    double a = ((const tn_move *)x)->prio, b = ((const tn_move *)y)->prio;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Boundary shifts of a pair move: code 8 j + i, i = 0..3 for k = -2, -1, +1, +2. */
static const int PAIR_K[4] = {-2, -1, 1, 2};

/* Stage j's first layer moves by k (MV_SHIFT); 0 if a stage would become empty. */
static int shift(tn_cand *c, int j, int k) {
    int nf = c->first[j] + k;
    if (j <= 0 || j >= c->S || nf <= c->first[j - 1] || nf >= c->first[j + 1]) return 0;
    c->first[j] = nf;
    return 1;
}

/* Applies mv to c (a copy of the current plan).  Returns 0 if the move is not legal here. */
static int mv_apply(const tn_search *st, tn_cand *c, const tn_move *mv) {
    const tn_prob *pb = st->pb;
    int S = c->S, P = pb->P;
    switch (mv->type) {
    case MV_SHIFT:
        return shift(c, mv->a, mv->b);
    case MV_PAIR:
        return shift(c, mv->a / 8, PAIR_K[mv->a % 8]) && shift(c, mv->b / 8, PAIR_K[mv->b % 8]);
    case MV_MOVE:
        if (c->dev[mv->a] == mv->b) return 0;
        c->dev[mv->a] = mv->b;
        return 1;
    case MV_SWAP: {
        if (c->dev[mv->a] == c->dev[mv->b]) return 0;
        int t = c->dev[mv->a];
        c->dev[mv->a] = c->dev[mv->b];
        c->dev[mv->b] = t;
        return 1;
    }
    case MV_SPLIT: { /* split stage a at its work midpoint; second half on device b */
        int s = mv->a, lo = c->first[s], hi = c->first[s + 1];
        if (hi - lo < 2 || S >= pb->L) return 0;
        double half = tn_work(pb, lo, hi) / 2;
        int cut = lo + 1;
        while (cut + 1 < hi && tn_work(pb, lo, cut + 1) <= half) cut++;
        memmove(&c->first[s + 2], &c->first[s + 1], sizeof(int) * (size_t)(S - s));
        memmove(&c->dev[s + 2], &c->dev[s + 1], sizeof(int) * (size_t)(S - s - 1));
        memmove(&c->pol[s + 2], &c->pol[s + 1], (size_t)(S - s - 1)); /* both halves keep s's */
        c->pol[s + 1] = c->pol[s];
        c->first[s + 1] = cut;
        c->dev[s + 1] = mv->b;
        c->S = S + 1;
        return 1;
    }
    case MV_MERGE: { /* merge stages a and a+1 onto device b (one of theirs) */
        int s = mv->a;
        if (s + 1 >= S) return 0;
        c->dev[s] = mv->b;
        memmove(&c->first[s + 1], &c->first[s + 2], sizeof(int) * (size_t)(S - s - 1));
        memmove(&c->dev[s + 1], &c->dev[s + 2], sizeof(int) * (size_t)(S - s - 2));
        if (c->pol[s + 1] > c->pol[s]) c->pol[s] = c->pol[s + 1]; /* the lighter stash of the two */
        memmove(&c->pol[s + 1], &c->pol[s + 2], (size_t)(S - s - 2));
        c->S = S - 1;
        return 1;
    }
    case MV_CAP: {
        int v = c->cap[mv->a] > 0 ? c->cap[mv->a] + mv->b : st->cr.max_inflight[mv->a] + mv->b;
        if (v < 1 || v == c->cap[mv->a]) return 0;
        c->cap[mv->a] = v;
        return 1;
    }
    case MV_CAPALL: {
        int changed = 0;
        for (int d = 0; d < P; d++) {
            int v = c->cap[d] > 0 ? c->cap[d] + mv->b : st->cr.max_inflight[d] + mv->b;
            if (v >= 1 && v != c->cap[d]) c->cap[d] = v, changed = 1;
        }
        return changed;
    }
    case MV_WLIM:
        if (c->wlim[mv->a] == mv->b || !c->split) return 0;
        c->wlim[mv->a] = mv->b;
        return 1;
    case MV_FMODE:
        if (c->fmode == mv->b) return 0;
        c->fmode = mv->b;
        return 1;
    case MV_REBAL: { /* re-cut all stages: move work from devices with little idle to devices
                      * with much (warm-up/cool-down idle cannot be removed by balancing busy) */
        double T = st->cr.makespan, mean = 0, alpha = (mv->b % 16) / 4.0;
        double *want = op_xcalloc((size_t)P, sizeof(double));
        for (int d = 0; d < P; d++) mean += T - st->cr.busy[d];
        mean /= P;
        int *old = op_xmalloc(sizeof(int) * (size_t)(S + 1));
        memcpy(old, c->first, sizeof(int) * (size_t)(S + 1));
        for (int d = 0; d < P; d++) {
            double idle = T - st->cr.busy[d];
            want[d] = fmax(0, st->cr.busy[d] + alpha * (idle - mean)) / pb->M;
        }
        tn_partition_targets(pb, c, want, mv->b >= 16 ? -1 : 0); /* b >= 16: keep the ramp */
        int same = !memcmp(old, c->first, sizeof(int) * (size_t)(S + 1));
        free(old);
        free(want);
        return !same;
    }
    case MV_RAMP: { /* every device's first stage gets b layers (a short ramp: each device
                     * starts after a short forward chain), the rest re-cut for equal work */
        int *cnt = op_xcalloc((size_t)P, sizeof(int)), *seen = op_xcalloc((size_t)P, sizeof(int));
        int *old = op_xmalloc(sizeof(int) * (size_t)(S + 1)), fixed = 0, nfree = 0;
        memcpy(old, c->first, sizeof(int) * (size_t)(S + 1));
        for (int s2 = 0; s2 < S; s2++) cnt[c->dev[s2]]++;
        for (int s2 = 0; s2 < S; s2++) { /* stages that are a device's first of several */
            int d = c->dev[s2], ramp = !seen[d] && cnt[d] >= 2;
            seen[d] = 1;
            if (ramp) fixed += mv->b;
            else nfree++;
        }
        int ok = nfree > 0 && fixed + nfree <= pb->L;
        if (ok) { /* provisional cut: ramps of b layers, the others share the rest evenly */
            memset(seen, 0, sizeof(int) * (size_t)P);
            int l = 0, rest = pb->L - fixed, k = 0;
            for (int s2 = 0; s2 < S; s2++) {
                int d = c->dev[s2], ramp = !seen[d] && cnt[d] >= 2;
                seen[d] = 1;
                c->first[s2] = l;
                l += ramp ? mv->b : rest / nfree + (k++ < rest % nfree);
            }
            c->first[S] = pb->L;
            double *want = op_xcalloc((size_t)P, sizeof(double)), mean = 0;
            int used = 0;
            for (int d = 0; d < P; d++) used += cnt[d] > 0;
            mean = tn_work(pb, 0, pb->L) / (used ? used : 1);
            for (int d = 0; d < P; d++) want[d] = cnt[d] ? mean : 0;
            tn_partition_targets(pb, c, want, -1);
            free(want);
            ok = memcmp(old, c->first, sizeof(int) * (size_t)(S + 1)) != 0;
        }
        free(cnt);
        free(seen);
        free(old);
        return ok;
    }
    case MV_LOOK:
        if (c->look == mv->b) return 0;
        c->look = mv->b;
        return 1;
    case MV_LPT: { /* re-place every stage: heaviest first onto the least loaded device (the
                    * first b stages keep their device, so the pipeline's head stays put) */
        int *ord = op_xmalloc(sizeof(int) * (size_t)S);
        double *load = op_xcalloc((size_t)P, sizeof(double));
        int n = 0, changed = 0;
        for (int s2 = 0; s2 < S; s2++) {
            if (s2 < mv->b) load[c->dev[s2]] += tn_work(pb, c->first[s2], c->first[s2 + 1]);
            else ord[n++] = s2;
        }
        for (int i = 1; i < n; i++) /* insertion sort by work, heaviest first */
            for (int j = i; j > 0; j--) {
                double a = tn_work(pb, c->first[ord[j]], c->first[ord[j] + 1]);
                double b = tn_work(pb, c->first[ord[j - 1]], c->first[ord[j - 1] + 1]);
                if (a <= b) break;
                int t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
        for (int i = 0; i < n; i++) {
            int best = 0;
            for (int d = 1; d < P; d++)
                if (load[d] < load[best]) best = d;
            if (c->dev[ord[i]] != best) changed = 1;
            c->dev[ord[i]] = best;
            load[best] += tn_work(pb, c->first[ord[i]], c->first[ord[i] + 1]);
        }
        free(ord);
        free(load);
        return changed;
    }
    case MV_PSPLIT: { /* stage a splits after its (b / 2)-th layer into two stages on its own
                       * device; the part b % 2 says (0: first, 1: second) keeps the policy,
                       * the other keeps its stash: recomputation only where the device needs
                       * it, e.g. on the early layers whose stashes live longest */
        int s = mv->a, lo = c->first[s], hi = c->first[s + 1], cut = lo + mv->b / 2;
        if (cut <= lo || cut >= hi || S >= pb->L || c->pol[s] == OP_ACT_KEEP) return 0;
        memmove(&c->first[s + 2], &c->first[s + 1], sizeof(int) * (size_t)(S - s));
        memmove(&c->dev[s + 2], &c->dev[s + 1], sizeof(int) * (size_t)(S - s - 1));
        memmove(&c->pol[s + 2], &c->pol[s + 1], (size_t)(S - s - 1));
        c->first[s + 1] = cut;
        c->dev[s + 1] = c->dev[s];
        c->pol[s + 1] = mv->b % 2 ? c->pol[s] : (uint8_t)OP_ACT_KEEP;
        if (mv->b % 2) c->pol[s] = OP_ACT_KEEP;
        c->S = S + 1;
        return 1;
    }
    case MV_POL:
        if (c->pol[mv->a] == mv->b) return 0;
        c->pol[mv->a] = (uint8_t)mv->b;
        return 1;
    case MV_IMODE:
        c->imode = !c->imode;
        return 1;
    case MV_FFIRST:
        c->ffirst = !c->ffirst;
        return 1;
    case MV_MEMRES: /* b < 0: reserve on / off; else that mode */
        if (mv->b < 0) c->memres = !c->memres;
        else if (c->memres == mv->b) return 0;
        else c->memres = mv->b;
        return 1;
    case MV_SPLITMODE:
        c->split = !c->split;
        return 1;
    }
    return 0;
}

static double stage_total(const tn_search *st, const tn_cand *c, int s) {
    return tn_work(st->pb, c->first[s], c->first[s + 1]) * st->pb->M;
}

/* Work (ms, all microbatches) that shift (j, k) moves, from device *from to device *to. */
static double shift_work(const tn_search *st, const tn_cand *c, int j, int k, int *from, int *to) {
    int f = c->first[j];
    if (k > 0) {
        *from = c->dev[j], *to = c->dev[j - 1];
        return tn_work(st->pb, f, f + k) * st->pb->M;
    }
    *from = c->dev[j - 1], *to = c->dev[j];
    return tn_work(st->pb, f + k, f) * st->pb->M;
}

/* Pairs of boundary shifts: one layer alone moves a device's work by M times a layer (more
 * than the imbalance left once the partition is roughly right), while two shifts can trade
 * a heavy layer for a light one (Mamba for MLP: an eighth of that), or shrink the first
 * stages (shorter warm-up for every device after them) and give the work back elsewhere.
 * Ranked by how much they lower the highest static load, busy + the forward chain of one
 * microbatch up to the device's first stage; only gains. */
static void gen_pairs(const tn_search *st, const tn_cand *c, tn_moves *m, op_rng *rng) {
    const tn_prob *pb = st->pb;
    int S = c->S, P = pb->P, hot = 0;
    double *lo = op_xmalloc(sizeof(double) * (size_t)P), *x = op_xmalloc(sizeof(double) * (size_t)P);
    int *fs = op_xmalloc(sizeof(int) * (size_t)P); /* first stage of each device */
    for (int d = 0; d < P; d++) fs[d] = -1;
    for (int s = S - 1; s >= 0; s--) fs[c->dev[s]] = s;
    double before = 0;
    for (int d = 0; d < P; d++) {
        lo[d] = st->cr.busy[d] + (fs[d] >= 0 ? pb->pf[c->first[fs[d]]] : 0);
        if (lo[d] > lo[hot]) hot = d;
    }
    before = lo[hot];
    for (int j1 = 1; j1 < S; j1++)
        for (int i1 = 0; i1 < 4; i1++) {
            int f1, t1, k1 = PAIR_K[i1];
            if (c->first[j1] + k1 <= c->first[j1 - 1] || c->first[j1] + k1 >= c->first[j1 + 1]) continue;
            double w1 = shift_work(st, c, j1, k1, &f1, &t1);
            if (f1 == t1) continue;
            for (int j2 = j1 + 2; j2 < S; j2++) /* adjacent boundaries would share layers */
                for (int i2 = 0; i2 < 4; i2++) {
                    int f2, t2, k2 = PAIR_K[i2];
                    if (S > 48 && c->dev[j2] != hot && c->dev[j2 - 1] != hot && f1 != hot && t1 != hot)
                        continue; /* many stages: only pairs that touch the hottest device */
                    if (c->first[j2] + k2 <= c->first[j2 - 1] || c->first[j2] + k2 >= c->first[j2 + 1])
                        continue;
                    double w2 = shift_work(st, c, j2, k2, &f2, &t2);
                    if (f2 == t2) continue;
                    double after = 0;
                    for (int d = 0; d < P; d++) {
                        x[d] = lo[d] + (d == t1 ? w1 : 0) - (d == f1 ? w1 : 0) + (d == t2 ? w2 : 0) -
                               (d == f2 ? w2 : 0);
                        int l = fs[d] == j1 ? 1 : fs[d] == j2 ? 2 : 0; /* chain to a moved start */
                        if (l) x[d] += pb->pf[c->first[fs[d]] + (l == 1 ? k1 : k2)] - pb->pf[c->first[fs[d]]];
                        after = fmax(after, x[d]);
                    }
                    if (before - after > 1e-9)
                        mv_add(m, MV_PAIR, 8 * j1 + i1, 8 * j2 + i2, before - after, rng);
                }
        }
    free(lo);
    free(x);
    free(fs);
}

static void gen_partition(const tn_search *st, const tn_cand *c, tn_moves *m, op_rng *rng) {
    const double *busy = st->cr.busy;
    double T = st->cr.makespan;
    for (int k = 1; k <= 3; k++) mv_add(m, MV_RAMP, 0, k, 2 * T, rng);
    for (int k = 1; k <= 6; k++) {
        mv_add(m, MV_REBAL, 0, k, 2 * T, rng);
        mv_add(m, MV_REBAL, 0, 16 + k, 2 * T, rng);
    }
    for (int j = 1; j < c->S; j++) {
        int a = c->dev[j - 1], b = c->dev[j];
        for (int k = 1; k <= 2; k++) {
            /* +k: stage j gives its first k layers to stage j-1 (device b -> a) */
            mv_add(m, MV_SHIFT, j, +k, (busy[b] - busy[a]) / k, rng);
            mv_add(m, MV_SHIFT, j, -k, (busy[a] - busy[b]) / k, rng);
        }
    }
    gen_pairs(st, c, m, rng);
}

static void gen_placement(const tn_search *st, const tn_cand *c, tn_moves *m, op_rng *rng) {
    if (st->mode != OP_TUNE_PLACE_ANY) return; /* loop / v fix the map */
    const tn_prob *pb = st->pb;
    const double *busy = st->cr.busy;
    int S = c->S, P = pb->P;
    double T = st->cr.makespan;
    int least = 0;
    double tot = 0;
    for (int s = 0; s < S; s++) tot += stage_total(st, c, s);
    for (int d = 1; d < P; d++)
        if (busy[d] < busy[least]) least = d;
    mv_add(m, MV_LPT, 0, 0, 2 * T, rng);
    mv_add(m, MV_LPT, 0, P, 2 * T, rng);
    for (int s = 0; s < S; s++) {
        int src = c->dev[s];
        double ws = stage_total(st, c, s);
        for (int d = 0; d < P; d++) {
            if (d == src) continue;
            double before = fmax(busy[src], busy[d]);
            double after = fmax(busy[src] - ws, busy[d] + ws);
            mv_add(m, MV_MOVE, s, d, before - after, rng);
        }
        /* splits only of the heaviest stages (cheap moves first: most splits do not pay) */
        if (c->first[s + 1] - c->first[s] >= 2 && S < pb->L && ws * S > 1.5 * tot) {
            mv_add(m, MV_SPLIT, s, least, ws / 2 - T * 0.01, rng);
            mv_add(m, MV_SPLIT, s, src, ws / 4 - T * 0.02, rng);
        }
        if (s + 1 < S) {
            int d2 = c->dev[s + 1];
            double w2 = stage_total(st, c, s + 1);
            if (d2 == src) {
                mv_add(m, MV_MERGE, s, src, -T * 0.01, rng);
            } else {
                mv_add(m, MV_MERGE, s, src, fmax(busy[src], busy[d2]) - (busy[src] + w2), rng);
                mv_add(m, MV_MERGE, s, d2, fmax(busy[src], busy[d2]) - (busy[d2] + ws), rng);
            }
        }
    }
    /* swaps: only between stages on different devices, prioritised by load gain and by moving
     * work away from devices with large warm-up/cool-down idle */
    for (int a = 0; a < S; a++)
        for (int b = a + 1; b < S; b++) {
            int da = c->dev[a], db = c->dev[b];
            if (da == db) continue;
            double wa = stage_total(st, c, a), wb = stage_total(st, c, b);
            double before = fmax(busy[da], busy[db]);
            double after = fmax(busy[da] - wa + wb, busy[db] - wb + wa);
            double ba = st->cr.first_start[da] + T - st->cr.last_end[da];
            double bb = st->cr.first_start[db] + T - st->cr.last_end[db];
            mv_add(m, MV_SWAP, a, b, before - after + 0.1 * fabs(ba - bb), rng);
        }
}

/* Activation-policy moves (searches with st->pol0 >= 0): while the plan does not fit, a
 * lighter stash on the stages of devices over their limit goes first (the score is then the
 * peak); once it fits, a cheaper policy where it saves recompute time (the device's freed
 * time), and a lighter stash on devices near their limit (room for a deeper warm-up, which the
 * engine's admission of F under the limit takes by itself). */
static void gen_policy(const tn_search *st, const tn_cand *c, tn_moves *m, op_rng *rng) {
    const tn_prob *pb = st->pb;
    double T = st->cr.makespan, busiest = 0;
    for (int d = 0; d < pb->P; d++) busiest = fmax(busiest, st->cr.busy[d]);
    for (int s = 0; s < c->S; s++) {
        int a = c->first[s], b = c->first[s + 1], d = c->dev[s];
        double lim = tn_dev_lim(pb, d), peak = (double)st->cr.peak[d];
        int sel_ok = pb->psel[b] - pb->psel[a] < pb->pact[b] - pb->pact[a];
        double redo[3] = {0, (pb->pfsel[b] - pb->pfsel[a]) * pb->M, (pb->pf[b] - pb->pf[a]) * pb->M};
        for (int q = OP_ACT_KEEP; q <= OP_ACT_FULL; q++) {
            if (q == c->pol[s] || (q == OP_ACT_SELECTIVE && !sel_ok)) continue;
            double prio;
            if (!st->cr.fits) prio = q > c->pol[s] && lim > 0 && peak > lim ? 3 * T * peak / lim : -1;
            else if (q < c->pol[s]) prio = redo[c->pol[s]] - redo[q];
            else prio = lim > 0 && peak > 0.9 * lim ? 0.5 * (T - st->cr.busy[d]) - redo[q] : -1;
            if (prio >= 0) mv_add(m, MV_POL, s, q, prio, rng);
        }
        /* partial recomputation: a recomputing stage keeps the stash of part of its layers
         * (the part's forward is no longer re-run); ranked by the time that saves */
        if (st->refine && st->cr.fits && c->pol[s] != OP_ACT_KEEP && b - a >= 2 && c->S < pb->L &&
            st->mode == OP_TUNE_PLACE_ANY) { /* loop / V: every device the same stage count */
            /* on the busiest device ahead of the schedule knobs: its recompute is the makespan */
            double hot = st->cr.busy[d] >= busiest ? T : 0;
            for (int cut = a + 1; cut < b; cut++) {
                double f1 = (pb->pf[cut] - pb->pf[a]) * pb->M, f2 = (pb->pf[b] - pb->pf[cut]) * pb->M;
                mv_add(m, MV_PSPLIT, s, 2 * (cut - a), hot + f2, rng);     /* second part keeps */
                mv_add(m, MV_PSPLIT, s, 2 * (cut - a) + 1, hot + f1, rng); /* first part keeps */
            }
        }
    }
}

static void gen_schedule(const tn_search *st, const tn_cand *c, tn_moves *m, op_rng *rng) {
    int P = st->pb->P;
    double T = st->cr.makespan;
    if (st->pol0 >= 0) gen_policy(st, c, m, rng);
    for (int d = 0; d < P; d++) {
        double resid = T - st->cr.busy[d] - st->cr.first_start[d] - (T - st->cr.last_end[d]);
        mv_add(m, MV_CAP, d, -1, resid, rng);
        mv_add(m, MV_CAP, d, +1, resid * 0.9, rng);
        if (c->split) {
            mv_add(m, MV_WLIM, d, 0, resid * 0.05, rng);
            mv_add(m, MV_WLIM, d, 1, resid * 0.05, rng);
        }
    }
    mv_add(m, MV_CAPALL, 0, -1, T, rng);
    mv_add(m, MV_CAPALL, 0, +1, T, rng);
    for (int f = 0; f < 3; f++) mv_add(m, MV_FMODE, 0, f, T, rng);
    mv_add(m, MV_FFIRST, 0, 0, T, rng);
    if (st->refine == 1) mv_add(m, MV_MEMRES, 0, -1, T, rng);
    if (st->refine > 1)
        for (int k = 0; k < 4; k++) mv_add(m, MV_MEMRES, 0, k == 3 ? TN_MEMRES_OWED : k, T, rng);
    mv_add(m, MV_IMODE, 0, 0, T, rng);
    for (int f = 0; f < 4; f++) mv_add(m, MV_LOOK, 0, f, T, rng);
    mv_add(m, MV_SPLITMODE, 0, 0, T, rng);
}

/* Tries the moves of one phase in priority order; first strict improvement wins. */
static int try_phase(tn_search *st, int phase, tn_cand *cur, double *cur_score, tn_cand *trial,
                     tn_moves *m, long *budget) {
    m->n = 0;
    if (phase == 0) gen_partition(st, cur, m, &st->rng);
    else if (phase == 1) gen_placement(st, cur, m, &st->rng);
    else gen_schedule(st, cur, m, &st->rng);
    if (m->n == 0) return 0;
    qsort(m->v, (size_t)m->n, sizeof(tn_move), mv_cmp);
    int limit = phase == 2 ? 3 * st->pb->P + 8 : 24 + st->pb->P;
    st->phase = phase == 0 ? "partition" : phase == 1 ? "placement" : "schedule";
    for (int i = 0, tried = 0; i < m->n && tried < limit && *budget > 0; i++) {
        tn_cand_copy(trial, cur, st->pb);
        if (!mv_apply(st, trial, &m->v[i])) continue;
        tried++;
        (*budget)--;
        double sc = tn_score_cut(st, trial, *cur_score);
        /* strict only, policy moves too: taking a cheaper policy at an equal makespan (to
         * free the device) did worse, nemotron-h-8b P=4 M=8 at 42 GiB seeds 1..3 averaged
         * 1087.8 ms against 1068.7; relax (tune_mem.c) drops unneeded recomputation after */
        if (sc < *cur_score * (1 - 1e-9)) {
            tn_cand_copy(cur, trial, st->pb);
            tn_res_copy(&st->cr, &st->r, st->pb->P);
            *cur_score = sc;
            return 1;
        }
        if (tn_out_of_budget(st)) return 0;
    }
    return 0;
}

/* Picks the phase order from the bubbles of the plan last evaluated (st->r). */
static void phase_order(const tn_search *st, const tn_cand *c, int order[3]) {
    int P = st->pb->P;
    double T = st->cr.makespan, bmax = -1e300, bmin = 1e300, bd = 0, res = 0;
    for (int d = 0; d < P; d++) {
        double bub = T - st->cr.busy[d];
        double bnd = st->cr.first_start[d] + (T - st->cr.last_end[d]);
        bmax = fmax(bmax, bub);
        bmin = fmin(bmin, bub);
        bd += bnd;
        res += bub - bnd;
    }
    (void)c;
    if (st->pol0 >= 0 && !st->cr.fits) order[0] = 2, order[1] = 0, order[2] = 1; /* policies */
    else if (bmax - bmin > st->pb->t_layer * st->pb->M) order[0] = 0, order[1] = 1, order[2] = 2;
    else if (bd > res) order[0] = 1, order[1] = 0, order[2] = 2;
    else order[0] = 2, order[1] = 0, order[2] = 1;
}

/* A seeded random kick: a few legal moves of any phase. */
static void kick(tn_search *st, tn_cand *c) {
    int S = c->S, P = st->pb->P;
    for (int k = 0; k < 3; k++) {
        tn_move mv = {MV_SHIFT, 1 + op_rng_int(&st->rng, S > 1 ? S - 1 : 1),
                      op_rng_int(&st->rng, 2) ? 1 : -1, 0};
        int r = op_rng_int(&st->rng, 4);
        if (r == 1 && st->mode == OP_TUNE_PLACE_ANY && S > 1)
            mv = (tn_move){MV_SWAP, op_rng_int(&st->rng, S), op_rng_int(&st->rng, S), 0};
        else if (r == 2)
            mv = (tn_move){MV_CAP, op_rng_int(&st->rng, P), op_rng_int(&st->rng, 2) ? 1 : -1, 0};
        mv_apply(st, c, &mv);
        S = c->S;
    }
}

void tn_rebalance(tn_search *st, tn_cand *c, double *score, int iters) {
    tn_cand trial;
    tn_cand_alloc(&trial, st->pb);
    *score = tn_score(st, c);
    tn_res_copy(&st->cr, &st->r, st->pb->P);
    for (int it = 0; it < iters; it++) {
        int improved = 0;
        for (int k = 2; k <= 22 && !improved; k += k == 6 ? 12 : 2) { /* 2 4 6, 18 20 22 */
            tn_cand_copy(&trial, c, st->pb);
            tn_move mv = {MV_REBAL, 0, k, 0};
            if (!mv_apply(st, &trial, &mv)) continue;
            double sc = tn_score(st, &trial);
            if (sc < *score * (1 - 1e-9)) {
                tn_cand_copy(c, &trial, st->pb);
                tn_res_copy(&st->cr, &st->r, st->pb->P);
                *score = sc;
                improved = 1;
            }
        }
        if (!improved) break;
    }
    tn_cand_free(&trial);
}

void tn_local_search(tn_search *st, tn_cand *cur, long budget) {
    tn_cand trial, base;
    tn_cand_alloc(&trial, st->pb);
    tn_cand_alloc(&base, st->pb);
    tn_moves m = {0};
    double cur_score = tn_score(st, cur);
    tn_res_copy(&st->cr, &st->r, st->pb->P);
    budget--;
    tn_cand_copy(&base, cur, st->pb);
    double base_score = cur_score;
    int stalls = 0;
    while (budget > 0 && !tn_out_of_budget(st)) {
        int order[3], improved = 0;
        phase_order(st, cur, order);
        for (int k = 0; k < 3 && !improved && budget > 0; k++) {
            improved = try_phase(st, order[k], cur, &cur_score, &trial, &m, &budget);
        }
        if (improved) continue;
        /* stalled: keep the better of base and cur, then kick from it */
        if (cur_score < base_score * (1 - 1e-9)) {
            tn_cand_copy(&base, cur, st->pb);
            base_score = cur_score;
            stalls = 0;
        } else if (++stalls > 6) {
            break;
        }
        tn_cand_copy(cur, &base, st->pb);
        kick(st, cur);
        cur_score = tn_score(st, cur);
        tn_res_copy(&st->cr, &st->r, st->pb->P);
        budget--;
    }
    if (base_score < cur_score) tn_cand_copy(cur, &base, st->pb);
    free(m.v);
    tn_cand_free(&trial);
    tn_cand_free(&base);
}
