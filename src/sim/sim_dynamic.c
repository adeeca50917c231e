/* sim_dynamic.c: list scheduling.  Whenever a device is idle it starts its best ready op under
 * a policy (sim.h: built-in rule or a custom priority); the result is a per-device order, which
 * is then replayed for the times and the prediction (so replay reproduces it exactly).
 *
 * Events: an op's completion (frees its device, updates the device's counters) and a wake-up of
 * an idle device when an input arrives from another device.  An op's end time is written when
 * it starts (it is known then), so a consumer's arrival time is known early; the consumer's
 * device gets a wake-up at that time.  Events are taken in time order (ties: lower device
 * first) and each device decides right at its event: every input that can arrive by then is
 * already known, except one made at that very instant by a zero-duration op, which the device
 * sees at its next decision.
 *
 * Cost: one event per op plus the wake-ups, each a walk up the event tree (log2 P levels) and
 * one decision over the device's stages.  The per-stage table (sim_dstage) makes the three
 * candidates of a stage one loop body, and the tree compares integer keys without branches:
 * at P = 128 both were most of the time per op (instructions, not memory: the hot state is
 * a few KB plus one sequential stream per producer row). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* ---- event queue: tournament tree over devices ---- */

/* Queue key of a time: its bits as an integer, which orders like the double for t >= 0, the
 * only times there are (+0.0 for -0.0; NaN, which valid costs never give, counts as never). */
static inline int64_t sim_key(double t) {
    int64_t k;
    t += 0.0;
    if (t != t) t = INFINITY;
    memcpy(&k, &t, 8);
    return k ^ ((k >> 63) & INT64_MAX); /* negative times, should any appear, still in order */
}
static inline double sim_time(int64_t k) {
    k ^= (k >> 63) & INT64_MAX;
    double t;
    memcpy(&t, &k, 8);
    return t;
}
#define KEY_NONE ((int64_t)0x7ff0000000000000) /* sim_key(+inf) */

/* Sets device d's event key and recomputes its path to the root.  Each level needs only the
 * sibling, whose address is known up front, so the loads overlap instead of chaining.  The
 * selects compile to cmov: the outcome is a coin flip, and mispredictions dominated this loop
 * at P = 128 when it branched. */
static inline void set_key(op_sim_ws *ws, int d, int64_t k) {
    sim_tnode *tw = ws->tw;
    unsigned i = (unsigned)(ws->tw_leaves + d);
    int64_t ck = k;
    int32_t cd = d;
    tw[i].k = k;
    while (i > 1) {
        const sim_tnode s = tw[i ^ 1];
        /* an odd i is a right child: its left sibling holds lower devices and wins ties */
        const int take = s.k < ck + (int64_t)(i & 1);
        ck = take ? s.k : ck;
        cd = take ? s.d : cd;
        i >>= 1;
        tw[i].k = ck;
        tw[i].d = cd;
    }
}

static void tw_init(op_sim_ws *ws) {
    const int n = ws->tw_leaves;
    for (int i = 1; i < 2 * n; i++) ws->tw[i] = (sim_tnode){KEY_NONE, i >= n ? i - n : 0, 0};
}

/* An input for device d arrives at t: wake it then (a busy device re-decides at its op's end
 * anyway, and then sees every arrival it can). */
static inline void wake(op_sim_ws *ws, int d, double t) {
    sim_dev *v = &ws->dv[d];
    const int64_t k = sim_key(t);
    if (v->busy || k >= v->wake_at) return;
    v->wake_at = k;
    set_key(ws, d, k);
}

/* ---- choosing ---- */

typedef struct cand {
    int slot, stage, mb;
    double key;
    double arrive; /* when its input is there */
} cand;

/* Tie order: smaller mb; then I/B before F before W; then larger stage for I/B (the gradient
 * flows down), smaller stage for F and W. */
static int tie_less(const cand *a, const cand *b) {
    if (a->mb != b->mb) return a->mb < b->mb;
    static const int cls[3] = {1, 0, 2};
    if (a->slot != b->slot) return cls[a->slot] < cls[b->slot];
    return a->slot == 1 ? a->stage > b->stage : a->stage < b->stage;
}

static int key_less(const cand *a, const cand *b) {
    if (a->key != b->key) return a->key < b->key;
    return tie_less(a, b);
}

static op_kind slot_kind(const sim_dstage *t, int slot) {
    return slot == 0 ? OP_F : slot == 2 ? OP_W : t->split ? OP_I : OP_B;
}

/* Custom priority: every ready candidate gets its key from the policy (in stage order, F, I|B,
 * W: a stateful prio sees the same calls as before).  Returns 1 with *best set, else 0 and
 * *fut = the earliest arrival still to come. */
static int pick_custom(op_sim_ws *ws, const op_sim_policy *pol, int d, double now, int force,
                       cand *best_out, double *fut_out) {
    const sim_dev *dv = &ws->dv[d];
    const int cap_ok = !(dv->cap > 0 && dv->inflight >= dv->cap);
    const op_sim_view view = {d, now, dv->inflight, dv->pending_w, dv->n_done, dv->act_now,
                              dv->static_b};
    double fut = INFINITY;
    int have_best = 0, have_any = 0;
    cand best = {0}, any = {0};
    for (int j = dv->first; j < dv->first + dv->nst; j++) {
        const int s = ws->dev_stages[j];
        const sim_dstage *t = &ws->ds[s];
        for (int slot = 0; slot < 3; slot++) {
            const int m = t->next[slot];
            if (m >= ws->dyn_M) continue;
            const double e = t->in[slot][m]; /* producer end */
            if (e < 0) continue;             /* producer not started: its start will wake us */
            const double r = e + t->delay[slot];
            if (r > now) {
                if (r < fut) fut = r;
                continue;
            }
            cand c = {slot, s, m, 0.0, r};
            int held = slot == 0 && (!cap_ok || (pol->mem_limit_bytes > 0 &&
                                                 (double)(dv->static_b + dv->act_now + t->act) >
                                                     pol->mem_limit_bytes));
            const op_kind k = slot_kind(t, slot);
            c.key = pol->prio_ex ? pol->prio_ex(pol->ctx, &view, k, s, m)
                                 : pol->prio(pol->ctx, d, k, s, m, now);
            if (isnan(c.key)) c.key = INFINITY;
            if (c.key == INFINITY) held = 1;
            if (!held && (!have_best || key_less(&c, &best))) best = c, have_best = 1;
            if (!have_any || key_less(&c, &any)) any = c, have_any = 1;
        }
    }
    if (!have_best && force && have_any) best = any, have_best = 1;
    *best_out = best;
    *fut_out = fut;
    return have_best;
}

/* Built-in rule (sim.h): it only needs the best op of each class in tie order, so packed keys
 * (mb << 32 | rank) compare as integers.  Classes: 0 F allowed, 1 I/B, 2 W, 3 F held by a
 * cap.  This is the hot path of the tuner's dynamic runs. */
static inline int pick_builtin(const op_sim_ws *ws, double mem_limit, int d, double now,
                               int force, cand *best, double *fut_out) {
    const sim_dev *dv = &ws->dv[d];
    const int M = ws->dyn_M;
    uint64_t bk[4] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    double br[4] = {0, 0, 0, 0};
    double fut = INFINITY;
    const int cap_ok = !(dv->cap > 0 && dv->inflight >= dv->cap);
    const double room =
        mem_limit > 0 ? mem_limit - (double)(dv->static_b + dv->act_now) : INFINITY;
    for (int j = dv->first; j < dv->first + dv->nst; j++) {
        const sim_dstage *t = &ws->ds[ws->dev_stages[j]];
        for (int slot = 0; slot < 3; slot++) {
            const int m = t->next[slot];
            if (m >= M) continue;
            const double e = t->in[slot][m];
            if (e < 0) continue;
            const double r = e + t->delay[slot];
            if (r <= now) {
                const int k = slot != 0 ? slot : cap_ok && (double)t->act <= room ? 0 : 3;
                const uint64_t key = (uint64_t)m << 32 | t->rank[slot];
                if (key < bk[k]) bk[k] = key, br[k] = r;
            } else if (r < fut) {
                fut = r;
            }
        }
    }
    *fut_out = fut;
    const uint64_t NONE = UINT64_MAX;
    int pick = -1;
    if (dv->wl > 0 && dv->pending_w >= dv->wl && bk[2] != NONE) pick = 2;
    else if (dv->inflight < dv->warm && bk[0] != NONE) pick = 0;
    else if (bk[1] != NONE) pick = 1;
    else if (bk[0] != NONE) pick = 0;
    else if (bk[2] != NONE) pick = 2;
    else if (force && bk[3] != NONE) pick = 3;
    if (pick < 0) return 0;
    const int lo = (int)(uint32_t)bk[pick];
    best->slot = pick == 3 ? 0 : pick;
    best->mb = (int)(bk[pick] >> 32);
    best->stage = pick == 1 ? ws->dyn_S - 1 - lo : lo;
    best->key = 0.0;
    best->arrive = br[pick];
    return 1;
}

static inline int pick(const op_sim_ws *ws, const op_sim_policy *pol, int d, double now,
                       int force, cand *best, double *fut) {
    if (pol->prio || pol->prio_ex)
        return pick_custom((op_sim_ws *)ws, pol, d, now, force, best, fut);
    return pick_builtin(ws, pol->mem_limit_bytes, d, now, force, best, fut);
}

/* Starts op c on device d at now. */
static inline void start(op_sim_ws *ws, int d, double now, const cand *c) {
    sim_dev *dv = &ws->dv[d];
    sim_dstage *t = &ws->ds[c->stage];
    const int slot = c->slot;
    const double end = now + t->dur[slot];
    /* an op held back past the moment its device and input were both free makes these times
     * differ from a replay of the order; the caller then replays */
    if (now != (dv->free_t > c->arrive ? dv->free_t : c->arrive)) ws->delayed = 1;
    dv->free_t = end;
    t->out[slot][c->mb] = end;
    t->next[slot]++;
    op_op *o = dv->out++;
    o->kind = (uint8_t)slot_kind(t, slot);
    o->stage = c->stage;
    o->mb = c->mb;
    o->start = now;
    o->end = end;
    dv->busy = 1;
    dv->run_stage = c->stage;
    dv->run_slot = slot;
    dv->wake_at = KEY_NONE;
    set_key(ws, d, sim_key(end));
    if (slot == 0) {
        dv->act_now += t->act;
        dv->inflight++;
    }
    /* a consumer on another device learns its arrival time now */
    if (t->wake_dev[slot] >= 0) wake(ws, t->wake_dev[slot], end + t->wake_delay[slot]);
}

/* Device d's op (if busy) ended at its event: free the device, update its counters. */
static inline void finish(op_sim_ws *ws, sim_dev *dv) {
    const sim_dstage *t = &ws->ds[dv->run_stage];
    dv->busy = 0;
    dv->n_done++;
    if (dv->run_slot == 1) {
        dv->inflight--;
        if (t->split) {
            dv->act_now -= t->act - t->act_w;
            dv->pending_w++;
        } else {
            dv->act_now -= t->act;
        }
    } else if (dv->run_slot == 2) {
        dv->act_now -= t->act_w;
        dv->pending_w--;
    }
}

/* ---- setup ---- */

/* Per-stage table, device -> stages, per-device state and output slices. */
static void setup(op_plan *p, const op_sim_policy *pol, op_sim_ws *ws) {
    const int P = p->P, S = p->S, M = p->M;
    const int64_t SM = (int64_t)S * M; /* end[] plane size (sim_internal.h) */
    double *E = ws->end, *zeros = ws->end + 3 * SM;
    ws->dyn_S = S;
    ws->dyn_M = M;
    for (int m = 0; m < M; m++) zeros[m] = 0.0;
    for (int s = 0; s < S; s++) {
        const sim_stage *st = &ws->st[s];
        sim_dstage *t = &ws->ds[s];
        const int last = s + 1 == S;
        t->in[0] = s > 0 ? E + (s - 1) * (int64_t)M : zeros;
        t->in[1] = last ? E + s * (int64_t)M : E + SM + (s + 1) * (int64_t)M;
        t->in[2] = E + SM + s * (int64_t)M;
        t->delay[0] = st->delay_f;
        t->delay[1] = st->delay_b; /* 0 on the last stage */
        t->delay[2] = 0.0;
        for (int k = 0; k < 3; k++) {
            t->out[k] = E + k * SM + s * (int64_t)M;
            t->dur[k] = st->dur[k];
            t->next[k] = 0;
        }
        t->split = st->split;
        if (!t->split) t->next[2] = M;
        t->rank[0] = t->rank[2] = (uint32_t)s;
        t->rank[1] = (uint32_t)(S - 1 - s);
        t->wake_dev[0] = !last && ws->st[s + 1].dev != st->dev ? ws->st[s + 1].dev : -1;
        t->wake_delay[0] = !last ? ws->st[s + 1].delay_f : 0.0;
        t->wake_dev[1] = s > 0 && ws->st[s - 1].dev != st->dev ? ws->st[s - 1].dev : -1;
        t->wake_delay[1] = s > 0 ? ws->st[s - 1].delay_b : 0.0;
        t->wake_dev[2] = -1;
        t->wake_delay[2] = 0.0;
        t->act = st->act;
        t->act_w = st->act_w;
    }

    /* device -> stages (ascending) */
    int *first = ws->dev_first;
    for (int d = 0; d <= P; d++) first[d] = 0;
    for (int s = 0; s < S; s++) first[p->stage_dev[s] + 1]++;
    for (int d = 0; d < P; d++) first[d + 1] += first[d];
    for (int d = 0; d < P; d++) ws->dv[d].nst = 0; /* used as a fill cursor */
    for (int s = 0; s < S; s++) {
        const int d = p->stage_dev[s];
        ws->dev_stages[first[d] + ws->dv[d].nst++] = s;
    }
    for (int d = 0; d < P; d++) {
        sim_dev *dv = &ws->dv[d];
        int64_t n = 0, stat = 0;
        dv->first = first[d];
        for (int j = first[d]; j < first[d + 1]; j++) {
            const int s = ws->dev_stages[j];
            n += (int64_t)M * (ws->st[s].split ? 3 : 2);
            stat += op_stage_static_bytes(p, s);
        }
        /* the order is written straight into the plan (reusing its arrays when the shape
         * did not change, as in the tuner's loops) */
        if (n > 0 && !(p->ops[d] && p->n_ops[d] == (int)n))
            p->ops[d] = OP_ARENA_NEW(&p->arena, op_op, n);
        p->n_ops[d] = (int)n;
        dv->out = p->ops[d];
        dv->busy = 0;
        dv->wake_at = KEY_NONE;
        dv->inflight = dv->pending_w = dv->n_done = 0;
        dv->run_stage = dv->run_slot = 0;
        dv->act_now = 0;
        dv->static_b = stat;
        dv->free_t = 0.0;
        /* the policy's per-device knobs, read once */
        dv->cap = pol->max_inflight ? pol->max_inflight[d] : 0;
        dv->wl = pol->w_limit ? pol->w_limit[d] : 0;
        dv->warm = pol->warmup ? pol->warmup[d]
                   : dv->nst > 0 ? S - 1 - ws->dev_stages[first[d]]
                                 : 0;
    }
    tw_init(ws);
    ws->delayed = 0;
}

/* Every device idle and no input on its way: only holds keep ops waiting.  Runs the held op
 * that comes first in key, then tie order, over all devices: the oldest microbatch moves, so
 * the pipeline drains instead of filling up.  Returns 0 if there is none. */
static int unstall(op_sim_ws *ws, const op_sim_policy *pol, int P, double now) {
    int dbest = -1;
    cand cb = {0}, c;
    double fut;
    for (int e = 0; e < P; e++)
        if (pick(ws, pol, e, now, 1, &c, &fut) && (dbest < 0 || key_less(&c, &cb)))
            dbest = e, cb = c;
    if (dbest < 0) return 0;
    /* pick again for real: a stateful custom priority sees the same calls as a plain decision */
    if (!pick(ws, pol, dbest, now, 1, &c, &fut)) return 0;
    start(ws, dbest, now, &c);
    return 1;
}

int op_sim_dynamic(op_plan *p, const op_sim_policy *pol_in, op_sim_ws *ws, op_err *err) {
    int rc = sim_check_layout(p, err);
    if (rc != OP_OK) return rc;
    op_sim_policy zero = {0};
    const op_sim_policy *pol = pol_in ? pol_in : &zero;
    op_sim_ws *own = ws ? NULL : op_sim_ws_new();
    if (!ws) ws = own;
    sim_prepare(ws, p);
    setup(p, pol, ws);
    const int P = p->P;
    int64_t total = 0;
    for (int d = 0; d < P; d++) total += p->n_ops[d];

    int64_t done = 0;
    double now = 0.0;
    wake(ws, ws->st[0].dev, 0.0);
    const int custom = pol->prio || pol->prio_ex;
    const double mem_limit = pol->mem_limit_bytes;
    while (done < total) {
        const sim_tnode root = ws->tw[1];
        if (root.k == KEY_NONE) {
            OP_ASSERT(unstall(ws, pol, P, now), "dynamic simulation stalled with %lld ops left",
                      (long long)(total - done));
            continue;
        }
        now = sim_time(root.k);
        const int d = root.d;
        sim_dev *dv = &ws->dv[d];
        if (dv->busy) {
            finish(ws, dv);
            done++;
        }
        /* decide now: start an op (which sets d's next event to its end), or sleep until the
         * earliest input on its way, else until another device's op wakes it */
        dv->wake_at = KEY_NONE;
        cand c;
        double fut;
        const int ok = custom ? pick_custom(ws, pol, d, now, 0, &c, &fut)
                              : pick_builtin(ws, mem_limit, d, now, 0, &c, &fut);
        if (ok) {
            start(ws, d, now, &c);
        } else if (fut < INFINITY) {
            dv->wake_at = sim_key(fut);
            set_key(ws, d, dv->wake_at);
        } else {
            set_key(ws, d, KEY_NONE);
        }
    }

    /* times from a replay of the orders: what the executor would do with them */
    if (ws->delayed) {
        sim_prepare(ws, p);
        double T = sim_replay_core(p, ws, 1);
        OP_ASSERT(T >= 0, "replay of a list-scheduled order deadlocked");
    }
    op_sim_fill_pred(p);
    op_sim_ws_free(own);
    return OP_OK;
}
