/* tune_engine.c: the tuner's list scheduler.  Given a candidate (stages, placement, knobs) it
 * builds every device's order and times it under the simulator's semantics, in
 * O(ops * (P + stages per device)) with no allocation per call.
 *
 * Rules (why): ops of one stage and kind run in microbatch order (FIFO), which keeps the ready
 * set per device at <= 3 ops per local stage and loses nothing in practice; whenever a device
 * can start something it starts the best ready op (non-delay list scheduling):
 *   1. I (or B): latest stage first, so gradients drain and memory is freed (knob ffirst puts
 *      a ready F under the cap first instead);
 *   2. W when the device has wlim pending W, or when an F is held back by memory (with knob
 *      memres and tn_prob.wfree, then the W that frees the most bytes per ms);
 *   3. F if the device has fewer than cap in-flight microbatch-stages (F done, I not) and the
 *      activation fits the memory limit (the warm-up depth), less what knob memres keeps for
 *      the device's later stages, and within the stage's quota (memres QUOTA);
 *   4. W otherwise: deferred W fills bubbles (zero-bubble style).
 * If every ready op in the whole pipeline is an F held back by cap or memory, the earliest one
 * runs anyway, so the engine never deadlocks; the memory check afterwards rejects the plan if it
 * overflowed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"
#include "tune/tune_memo.h"

struct tn_eng {
    int P, M, L;
    double *tf, *ti, *tw, *cf, *cb; /* [L] per stage durations and link delays (ms) */
    int64_t *act, *actw, *acti;     /* [L] bytes: F stash, held I..W, transient in I/B */
    int64_t *fneed;                 /* [L] what an F must find free under the limit */
    int *scap;                      /* [L] per-stage in-flight quota (memres QUOTA, OWED) */
    int64_t *resv;                  /* [L] pick's scratch by local slot: bytes owed after it */
    int *nF, *nI, *nW;              /* [L] next microbatch per stage and kind */
    double *fend, *iend;            /* [L*M] */
    double *tfree;                  /* [P] */
    int *inflight, *pendW, *maxinf; /* [P] */
    int64_t *acur, *stat, *amax;    /* [P] */
    int *dstart, *dst;              /* CSR: local stages of device d */
    double *ct, *cbt;               /* [P] cached pick: start time of best allowed / blocked op */
    int *cs, *ck, *cbs;             /* [P] cached stage and kind; blocked F stage */
    unsigned char *dirty;           /* [P] */
    int *dlist, nd;                 /* [P] the dirty devices, in the order they became dirty */
    int Q, *si;                     /* [2Q] min-tree over ct (ties: lower device), Q >= P: */
    double *sk;                     /* each node's winning device and its key */
    double *rem;                    /* [P] work not yet scheduled (ms) */
    double *qf, *qi, *qw;           /* [L] pick's ready times by local stage slot (dst order) */
    tn_memo *memo;                  /* results of candidates already evaluated */
    int wfree;                      /* tn_prob.wfree, read by pick */
};

#define TN_INF 1e300

static double tn_comm_ms(const op_comm *c, int a, int b, int64_t bytes) {
    return c->none || a == b ? 0 : op_comm_ms(c, a, b, bytes);
}

tn_eng *tn_eng_new(const tn_prob *pb) {
    tn_eng *e = op_xcalloc(1, sizeof *e);
    int L = pb->L, P = pb->P, M = pb->M;
    e->P = P;
    e->M = M;
    e->L = L;
    e->tf = op_xcalloc((size_t)L, sizeof(double));
    e->ti = op_xcalloc((size_t)L, sizeof(double));
    e->tw = op_xcalloc((size_t)L, sizeof(double));
    e->cf = op_xcalloc((size_t)L, sizeof(double));
    e->cb = op_xcalloc((size_t)L, sizeof(double));
    e->act = op_xcalloc((size_t)L, sizeof(int64_t));
    e->actw = op_xcalloc((size_t)L, sizeof(int64_t));
    e->acti = op_xcalloc((size_t)L, sizeof(int64_t));
    e->fneed = op_xcalloc((size_t)L, sizeof(int64_t));
    e->scap = op_xcalloc((size_t)L, sizeof(int));
    e->resv = op_xcalloc((size_t)L, sizeof(int64_t));
    e->nF = op_xcalloc((size_t)L, sizeof(int));
    e->nI = op_xcalloc((size_t)L, sizeof(int));
    e->nW = op_xcalloc((size_t)L, sizeof(int));
    e->fend = op_xcalloc((size_t)L * (size_t)M, sizeof(double));
    e->iend = op_xcalloc((size_t)L * (size_t)M, sizeof(double));
    e->tfree = op_xcalloc((size_t)P, sizeof(double));
    e->inflight = op_xcalloc((size_t)P, sizeof(int));
    e->pendW = op_xcalloc((size_t)P, sizeof(int));
    e->maxinf = op_xcalloc((size_t)P, sizeof(int));
    e->acur = op_xcalloc((size_t)P, sizeof(int64_t));
    e->stat = op_xcalloc((size_t)P, sizeof(int64_t));
    e->amax = op_xcalloc((size_t)P, sizeof(int64_t));
    e->dstart = op_xcalloc((size_t)P + 1, sizeof(int));
    e->dst = op_xcalloc((size_t)L, sizeof(int));
    e->ct = op_xcalloc((size_t)P, sizeof(double));
    e->cbt = op_xcalloc((size_t)P, sizeof(double));
    e->cs = op_xcalloc((size_t)P, sizeof(int));
    e->ck = op_xcalloc((size_t)P, sizeof(int));
    e->cbs = op_xcalloc((size_t)P, sizeof(int));
    e->dirty = op_xcalloc((size_t)P, 1);
    e->dlist = op_xcalloc((size_t)P, sizeof(int));
    for (e->Q = 1; e->Q < P; e->Q *= 2) {}
    e->si = op_xcalloc(2 * (size_t)e->Q, sizeof(int));
    e->sk = op_xcalloc(2 * (size_t)e->Q, sizeof(double));
    e->rem = op_xcalloc((size_t)P, sizeof(double));
    e->qf = op_xcalloc((size_t)L, sizeof(double));
    e->qi = op_xcalloc((size_t)L, sizeof(double));
    e->qw = op_xcalloc((size_t)L, sizeof(double));
    e->memo = tn_memo_new(pb);
    return e;
}

void tn_eng_free(tn_eng *e) {
    if (!e) return;
    void *ptrs[] = {e->tf, e->ti, e->tw, e->cf, e->cb, e->act, e->actw, e->acti, e->fneed,
                    e->scap, e->resv, e->nF, e->nI, e->nW, e->fend, e->iend, e->tfree, e->inflight, e->pendW, e->maxinf,
                    e->acur, e->stat, e->amax, e->dstart, e->dst, e->ct, e->cbt, e->cs,
                    e->ck, e->cbs, e->dirty, e->dlist, e->si, e->sk, e->rem, e->qf, e->qi, e->qw};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    tn_memo_free(e->memo);
    free(e);
}

void tn_res_alloc(tn_res *r, int P) {
    memset(r, 0, sizeof *r);
    r->busy = op_xcalloc((size_t)P, sizeof(double));
    r->first_start = op_xcalloc((size_t)P, sizeof(double));
    r->last_end = op_xcalloc((size_t)P, sizeof(double));
    r->peak = op_xcalloc((size_t)P, sizeof(int64_t));
    r->max_inflight = op_xcalloc((size_t)P, sizeof(int));
}

void tn_res_free(tn_res *r) {
    free(r->busy);
    free(r->first_start);
    free(r->last_end);
    free(r->peak);
    free(r->max_inflight);
    memset(r, 0, sizeof *r);
}

void tn_res_copy(tn_res *dst, const tn_res *src, int P) {
    dst->makespan = src->makespan;
    dst->fits = src->fits;
    dst->peak_max = src->peak_max;
    memcpy(dst->busy, src->busy, sizeof(double) * (size_t)P);
    memcpy(dst->first_start, src->first_start, sizeof(double) * (size_t)P);
    memcpy(dst->last_end, src->last_end, sizeof(double) * (size_t)P);
    memcpy(dst->peak, src->peak, sizeof(int64_t) * (size_t)P);
    memcpy(dst->max_inflight, src->max_inflight, sizeof(int) * (size_t)P);
}

/* Ready times (ms) of the next F / I(B) / W of stage s; TN_INF if its inputs are not done. */
static inline double rt_F(const tn_eng *e, int s) {
    int m = e->nF[s];
    if (m >= e->M) return TN_INF;
    if (s == 0) return 0;
    if (e->nF[s - 1] <= m) return TN_INF;
    return e->fend[(size_t)(s - 1) * (size_t)e->M + (size_t)m] + e->cf[s - 1];
}
static inline double rt_I(const tn_eng *e, int s, int S) {
    int m = e->nI[s];
    if (m >= e->nF[s]) return TN_INF;
    if (s == S - 1) return e->fend[(size_t)s * (size_t)e->M + (size_t)m];
    if (e->nI[s + 1] <= m) return TN_INF;
    return e->iend[(size_t)(s + 1) * (size_t)e->M + (size_t)m] + e->cb[s];
}
static inline double rt_W(const tn_eng *e, int s) {
    int m = e->nW[s];
    if (m >= e->nI[s]) return TN_INF;
    return e->iend[(size_t)s * (size_t)e->M + (size_t)m];
}

/* tn_prob.wfree with knob memres, when an F is held back by memory: of the W ready by t (qw
 * by local slot), the one that frees the most bytes (act_w) per ms of W, so that the F gets in
 * soonest; ties keep `cur` (oldest microbatch first).  The W left pending are then the long
 * ones that hold little, which is what the drain can still fill with under the limit (Jamba:
 * a MoE layer's W holds 0.81 GiB for 8.8 ms, the head's 1.03 GiB for 4.1 ms). */
static int w_most_freed(const tn_eng *e, const double *qw, int j0, int j1, double t, int cur) {
    for (int j = j0; j < j1; j++) {
        int s = e->dst[j];
        if (qw[j] <= t && (double)e->actw[s] * e->tw[cur] > (double)e->actw[cur] * e->tw[s]) cur = s;
    }
    return cur;
}

/* Chooses device d's next op (cached in ct/cs/ck) and its earliest held-back F (cbt/cbs).
 * The first pass keeps each local stage's ready times (qf: F when the cap and memory allow
 * it, else TN_INF) for the second, which picks among those ready by t. */
static void pick(tn_eng *e, const tn_cand *c, int d, double lim) {
    double tfr = e->tfree[d], tmin = TN_INF, bmin = TN_INF, tI = TN_INF, tN = TN_INF;
    int bs = -1, memblock = 0, S = c->S, sI = -1, sN = -1, kN = OP_F;
    int capok = c->cap[d] <= 0 || e->inflight[d] < c->cap[d];
    const int j0 = e->dstart[d], j1 = e->dstart[d + 1];
    double *qf = e->qf, *qi = e->qi, *qw = e->qw;
    int owed = (c->memres & TN_MEMRES_OWED) && lim > 0;
    if (owed) { /* resv[j]: stashes the later local stages may still add under their quotas */
        int64_t after = 0;
        for (int j = j1 - 1; j >= j0; j--) {
            int s = e->dst[j];
            e->resv[j] = after;
            int owe = e->scap[s] - (e->nF[s] - e->nI[s]);
            if (owe > e->M - e->nF[s]) owe = e->M - e->nF[s];
            if (owe > 0) after += owe * e->act[s];
        }
    }
    for (int j = j0; j < j1; j++) {
        int s = e->dst[j];
        double r = rt_F(e, s);
        qf[j] = TN_INF;
        if (r < TN_INF) {
            int64_t more = owed ? e->resv[j] : 0;
            int memok = lim <= 0 || (double)(e->stat[d] + e->acur[d] + e->fneed[s] + more) <= lim;
            if (!memok) memblock = 1;
            int quota = !(c->memres & TN_MEMRES_QUOTA) || e->scap[s] <= 0 ||
                        e->nF[s] - e->nI[s] < e->scap[s];
            if (capok && memok && quota) {
                qf[j] = r;
                if (r < tmin) tmin = r;
                if (r < tN) tN = r, sN = s, kN = OP_F;
            } else if (r < bmin) {
                bmin = r;
                bs = s;
            }
        }
        r = qi[j] = rt_I(e, s, S);
        if (r < tmin) tmin = r;
        if (r < tI || (r == tI && s > sI)) tI = r, sI = s;
        if (r <= tN && r < TN_INF) tN = r, sN = s, kN = OP_I;
        qw[j] = TN_INF;
        if (c->split) {
            r = qw[j] = rt_W(e, s);
            if (r < tmin) tmin = r;
        }
    }
    e->cbt[d] = bs >= 0 ? (bmin > tfr ? bmin : tfr) : TN_INF;
    e->cbs[d] = bs;
    if (tmin >= TN_INF) {
        e->ct[d] = TN_INF;
        return;
    }
    double t = tmin > tfr ? tmin : tfr, eps = 1e-12 * (1 + t);
    int bI = -1, bF = -1, bW = -1;
    for (int j = j0; j < j1; j++) {
        int s = e->dst[j];
        if (qi[j] <= t + eps &&
            (bI < 0 || (c->imode == 0 ? s > bI : e->nI[s] < e->nI[bI] || (e->nI[s] == e->nI[bI] && s > bI))))
            bI = s;
        if (qw[j] <= t + eps &&
            (bW < 0 || e->nW[s] < e->nW[bW] || (e->nW[s] == e->nW[bW] && s > bW)))
            bW = s;
        if (qf[j] <= t + eps) {
            if (bF < 0) bF = s;
            else if (c->fmode == 1) bF = s > bF ? s : bF;
            else if (c->fmode == 2) bF = s < bF ? s : bF;
            else if (e->nF[s] < e->nF[bF] || (e->nF[s] == e->nF[bF] && s > bF)) bF = s;
        }
    }
    int wforce = (c->wlim[d] > 0 && e->pendW[d] >= c->wlim[d]) || memblock;
    if (memblock && c->memres && e->wfree && bW >= 0) bW = w_most_freed(e, qw, j0, j1, t + eps, bW);
    e->ct[d] = t;
    if (bF >= 0 && c->ffirst && !(bW >= 0 && wforce)) e->cs[d] = bF, e->ck[d] = OP_F;
    else if (bI >= 0) e->cs[d] = bI, e->ck[d] = c->split ? OP_I : OP_B;
    else if (bW >= 0 && (wforce || bF < 0)) e->cs[d] = bW, e->ck[d] = OP_W;
    else e->cs[d] = bF, e->ck[d] = OP_F;
    OP_ASSERT(e->cs[d] >= 0, "tune engine: no op picked on device %d", d);
    /* lookahead (knob look): rather than start a W (bit 1) or an F (bit 2) that would still be
     * running when a known I (or, for W, an F) becomes ready, wait for that op */
    if ((c->look & 1) && e->ck[d] == OP_W && !wforce && tN < TN_INF && tN > t &&
        tN < t + e->tw[e->cs[d]]) {
        e->ct[d] = tN;
        e->cs[d] = sN;
        e->ck[d] = kN == OP_I ? (c->split ? OP_I : OP_B) : OP_F;
    } else if ((c->look & 2) && e->ck[d] == OP_F && !c->ffirst && tI < TN_INF && tI > t &&
               tI < t + e->tf[e->cs[d]]) {
        e->ct[d] = tI;
        e->cs[d] = sI;
        e->ck[d] = c->split ? OP_I : OP_B;
    }
}

/* The next device to run is the one whose picked op starts first (lowest device on ties): a
 * min-tree over ct makes that O(log P) per op instead of a scan of every device, which at
 * P = 64 was most of the tuner's time.  Node i holds its winner's key and device (sk, si):
 * leaf Q + d is (ct[d], d), padding leaves (TN_INF, P).  Every device under a left child is
 * lower than those under its right sibling, so a tie goes left and a node takes its right
 * child only when that key is strictly smaller: one compare of two adjacent keys, no
 * indirection through ct. */
static inline int seg_pick(const tn_eng *e, int i) { /* the winning child of node i */
    return e->sk[2 * i + 1] < e->sk[2 * i] ? 2 * i + 1 : 2 * i;
}
/* After ct[d] changed: every node from its leaf up, always to the root (a fixed trip of
 * selects; stopping where the winner stays was slower at P = 64, the exit mispredicts). */
static void seg_update(tn_eng *e, int d) {
    e->sk[e->Q + d] = e->ct[d];
    for (int i = (e->Q + d) / 2; i >= 1; i /= 2) {
        int w = seg_pick(e, i);
        e->sk[i] = e->sk[w];
        e->si[i] = e->si[w];
    }
}
static inline void mark_dirty(tn_eng *e, int d) {
    if (!e->dirty[d]) e->dirty[d] = 1, e->dlist[e->nd++] = d;
}

/* Knob memres ONE (tn_cand): an F of stage s also leaves room for one microbatch of every later
 * stage on its device (their largest fneed), so an early stage cannot fill the memory that the
 * device's later stages, on which its own I waits, need (else every device waits and an F must
 * be forced over the limit).  amax serves as scratch; setup zeroes it next. */
static void tn_reserve(tn_eng *e, const tn_cand *c) {
    memset(e->amax, 0, sizeof(int64_t) * (size_t)e->P);
    for (int s = c->S - 1; s >= 0; s--) {
        int d = c->dev[s];
        int64_t own = e->fneed[s];
        e->fneed[s] += e->amax[d];
        if (own > e->amax[d]) e->amax[d] = own;
    }
}

static void setup(tn_eng *e, const tn_prob *pb, const tn_cand *c) {
    int S = c->S, P = pb->P;
    const op_comm *cm = &pb->pr->comm;
    e->wfree = pb->wfree;
    for (int s = 0; s < S; s++) {
        int a = c->first[s], b = c->first[s + 1];
        e->tf[s] = pb->pf[b] - pb->pf[a] + pb->ovh;
        if (c->split) {
            e->ti[s] = pb->pi[b] - pb->pi[a] + pb->ovh;
            e->tw[s] = pb->pw[b] - pb->pw[a] + pb->ovh;
        } else {
            e->ti[s] = pb->pi[b] - pb->pi[a] + pb->pw[b] - pb->pw[a] + pb->ovh;
            e->tw[s] = 0;
        }
        e->act[s] = pb->pact[b] - pb->pact[a];
        e->actw[s] = c->split ? pb->pactw[b] - pb->pactw[a] : 0;
        e->acti[s] = pb->pacti[b] - pb->pacti[a];
        if (c->pol[s] == OP_ACT_SELECTIVE || c->pol[s] == OP_ACT_FULL) {
            /* plan.h's rules: F holds the stash only; I re-runs the dropped part of the
             * forward first (its time on I) and holds the re-materialised bytes through I */
            int full = c->pol[s] == OP_ACT_FULL;
            int64_t in = a > 0 ? pb->pr->layers[a - 1].out_bytes : pb->in0;
            int64_t stash = full ? in : pb->psel[b] - pb->psel[a];
            if (full && stash > e->act[s]) stash = e->act[s]; /* as op_stage_stash_bytes */
            e->ti[s] += full ? pb->pf[b] - pb->pf[a] : pb->pfsel[b] - pb->pfsel[a];
            e->acti[s] += e->act[s] - stash;
            e->act[s] = stash;
        }
        /* an F reserves its stash plus what its own I will add on top (the transient act_i,
         * or the growth to act_w): the simulator's dynamic mode admits F the same way */
        int64_t extra = e->acti[s] > e->actw[s] - e->act[s] ? e->acti[s] : e->actw[s] - e->act[s];
        e->fneed[s] = e->act[s] + (extra > 0 ? extra : 0);
        if (s + 1 < S) {
            int64_t bytes = pb->pr->layers[b - 1].out_bytes;
            e->cf[s] = tn_comm_ms(cm, c->dev[s], c->dev[s + 1], bytes);
            e->cb[s] = tn_comm_ms(cm, c->dev[s + 1], c->dev[s], bytes);
        } else {
            e->cf[s] = e->cb[s] = 0;
        }
        e->nF[s] = e->nI[s] = e->nW[s] = 0;
    }
    if (pb->mx) tn_mixed_stage_times(pb, c, e->tf, e->ti, e->tw); /* each stage on its device */
    memset(e->dstart, 0, sizeof(int) * (size_t)(P + 1));
    for (int s = 0; s < S; s++) e->dstart[c->dev[s] + 1]++;
    for (int d = 0; d < P; d++) e->dstart[d + 1] += e->dstart[d];
    for (int d = 0; d < P; d++) e->cs[d] = e->dstart[d]; /* fill cursor */
    for (int s = 0; s < S; s++) e->dst[e->cs[c->dev[s]]++] = s;
    if (c->memres & TN_MEMRES_ONE) tn_reserve(e, c);
    for (int d = 0; d < P; d++) {
        e->tfree[d] = 0;
        e->inflight[d] = e->pendW[d] = e->maxinf[d] = 0;
        e->acur[d] = e->amax[d] = e->stat[d] = 0;
        e->dirty[d] = 1;
        e->dlist[d] = d;
        e->ct[d] = TN_INF;
    }
    e->nd = P;
    for (int i = 0; i < e->Q; i++) {
        e->sk[e->Q + i] = TN_INF;
        e->si[e->Q + i] = i < P ? i : P;
    }
    for (int i = e->Q - 1; i >= 1; i--) {
        int w = seg_pick(e, i);
        e->sk[i] = e->sk[w];
        e->si[i] = e->si[w];
    }
    for (int s = 0; s < S; s++)
        e->stat[c->dev[s]] += pb->pstat[c->first[s + 1]] - pb->pstat[c->first[s]];
    if (c->memres & (TN_MEMRES_QUOTA | TN_MEMRES_OWED)) { /* rem, qf: free until tn_eval */
        tn_quota_in in = {e->tf, e->ti, e->tw, e->cf, e->cb, e->act, e->actw, e->fneed,
                          e->stat, e->dstart, e->dst};
        tn_quota(pb, c, &in, e->rem, e->qf, e->scap);
    }
}

double tn_eval(tn_eng *e, const tn_prob *pb, const tn_cand *c, tn_res *r, op_op **ops,
               int *n_ops, double cutoff) {
    int P = pb->P, M = pb->M, S = c->S;
    double known, xmax = 0; /* xmax: the largest en + rem compared with the cutoff */
    if (!ops && tn_memo_get(e->memo, pb, c, cutoff, r, &known)) return known;
    setup(e, pb, c);
    for (int d = 0; d < P; d++) {
        r->busy[d] = 0;
        r->first_start[d] = TN_INF;
        r->last_end[d] = 0;
        if (n_ops) n_ops[d] = 0;
    }
    long total = (long)S * M * (c->split ? 3 : 2);
    double mk = 0;
    /* remaining work per device: tfree + rem bounds the makespan from below, so a candidate
     * that cannot beat `cutoff` is abandoned early (most rejected moves stop half-way) */
    for (int d = 0; d < P; d++) e->rem[d] = 0;
    for (int s = 0; s < S; s++)
        e->rem[c->dev[s]] += M * (e->tf[s] + e->ti[s] + (c->split ? e->tw[s] : 0));
    for (long k = 0; k < total; k++) {
        for (int j = 0; j < e->nd; j++) {
            int d = e->dlist[j];
            pick(e, c, d, tn_dev_lim(pb, d));
            e->dirty[d] = 0;
            seg_update(e, d);
        }
        e->nd = 0;
        int bd = e->si[1];
        double bt = TN_INF;
        if (bd < P && e->ct[bd] < TN_INF) bt = e->ct[bd];
        else bd = -1;
        int s, kind;
        if (bd < 0) { /* only held-back F ops are ready: run the earliest */
            for (int d = 0; d < P; d++)
                if (e->cbt[d] < bt) bt = e->cbt[d], bd = d;
            if (bd < 0) {
                r->makespan = -1;
                return -1;
            }
            s = e->cbs[bd];
            kind = OP_F;
        } else {
            s = e->cs[bd];
            kind = e->ck[bd];
        }
        int d = bd;
        double ready = kind == OP_F ? rt_F(e, s) : kind == OP_W ? rt_W(e, s) : rt_I(e, s, S);
        double st = ready > e->tfree[d] ? ready : e->tfree[d];
        double dur = kind == OP_F ? e->tf[s] : kind == OP_W ? e->tw[s] : e->ti[s];
        double en = st + dur;
        size_t idx = (size_t)s * (size_t)M;
        int m;
        if (kind == OP_F) {
            m = e->nF[s]++;
            e->fend[idx + (size_t)m] = en;
            if (++e->inflight[d] > e->maxinf[d]) e->maxinf[d] = e->inflight[d];
            e->acur[d] += e->act[s];
            if (e->acur[d] > e->amax[d]) e->amax[d] = e->acur[d];
            if (s + 1 < S) mark_dirty(e, c->dev[s + 1]);
        } else if (kind == OP_W) {
            m = e->nW[s]++;
            e->pendW[d]--;
            e->acur[d] -= e->actw[s];
        } else {
            m = e->nI[s]++;
            e->iend[idx + (size_t)m] = en;
            e->inflight[d]--;
            /* the transient act_i while I/B runs, then I leaves act_w held (B nothing) */
            if (e->acur[d] + e->acti[s] > e->amax[d]) e->amax[d] = e->acur[d] + e->acti[s];
            e->acur[d] += e->actw[s] - e->act[s];
            if (e->acur[d] > e->amax[d]) e->amax[d] = e->acur[d];
            if (c->split) e->pendW[d]++;
            if (s > 0) mark_dirty(e, c->dev[s - 1]);
        }
        mark_dirty(e, d);
        e->tfree[d] = en;
        e->rem[d] -= dur;
        double lb = en + e->rem[d];
        if (lb > xmax) xmax = lb;
        if (cutoff > 0 && lb > cutoff * (1 + 1e-12)) {
            r->makespan = -2;
            if (!ops) tn_memo_put(e->memo, r, 0, xmax);
            return -2;
        }
        r->busy[d] += dur;
        if (st < r->first_start[d]) r->first_start[d] = st;
        r->last_end[d] = en;
        if (en > mk) mk = en;
        if (ops) ops[d][n_ops[d]++] = (op_op){(uint8_t)kind, s, m, st, en};
    }
    r->makespan = mk;
    r->fits = 1;
    r->peak_max = 0;
    for (int d = 0; d < P; d++) {
        if (r->first_start[d] >= TN_INF) r->first_start[d] = mk; /* device without stages */
        r->peak[d] = e->stat[d] + e->amax[d];
        r->max_inflight[d] = e->maxinf[d];
        if (r->peak[d] > r->peak_max) r->peak_max = r->peak[d];
        if (tn_dev_lim(pb, d) > 0 && (double)r->peak[d] > tn_dev_lim(pb, d)) r->fits = 0;
    }
    if (!ops) tn_memo_put(e->memo, r, 1, xmax);
    return mk;
}
