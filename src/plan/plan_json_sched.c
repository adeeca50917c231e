/* plan_json_sched.c: the plan file's schedule (the per-device op lists, each op listed once,
 * every op of every stage and microbatch present), its recorded op times and its prediction,
 * each checked against a re-simulation (plan_json.c reads the rest). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sim.h"
#include "plan/plan_json_int.h"

static const char *const k_op[] = {"op", "stage", "mb", "start", "end", NULL};
static const char *const k_op_req[] = {"op", "stage", "mb", NULL};
static const char *const k_pred[] = {"makespan_ms", "bubble_ratio", "lower_bound_ms",
                                     "tokens_per_s", "peak_bytes_max", "peak_bytes",
                                     "static_bytes", "busy_ms", "warmup_ms", "cooldown_ms",
                                     "residual_ms", NULL};
static const char *const k_pred_req[] = {"makespan_ms", "bubble_ratio", "lower_bound_ms",
                                         "peak_bytes", NULL};

void pj_op_name(char *buf, size_t n, int kind, int s, int m) {
    snprintf(buf, n, "%s(s%d,mb%d)", op_kind_name((op_kind)kind), s, m);
}

double pj_tol_of(double x) { return 1e-9 * (fabs(x) > 1 ? fabs(x) : 1); }

/* One listed op for the sparse check: its (stage, mb, slot) id and where it is listed. */
typedef struct seen_op {
    int64_t id, at; /* at = device << 32 | index */
} seen_op;

static int cmp_seen(const void *a, const void *b) {
    const seen_op *x = a, *y = b;
    return x->id != y->id ? (x->id > y->id) - (x->id < y->id) : (x->at > y->at) - (x->at < y->at);
}

static int slot_kind(int slot, int split) {
    return slot == 0 ? OP_F : slot == 2 ? OP_W : split == 1 ? OP_I : OP_B;
}

/* The "missing op" error for (s, m, slot), the same from the dense and the sparse check. */
static int missing_op(pj_rd *r, const op_plan *p, const int *split, int s, int m, int slot) {
    char path[64], nm[64];
    pj_op_name(nm, sizeof nm, slot_kind(slot, split[s]), s, m);
    snprintf(path, sizeof path, "schedule[%d]", p->stage_dev[s]);
    return pj_fail(r, path, "missing op %s (stage %d is placed on device %d)", nm, s, p->stage_dev[s]);
}

/* Duplicate and missing ops of a schedule that lists fewer ops than the plan needs, so one is
 * missing for sure: found by sorting the n listed ops, in time and memory proportional to the
 * file rather than to S*M.  Reports the same errors, in the same order, as the dense check. */
static int sparse_check(pj_rd *r, const op_plan *p, const int *split, seen_op *l, int64_t n) {
    const int M = p->M;
    char path[64], nm[64];
    qsort(l, (size_t)n, sizeof *l, cmp_seen);
    int64_t dup = -1; /* the second listing of an id that comes first in the file */
    for (int64_t k = 1; k < n; k++)
        if (l[k].id == l[k - 1].id && (k < 2 || l[k - 2].id != l[k].id) &&
            (dup < 0 || l[k].at < l[dup].at))
            dup = k;
    if (dup >= 0) {
        int64_t id = l[dup].id, sm = id / 3;
        int s = (int)(sm / M), m = (int)(sm % M);
        pj_op_name(nm, sizeof nm, slot_kind((int)(id % 3), split[s]), s, m);
        snprintf(path, sizeof path, "schedule[%d][%d]", (int)(l[dup].at >> 32),
                 (int)(l[dup].at & 0xffffffff));
        return pj_fail(r, path, "duplicate op %s (first at schedule[%d][%d])", nm,
                    (int)(l[dup - 1].at >> 32), (int)(l[dup - 1].at & 0xffffffff));
    }
    /* ids are unique and valid now: the first needed id not listed turns up within n + 1 */
    int64_t k = 0;
    for (int s = 0; s < p->S; s++)
        for (int m = 0; m < M; m++)
            for (int slot = 0; slot < 3; slot++) {
                if (slot == 2 && split[s] != 1) continue;
                if (k < n && l[k].id == ((int64_t)s * M + m) * 3 + slot) {
                    k++;
                    continue;
                }
                return missing_op(r, p, split, s, m, slot);
            }
    return OP_OK; /* not reached: the caller knows an op is missing */
}

/* Parses "schedule" into p->ops (structure only: kinds, ranges, devices, duplicates, missing
 * ops, split).  rec[d][i] gets the recorded start/end; *has_times whether there were any. */
int pj_read_schedule(pj_rd *r, json_t *arr, json_t *split_arr, op_plan *p, op_op **rec,
                     int *has_times) {
    const int P = p->P, S = p->S, M = p->M;
    if (!json_is_array(arr)) return pj_fail(r, "schedule", "expected one array of ops per device");
    if ((int)json_array_size(arr) != P)
        return pj_fail(r, "schedule", "%zu device lists but devices = %d", json_array_size(arr), P);
    /* split given, or inferred: -1 unknown, 0 B, 1 I+W */
    int *split = op_xmalloc(sizeof(int) * (size_t)S);
    int64_t *seen = NULL;
    seen_op *list = NULL;
    int64_t listed = 0, need = 0, n_list = 0;
    int rc = OP_OK, timed = -1;
    char path[64], nm[64];
    if (split_arr) {
        if (!json_is_array(split_arr) || (int)json_array_size(split_arr) != S) {
            rc = pj_fail(r, "split", "expected %d booleans (true = I+W, false = fused B)", S);
            goto out;
        }
        for (int s = 0; s < S; s++) {
            json_t *v = json_array_get(split_arr, (size_t)s);
            if (!json_is_boolean(v)) {
                snprintf(path, sizeof path, "split[%d]", s);
                rc = pj_fail(r, path, "expected true (I+W) or false (fused B)");
                goto out;
            }
            split[s] = json_is_true(v);
        }
    } else {
        for (int s = 0; s < S; s++) split[s] = -1;
    }
    /* A few bytes of "microbatches" can ask for 64 Mi ops per kind: a dense table of S*M*3
     * slots is only allocated once the file lists at least the ops the plan needs (2 per
     * stage and microbatch, 3 where split[] says I+W), so its size stays proportional to the
     * file.  A shorter list misses an op for sure and is checked sparsely (sparse_check). */
    for (size_t d = 0; d < (size_t)P; d++) listed += (int64_t)json_array_size(json_array_get(arr, d));
    for (int s = 0; s < S; s++) need += (int64_t)M * (split[s] == 1 ? 3 : 2);
    if (listed >= need) {
        seen = op_xmalloc(sizeof(int64_t) * (size_t)S * (size_t)M * 3);
        for (int64_t i = 0; i < (int64_t)S * M * 3; i++) seen[i] = -1;
    } else {
        list = op_xmalloc(sizeof *list * (size_t)(listed ? listed : 1));
    }
    for (int d = 0; d < P && rc == OP_OK; d++) {
        json_t *l = json_array_get(arr, (size_t)d);
        snprintf(path, sizeof path, "schedule[%d]", d);
        if (!json_is_array(l)) {
            rc = pj_fail(r, path, "expected an array of ops");
            break;
        }
        int n = (int)json_array_size(l);
        rec[d] = op_xcalloc((size_t)(n ? n : 1), sizeof(op_op));
        for (int i = 0; i < n; i++) {
            json_t *o = json_array_get(l, (size_t)i);
            snprintf(path, sizeof path, "schedule[%d][%d]", d, i);
            if ((rc = pj_check_keys(r, o, path, k_op, k_op_req))) break;
            json_t *k = json_object_get(o, "op");
            const char *ks = json_is_string(k) ? json_string_value(k) : "";
            int kind = !strcmp(ks, "F") ? OP_F : !strcmp(ks, "I") ? OP_I
                     : !strcmp(ks, "W") ? OP_W : !strcmp(ks, "B") ? OP_B : -1;
            if (kind < 0) {
                rc = pj_fail(r, path, "op: expected \"F\", \"I\", \"W\" or \"B\"");
                break;
            }
            int64_t s, m;
            char pp[96];
            snprintf(pp, sizeof pp, "%s.stage", path);
            if ((rc = pj_get_int(r, json_object_get(o, "stage"), pp, INT32_MIN, INT32_MAX, &s))) break;
            snprintf(pp, sizeof pp, "%s.mb", path);
            if ((rc = pj_get_int(r, json_object_get(o, "mb"), pp, INT32_MIN, INT32_MAX, &m))) break;
            if (s < 0 || s >= S) {
                rc = pj_fail(r, path, "stage %lld does not exist (there are %d stages)", (long long)s, S);
                break;
            }
            if (m < 0 || m >= M) {
                rc = pj_fail(r, path, "microbatch %lld out of range (microbatches = %d)", (long long)m, M);
                break;
            }
            pj_op_name(nm, sizeof nm, kind, (int)s, (int)m);
            if (p->stage_dev[s] != d) {
                rc = pj_fail(r, path, "%s is on device %d but stage %lld is placed on device %d", nm,
                          d, (long long)s, p->stage_dev[s]);
                break;
            }
            if (kind != OP_F) {
                int want = kind == OP_B ? 0 : 1;
                if (split[s] < 0 && !split_arr) split[s] = want;
                if (split[s] != want) {
                    rc = pj_fail(r, path, "%s but stage %lld uses %s", nm, (long long)s,
                              split[s] ? "I+W (split[] or earlier ops)" : "fused B (split[] or earlier ops)");
                    break;
                }
            }
            int64_t id = ((int64_t)s * M + m) * 3 + (kind == OP_F ? 0 : kind == OP_W ? 2 : 1);
            if (!seen) {
                list[n_list++] = (seen_op){id, ((int64_t)d << 32) | i};
            } else if (seen[id] >= 0) {
                rc = pj_fail(r, path, "duplicate op %s (first at schedule[%d][%d])", nm,
                          (int)(seen[id] >> 32), (int)(seen[id] & 0xffffffff));
                break;
            } else {
                seen[id] = ((int64_t)d << 32) | i;
            }
            op_op *x = &rec[d][i];
            x->kind = (uint8_t)kind;
            x->stage = (int32_t)s;
            x->mb = (int32_t)m;
            json_t *a = json_object_get(o, "start"), *b = json_object_get(o, "end");
            int t = a || b;
            if (timed >= 0 && t != timed) {
                rc = pj_fail(r, path, t ? "has start/end but earlier ops do not"
                                     : "has no start/end but earlier ops do");
                break;
            }
            timed = t;
            if (t) {
                if (!a || !b) {
                    rc = pj_fail(r, path, "needs both start and end");
                    break;
                }
                snprintf(pp, sizeof pp, "%s.start", path);
                if ((rc = pj_get_num(r, a, pp, &x->start))) break;
                snprintf(pp, sizeof pp, "%s.end", path);
                if ((rc = pj_get_num(r, b, pp, &x->end))) break;
            }
        }
        if (rc == OP_OK) op_plan_set_ops(p, d, rec[d], n);
    }
    if (rc == OP_OK && !seen) rc = sparse_check(r, p, split, list, n_list);
    for (int s = 0; s < S && rc == OP_OK; s++) {
        p->stage_split[s] = (uint8_t)(split[s] == 1);
        for (int m = 0; m < M && rc == OP_OK; m++)
            for (int slot = 0; slot < 3; slot++) {
                if (slot == 2 && split[s] != 1) continue;
                if (!seen || seen[((int64_t)s * M + m) * 3 + slot] >= 0) continue;
                rc = missing_op(r, p, split, s, m, slot);
                break;
            }
    }
    *has_times = timed == 1;
out:
    free(split);
    free(seen);
    free(list);
    return rc;
}

/* Recorded times: right durations, one op at a time per device, no op before its input. */
int pj_check_times(pj_rd *r, const op_plan *p) {
    const int S = p->S, M = p->M;
    double *end = op_xmalloc(sizeof(double) * (size_t)S * (size_t)M * 3);
    int64_t *where = op_xmalloc(sizeof(int64_t) * (size_t)S * (size_t)M * 3);
    char path[64], nm[64], pn[64];
    int rc = OP_OK;
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            int64_t id = ((int64_t)o->stage * M + o->mb) * 3 + (o->kind == OP_F ? 0 : o->kind == OP_W ? 2 : 1);
            end[id] = o->end;
            where[id] = ((int64_t)d << 32) | i;
        }
    for (int d = 0; d < p->P && rc == OP_OK; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            const int s = o->stage, m = o->mb;
            snprintf(path, sizeof path, "schedule[%d][%d]", d, i);
            pj_op_name(nm, sizeof nm, o->kind, s, m);
            double dur = op_stage_ms(p, s, (op_kind)o->kind);
            if (fabs((o->end - o->start) - dur) > pj_tol_of(o->end)) {
                rc = pj_fail(r, path, "%s lasts %.17g ms (start %.17g, end %.17g) but stage %d's %s "
                          "costs %.17g ms", nm, o->end - o->start, o->start, o->end, s,
                          op_kind_name((op_kind)o->kind), dur);
                break;
            }
            if (i > 0 && o->start < p->ops[d][i - 1].end - pj_tol_of(o->start)) {
                rc = pj_fail(r, path, "%s starts at %.17g before the previous op on device %d ends "
                          "(%.17g)", nm, o->start, d, p->ops[d][i - 1].end);
                break;
            }
            /* producer and the boundary its message crosses */
            int ps = -1, pslot = 0, pk = OP_F;
            int64_t bytes = 0;
            if (o->kind == OP_F && s > 0) ps = s - 1, pslot = 0, pk = OP_F, bytes = op_stage_out_bytes(p, s - 1);
            else if (o->kind == OP_W) ps = s, pslot = 1, pk = OP_I;
            else if (o->kind != OP_F && s + 1 < S)
                ps = s + 1, pslot = 1, pk = p->stage_split[s + 1] ? OP_I : OP_B,
                bytes = op_stage_out_bytes(p, s);
            else if (o->kind != OP_F) ps = s, pslot = 0, pk = OP_F;
            if (ps < 0) continue;
            int64_t pid = ((int64_t)ps * M + m) * 3 + pslot;
            int pd = p->stage_dev[ps];
            double tr = pd != d && !p->comm.none ? op_comm_ms(&p->comm, pd, d, bytes) : 0.0;
            double arrive = end[pid] + tr;
            if (o->start < arrive - pj_tol_of(arrive)) {
                pj_op_name(pn, sizeof pn, pk, ps, m);
                rc = pj_fail(r, path, "%s starts at %.17g, before its input from %s (schedule[%d][%d]) "
                          "is there: it ends at %.17g%s%.17g ms transfer", nm, o->start, pn,
                          (int)(where[pid] >> 32), (int)(where[pid] & 0xffffffff), end[pid],
                          tr > 0 ? " + " : ", no transfer; ", tr);
                break;
            }
        }
    free(end);
    free(where);
    return rc;
}

static double rel_diff(double a, double b) {
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    /* a re-simulation that overflows (tokens/s of a tokens_per_mb near DBL_MAX) differs from
     * any finite figure: inf/inf is NaN, which compares as no difference at all */
    if (a != b && !(isfinite(a) && isfinite(b))) return INFINITY;
    return a == b ? 0 : fabs(a - b) / (m > 1 ? m : 1);
}

/* "predicted" against the re-simulation in p->pred. */
int pj_check_pred(pj_rd *r, json_t *o, const op_plan *p, op_plan_file_info *info) {
    int rc = pj_check_keys(r, o, "predicted", k_pred, k_pred_req);
    if (rc) return rc;
    const op_pred *q = &p->pred;
    struct { const char *k; double sim; } dn[] = {
        {"makespan_ms", q->makespan_ms}, {"bubble_ratio", q->bubble_ratio},
        {"lower_bound_ms", q->lower_bound_ms}, {"tokens_per_s", q->tokens_per_s}};
    char path[64];
    for (size_t i = 0; i < sizeof dn / sizeof dn[0]; i++) {
        json_t *v = json_object_get(o, dn[i].k);
        if (!v) continue;
        snprintf(path, sizeof path, "predicted.%s", dn[i].k);
        double x;
        if ((rc = pj_get_num(r, v, path, &x))) return rc;
        /* the bound is not a prediction of this plan but of what any plan could do; it
         * tightens as OctoPipe learns better bounds, so a file written by an older version
         * keeps loading (the value in memory is this version's) */
        if (!strcmp(dn[i].k, "lower_bound_ms")) continue;
        double rd_ = rel_diff(x, dn[i].sim);
        if (rd_ > info->max_pred_rel_diff) info->max_pred_rel_diff = rd_;
        if (rd_ > 1e-9)
            return pj_fail(r, path, "the file says %.17g but a re-simulation gives %.17g", x, dn[i].sim);
    }
    const int P = p->P;
    struct { const char *k; const double *d; const int64_t *i; } an[] = {
        {"peak_bytes", NULL, q->peak_bytes}, {"static_bytes", NULL, q->static_bytes},
        {"busy_ms", q->busy_ms, NULL}, {"warmup_ms", q->warmup_ms, NULL},
        {"cooldown_ms", q->cooldown_ms, NULL}, {"residual_ms", q->residual_ms, NULL}};
    for (size_t a = 0; a < sizeof an / sizeof an[0]; a++) {
        json_t *v = json_object_get(o, an[a].k);
        if (!v) continue;
        snprintf(path, sizeof path, "predicted.%s", an[a].k);
        if (!json_is_array(v) || (int)json_array_size(v) != P)
            return pj_fail(r, path, "expected %d numbers, one per device", P);
        for (int d = 0; d < P; d++) {
            snprintf(path, sizeof path, "predicted.%s[%d]", an[a].k, d);
            json_t *e = json_array_get(v, (size_t)d);
            if (an[a].i) {
                int64_t x;
                if ((rc = pj_get_int(r, e, path, 0, INT64_MAX, &x))) return rc;
                if (x != an[a].i[d])
                    return pj_fail(r, path, "the file says %lld but a re-simulation gives %lld",
                                (long long)x, (long long)an[a].i[d]);
            } else {
                double x;
                if ((rc = pj_get_num(r, e, path, &x))) return rc;
                double rd_ = rel_diff(x, an[a].d[d]);
                if (rd_ > info->max_pred_rel_diff) info->max_pred_rel_diff = rd_;
                /* idle splits are sums of gaps: allow the last bits of the makespan */
                if (fabs(x - an[a].d[d]) > pj_tol_of(q->makespan_ms))
                    return pj_fail(r, path, "the file says %.17g but a re-simulation gives %.17g", x,
                                an[a].d[d]);
            }
        }
    }
    json_t *v = json_object_get(o, "peak_bytes_max");
    if (v) {
        int64_t x;
        if ((rc = pj_get_int(r, v, "predicted.peak_bytes_max", 0, INT64_MAX, &x))) return rc;
        if (x != q->peak_bytes_max)
            return pj_fail(r, "predicted.peak_bytes_max",
                        "the file says %lld but a re-simulation gives %lld", (long long)x,
                        (long long)q->peak_bytes_max);
    }
    return OP_OK;
}