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
 * Speed.  At P = 128 an op cost 4x what it did at P = 4 (same instructions per op, give or
 * take the tree's depth): each event is one chain of dependent steps (pop, decide, push the
 * new end time), and the state of ~128 interleaving devices does not stay in L1, so every
 * dependent load on that chain was an L2 (or, for end[] lines not yet written, L3) round
 * trip.  What keeps the chain short:
 *  - a decision reads one line of its stage (sim_dstage: the producers' end times are pushed
 *    into it when they start) and one of its device (sim_dev: what ends with its op was set
 *    when the op started), both found from the device number alone;
 *  - end[] is read only where it was written (sim_dstage.prod), so never a cold line;
 *  - the event tree compares integer keys with cmov; wake-ups read a dense array;
 *  - 128 output streams defeat the hardware prefetcher: start prefetches each one.
 * (Branch-free versions of the decision and of start were tried: more instructions, slower
 * at every P.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

#define NONE UINT64_MAX /* no candidate in a class */

static inline double min_d(double a, double b) { return a < b ? a : b; } /* minsd */
static inline uint64_t min_u(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---- event queue: tournament tree over devices ---- */

/* Queue key of a time: its bits as an integer, which orders like the double for t >= 0, the
 * only times there are (+0.0 for -0.0; NaN, which valid costs never give, counts as +inf). */
static inline int64_t sim_key(double t) {
    int64_t k;
    t += 0.0;
    if (t != t) t = INFINITY;
    memcpy(&k, &t, 8);
    return k ^ ((k >> 63) & INT64_MAX); /* a negative time, should one appear, still in order */
}
static inline double sim_time(int64_t k) {
    k ^= (k >> 63) & INT64_MAX;
    double t;
    memcpy(&t, &k, 8);
    return t;
}
#define KEY_NEVER ((int64_t)0x7ff0000000000000) /* sim_key(+inf): no event */

/* Sets device d's event key and recomputes its path to the root.  Each level needs only the
 * sibling, whose address is known up front, so the loads overlap instead of chaining; the
 * selects compile to cmov. */
static inline void set_key(op_sim_ws *ws, int d, int64_t k) {
    int64_t *tk = ws->tk;
    int32_t *td = ws->td;
    unsigned i = (unsigned)(ws->tw_leaves + d);
    int64_t ck = k;
    int32_t cd = d;
    tk[i] = k;
    while (i > 1) {
        const int64_t sk = tk[i ^ 1];
        const int32_t sd = td[i ^ 1];
        /* an odd i is a right child: its left sibling holds lower devices and wins ties */
        const int take = sk < ck + (int64_t)(i & 1);
        ck = take ? sk : ck;
        cd = take ? sd : cd;
        i >>= 1;
        tk[i] = ck;
        td[i] = cd;
    }
}

static void tw_init(op_sim_ws *ws) {
    const int n = ws->tw_leaves;
    for (int i = 1; i < 2 * n; i++) {
        ws->tk[i] = KEY_NEVER;
        ws->td[i] = i >= n ? i - n : 0;
    }
}

/* An input for device d arrives at t: wake it then (a busy device re-decides at its op's end
 * anyway, and then sees every arrival it can: its wake_at is INT64_MIN, no k is below). */
static inline void wake(op_sim_ws *ws, int d, double t) {
    const int64_t k = sim_key(t);
    if (k >= ws->wake_at[d]) return;
    ws->wake_at[d] = k;
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

/* Custom priority: every ready candidate gets its key from the policy, in stage order, then
 * F, I|B, W.  Returns 1 with *best set, else 0; *fut = the earliest arrival still to come. */
static int pick_custom(op_sim_ws *ws, const op_sim_policy *pol, int d, double now, int force,
                       cand *best_out, double *fut_out) {
    const sim_dev *dv = &ws->dv[d];
    const int cap_ok = !(dv->cap > 0 && dv->inflight >= dv->cap);
    const int64_t stat = ws->static_b[d];
    const op_sim_view view = {d,
                              now,
                              dv->inflight,
                              dv->pending_w,
                              (int)(dv->out - ws->ops_base[d]) - ((dv->run & 3) != 3),
                              dv->held - stat,
                              stat};
    double fut = INFINITY;
    int have_best = 0, have_any = 0;
    cand best = {0}, any = {0};
    for (int j = ws->dev_first[d]; j < ws->dev_first[d + 1]; j++) {
        const int s = ws->dev_stages[j];
        const sim_dstage *t = &ws->ds[s];
        for (int slot = 0; slot < 3; slot++) {
            const int m = t->next[slot];
            if (m >= ws->dyn_M) continue;
            const double e = t->head[slot]; /* producer end */
            if (e < 0) continue; /* producer not started: its start will wake us */
            const double r = slot < 2 ? e + t->delay[slot] : e;
            if (r > now) {
                if (r < fut) fut = r;
                continue;
            }
            cand c = {slot, s, m, 0.0, r};
            const double lim = pol->dev_mem_limit_bytes ? pol->dev_mem_limit_bytes[d] : pol->mem_limit_bytes;
            int held = slot == 0 && (!cap_ok || (lim > 0 && (double)(dv->held + t->f_need) > lim));
            const op_kind k = slot == 0 ? OP_F : slot == 2 ? OP_W : t->split ? OP_I : OP_B;
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
 * (mb << 32 | rank) compare as integers; rank = stage for F and W, S-1-stage for I|B.
 * Classes: 0 F allowed, 1 I/B, 2 W, 3 F held by a cap.  Sets *c (key 0) and returns 1, or
 * returns 0; *fut = the earliest arrival still to come.  Inlined into the event loop (and so
 * start), the pick stays in registers. */
#define HOT static inline __attribute__((always_inline))
HOT int pick_builtin(const op_sim_ws *ws, double mem_limit, int d, double now, int force,
                     cand *c, double *fut_out) {
    const sim_dev *dv = &ws->dv[d];
    const uint32_t S1 = (uint32_t)ws->dyn_S - 1;
    uint64_t b0 = NONE, b1 = NONE, b2 = NONE, b3 = NONE;
    double fut = INFINITY;
    const int cap_ok = !(dv->cap > 0 && dv->inflight >= dv->cap);
    const double room = mem_limit > 0 ? mem_limit - (double)dv->held : INFINITY;
    const int j1 = ws->dev_first[d + 1];
    for (int j = ws->dev_first[d]; j < j1; j++) {
        const sim_dstage *t = &ws->ds[ws->dev_stages[j]];
        /* e < 0: producer not started (or no op left); r <= now: ready; else on its way */
        const double e0 = t->head[0], e1 = t->head[1], e2 = t->head[2];
        const double r0 = e0 + t->delay[0], r1 = e1 + t->delay[1];
        const int s0 = e0 >= 0, s1 = e1 >= 0, s2 = e2 >= 0;
        const int ok0 = s0 & (r0 <= now), ok1 = s1 & (r1 <= now), ok2 = s2 & (e2 <= now);
        fut = min_d((s0 & !ok0) ? r0 : INFINITY, fut);
        fut = min_d((s1 & !ok1) ? r1 : INFINITY, fut);
        fut = min_d((s2 & !ok2) ? e2 : INFINITY, fut);
        const uint32_t st = (uint32_t)t->stage;
        const uint64_t k0 = ok0 ? (uint64_t)t->next[0] << 32 | st : NONE;
        const uint64_t k1 = ok1 ? (uint64_t)t->next[1] << 32 | (S1 - st) : NONE;
        const uint64_t k2 = ok2 ? (uint64_t)t->next[2] << 32 | st : NONE;
        const int f_ok = cap_ok & ((double)t->f_need <= room);
        b0 = min_u(b0, f_ok ? k0 : NONE);
        b3 = min_u(b3, f_ok ? NONE : k0);
        b1 = min_u(b1, k1);
        b2 = min_u(b2, k2);
    }
    *fut_out = fut;
    /* the first rule that applies wins (sim.h): W past its limit, F in warm-up, I/B, F, W,
     * a held F when stalled; taken here from the last, each overriding.  The class goes to
     * bits 30-31 of the rank (ranks are < S < 2^30), so one select moves both. */
    uint64_t sel = force ? b3 | 3u << 30 : NONE;
    sel = b2 != NONE ? b2 | 2u << 30 : sel;
    sel = b0 != NONE ? b0 : sel;
    sel = b1 != NONE ? b1 | 1u << 30 : sel;
    sel = dv->inflight < dv->warm && b0 != NONE ? b0 : sel;
    sel = dv->wl > 0 && dv->pending_w >= dv->wl && b2 != NONE ? b2 | 2u << 30 : sel;
    if (sel == NONE) return 0;
    const int cls = (int)(sel >> 30 & 3), lo = (int)(sel & 0x3fffffff);
    const int slot = cls == 3 ? 0 : cls;
    c->slot = slot;
    c->mb = (int)(sel >> 32);
    c->stage = cls == 1 ? (int)S1 - lo : lo;
    c->key = 0.0;
    const sim_dstage *t = &ws->ds[c->stage];
    c->arrive = slot < 2 ? t->head[slot] + t->delay[slot] : t->head[2];
    return 1;
}

static int pick(const op_sim_ws *ws, const op_sim_policy *pol, int d, double now, int force,
                cand *best, double *fut) {
    if (pol->prio || pol->prio_ex)
        return pick_custom((op_sim_ws *)ws, pol, d, now, force, best, fut);
    return pick_builtin(ws, pol->dev_mem_limit_bytes ? pol->dev_mem_limit_bytes[d] : pol->mem_limit_bytes,
                        d, now, force, best, fut);
}

/* End of op mb of producer pr (sim_dstage.prod), or -1 if it has not started: its end[] is
 * read only once written, so end[] needs no reset and a device that waits for an input does
 * not pull in a line of end[] no one has touched since the last run (a cache miss). */
static inline double produced(const op_sim_ws *ws, int pr, int mb) {
    if (pr < 0) return 0.0;
    const int ps = pr >> 2, pk = pr & 3;
    if (ws->ds[ps].next[pk] <= mb) return -1.0;
    return ws->end[pk * ws->dyn_SM + (int64_t)ps * ws->dyn_M + mb];
}

/* Starts op c on device d at now. */
HOT void start(op_sim_ws *ws, int d, double now, const cand *c) {
    sim_dev *dv = &ws->dv[d];
    sim_dstage *t = &ws->ds[c->stage];
    const int slot = c->slot, mb = c->mb, s = c->stage, M = ws->dyn_M;
    const double end = now + t->dur[slot];
    /* an op held back past the moment its device and input were both free makes these times
     * differ from a replay of the order; the caller then replays */
    ws->delayed |= now != (dv->free_t > c->arrive ? dv->free_t : c->arrive);
    dv->free_t = end;
    const int n = ++t->next[slot];
    t->head[slot] = n < M ? produced(ws, t->prod[slot], n) : -1.0;
    op_op *o = dv->out++;
    /* 128 devices write 128 streams: prefetch each a few lines ahead, as hardware does not */
    __builtin_prefetch(o + 8, 1, 3);
    o->kind = (uint8_t)(slot == 0 ? OP_F : slot == 2 ? OP_W : t->split ? OP_I : OP_B);
    o->stage = s;
    o->mb = mb;
    o->start = now;
    o->end = end;
    dv->run = s << 2 | slot;
    dv->fin_held = slot == 1 ? t->act_end_b : slot == 2 ? t->act_w : 0;
    dv->fin_pend = slot == 1 ? t->split : slot == 2 ? -1 : 0;
    ws->wake_at[d] = INT64_MIN; /* busy: wake-ups are moot, it decides at its op's end */
    set_key(ws, d, sim_key(end));
    dv->held += slot == 0 ? t->act_end_b + t->act_w : 0; /* = the stage's act */
    dv->inflight += slot == 0;
    ws->last_f = slot == 0 && end > ws->last_f ? end : ws->last_f;
    if (slot == 2) return; /* W has no consumer */
    if (slot == 1 && ws->first_b < 0) ws->first_b = now; /* events come in time order */
    /* its consumers: F(s) -> F(s+1) and, on the last stage, I|B(s); I|B(s) -> I|B(s-1) and
     * W(s) (none for B: next[2] = M).  The end[] rows keep it for when they get to mb; the
     * one waiting for exactly mb gets it now */
    ws->end[slot * ws->dyn_SM + (int64_t)s * M + mb] = end;
    if (slot == 0 ? s + 1 < ws->dyn_S : s > 0) {
        sim_dstage *u = slot == 0 ? t + 1 : t - 1;
        if (u->next[slot] == mb) u->head[slot] = end;
        const int e = t->wake_dev[slot];
        /* a consumer on another device learns its arrival time now */
        if (e >= 0) wake(ws, e, end + u->delay[slot]);
    }
    if ((slot == 1 || s + 1 == ws->dyn_S) && t->next[slot + 1] == mb) t->head[slot + 1] = end;
}

/* Device dv's event: the op it ran (slot 3: none, it was woken) ended: update its counters.
 * Returns 1 if an op ended. */
static inline int finish(sim_dev *dv) {
    const int slot = dv->run & 3;
    dv->held -= dv->fin_held;
    dv->pending_w += dv->fin_pend;
    dv->inflight -= slot == 1;
    dv->fin_held = 0;
    dv->fin_pend = 0;
    dv->run |= 3;
    return slot != 3;
}

/* ---- setup ---- */

/* Per-stage table, device -> stages, per-device state and output slices. */
static void setup(op_plan *p, const op_sim_policy *pol, op_sim_ws *ws) {
    const int P = p->P, S = p->S, M = p->M;
    const int64_t SM = (int64_t)S * M; /* end[] plane size (sim_internal.h) */
    OP_ASSERT(S < 1 << 30, "%d stages", S); /* pick_builtin packs a class above the rank */
    ws->dyn_S = S;
    ws->dyn_M = M;
    ws->dyn_SM = SM;
    for (int s = 0; s < S; s++) {
        const sim_stage *st = &ws->st[s];
        sim_dstage *t = &ws->ds[s];
        const int last = s + 1 == S;
        t->prod[0] = s > 0 ? (s - 1) << 2 : -1;
        t->prod[1] = last ? s << 2 : (s + 1) << 2 | 1;
        t->prod[2] = s << 2 | 1;
        t->next[0] = t->next[1] = 0;
        t->next[2] = st->split ? 0 : M;
        t->head[0] = s > 0 ? -1.0 : 0.0; /* nothing has run yet */
        t->head[1] = t->head[2] = -1.0;
        t->delay[0] = st->delay_f;
        t->delay[1] = st->delay_b; /* 0 on the last stage */
        t->stage = s;
        {
            /* with act_i = 0 and act_w <= act this is act: the rule before act_i existed */
            /* recompute re-materialises remat bytes during I on top of the stash */
            int64_t ai = st->act_i + st->remat;
            int64_t extra = ai > st->act_w - st->act ? ai : st->act_w - st->act;
            t->f_need = st->act + (extra > 0 ? extra : 0);
        }
        for (int k = 0; k < 3; k++) t->dur[k] = st->dur[k];
        t->act_end_b = st->split ? st->act - st->act_w : st->act;
        t->act_w = st->act_w;
        t->split = st->split;
        t->wake_dev[0] = !last && ws->st[s + 1].dev != st->dev ? ws->st[s + 1].dev : -1;
        t->wake_dev[1] = s > 0 && ws->st[s - 1].dev != st->dev ? ws->st[s - 1].dev : -1;
    }

    /* device -> stages (ascending) */
    int *first = ws->dev_first;
    for (int d = 0; d <= P; d++) first[d] = 0;
    for (int s = 0; s < S; s++) first[p->stage_dev[s] + 1]++;
    for (int d = 0; d < P; d++) first[d + 1] += first[d];
    for (int d = 0; d < P; d++) ws->dv[d].inflight = 0; /* used as a fill cursor */
    for (int s = 0; s < S; s++) {
        const int d = p->stage_dev[s];
        ws->dev_stages[first[d] + ws->dv[d].inflight++] = s;
    }
    for (int d = 0; d < P; d++) {
        sim_dev *dv = &ws->dv[d];
        int64_t n = 0, stat = 0;
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
        ws->ops_base[d] = dv->out = p->ops[d];
        ws->static_b[d] = dv->held = stat;
        ws->wake_at[d] = KEY_NEVER;
        dv->free_t = 0.0;
        dv->fin_held = 0;
        dv->fin_pend = 0;
        dv->inflight = dv->pending_w = 0;
        dv->run = 3;
        /* the policy's per-device knobs, read once */
        dv->cap = pol->max_inflight ? pol->max_inflight[d] : 0;
        dv->wl = pol->w_limit ? pol->w_limit[d] : 0;
        dv->warm = pol->warmup ? pol->warmup[d]
                   : first[d + 1] > first[d] ? S - 1 - ws->dev_stages[first[d]]
                                             : 0;
    }
    tw_init(ws);
    ws->delayed = 0;
    ws->last_f = 0.0;
    ws->first_b = -1.0;
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
    /* pick again for real: a stateful custom priority sees the calls it always did */
    if (!pick(ws, pol, dbest, now, 1, &c, &fut)) return 0;
    start(ws, dbest, now, &c);
    return 1;
}

/* The event loop; custom: the policy has a priority callback (a constant in each inlined
 * copy, so the built-in rule's loop carries no trace of the other). */
static inline void run(op_sim_ws *ws, const op_sim_policy *pol, int P, int64_t total,
                       const int custom) {
    int64_t done = 0;
    double now = 0.0;
    const double mem_limit = pol->mem_limit_bytes;
    wake(ws, ws->st[0].dev, 0.0);
    while (done < total) {
        const int64_t k = ws->tk[1];
        if (k == KEY_NEVER) {
            OP_ASSERT(unstall(ws, pol, P, now), "dynamic simulation stalled with %lld ops left",
                      (long long)(total - done));
            continue;
        }
        now = sim_time(k);
        const int d = ws->td[1];
        sim_dev *dv = &ws->dv[d];
        done += finish(dv);
        /* decide now: start an op (which sets d's next event to its end), or sleep until the
         * earliest input on its way, else until another device's op wakes it */
        ws->wake_at[d] = KEY_NEVER;
        cand c;
        double fut;
        const int ok = custom ? pick_custom(ws, pol, d, now, 0, &c, &fut)
                              : pick_builtin(ws, pol->dev_mem_limit_bytes ? pol->dev_mem_limit_bytes[d]
                                                                          : mem_limit, d, now, 0, &c, &fut);
        if (ok) {
            start(ws, d, now, &c);
        } else {
            ws->wake_at[d] = sim_key(fut); /* KEY_NEVER when fut = +inf */
            set_key(ws, d, ws->wake_at[d]);
        }
    }
}

int op_sim_dynamic(op_plan *p, const op_sim_policy *pol_in, op_sim_ws *ws, op_err *err) {
    /* the costs and links too: an infinite time or a zero bandwidth stalled the list
     * scheduler, which it can only take for its own bug */
    int rc = op_plan_validate_numbers(p, err);
    if (rc == OP_OK) rc = sim_check_layout(p, err);
    if (rc != OP_OK) return rc;
    op_sim_policy zero = {0};
    const op_sim_policy *pol = pol_in ? pol_in : &zero;
    op_sim_ws *own = ws ? NULL : op_sim_ws_new();
    if (!ws) ws = own;
    sim_prepare(ws, p, 0);
    setup(p, pol, ws);
    int64_t total = 0;
    for (int d = 0; d < p->P; d++) total += p->n_ops[d];
    if (pol->prio || pol->prio_ex) run(ws, pol, p->P, total, 1);
    else run(ws, pol, p->P, total, 0);

    /* times from a replay of the orders: what the executor would do with them (always when
     * stages offload: list scheduling does not wait for reloads, the replay does) */
    if (ws->delayed || ws->any_offload) {
        sim_prepare(ws, p, 1);
        double T = sim_replay_core(p, ws, 1);
        OP_ASSERT(T >= 0, "replay of a list-scheduled order deadlocked");
        sim_fill_pred(p); /* its own ops, built on a checked layout */
    } else {
        /* its first pass over the ops is known: ends per device only grow */
        double T = 0.0;
        for (int d = 0; d < p->P; d++) T = ws->dv[d].free_t > T ? ws->dv[d].free_t : T;
        sim_fill_pred_at(p, T, ws->first_b, ws->last_f);
    }
    op_sim_ws_free(own);
    return OP_OK;
}
