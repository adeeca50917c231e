/* report.c: an executed run next to its prediction: the result type, --json, the merged Chrome
 * trace and the executed-order check. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "octopipe/export.h"

void op_exec_result_build(op_exec_result *res, const op_plan *p, op_exec_rec **recs,
                          const int *n) {
    int P = p->P;
    op_arena a = res->arena;
    memset(res, 0, sizeof *res);
    res->arena = a;
    res->watchdog_rank = -1;
    res->P = P;
    res->n_recs = OP_ARENA_NEW(&res->arena, int, P);
    res->recs = OP_ARENA_NEW(&res->arena, op_exec_rec *, P);
    res->busy_ms = OP_ARENA_NEW(&res->arena, double, P);
    double sum_busy = 0, over = 0;
    int nover = 0;
    for (int r = 0; r < P; r++) {
        res->n_recs[r] = n[r];
        res->recs[r] = OP_ARENA_NEW(&res->arena, op_exec_rec, n[r] ? n[r] : 1);
        if (n[r]) memcpy(res->recs[r], recs[r], sizeof(op_exec_rec) * (size_t)n[r]);
        for (int i = 0; i < n[r]; i++) {
            const op_exec_rec *e = &res->recs[r][i];
            double d = e->end - e->start;
            res->busy_ms[r] += d;
            if (e->end > res->makespan_ms) res->makespan_ms = e->end;
            over += d - op_stage_ms(p, e->stage, (op_kind)e->kind);
            nover++;
        }
        sum_busy += res->busy_ms[r];
    }
    res->bubble_ratio = res->makespan_ms > 0 ? 1 - sum_busy / (P * res->makespan_ms) : 0;
    res->overhead_ms = nover ? over / nover : 0;
}

void op_exec_result_free(op_exec_result *r) {
    op_arena_free(&r->arena);
    memset(r, 0, sizeof *r);
}

/* Predicted busy per device and bubble ratio from the simulated op times. */
double op_exec_pred_bubble(const op_plan *p, double *busy) {
    double sum = 0;
    for (int d = 0; d < p->P; d++) {
        double b = 0;
        for (int i = 0; i < p->n_ops[d]; i++) b += p->ops[d][i].end - p->ops[d][i].start;
        if (busy) busy[d] = b;
        sum += b;
    }
    double mk = p->pred.makespan_ms;
    return mk > 0 ? 1 - sum / (p->P * mk) : 0;
}

void op_exec_report_json(const op_exec_result *r, const op_plan *pred, double time_scale,
                         op_buf *out) {
    double *pb = op_xcalloc((size_t)pred->P, sizeof(double));
    double pbub = op_exec_pred_bubble(pred, pb);
    double pm = pred->pred.makespan_ms;
    /* the name is the plan file's "name", any string: escaped, or one quote in it breaks the
     * JSON */
    op_buf_printf(out, "{\"plan\": ");
    op_buf_json_str(out, pred->name);
    op_buf_printf(out, ", \"devices\": %d, \"microbatches\": %d, \"time_scale\": %g,\n",
                  pred->P, pred->M, time_scale);
    op_buf_printf(out, " \"measured\": {\"makespan_ms\": %.4f, \"bubble_ratio\": %.5f, \"busy_ms\": [",
                  r->makespan_ms, r->bubble_ratio);
    for (int d = 0; d < r->P; d++) op_buf_printf(out, "%s%.4f", d ? ", " : "", r->busy_ms[d]);
    op_buf_printf(out, "], \"op_overhead_ms\": %.4f},\n", r->overhead_ms);
    op_buf_printf(out, " \"predicted\": {\"makespan_ms\": %.4f, \"bubble_ratio\": %.5f, \"busy_ms\": [",
                  pm, pbub);
    for (int d = 0; d < pred->P; d++) op_buf_printf(out, "%s%.4f", d ? ", " : "", pb[d]);
    op_buf_printf(out, "]},\n \"makespan_error_pct\": %.3f}\n",
                  pm > 0 ? 100.0 * (r->makespan_ms - pm) / pm : 0.0);
    free(pb);
}

/* ts and dur in microseconds at the 1 ns %.3f prints, dur between the rounded ends: rounded
 * apart, back-to-back predicted ops overlapped by 1 ns, which Perfetto misnests */
static void trace_op(op_buf *out, int *first, int pid, int tid, int kind, int s, int m,
                     double start, double end) {
    double t0 = rint(start * 1e6) / 1e3, t1 = rint(end * 1e6) / 1e3;
    op_buf_printf(out, "%s\n{\"name\": \"%s%d\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                       "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"stage\": %d, \"mb\": %d}}",
                  *first ? "" : ",", op_kind_name((op_kind)kind), m, op_kind_name((op_kind)kind),
                  pid, tid, t0, t1 - t0, s, m);
    *first = 0;
}

void op_exec_chrome_trace(const op_exec_result *r, const op_plan *pred, op_buf *out) {
    int first = 1;
    op_buf_printf(out, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
    const char *names[2] = {"measured", "predicted"};
    for (int pid = 0; pid < 2; pid++) {
        op_buf_printf(out, "%s\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"%s\"}}",
                      first ? "" : ",", pid, names[pid]);
        first = 0;
        for (int d = 0; d < pred->P; d++) {
            op_buf_printf(out, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": ",
                          pid, d);
            /* a mixed plan: each row's GPU type, "rank 4 (a100-80gb)"; the type is the plan
             * file's name, any string: escaped */
            const char *t = op_export_dev_type(pred, d);
            char row[96];
            snprintf(row, sizeof row, "%s %d%s%s%s", pid ? "device" : "rank", d, t ? " (" : "", t ? t : "",
                     t ? ")" : "");
            op_buf_json_str(out, row);
            op_buf_printf(out, "}}");
        }
    }
    for (int d = 0; d < r->P; d++)
        for (int i = 0; i < r->n_recs[d]; i++) {
            const op_exec_rec *e = &r->recs[d][i];
            trace_op(out, &first, 0, d, e->kind, e->stage, e->mb, e->start, e->end);
        }
    for (int d = 0; d < pred->P; d++)
        for (int i = 0; i < pred->n_ops[d]; i++) {
            const op_op *o = &pred->ops[d][i];
            trace_op(out, &first, 1, d, o->kind, o->stage, o->mb, o->start, o->end);
        }
    op_buf_printf(out, "\n]}\n");
}

int op_exec_check_order(const op_exec_result *r, const op_plan *p, op_err *err) {
    if (r->P != p->P) return op_errf(err, OP_EINVAL, "result has %d ranks, plan %d", r->P, p->P);
    for (int d = 0; d < p->P; d++) {
        if (r->n_recs[d] != p->n_ops[d])
            return op_errf(err, OP_EINVAL, "rank %d executed %d ops, its plan has %d", d,
                           r->n_recs[d], p->n_ops[d]);
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_exec_rec *e = &r->recs[d][i];
            const op_op *o = &p->ops[d][i];
            if (e->kind != o->kind || e->stage != o->stage || e->mb != o->mb)
                return op_errf(err, OP_EINVAL,
                               "rank %d op %d: executed %s(s%d,mb%d), plan says %s(s%d,mb%d)", d, i,
                               op_kind_name((op_kind)e->kind), e->stage, e->mb,
                               op_kind_name((op_kind)o->kind), o->stage, o->mb);
            if (i && e->start < r->recs[d][i - 1].end - 1e-9)
                return op_errf(err, OP_EINVAL, "rank %d op %d starts before op %d ended", d, i, i - 1);
        }
    }
    return OP_OK;
}
