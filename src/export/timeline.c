/* timeline.c: what the time-based exports (Chrome trace, SVG) read off a plan's op times:
 * sanity of the times, the per-device memory curve and the summary numbers.
 *
 * Memory rule (the simulator's, sim.h): static bytes of the device's stages, + stash at F
 * start, + act_i_bytes + remat at I (and B) start, - act_i_bytes - (stash + remat -
 * act_w_bytes) at I end, - act_w_bytes at W end, - act_i_bytes - stash - remat at B end
 * (stash and remat per activation policy, plan.h; keep: stash = act_bytes, remat = 0);
 * offload stages: - stash when the copy to host ends, + stash when the reload starts.
 * A device runs one op at a time, so changes at the same instant are netted: an I ending at t
 * frees before the F that starts at t allocates. */
#include <math.h>
#include <stdlib.h>

#include <string.h>

#include "octopipe/export.h"
#include "octopipe/sim.h"

int op_export_check_partition(const op_plan *p, op_err *err) {
    if (p->S < 1 || p->P < 1)
        return op_errf(err, OP_EINVAL, "plan has %d stages on %d devices", p->S, p->P);
    if (p->stage_first[0] != 0 || p->stage_first[p->S] != p->n_layers)
        return op_errf(err, OP_EINVAL, "stages cover layers [%d, %d) but the model has %d layers",
                       p->stage_first[0], p->stage_first[p->S], p->n_layers);
    for (int s = 0; s < p->S; s++) {
        if (p->stage_first[s + 1] <= p->stage_first[s])
            return op_errf(err, OP_EINVAL, "stages[%d] = [%d, %d) is empty", s, p->stage_first[s],
                           p->stage_first[s + 1]);
        if (p->stage_dev[s] < 0 || p->stage_dev[s] >= p->P)
            return op_errf(err, OP_EINVAL, "stage %d is placed on device %d, not in 0..%d", s,
                           p->stage_dev[s], p->P - 1);
    }
    return OP_OK;
}

int op_export_check_times(const op_plan *p, op_err *err) {
    int any = 0;
    for (int d = 0; d < p->P; d++) {
        double prev = 0;
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            if (!isfinite(o->start) || !isfinite(o->end) || o->start < 0 || o->end < o->start)
                return op_errf(err, OP_EINVAL,
                               "schedule[%d][%d]: %s(s%d,mb%d) has bad times start %g end %g ms",
                               d, i, op_kind_name((op_kind)o->kind), o->stage, o->mb, o->start,
                               o->end);
            if (o->start < prev - 1e-9 * (1 + prev))
                return op_errf(err, OP_EINVAL,
                               "schedule[%d][%d]: %s(s%d,mb%d) starts at %g ms, before the "
                               "previous op on device %d ends (%g ms)", d, i,
                               op_kind_name((op_kind)o->kind), o->stage, o->mb, o->start, d, prev);
            prev = o->end;
            any |= o->end > 0;
        }
    }
    if (!any)
        return op_errf(err, OP_EINVAL, "the plan's ops have no times (all zero): simulate it "
                                       "first (octopipe sim)");
    return OP_OK;
}

typedef struct delta {
    double t;
    int64_t b;
} delta;

static int cmp_delta(const void *a, const void *b) {
    double x = ((const delta *)a)->t, y = ((const delta *)b)->t;
    return x < y ? -1 : x > y;
}

double *op_export_copy_times(const op_plan *p) {
    int any = 0;
    for (int s = 0; s < p->S; s++) any |= p->stage_act && p->stage_act[s] == OP_ACT_OFFLOAD;
    if (!any) return NULL;
    size_t n = (size_t)p->S * (size_t)p->M * 4;
    double *x = op_xmalloc(sizeof(double) * n);
    if (p->pred.copy_ms) {
        memcpy(x, p->pred.copy_ms, sizeof(double) * n);
    } else { /* e.g. a plan read from a file: derive them from its times as the simulator does */
        op_plan q;
        op_plan_copy(&q, p);
        op_sim_fill_pred(&q);
        memcpy(x, q.pred.copy_ms, sizeof(double) * n);
        op_plan_free(&q);
    }
    return x;
}

/* What the walk below indexes and sorts by: the layout, device d's ops in range and on d, and
 * their times finite and >= 0 (a NaN start never advanced the netting loop: it wrote past
 * its buffer).  O(S + device d's ops): the exporters call it once per device. */
static int timeline_ok(const op_plan *p, int d) {
    if (d < 0 || !op_plan_ops_in_range(p, d)) return 0;
    for (int i = 0; i < p->n_ops[d]; i++)
        if (!(p->ops[d][i].start >= 0 && p->ops[d][i].end >= p->ops[d][i].start && isfinite(p->ops[d][i].end)))
            return 0;
    return 1;
}

int op_export_mem_timeline(const op_plan *p, int d, op_mem_point **pts) {
    *pts = NULL;
    if (!timeline_ok(p, d)) return -1;
    int64_t stat = 0;
    for (int s = 0; s < p->S; s++)
        if (p->stage_dev[s] == d) stat += op_stage_static_bytes(p, s);
    int n = p->n_ops[d], nd = 0;
    double *cx = op_export_copy_times(p);
    delta *dl = op_xmalloc(sizeof(delta) * (size_t)(4 * n + 1));
    for (int i = 0; i < n; i++) {
        const op_op *o = &p->ops[d][i];
        int64_t act = op_stage_stash_bytes(p, o->stage), actw = op_stage_act_w_bytes(p, o->stage);
        int64_t acti = op_stage_act_i_bytes(p, o->stage) + op_stage_remat_bytes(p, o->stage);
        int64_t remat = op_stage_remat_bytes(p, o->stage);
        switch ((op_kind)o->kind) {
        case OP_F:
            dl[nd++] = (delta){o->start, act};
            if (cx) { /* offloaded: off the device when the copy ends, back at reload start */
                const double *x = &cx[((size_t)o->stage * p->M + o->mb) * 4];
                if (x[1] >= 0) dl[nd++] = (delta){x[1], -act};
                if (x[2] >= 0) dl[nd++] = (delta){x[2], act};
            }
            break;
        case OP_I:
            if (acti) dl[nd++] = (delta){o->start, acti};
            dl[nd++] = (delta){o->end, -acti - (act + remat - actw) + remat};
            break;
        case OP_W: dl[nd++] = (delta){o->end, -actw}; break;
        case OP_B:
            if (acti) dl[nd++] = (delta){o->start, acti};
            dl[nd++] = (delta){o->end, -acti - act};
            break;
        }
    }
    free(cx);
    /* qsort is not stable, but equal times are netted below, so order among them is moot */
    qsort(dl, (size_t)nd, sizeof *dl, cmp_delta);
    op_mem_point *out = op_xmalloc(sizeof(op_mem_point) * (size_t)(nd + 1));
    int np = 0;
    out[np++] = (op_mem_point){0, stat};
    int64_t cur = stat;
    for (int i = 0; i < nd;) {
        double t = dl[i].t;
        while (i < nd && dl[i].t == t) cur += dl[i++].b;
        if (t == 0) out[0].bytes = cur;
        else out[np++] = (op_mem_point){t, cur};
    }
    free(dl);
    *pts = out;
    return np;
}

int64_t op_export_peak_bytes(const op_plan *p, int d) {
    op_mem_point *pts;
    int n = op_export_mem_timeline(p, d, &pts);
    if (n < 1) return -1;
    int64_t peak = pts[0].bytes;
    for (int i = 1; i < n; i++)
        if (pts[i].bytes > peak) peak = pts[i].bytes;
    free(pts);
    return peak;
}

void op_export_summarize(const op_plan *p, op_export_summary *s) {
    double busy = 0, end = 0;
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            busy += o->end - o->start;
            if (o->end > end) end = o->end;
        }
    s->makespan_ms = end;
    s->bubble_ratio = end > 0 ? 1 - busy / (p->P * end) : 0;
    s->peak_bytes_max = -1;
    s->peak_dev = 0;
    for (int d = 0; d < p->P; d++) {
        int64_t pk = op_export_peak_bytes(p, d);
        if (pk > s->peak_bytes_max) s->peak_bytes_max = pk, s->peak_dev = d;
    }
}
