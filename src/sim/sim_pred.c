/* sim_pred.c: the prediction read off a simulated timeline: makespan, busy time, the idle
 * split (warm-up / residual / cool-down), bubble ratio, memory peaks, lower bound, tokens/s.
 *
 * Memory needs no event sort: every allocation and release happens at an op boundary of the
 * device that owns the activation (alloc at F start, I's transient act_i during I/B, the
 * held amount becoming act_w at I end, release at W/B end), and a device's ops are disjoint
 * in time and run in order.  Walking the order, releases at an op's end come
 * before an allocation at the next op's start, even when both fall at the same instant. */
#include <stdlib.h>

#include "sim/sim_internal.h"

/* Idle time of the gap [a, b) that falls inside [lo, hi). */
static double overlap(double a, double b, double lo, double hi) {
    double x = a > lo ? a : lo, y = b < hi ? b : hi;
    return y > x ? y - x : 0.0;
}

void op_sim_fill_pred(op_plan *p) {
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

void sim_fill_pred_at(op_plan *p, double T, double tb, double tf) {
    op_pred *r = &p->pred;
    const int P = p->P;
    if (tb < 0) tb = T;
    /* boundaries of the three idle windows: [0, a) warm-up, [a, b) residual, [b, T] cool-down */
    const double a = tb, b = tf > tb ? tf : tb;
    double idle_total = 0.0;
    int64_t peak_max = 0;
    /* per stage: [0] act (F), [1] act_i (transient during I/B), [2] act_w (held from I end to
     * W end; 0 for a B stage); then static per device */
    int64_t *sb = op_xcalloc((size_t)p->S * 3 + (size_t)P, sizeof(int64_t));
    int64_t *stat_d = sb + (size_t)p->S * 3;
    for (int s = 0; s < p->S; s++) {
        sb[3 * s] = op_stage_act_bytes(p, s);
        sb[3 * s + 1] = op_stage_act_i_bytes(p, s);
        sb[3 * s + 2] = p->stage_split[s] ? op_stage_act_w_bytes(p, s) : 0;
        stat_d[p->stage_dev[s]] += op_stage_static_bytes(p, s);
    }
    for (int d = 0; d < P; d++) {
        const int64_t stat = stat_d[d];
        double busy = 0.0, warm = 0.0, res = 0.0, cool = 0.0, t = 0.0;
        int64_t act = 0, peak = stat;
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            /* gap before this op (most ops have none: skipping adds nothing but +0.0) */
            if (o->start > t) {
                warm += overlap(t, o->start, 0.0, a);
                res += overlap(t, o->start, a, b);
                cool += overlap(t, o->start, b, T);
            }
            busy += o->end - o->start;
            t = o->end;
            int s = o->stage;
            switch ((op_kind)o->kind) {
            case OP_F:
                act += sb[3 * s];
                if (stat + act > peak) peak = stat + act;
                break;
            case OP_I:
            case OP_B:
                /* transient peak while the op runs, then what it leaves held */
                if (stat + act + sb[3 * s + 1] > peak) peak = stat + act + sb[3 * s + 1];
                act += (o->kind == OP_I ? sb[3 * s + 2] : 0) - sb[3 * s];
                if (stat + act > peak) peak = stat + act;
                break;
            case OP_W: act -= sb[3 * s + 2]; break;
            }
        }
        warm += overlap(t, T, 0.0, a);
        res += overlap(t, T, a, b);
        cool += overlap(t, T, b, T);
        r->busy_ms[d] = busy;
        r->warmup_ms[d] = warm;
        r->residual_ms[d] = res;
        r->cooldown_ms[d] = cool;
        r->static_bytes[d] = stat;
        r->peak_bytes[d] = peak;
        if (peak > peak_max) peak_max = peak;
        idle_total += warm + res + cool;
    }
    free(sb);
    r->makespan_ms = T;
    r->peak_bytes_max = peak_max;
    r->bubble_ratio = T > 0 ? idle_total / ((double)P * T) : 0.0;
    r->lower_bound_ms = op_plan_lower_bound(p);
    r->tokens_per_s = T > 0 ? p->tokens_per_mb * p->M / (T / 1000.0) : 0.0;
    r->valid = 1;
}
