/* sim_pred.c: the prediction read off a simulated timeline: makespan, busy time, the idle
 * split (warm-up / residual / cool-down), bubble ratio, memory peaks, lower bound, tokens/s.
 *
 * Memory needs no event sort: every allocation and release happens at an op boundary of the
 * device that owns the activation (alloc at F start, I's transient act_i during I/B, the
 * held amount becoming act_w at I end, release at W/B end), and a device's ops are disjoint
 * in time and run in order.  Walking the order, releases at an op's end come
 * before an allocation at the next op's start, even when both fall at the same instant.
 * Offload stages add two events per microbatch off the op boundaries (the copy to host ends:
 * free; the reload starts: allocate); they are sorted per device and merged into the walk,
 * frees before allocations at the same instant, and an event inside an I|B counts with its
 * transient. */
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

/* Idle time of the gap [a, b) that falls inside [lo, hi). */
static double overlap(double a, double b, double lo, double hi) {
    double x = a > lo ? a : lo, y = b < hi ? b : hi;
    return y > x ? y - x : 0.0;
}

void op_sim_fill_pred(op_plan *p) {
    if (!op_plan_ops_in_range(p, -1)) { /* a caller's plan out of range: no prediction, no walk */
        p->pred.valid = 0;
        return;
    }
    sim_fill_pred(p);
}

void sim_fill_pred(op_plan *p) {
    double T = 0.0, tb = -1.0, tf = 0.0;
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            if (o->end > T) T = o->end;
            if (o->kind == OP_F && o->end > tf) tf = o->end;
            if ((o->kind == OP_I || o->kind == OP_B) && (tb < 0 || o->start < tb)) tb = o->start;
        }
    sim_fill_pred_at(p, T, tb, tf);
}

typedef struct {
    double t;
    int64_t delta;
} mem_ev;

static int cmp_ev(const void *a, const void *b) {
    const mem_ev *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->delta > y->delta) - (x->delta < y->delta); /* frees first */
}

/* Re-derives the copy engines from the timeline (sim_copy.c, the same calls the replay
 * makes) into p->pred.copy_ms and host_peak_bytes.  Returns 1 if the plan offloads. */
static int fill_copies(op_plan *p) {
    int any = 0;
    for (int s = 0; s < p->S; s++) any |= p->stage_act && p->stage_act[s] == OP_ACT_OFFLOAD;
    if (!any) return 0;
    op_pred *r = &p->pred;
    if (!r->copy_ms) {
        r->copy_ms = OP_ARENA_NEW(&p->arena, double, (size_t)p->S * p->M * 4);
        r->host_peak_bytes = OP_ARENA_NEW(&p->arena, int64_t, p->P);
    }
    op_sim_ws *ws = op_sim_ws_new();
    sim_prepare(ws, p, 0);
    sim_copy *cp = &ws->cp;
    sim_copy_triggers(cp, p);
    for (int d = 0; d < p->P; d++) {
        const op_op *ops = p->ops[d];
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &ops[i];
            const sim_stage *t = &ws->st[o->stage];
            if (i == 0 && o->kind != OP_F && o->kind != OP_W && t->offload)
                sim_copy_reload(cp, t, o->stage, o->mb, 0.0);
            if (o->kind == OP_F && t->offload) sim_copy_offload(cp, t, o->stage, o->mb, o->end);
            const int *tf = cp->tfirst + cp->tbase[d] + i;
            for (int k = tf[0]; k < tf[1]; k++) {
                const op_op *nx = &ops[cp->tq[k]];
                sim_copy_reload(cp, &ws->st[nx->stage], nx->stage, nx->mb, o->start);
            }
        }
    }
    memcpy(r->copy_ms, ws->xfer, sizeof(double) * (size_t)p->S * p->M * 4);
    memcpy(r->host_peak_bytes, ws->host_peak, sizeof(int64_t) * (size_t)p->P);
    op_sim_ws_free(ws);
    return 1;
}

/* Per stage: [0] stash (F), [1] act_i (transient during I/B), [2] act_w (held from I end to
 * W end; 0 for a B stage), [3] remat (held again from I start: recompute); then static bytes
 * per device.  One allocation: sb[4 * S + P]. */
static int64_t *stage_bytes(const op_plan *p) {
    int64_t *sb = op_xcalloc((size_t)p->S * 4 + (size_t)p->P, sizeof(int64_t));
    int64_t *stat_d = sb + (size_t)p->S * 4;
    for (int s = 0; s < p->S; s++) {
        sb[4 * s] = op_stage_stash_bytes(p, s);
        sb[4 * s + 1] = op_stage_act_i_bytes(p, s);
        sb[4 * s + 2] = p->stage_split[s] ? op_stage_act_w_bytes(p, s) : 0;
        sb[4 * s + 3] = op_stage_remat_bytes(p, s);
        stat_d[p->stage_dev[s]] += op_stage_static_bytes(p, s);
    }
    return sb;
}

/* Idle time of one device, split by the windows [0, a) warm-up, [a, b) residual, [b, T]. */
typedef struct {
    double busy, warm, res, cool;
} dev_idle;

/* Device d's walk: its peak bytes (static + activations, with the copy events ev[0..ne) in
 * time order), and its busy and idle split when id != NULL.  op_sim_peak_max and the
 * prediction share it, so both read the same peak. */
static inline int64_t dev_walk(const op_plan *p, int d, const int64_t *sb, int64_t stat,
                               const mem_ev *ev, int ne, double a, double b, double T,
                               dev_idle *id) {
    double busy = 0.0, warm = 0.0, res = 0.0, cool = 0.0, t = 0.0;
    int64_t act = 0, peak = stat;
    int ie = 0;
    for (int i = 0; i < p->n_ops[d]; i++) {
        const op_op *o = &p->ops[d][i];
        /* copy events up to this op's start (frees at the same instant come first) */
        for (; ie < ne && ev[ie].t <= o->start; ie++) {
            act += ev[ie].delta;
            if (stat + act > peak) peak = stat + act;
        }
        if (id) {
            /* gap before this op (most ops have none: skipping adds nothing but +0.0) */
            if (o->start > t) {
                warm += overlap(t, o->start, 0.0, a);
                res += overlap(t, o->start, a, b);
                cool += overlap(t, o->start, b, T);
            }
            busy += o->end - o->start;
            t = o->end;
        }
        int s = o->stage;
        const int isb = o->kind == OP_I || o->kind == OP_B;
        switch ((op_kind)o->kind) {
        case OP_F:
            act += sb[4 * s];
            if (stat + act > peak) peak = stat + act;
            break;
        case OP_I:
        case OP_B:
            /* recompute re-materialises, then the transient peak while the op runs */
            act += sb[4 * s + 3];
            if (stat + act + sb[4 * s + 1] > peak) peak = stat + act + sb[4 * s + 1];
            break;
        case OP_W: break;
        }
        /* copy events while the op runs (with I|B's transient on top) */
        for (; ie < ne && ev[ie].t < o->end; ie++) {
            act += ev[ie].delta;
            int64_t at = stat + act + (isb ? sb[4 * s + 1] : 0);
            if (at > peak) peak = at;
        }
        if (isb) { /* what it leaves held */
            act += (o->kind == OP_I ? sb[4 * s + 2] : 0) - sb[4 * s] - sb[4 * s + 3];
            if (stat + act > peak) peak = stat + act;
        } else if (o->kind == OP_W) {
            act -= sb[4 * s + 2];
        }
    }
    for (; ie < ne; ie++) { /* copies after the device's last op */
        act += ev[ie].delta;
        if (stat + act > peak) peak = stat + act;
    }
    if (id) {
        warm += overlap(t, T, 0.0, a);
        res += overlap(t, T, a, b);
        cool += overlap(t, T, b, T);
        *id = (dev_idle){busy, warm, res, cool};
    }
    return peak;
}

void sim_fill_pred_at(op_plan *p, double T, double tb, double tf) {
    op_pred *r = &p->pred;
    const int P = p->P;
    if (tb < 0) tb = T;
    /* boundaries of the three idle windows: [0, a) warm-up, [a, b) residual, [b, T] cool-down */
    const double a = tb, b = tf > tb ? tf : tb;
    double idle_total = 0.0;
    int64_t peak_max = 0;
    int64_t *sb = stage_bytes(p);
    const int64_t *stat_d = sb + (size_t)p->S * 4;
    const int offl = fill_copies(p);
    mem_ev *ev = NULL;
    if (offl) ev = op_xmalloc(sizeof *ev * ((size_t)p->S * p->M * 2 + 1));
    for (int d = 0; d < P; d++) {
        const int64_t stat = stat_d[d];
        int ne = 0;
        if (offl) { /* this device's copy-end frees and reload-start allocations, in time order */
            for (int s = 0; s < p->S; s++) {
                if (p->stage_dev[s] != d || p->stage_act[s] != OP_ACT_OFFLOAD) continue;
                for (int m = 0; m < p->M; m++) {
                    const double *x = &p->pred.copy_ms[((int64_t)s * p->M + m) * 4];
                    if (x[1] < 0) continue; /* kept on the device */
                    ev[ne++] = (mem_ev){x[1], -sb[4 * s]};
                    if (x[2] >= 0) ev[ne++] = (mem_ev){x[2], sb[4 * s]};
                }
            }
            qsort(ev, (size_t)ne, sizeof *ev, cmp_ev);
        }
        dev_idle id;
        int64_t peak = dev_walk(p, d, sb, stat, ev, ne, a, b, T, &id);
        r->busy_ms[d] = id.busy;
        r->warmup_ms[d] = id.warm;
        r->residual_ms[d] = id.res;
        r->cooldown_ms[d] = id.cool;
        r->static_bytes[d] = stat;
        r->peak_bytes[d] = peak;
        if (peak > peak_max) peak_max = peak;
        idle_total += id.warm + id.res + id.cool;
    }
    free(sb);
    free(ev);
    r->makespan_ms = T;
    r->peak_bytes_max = peak_max;
    r->bubble_ratio = T > 0 ? idle_total / ((double)P * T) : 0.0;
    r->lower_bound_ms = op_plan_lower_bound(p);
    r->tokens_per_s = T > 0 ? p->tokens_per_mb * p->M / (T / 1000.0) : 0.0;
    r->valid = 1;
}

int64_t op_sim_peak_max(op_plan *p) {
    if (!op_plan_ops_in_range(p, -1)) return INT64_MAX; /* fits no limit */
    for (int s = 0; s < p->S; s++)
        if (p->stage_act && p->stage_act[s] == OP_ACT_OFFLOAD) { /* peaks need the copies */
            sim_fill_pred(p);
            return p->pred.peak_bytes_max;
        }
    int64_t *sb = stage_bytes(p), peak_max = 0;
    for (int d = 0; d < p->P; d++) {
        int64_t peak = dev_walk(p, d, sb, sb[(size_t)p->S * 4 + (size_t)d], NULL, 0, 0, 0, 0, NULL);
        if (peak > peak_max) peak_max = peak;
    }
    free(sb);
    return peak_max;
}

int op_plan_fits(const op_plan *p) {
    for (int d = 0; d < p->P; d++) {
        double lim = op_plan_dev_mem_limit(p, d);
        if (lim > 0 && (double)p->pred.peak_bytes[d] > lim) return 0;
    }
    return 1;
}
