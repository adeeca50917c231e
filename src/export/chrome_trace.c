/* chrome_trace.c: a plan's timeline as Chrome trace JSON (opens in Perfetto and
 * chrome://tracing).
 *
 * Layout: one process per device ("device d", sorted by d) with one thread ("device d") for
 * compute.  Ops are complete events (ph "X", ts/dur in microseconds) named "F s3 mb5", with
 * cname colours close to torch's visualizer (F blue, I teal, W green, B orange).  Each device
 * has a counter track "memory" (args.bytes) following timeline.c's memory rule, and every
 * cross-device dependency is a flow arrow (ph "s" at the producer's end, ph "f" with
 * binding point "e" just inside the consumer).
 * Activation policies: a recompute (selective, full) is a slice "recompute s3 mb5" nested at
 * the start of its I or B, as it runs there; a device whose stages offload gets a second
 * thread "copy engine" (tid 1) with "offload s mb" and "reload s mb" slices. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/export.h"

static const char *cname(op_kind k) {
    return k == OP_F ? "rail_response" : k == OP_I ? "rail_load" : k == OP_W ? "good"
                                                                             : "thread_state_iowait";
}

/* ms as the trace's microseconds, rounded to the 1 ns that %.3f prints.  A slice's dur is
 * the difference of its rounded ends: rounding ts and dur apart let back-to-back ops overlap
 * by 1 ns, which Perfetto reads as a slice starting inside the previous one. */
static double us(double ms) { return rint(ms * 1e6) / 1e3; }

/* where op (slot 0 = F, 1 = I or B) of (stage, mb) sits: device and index, or -1 */
typedef struct loc {
    int d, i;
} loc;

int op_export_chrome_trace(const op_plan *p, op_buf *out, op_err *err) {
    int rc = op_plan_validate(p, err);
    if (!rc) rc = op_export_check_times(p, err);
    if (rc) return op_err_prefix(err, "chrome trace");
    int S = p->S, M = p->M, P = p->P;
    loc *at = op_xmalloc(sizeof(loc) * (size_t)S * (size_t)M * 2);
    for (int d = 0; d < P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            if (o->kind != OP_W) at[((size_t)o->stage * M + o->mb) * 2 + (o->kind != OP_F)] = (loc){d, i};
        }
    op_export_summary sum;
    op_export_summarize(p, &sum);

    op_buf b = {0};
    op_buf_printf(&b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"plan\":");
    op_buf_json_str(&b, p->name);
    op_buf_printf(&b, ",\"model\":");
    op_buf_json_str(&b, p->model);
    op_buf_printf(&b, ",\"devices\":%d,\"microbatches\":%d,\"stages\":%d,\"makespan_ms\":%.6g,"
                      "\"bubble_ratio\":%.6g,\"peak_bytes_max\":%lld},\n\"traceEvents\":[\n",
                  P, M, S, sum.makespan_ms, sum.bubble_ratio, (long long)sum.peak_bytes_max);
    const char *sep = "";
    for (int d = 0; d < P; d++) {
        /* a mixed plan names each device row with its GPU type: "device 4 (a100-80gb)" */
        op_buf dn = {0};
        const char *ty = op_export_dev_type(p, d);
        op_buf_printf(&dn, "device %d", d);
        if (ty) op_buf_printf(&dn, " (%s)", ty);
        op_buf_printf(&b, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
                          "\"args\":{\"name\":", sep, d);
        op_buf_json_str(&b, dn.data);
        op_buf_printf(&b, "}},\n");
        op_buf_printf(&b, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                          "\"args\":{\"sort_index\":%d}},\n", d, d);
        op_buf_printf(&b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,"
                          "\"args\":{\"name\":", d);
        op_buf_json_str(&b, dn.data);
        op_buf_printf(&b, "}}");
        op_buf_free(&dn);
        sep = ",\n";
    }
    double *cx = op_export_copy_times(p);
    if (cx) {
        uint8_t *named = op_xcalloc((size_t)P, 1);
        for (int s = 0; s < S; s++) {
            int d = p->stage_dev[s];
            if (p->stage_act[s] != OP_ACT_OFFLOAD) continue;
            if (!named[d]++)
                op_buf_printf(&b, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,"
                                  "\"args\":{\"name\":\"copy engine %d\"}}", sep, d, d);
            for (int m = 0; m < M; m++) {
                const double *x = &cx[((size_t)s * M + m) * 4];
                for (int k = 0; k < 2; k++) {
                    if (x[2 * k] < 0) continue;
                    op_buf_printf(&b, "%s{\"ph\":\"X\",\"name\":\"%s s%d mb%d\",\"cat\":\"copy\","
                                      "\"pid\":%d,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"cname\":"
                                      "\"%s\",\"args\":{\"stage\":%d,\"mb\":%d,\"bytes\":%lld}}",
                                  sep, k ? "reload" : "offload", s, m, d, us(x[2 * k]),
                                  us(x[2 * k + 1]) - us(x[2 * k]), k ? "cq_build_passed" : "cq_build_running",
                                  s, m, (long long)op_stage_act_bytes(p, s));
                }
            }
        }
        free(named);
        free(cx);
    }
    for (int d = 0; d < P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            double rc_ms = o->kind == OP_I || o->kind == OP_B ? op_stage_recompute_ms(p, o->stage) : 0;
            if (!(rc_ms > 0)) continue;
            if (rc_ms > o->end - o->start) rc_ms = o->end - o->start;
            op_buf_printf(&b, "%s{\"ph\":\"X\",\"name\":\"recompute s%d mb%d\",\"cat\":\"recompute\","
                              "\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,\"cname\":\"terrible\","
                              "\"args\":{\"stage\":%d,\"mb\":%d,\"policy\":\"%s\"}}",
                          sep, o->stage, o->mb, d, us(o->start), us(o->start + rc_ms) - us(o->start),
                          o->stage, o->mb,
                          op_act_policy_name(p->stage_act[o->stage]));
        }
    for (int d = 0; d < P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            op_kind k = (op_kind)o->kind;
            int l0 = p->stage_first[o->stage], l1 = p->stage_first[o->stage + 1];
            op_buf_printf(&b, "%s{\"ph\":\"X\",\"name\":\"%s s%d mb%d\",\"cat\":\"%s\",\"pid\":%d,"
                              "\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,\"cname\":\"%s\",\"args\":{"
                              "\"stage\":%d,\"mb\":%d,\"layers\":\"[%d,%d)\",\"n_layers\":%d}}",
                          sep, op_kind_name(k), o->stage, o->mb, op_kind_name(k), d,
                          us(o->start), us(o->end) - us(o->start), cname(k), o->stage, o->mb,
                          l0, l1, l1 - l0);
        }
    for (int d = 0; d < P; d++) {
        op_mem_point *pts;
        int n = op_export_mem_timeline(p, d, &pts);
        for (int j = 0; j < n; j++)
            op_buf_printf(&b, "%s{\"ph\":\"C\",\"name\":\"memory\",\"pid\":%d,\"tid\":0,"
                              "\"ts\":%.3f,\"args\":{\"bytes\":%lld}}",
                          sep, d, pts[j].t_ms * 1e3, (long long)pts[j].bytes);
        free(pts);
    }
    /* flow arrows: consumer F(s,m) <- F(s-1,m), consumer I|B(s,m) <- I|B(s+1,m) */
    int id = 0;
    for (int d = 0; d < P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            int ps = o->kind == OP_F ? o->stage - 1 : o->kind == OP_W ? -1 : o->stage + 1;
            if (ps < 0 || ps >= S || p->stage_dev[ps] == d) continue;
            loc src = at[((size_t)ps * M + o->mb) * 2 + (o->kind != OP_F)];
            const op_op *q = &p->ops[src.d][src.i];
            double t0 = q->end * 1e3, t1 = o->start * 1e3;
            /* bind inside both slices: 1 ns before the producer ends, after the consumer starts */
            if (q->end - q->start > 2e-6) t0 -= 1e-3;
            if (o->end - o->start > 2e-6) t1 += 1e-3;
            op_buf_printf(&b, "%s{\"ph\":\"s\",\"name\":\"p2p\",\"cat\":\"p2p\",\"id\":%d,\"pid\":%d,"
                              "\"tid\":0,\"ts\":%.3f}", sep, id, src.d, t0);
            op_buf_printf(&b, "%s{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"p2p\",\"cat\":\"p2p\","
                              "\"id\":%d,\"pid\":%d,\"tid\":0,\"ts\":%.3f}", sep, id, d, t1);
            id++;
        }
    op_buf_printf(&b, "\n]}\n");
    free(at);
    op_buf_put(out, b.data, b.len);
    op_buf_free(&b);
    return OP_OK;
}
