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
 * sees at its next decision. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* ---- event queue: tournament tree over devices ---- */

/* Sets device d's event time and recomputes its path to the root.  Nodes hold (time, device)
 * so each level needs only the sibling, whose address is known up front: the loads overlap
 * instead of chaining.  Ties go to the lower device, which keeps runs deterministic. */
static void set_key(op_sim_ws *ws, int d, double t) {
    double *tk = ws->key;
    int *ti = ws->tw;
    int i = ws->tw_leaves + d, cd = d;
    double ct = t;
    tk[i] = t;
    while (i > 1) {
        const int sib = i ^ 1;
        const double st = tk[sib];
        const int sd = ti[sib];
        /* a left sibling holds lower devices: it wins ties.  Selects without branches: the
         * outcome is a coin flip, and mispredictions dominated this loop at P = 128. */
        const int take = (st < ct) | ((st == ct) & (i & 1));
        const int64_t mask = -(int64_t)take;
        int64_t cb, sb;
        memcpy(&cb, &ct, 8);
        memcpy(&sb, &st, 8);
        cb = (sb & mask) | (cb & ~mask);
        memcpy(&ct, &cb, 8);
        cd = (int)((sd & mask) | (cd & ~mask));
        i >>= 1;
        tk[i] = ct;
        ti[i] = cd;
    }
}

static void tw_init(op_sim_ws *ws) {
    const int n = ws->tw_leaves;
    for (int i = 1; i < 2 * n; i++) {
        ws->key[i] = INFINITY;
        ws->tw[i] = i >= n ? i - n : 0;
    }
}

/* An input for device d arrives at t: wake it then (a busy device re-decides at its op's end
 * anyway, and then sees every arrival it can). */
static void wake(op_sim_ws *ws, int d, double t) {
    if (ws->dv[d].busy || t >= ws->dv[d].wake_at) return;
    ws->dv[d].wake_at = t;
    set_key(ws, d, t);
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

static op_kind slot_kind(const op_sim_ws *ws, int slot, int s) {
    return slot == 0 ? OP_F : slot == 2 ? OP_W : ws->st[s].split ? OP_I : OP_B;
}

/* Picks device d's op at `now` and starts it; force = ignore holds (stall).  With peek != NULL
 * only reports the pick there.  Returns 0 if there is none. */
static int dispatch(op_plan *p, op_sim_ws *ws, const op_sim_policy *pol, int d, double now,
                    int force, cand *peek) {
    const int M = p->M, S = p->S;
    const sim_stage *st = ws->st;
    const int64_t SM = (int64_t)S * M; /* end[] plane size (sim_internal.h) */
    double fut = INFINITY;
    int have_best = 0, have_any = 0;
    cand best = {0}, any = {0};
    const int custom = pol->prio || pol->prio_ex;
    sim_dev *dv = &ws->dv[d];
    const int cap_ok = !(dv->cap > 0 && dv->inflight >= dv->cap);
    op_sim_view view = {0};
    if (custom)
        view = (op_sim_view){d, now, ws->dv[d].inflight, ws->dv[d].pending_w, ws->dv[d].n_done,
                             ws->dv[d].act_now, ws->dv[d].static_b};
    if (custom) {
        for (int j = ws->dev_first[d]; j < ws->dev_first[d + 1]; j++) {
            const int s = ws->dev_stages[j];
            const sim_stage *t = &st[s];
            for (int slot = 0; slot < (t->split ? 3 : 2); slot++) {
                const int m = t->next[slot];
                if (m >= M) continue;
                const int64_t row = (int64_t)s * M + m;
                double e, r; /* producer end, arrival here */
                if (slot == 0) {
                    e = s > 0 ? ws->end[row - M] : 0.0;
                    r = e + t->delay_f;
                } else if (slot == 2) {
                    r = e = ws->end[SM + row];
                } else if (s + 1 < S) {
                    e = ws->end[SM + row + M];
                    r = e + t->delay_b;
                } else {
                    r = e = ws->end[row];
                }
                if (e < 0) continue; /* producer not started: its start will wake us */
                if (r > now) {
                    if (r < fut) fut = r;
                    continue;
                }
                cand c = {slot, s, m, 0.0, r};
                int held = slot == 0 && (!cap_ok || (pol->mem_limit_bytes > 0 &&
                                                     (double)(ws->dv[d].static_b + ws->dv[d].act_now +
                                                              t->act) > pol->mem_limit_bytes));
                op_kind k = slot_kind(ws, slot, s);
                c.key = pol->prio_ex ? pol->prio_ex(pol->ctx, &view, k, s, m)
                                     : pol->prio(pol->ctx, d, k, s, m, now);
                if (isnan(c.key)) c.key = INFINITY;
                if (c.key == INFINITY) held = 1;
                if (!held && (!have_best || key_less(&c, &best))) best = c, have_best = 1;
                if (!have_any || key_less(&c, &any)) any = c, have_any = 1;
            }
        }
        if (!have_best && force && have_any) best = any, have_best = 1;
    } else {
        /* The built-in rule only needs the best op of each class, in tie order: packed keys
         * (mb << 32 | stage rank) compare as integers.  Classes: 0 F allowed, 1 I/B, 2 W,
         * 3 F held by a cap.  This loop is the hot path of the tuner's dynamic runs. */
        uint64_t bk[4] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
        double br[4] = {0, 0, 0, 0};
        const double *E = ws->end;
        const double room = pol->mem_limit_bytes > 0
                                ? pol->mem_limit_bytes - (double)(ws->dv[d].static_b + ws->dv[d].act_now)
                                : INFINITY;
        for (int j = ws->dev_first[d]; j < ws->dev_first[d + 1]; j++) {
            const int s = ws->dev_stages[j];
            const sim_stage *t = &st[s];
            int m = t->next[0];
            if (m < M) {
                const int64_t row = (int64_t)s * M + m;
                const double e = s > 0 ? E[row - M] : 0.0;
                if (e >= 0) {
                    const double r = e + t->delay_f;
                    if (r <= now) {
                        const int k = cap_ok && (double)t->act <= room ? 0 : 3;
                        const uint64_t key = (uint64_t)m << 32 | (uint32_t)s;
                        if (key < bk[k]) bk[k] = key, br[k] = r;
                    } else if (r < fut) {
                        fut = r;
                    }
                }
            }
            m = t->next[1];
            if (m < M) {
                const int64_t row = (int64_t)s * M + m;
                const int last = s + 1 >= S;
                const double e = last ? E[row] : E[SM + row + M];
                if (e >= 0) {
                    const double r = last ? e : e + t->delay_b;
                    if (r <= now) {
                        const uint64_t key = (uint64_t)m << 32 | (uint32_t)(S - 1 - s);
                        if (key < bk[1]) bk[1] = key, br[1] = r;
                    } else if (r < fut) {
                        fut = r;
                    }
                }
            }
            if (t->split && (m = t->next[2]) < M) {
                const double e = E[SM + (int64_t)s * M + m];
                if (e >= 0) {
                    if (e <= now) {
                        const uint64_t key = (uint64_t)m << 32 | (uint32_t)s;
                        if (key < bk[2]) bk[2] = key, br[2] = e;
                    } else if (e < fut) {
                        fut = e;
                    }
                }
            }
        }
        const int warm = dv->warm, wl = dv->wl;
        const uint64_t NONE = UINT64_MAX;
        int pick = -1;
        if (wl > 0 && ws->dv[d].pending_w >= wl && bk[2] != NONE) pick = 2;
        else if (ws->dv[d].inflight < warm && bk[0] != NONE) pick = 0;
        else if (bk[1] != NONE) pick = 1;
        else if (bk[0] != NONE) pick = 0;
        else if (bk[2] != NONE) pick = 2;
        else if (force && bk[3] != NONE) pick = 3;
        if (pick >= 0) {
            const int lo = (int)(uint32_t)bk[pick];
            best.slot = pick == 3 ? 0 : pick;
            best.mb = (int)(bk[pick] >> 32);
            best.stage = pick == 1 ? S - 1 - lo : lo;
            best.key = 0.0;
            best.arrive = br[pick];
            have_best = 1;
        }
    }
    if (peek) {
        *peek = best;
        return have_best;
    }
    if (!have_best) {
        if (fut < INFINITY) wake(ws, d, fut);
        return 0;
    }
    /* start it */
    const sim_stage *t = &st[best.stage];
    const int64_t id = best.slot * SM + (int64_t)best.stage * M + best.mb;
    const double end = now + t->dur[best.slot];
    /* an op held back past the moment its device and input were both free makes these times
     * differ from a replay of the order; the caller then replays */
    if (now != (ws->dv[d].free_t > best.arrive ? ws->dv[d].free_t : best.arrive)) ws->delayed = 1;
    ws->dv[d].free_t = end;
    ws->end[id] = end;
    ws->st[best.stage].next[best.slot]++;
    op_op *o = &p->ops[d][ws->dv[d].out_n++];
    o->kind = (uint8_t)slot_kind(ws, best.slot, best.stage);
    o->stage = best.stage;
    o->mb = best.mb;
    o->start = now;
    o->end = end;
    ws->dv[d].busy = 1;
    ws->dv[d].run_op = best.stage << 2 | best.slot;
    ws->dv[d].run_mb = best.mb;
    ws->dv[d].wake_at = INFINITY;
    set_key(ws, d, end);
    if (best.slot == 0) {
        ws->dv[d].act_now += t->act;
        ws->dv[d].inflight++;
    }
    /* consumers on other devices learn their arrival time now */
    if (best.slot == 0 && best.stage + 1 < S && st[best.stage + 1].dev != d)
        wake(ws, st[best.stage + 1].dev, end + st[best.stage + 1].delay_f);
    if (best.slot == 1 && best.stage > 0 && st[best.stage - 1].dev != d)
        wake(ws, st[best.stage - 1].dev, end + st[best.stage - 1].delay_b);
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
    const int P = p->P, S = p->S, M = p->M;

    /* device -> stages (ascending), and each device's slice of the output */
    for (int d = 0; d <= P; d++) ws->dev_first[d] = 0;
    for (int s = 0; s < S; s++) ws->dev_first[p->stage_dev[s] + 1]++;
    for (int d = 0; d < P; d++) ws->dev_first[d + 1] += ws->dev_first[d];
    for (int d = 0; d < P; d++) ws->dv[d].out_n = 0; /* used as a fill cursor */
    for (int s = 0; s < S; s++) {
        int d = p->stage_dev[s];
        ws->dev_stages[ws->dev_first[d] + ws->dv[d].out_n++] = s;
    }
    int64_t total = 0;
    for (int d = 0; d < P; d++) {
        int64_t n = 0, stat = 0;
        for (int j = ws->dev_first[d]; j < ws->dev_first[d + 1]; j++) {
            int s = ws->dev_stages[j];
            n += (int64_t)M * (ws->st[s].split ? 3 : 2);
            stat += op_stage_static_bytes(p, s);
        }
        /* the order is written straight into the plan (reusing its arrays when the shape
         * did not change, as in the tuner's loops) */
        if (n > 0 && !(p->ops[d] && p->n_ops[d] == (int)n)) {
            p->ops[d] = OP_ARENA_NEW(&p->arena, op_op, n);
        }
        p->n_ops[d] = (int)n;
        total += n;
        ws->dv[d].out_n = 0;
        ws->dv[d].busy = 0;
        ws->dv[d].wake_at = INFINITY;
        ws->dv[d].inflight = ws->dv[d].pending_w = ws->dv[d].n_done = 0;
        ws->dv[d].act_now = 0;
        ws->dv[d].static_b = stat;
        ws->dv[d].free_t = 0.0;
        /* the policy's per-device knobs, read once */
        const int nst = ws->dev_first[d + 1] - ws->dev_first[d];
        ws->dv[d].cap = pol->max_inflight ? pol->max_inflight[d] : 0;
        ws->dv[d].wl = pol->w_limit ? pol->w_limit[d] : 0;
        ws->dv[d].warm = pol->warmup ? pol->warmup[d]
                         : nst > 0   ? S - 1 - ws->dev_stages[ws->dev_first[d]]
                                     : 0;
    }
    for (int s = 0; s < S; s++) ws->st[s].next[0] = ws->st[s].next[1] = ws->st[s].next[2] = 0;
    tw_init(ws);
    ws->delayed = 0;

    int64_t done = 0;
    double now = 0.0;
    wake(ws, ws->st[0].dev, 0.0);
    while (done < total) {
        int d;
        if (ws->key[1] == INFINITY) {
            /* every device idle, no input on its way: only holds keep ops waiting */
            /* run the held op that comes first in key, then tie order, over all devices:
             * the oldest microbatch moves, so the pipeline drains instead of filling up */
            int dbest = -1;
            cand cb = {0}, c;
            for (int e = 0; e < P; e++)
                if (dispatch(p, ws, pol, e, now, 1, &c) && (dbest < 0 || key_less(&c, &cb)))
                    dbest = e, cb = c;
            int started = dbest >= 0 && dispatch(p, ws, pol, dbest, now, 1, NULL);
            OP_ASSERT(started, "dynamic simulation stalled with %lld ops left",
                      (long long)(total - done));
            continue;
        }
        now = ws->key[1];
        d = ws->tw[1];
        if (ws->dv[d].busy) {
            const int slot = ws->dv[d].run_op & 3, s = ws->dv[d].run_op >> 2;
            const sim_stage *t = &ws->st[s];
            ws->dv[d].busy = 0;
            ws->dv[d].n_done++;
            done++;
            if (slot == 1) {
                ws->dv[d].inflight--;
                if (t->split) {
                    ws->dv[d].act_now -= t->act - t->act_w;
                    ws->dv[d].pending_w++;
                } else {
                    ws->dv[d].act_now -= t->act;
                }
            } else if (slot == 2) {
                ws->dv[d].act_now -= t->act_w;
                ws->dv[d].pending_w--;
            }
        }
        /* decide now; dispatch sets d's next event (op end or wake-up), else none */
        ws->dv[d].wake_at = INFINITY;
        if (!dispatch(p, ws, pol, d, now, 0, NULL) && ws->dv[d].wake_at == INFINITY)
            set_key(ws, d, INFINITY);
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
