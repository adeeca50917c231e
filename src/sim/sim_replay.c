/* sim_replay.c: replaying given per-device orders, the makespan fast path, and naming the
 * cycle when an order deadlocks.
 *
 * Replay is a worklist over devices, not an event queue: an op's start is
 * max(device free, producer end + transfer), which is final once the producer is done, so the
 * order in which devices are advanced does not change any time.  A device advances until its
 * next op's producer is not done; finishing an op re-queues the device of its consumer.  Each
 * op is started once and each finish queues at most one device, so a run is O(ops). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* The replay proper, from ws->pos / ws->free_t as set (each device's next op and free time;
 * ws->end holds the ends of the ops before them, -1 for the rest). */
static double replay_from(const op_plan *p, op_sim_ws *ws, int write) {
    const int P = p->P, M = p->M, S = p->S;
    const sim_stage *st = ws->st;
    double *end = ws->end;
    int *pos = ws->pos, *stack = ws->stack;
    double *fr = ws->free_t;
    uint8_t *inq = ws->inq;
    const int off = ws->any_offload;
    sim_copy *cp = &ws->cp;
    const int64_t SM = (int64_t)S * M; /* plane size; the next stage's row is M further */
    int sp = 0;
    for (int d = P - 1; d >= 0; d--) {
        stack[sp++] = d;
        inq[d] = 1;
    }
    while (sp) {
        int d = stack[--sp];
        inq[d] = 0;
        op_op *ops = p->ops[d];
        const int n = p->n_ops[d];
        int i = pos[d];
        double f = fr[d];
        while (i < n) {
            op_op *o = &ops[i];
            const int s = o->stage, m = o->mb, k = o->kind;
            if ((unsigned)s >= (unsigned)S || (unsigned)m >= (unsigned)M || k > OP_B) break;
            const sim_stage *t = &st[s];
            const int64_t row = (int64_t)s * M + m;
            double ready = 0.0, e;
            int push = -1, slot;
            if (k == OP_F) {
                slot = 0;
                if (s > 0) {
                    if ((e = end[row - M]) < 0) break;
                    ready = e + t->delay_f;
                }
                if (s + 1 < S) push = st[s + 1].dev;
            } else if (k == OP_W) {
                slot = 2;
                if ((e = end[SM + row]) < 0) break;
                ready = e;
            } else {
                slot = 1;
                if (s + 1 < S) {
                    if ((e = end[SM + row + M]) < 0) break;
                    ready = e + t->delay_b;
                } else {
                    if ((e = end[row]) < 0) break;
                    ready = e;
                }
                if (s > 0) push = st[s - 1].dev;
                /* offload: I|B waits for its reload (issued at its reload point, below) */
                if (off && t->offload) {
                    if (i == 0) sim_copy_reload(cp, t, s, m, 0.0);
                    double r = cp->xfer[row * 4 + 3];
                    if (r > ready) ready = r;
                }
            }
            const double start = f > ready ? f : ready;
            f = start + t->dur[slot];
            if (off) {
                if (k == OP_F && t->offload) sim_copy_offload(cp, t, s, m, f);
                const int *tf = cp->tfirst + cp->tbase[d] + i;
                for (int r = tf[0]; r < tf[1]; r++) {
                    const op_op *nx = &ops[cp->tq[r]];
                    sim_copy_reload(cp, &st[nx->stage], nx->stage, nx->mb, start);
                }
            }
            end[slot * SM + row] = f;
            if (write) {
                o->start = start;
                o->end = f;
            }
            i++;
            if (push >= 0 && push != d && !inq[push]) {
                inq[push] = 1;
                stack[sp++] = push;
            }
        }
        pos[d] = i;
        fr[d] = f;
    }
    double T = 0.0;
    for (int d = 0; d < P; d++) {
        if (pos[d] < p->n_ops[d]) return -1.0;
        if (fr[d] > T) T = fr[d];
    }
    return T;
}

double sim_replay_core(const op_plan *p, op_sim_ws *ws, int write) {
    if (ws->any_offload) sim_copy_triggers(&ws->cp, p);
    for (int d = 0; d < p->P; d++) {
        ws->pos[d] = 0;
        ws->free_t[d] = 0.0;
    }
    return replay_from(p, ws, write);
}

/* Producer of op o (its id), or -1 for F(0,m). */
static int64_t producer(const op_plan *p, const op_op *o) {
    if (o->kind == OP_F) return o->stage > 0 ? sim_id(p->S, p->M, o->stage - 1, o->mb, 0) : -1;
    if (o->kind == OP_W) return sim_id(p->S, p->M, o->stage, o->mb, 1);
    if (o->stage + 1 < p->S) return sim_id(p->S, p->M, o->stage + 1, o->mb, 1);
    return sim_id(p->S, p->M, o->stage, o->mb, 0);
}

static void put_id(const op_plan *p, op_buf *b, int64_t id) {
    const int64_t SM = (int64_t)p->S * p->M;
    int slot = (int)(id / SM);
    int s = (int)(id % SM / p->M), m = (int)(id % p->M);
    const char *k = slot == 0 ? "F" : slot == 2 ? "W" : p->stage_split[s] ? "I" : "B";
    op_buf_printf(b, "%s(s%d,mb%d)@dev%d", k, s, m, p->stage_dev[s]);
}

int sim_deadlock_report(const op_plan *p, op_sim_ws *ws, op_err *err) {
    const int P = p->P;
    int *seen = op_xcalloc((size_t)P, sizeof(int)); /* step at which the walk met device d, +1 */
    int *order = op_xmalloc(sizeof(int) * (size_t)P);
    int d = -1;
    for (int i = 0; i < P; i++)
        if (ws->pos[i] < p->n_ops[i]) {
            d = i;
            break;
        }
    OP_ASSERT(d >= 0, "deadlock report without a blocked device");
    /* Every blocked device's next op waits for a producer that is not done, on a device that
     * is itself blocked: following producers must revisit a device, which closes the cycle. */
    int steps = 0;
    const char *stray = NULL;
    while (!seen[d]) {
        seen[d] = ++steps;
        order[steps - 1] = d;
        const op_op *h = &p->ops[d][ws->pos[d]];
        int64_t x = producer(p, h);
        OP_ASSERT(x >= 0, "F(s0) cannot block");
        int e = p->stage_dev[x % ((int64_t)p->S * p->M) / p->M];
        if (ws->pos[e] >= p->n_ops[e]) {
            stray = "which is in no device's schedule";
            break;
        }
        d = e;
    }
    op_buf b = {0};
    op_buf_printf(&b, "deadlock: ");
    int first = stray ? 0 : seen[d] - 1;
    int n = stray ? steps : steps - first;
    int64_t prev_x = -1;
    for (int j = 0; j < n; j++) {
        int c = order[first + j];
        const op_op *h = &p->ops[c][ws->pos[c]];
        int64_t hid = sim_id(p->S, p->M, h->stage, h->mb, sim_slot(h->kind));
        if (j == 0) {
            put_id(p, &b, hid);
        } else if (hid != prev_x) {
            /* the producer named last is behind this device's next op */
            op_buf_printf(&b, ", which waits behind ");
            put_id(p, &b, hid);
        }
        op_buf_printf(&b, j == 0 ? " waits for " : ", which waits for ");
        prev_x = producer(p, h);
        put_id(p, &b, prev_x);
        if (b.len > 700 && j + 1 < n) {
            op_buf_printf(&b, ", ... (%d more devices in the cycle)", n - j - 1);
            break;
        }
    }
    if (stray) {
        op_buf_printf(&b, ", %s", stray);
    } else {
        int c = order[first];
        const op_op *h = &p->ops[c][ws->pos[c]];
        int64_t hid = sim_id(p->S, p->M, h->stage, h->mb, sim_slot(h->kind));
        if (prev_x != hid) {
            op_buf_printf(&b, ", which waits behind ");
            put_id(p, &b, hid);
        }
        op_buf_printf(&b, " (a cycle over %d device%s)", n, n == 1 ? "" : "s");
    }
    int rc = op_errf(err, OP_EDEADLOCK, "%s", b.data);
    op_buf_free(&b);
    free(seen);
    free(order);
    return rc;
}

int op_sim_replay(op_plan *p, op_sim_ws *ws, op_err *err) {
    int rc = op_plan_validate(p, err);
    if (rc != OP_OK) return rc;
    if ((rc = sim_check_layout(p, err)) != OP_OK) return rc;
    op_sim_ws *own = ws ? NULL : op_sim_ws_new();
    if (!ws) ws = own;
    sim_prepare(ws, p, 1);
    double T = sim_replay_core(p, ws, 1);
    if (T < 0) {
        rc = sim_deadlock_report(p, ws, err);
        p->pred.valid = 0;
    } else {
        sim_fill_pred(p); /* validated above */
    }
    op_sim_ws_free(own);
    return rc;
}

/* One replay in ws (or a workspace of its own); write: as sim_replay_core's (the op times). */
static double replay_once(const op_plan *p, op_sim_ws *ws, int write) {
    op_sim_ws *own = ws ? NULL : op_sim_ws_new();
    if (!ws) ws = own;
    sim_prepare(ws, p, 1);
    double T = sim_replay_core(p, ws, write);
    op_sim_ws_free(own);
    return T;
}

double op_sim_makespan(const op_plan *p, op_sim_ws *ws) {
    if (sim_check_layout(p, NULL) != OP_OK) return -1.0; /* replay indexes by stage_dev */
    return replay_once(p, ws, 0);
}

double op_sim_retime(op_plan *p, op_sim_ws *ws) {
    if (sim_check_layout(p, NULL) != OP_OK) return -1.0; /* replay indexes by stage_dev */
    return replay_once(p, ws, 1);
}

/* Ops that started before t0, the earliest start among the moved ones, keep their times: all
 * their inputs ended before t0 too, so none of them waits, directly or not, on a moved op or
 * on an op after one (those start at t0 or later), and the order among them is unchanged.
 * Each device resumes at its first op from t0 on (device d at lo at the latest), and the
 * replay from there is the full replay's, as the order devices advance in changes no time. */
double op_sim_retime_from(op_plan *p, op_sim_ws *ws, int d, int lo, int hi, int *from) {
    const int P = p->P, S = p->S, M = p->M;
    if (from)
        for (int e = 0; e < P; e++) from[e] = 0;
    if (sim_check_layout(p, NULL) != OP_OK) return -1.0;
    op_sim_ws *own = ws ? NULL : op_sim_ws_new();
    if (!ws) ws = own;
    sim_prepare(ws, p, 1);
    double T;
    if (ws->any_offload || d < 0 || d >= P || lo < 0 || lo > hi || hi >= p->n_ops[d]) {
        T = sim_replay_core(p, ws, 1); /* copy engines queue in issue order: replay it all */
        op_sim_ws_free(own);
        return T;
    }
    double t0 = p->ops[d][lo].start;
    for (int i = lo + 1; i <= hi; i++)
        if (p->ops[d][i].start < t0) t0 = p->ops[d][i].start;
    for (int e = 0; e < P; e++) {
        const op_op *o = p->ops[e];
        const int n = e == d ? lo : p->n_ops[e];
        int i = 0;
        for (; i < n && o[i].start < t0; i++) {
            if ((unsigned)o[i].stage >= (unsigned)S || (unsigned)o[i].mb >= (unsigned)M ||
                o[i].kind > OP_B) {
                op_sim_ws_free(own);
                return -1.0; /* the full replay stops there too */
            }
            ws->end[sim_id(S, M, o[i].stage, o[i].mb, sim_slot(o[i].kind))] = o[i].end;
        }
        ws->pos[e] = i;
        ws->free_t[e] = i > 0 ? o[i - 1].end : 0.0;
        if (from) from[e] = i;
    }
    T = replay_from(p, ws, 1);
    op_sim_ws_free(own);
    return T;
}
