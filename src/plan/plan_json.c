/* plan_json.c: reading and checking the plan file `octopipe.plan/1` (format and checks in
 * plan_io.h).  Every error names the file and the JSON path of the offending value, since
 * jansson keeps line/column only for syntax errors: "plan.json: schedule[2][17]: duplicate op
 * F(s3,mb5) (first at schedule[2][4])". */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/plan_io.h"
#include "octopipe/sim.h"

typedef struct rd {
    const char *src;
    op_err *err;
} rd;

static int fail(rd *r, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(rd *r, const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return op_errf(r->err, OP_EINVAL, "%s: %s: %s", r->src, path, msg);
}

/* Unknown keys are errors (typos must not pass silently); so are missing required ones. */
static int check_keys(rd *r, json_t *obj, const char *path, const char *const *allowed,
                      const char *const *required) {
    if (!json_is_object(obj)) return fail(r, path, "expected an object");
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, k);
        if (!ok) return fail(r, path, "unknown key \"%s\"", k);
    }
    for (const char *const *q = required; *q; q++)
        if (!json_object_get(obj, *q)) return fail(r, path, "missing key \"%s\"", *q);
    return OP_OK;
}

static int get_int(rd *r, json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out) {
    if (!json_is_integer(v)) return fail(r, path, "expected an integer");
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return fail(r, path, "%lld is out of range [%lld, %lld]", (long long)x,
                                      (long long)lo, (long long)hi);
    *out = x;
    return OP_OK;
}

static int get_num(rd *r, json_t *v, const char *path, double *out) {
    if (!json_is_number(v)) return fail(r, path, "expected a number");
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0) return fail(r, path, "%g must be finite and >= 0", x);
    *out = x;
    return OP_OK;
}

/* optional member: leaves *out alone when absent */
static int opt_num(rd *r, json_t *obj, const char *key, const char *path, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return OP_OK;
    char pp[256];
    snprintf(pp, sizeof pp, "%s%s", path, key);
    return get_num(r, v, pp, out);
}



static const char *const k_root[] = {"format", "name", "model", "devices", "microbatches",
                                     "tokens_per_mb", "op_overhead_ms", "mem_limit_bytes",
                                     "comm", "layers", "stages", "split", "activation", "placement",
                                     "schedule", "predicted", "device_types", "device_type",
                                     "device_mem_limit_bytes", NULL};
static const char *const k_root_req[] = {"format", "devices", "microbatches", "layers",
                                         "stages", "placement", "schedule", NULL};
static const char *const k_comm[] = {"none", "nodes_of", "intra_lat_ms", "intra_bw_GBps",
                                     "inter_lat_ms", "inter_bw_GBps", "host_lat_ms",
                                     "host_bw_GBps", "host_mem_bytes", "pair_lat_ms",
                                     "pair_bw_GBps", "host_bw_GBps_per_device", NULL};
static const char *const k_none[] = {NULL};
static const char *const k_layer[] = {"name", "kind", "F", "I", "W", "out_bytes", "act_bytes",
                                      "act_w_bytes", "act_i_bytes", "param_bytes",
                                      "static_bytes", "F_sel", "act_sel_bytes", NULL};
static const char *const k_layer_req[] = {"kind", "F", "I", "W", "out_bytes", "act_bytes",
                                          NULL};
static const char *const k_op[] = {"op", "stage", "mb", "start", "end", NULL};
static const char *const k_op_req[] = {"op", "stage", "mb", NULL};
static const char *const k_pred[] = {"makespan_ms", "bubble_ratio", "lower_bound_ms",
                                     "tokens_per_s", "peak_bytes_max", "peak_bytes",
                                     "static_bytes", "busy_ms", "warmup_ms", "cooldown_ms",
                                     "residual_ms", NULL};
static const char *const k_pred_req[] = {"makespan_ms", "bubble_ratio", "lower_bound_ms",
                                         "peak_bytes", NULL};

/* `what` names the array in messages ("layers", "device_types[1].layers"). */
static int read_layers(rd *r, json_t *arr, const char *what, op_layer_cost **out, int *n_out) {
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return fail(r, what, "expected a non-empty array");
    int n = (int)json_array_size(arr);
    op_layer_cost *L = op_xcalloc((size_t)n, sizeof *L);
    *out = L;
    *n_out = n;
    for (int l = 0; l < n; l++) {
        json_t *o = json_array_get(arr, (size_t)l);
        char path[96], pp[128];
        snprintf(path, sizeof path, "%s[%d]", what, l);
        int rc = check_keys(r, o, path, k_layer, k_layer_req);
        if (rc) return rc;
        op_layer_cost *c = &L[l];
        json_t *v = json_object_get(o, "name");
        if (v) {
            if (!json_is_string(v)) return fail(r, path, "name: expected a string");
            op_copy_name(c->name, sizeof c->name, json_string_value(v));
        }
        v = json_object_get(o, "kind");
        const char *k = json_is_string(v) ? json_string_value(v) : NULL;
        if (!k || strlen(k) != 1 || k[0] < 0x21 || k[0] > 0x7e)
            return fail(r, path, "kind: expected a one-character layer symbol such as \"M\"");
        c->sym = k[0];
        snprintf(pp, sizeof pp, "%s.", path);
        if ((rc = opt_num(r, o, "F", pp, &c->f_ms)) || (rc = opt_num(r, o, "I", pp, &c->i_ms)) ||
            (rc = opt_num(r, o, "W", pp, &c->w_ms)) ||
            (rc = opt_num(r, o, "F_sel", pp, &c->f_sel_ms))) /* optional: 0 = no core */
            return rc;
        /* act_i_bytes is optional (0: files written before it existed still load);
         * act_w_bytes may exceed act_bytes (I can leave more stored than F did). */
        const char *ik[] = {"out_bytes", "act_bytes", "act_w_bytes", "act_i_bytes",
                            "param_bytes", "static_bytes", "act_sel_bytes"};
        int64_t *iv[] = {&c->out_bytes, &c->act_bytes, &c->act_w_bytes, &c->act_i_bytes,
                         &c->param_bytes, &c->static_bytes, &c->act_sel_bytes};
        for (int i = 0; i < 7; i++) {
            v = json_object_get(o, ik[i]);
            if (!v) continue;
            snprintf(pp, sizeof pp, "%s.%s", path, ik[i]);
            if ((rc = get_int(r, v, pp, 0, INT64_MAX / 4, iv[i]))) return rc;
        }
    }
    return OP_OK;
}

/* One n x n matrix of links (rows: from device a), each entry checked by `bw` (> 0) or as a
 * latency (>= 0); *out is heap memory the caller frees. */
static int read_matrix(rd *r, json_t *v, const char *what, int n, int bw, double **out) {
    char path[96];
    if (!json_is_array(v) || (int)json_array_size(v) != n)
        return fail(r, what, "expected %d rows of %d numbers (one per device pair a -> b)", n, n);
    double *m = op_xmalloc(sizeof(double) * (size_t)n * (size_t)n);
    *out = m;
    for (int a = 0; a < n; a++) {
        json_t *row = json_array_get(v, (size_t)a);
        snprintf(path, sizeof path, "%s[%d]", what, a);
        if (!json_is_array(row) || (int)json_array_size(row) != n)
            return fail(r, path, "expected %d numbers", n);
        for (int b = 0; b < n; b++) {
            snprintf(path, sizeof path, "%s[%d][%d]", what, a, b);
            double x;
            int rc = get_num(r, json_array_get(row, (size_t)b), path, &x);
            if (rc) return rc;
            if (bw && a != b && !(x >= OP_MIN_GBPS))
                return fail(r, path, "bandwidth must be at least %g GB/s (1 kB/s)", OP_MIN_GBPS);
            if (!bw && x > OP_MAX_MS) return fail(r, path, "latency %g is above %g ms", x, OP_MAX_MS);
            m[(size_t)a * n + b] = x;
        }
    }
    return OP_OK;
}

/* comm.host_bw_GBps_per_device: P host links (mixed clusters), each > 0. */
static int read_host_devs(rd *r, json_t *o, int P, op_comm *c, double **out) {
    json_t *v = o ? json_object_get(o, "host_bw_GBps_per_device") : NULL;
    if (!v) return OP_OK;
    if (!json_is_array(v) || (int)json_array_size(v) != P)
        return fail(r, "comm.host_bw_GBps_per_device", "expected %d numbers (one per device)", P);
    double *h = op_xmalloc(sizeof(double) * (size_t)P);
    *out = h;
    for (int d = 0; d < P; d++) {
        char path[64];
        snprintf(path, sizeof path, "comm.host_bw_GBps_per_device[%d]", d);
        int rc = get_num(r, json_array_get(v, (size_t)d), path, &h[d]);
        if (rc) return rc;
        if (!(h[d] >= OP_MIN_GBPS)) return fail(r, path, "bandwidth must be at least %g GB/s (1 kB/s)", OP_MIN_GBPS);
    }
    c->host_n = P;
    c->host_bw_dev_GBps = h;
    return OP_OK;
}

/* comm.pair_lat_ms / pair_bw_GBps: both or neither, P x P. */
static int read_pairs(rd *r, json_t *o, int P, op_comm *c, double **lat, double **bw) {
    json_t *a = o ? json_object_get(o, "pair_lat_ms") : NULL, *b = o ? json_object_get(o, "pair_bw_GBps") : NULL;
    if (!a && !b) return OP_OK;
    if (!a || !b) return fail(r, a ? "comm.pair_bw_GBps" : "comm.pair_lat_ms", "missing (per-pair "
                              "links need both pair_lat_ms and pair_bw_GBps)");
    int rc;
    if ((rc = read_matrix(r, a, "comm.pair_lat_ms", P, 0, lat)) ||
        (rc = read_matrix(r, b, "comm.pair_bw_GBps", P, 1, bw)))
        return rc;
    c->pair_n = P;
    c->pair_lat_ms = *lat;
    c->pair_bw_GBps = *bw;
    return OP_OK;
}

static int read_comm(rd *r, json_t *o, int P, op_comm *c) {
    c->none = 1;
    /* host link: optional keys (files written before offload existed get the default link) */
    c->host_lat_ms = 0.010;
    c->host_bw_GBps = 25;
    if (!o) return OP_OK;
    int rc = check_keys(r, o, "comm", k_comm, k_none);
    if (rc) return rc;
    json_t *v = json_object_get(o, "none");
    if (v && !json_is_boolean(v)) return fail(r, "comm.none", "expected true or false");
    c->none = v ? json_is_true(v) : 0;
    int64_t nodes = 0;
    if ((v = json_object_get(o, "nodes_of")) &&
        (rc = get_int(r, v, "comm.nodes_of", 0, INT32_MAX, &nodes)))
        return rc;
    c->nodes_of = (int)nodes;
    if ((rc = opt_num(r, o, "intra_lat_ms", "comm.", &c->intra_lat_ms)) ||
        (rc = opt_num(r, o, "intra_bw_GBps", "comm.", &c->intra_bw_GBps)) ||
        (rc = opt_num(r, o, "inter_lat_ms", "comm.", &c->inter_lat_ms)) ||
        (rc = opt_num(r, o, "inter_bw_GBps", "comm.", &c->inter_bw_GBps)))
        return rc;
    if ((rc = opt_num(r, o, "host_lat_ms", "comm.", &c->host_lat_ms)) ||
        (rc = opt_num(r, o, "host_bw_GBps", "comm.", &c->host_bw_GBps)) ||
        (rc = opt_num(r, o, "host_mem_bytes", "comm.", &c->host_mem_bytes)))
        return rc;
    /* only the links P devices use, as op_comm_validate: a plan of one device (or of one node)
     * with the unused link at 0 was written and then refused here */
    if (!c->none && P > 1 && !(c->intra_bw_GBps >= OP_MIN_GBPS))
        return fail(r, "comm.intra_bw_GBps", "must be at least %g GB/s (1 kB/s) unless comm.none is true",
                    OP_MIN_GBPS);
    if (!c->none && c->nodes_of > 0 && P > c->nodes_of && !(c->inter_bw_GBps >= OP_MIN_GBPS))
        return fail(r, "comm.inter_bw_GBps", "must be at least %g GB/s (1 kB/s) when devices span "
                    "nodes (more than nodes_of)", OP_MIN_GBPS);
    if (c->host_bw_GBps > 0 && !(c->host_bw_GBps >= OP_MIN_GBPS))
        return fail(r, "comm.host_bw_GBps", "must be at least %g GB/s (1 kB/s), or 0 for no offload",
                    OP_MIN_GBPS);
    return OP_OK;
}

static int read_stages(rd *r, json_t *arr, int n_layers, int *first, int S) {
    int64_t prev_end = 0;
    for (int s = 0; s < S; s++) {
        json_t *o = json_array_get(arr, (size_t)s);
        char path[48];
        snprintf(path, sizeof path, "stages[%d]", s);
        if (!json_is_array(o) || json_array_size(o) != 2)
            return fail(r, path, "expected [first, last) as two integers");
        int64_t a, b;
        int rc;
        if ((rc = get_int(r, json_array_get(o, 0), path, 0, n_layers, &a)) ||
            (rc = get_int(r, json_array_get(o, 1), path, 0, n_layers, &b)))
            return rc;
        if (b <= a) return fail(r, path, "[%lld, %lld) is empty", (long long)a, (long long)b);
        if (a != prev_end) {
            if (s == 0) return fail(r, path, "starts at layer %lld, not 0", (long long)a);
            return fail(r, path,
                        "[%lld, %lld) does not start where stages[%d] ends (%lld): stages must "
                        "cover the layers in order, without gaps or overlaps",
                        (long long)a, (long long)b, s - 1, (long long)prev_end);
        }
        first[s] = (int)a;
        prev_end = b;
    }
    first[S] = (int)prev_end;
    if (prev_end != n_layers)
        return fail(r, "stages",
                    "the last stage ends at layer %lld but there are %d layers (layers %lld..%d "
                    "are in no stage)",
                    (long long)prev_end, n_layers, (long long)prev_end, n_layers - 1);
    return OP_OK;
}

static int read_placement(rd *r, json_t *arr, int P, int S, int *dev) {
    if (!json_is_array(arr)) return fail(r, "placement", "expected one array of stages per device");
    if ((int)json_array_size(arr) != P)
        return fail(r, "placement", "%zu device lists but devices = %d", json_array_size(arr), P);
    for (int s = 0; s < S; s++) dev[s] = -1;
    for (int d = 0; d < P; d++) {
        json_t *l = json_array_get(arr, (size_t)d);
        char path[64];
        snprintf(path, sizeof path, "placement[%d]", d);
        if (!json_is_array(l)) return fail(r, path, "expected an array of stage indices");
        for (size_t j = 0; j < json_array_size(l); j++) {
            snprintf(path, sizeof path, "placement[%d][%zu]", d, j);
            int64_t s;
            int rc = get_int(r, json_array_get(l, j), path, INT32_MIN, INT32_MAX, &s);
            if (rc) return rc;
            if (s < 0 || s >= S)
                return fail(r, path, "stage %lld does not exist (there are %d stages)",
                            (long long)s, S);
            if (dev[s] >= 0)
                return fail(r, path, "stage %lld is already placed on device %d: a stage "
                            "lives on exactly one device", (long long)s, dev[s]);
            dev[s] = d;
        }
    }
    for (int s = 0; s < S; s++)
        if (dev[s] < 0) return fail(r, "placement", "stage %d is on no device", s);
    return OP_OK;
}

/* "activation": optional, one policy name per stage (cost.h); absent = keep everywhere, so plan
 * files written before policies existed still load. */
static int read_activation(rd *r, json_t *arr, int S, uint8_t *act) {
    if (!arr) return OP_OK;
    if (!json_is_array(arr) || (int)json_array_size(arr) != S)
        return fail(r, "activation", "expected %d policy names (keep, selective, full, offload)", S);
    for (int s = 0; s < S; s++) {
        json_t *v = json_array_get(arr, (size_t)s);
        char path[64];
        snprintf(path, sizeof path, "activation[%d]", s);
        op_act_policy a;
        if (!json_is_string(v) || op_act_policy_parse(json_string_value(v), &a, NULL) != OP_OK)
            return fail(r, path, "expected one of keep, selective, full, offload");
        act[s] = (uint8_t)a;
    }
    return OP_OK;
}

/* Mixed clusters (optional): "device_types" [{"name", "layers" (types >= 1)}], "device_type"
 * [P] and "device_mem_limit_bytes" [P].  Absent: the plan is uniform, as files before them. */
static int read_types(rd *r, json_t *root, op_plan *p) {
    json_t *tv = json_object_get(root, "device_types"), *dv = json_object_get(root, "device_type");
    json_t *mv = json_object_get(root, "device_mem_limit_bytes");
    if (!tv && !dv && !mv) return OP_OK;
    if (!tv != !dv)
        return fail(r, tv ? "device_type" : "device_types", "missing (a plan with device types "
                    "needs both device_types and device_type)");
    const int P = p->P, L = p->n_layers;
    int n = 1, rc = OP_OK;
    if (tv && (!json_is_array(tv) || json_array_size(tv) < 1 || json_array_size(tv) > 64))
        return fail(r, "device_types", "expected 1 to 64 objects {\"name\", \"layers\"}");
    if (tv) n = (int)json_array_size(tv);
    char (*names)[32] = op_xcalloc((size_t)n, 32);
    op_layer_cost *rows = op_xcalloc((size_t)n * (size_t)L, sizeof *rows);
    int *dt = op_xcalloc((size_t)P, sizeof *dt);
    double *lim = NULL;
    memcpy(rows, p->layers, sizeof *rows * (size_t)L);
    static const char *const k_type[] = {"name", "layers", NULL}, *const k_type_req[] = {"name", NULL};
    char path[96];
    for (int t = 0; tv && t < n && !rc; t++) {
        json_t *o = json_array_get(tv, (size_t)t), *nm;
        snprintf(path, sizeof path, "device_types[%d]", t);
        if ((rc = check_keys(r, o, path, k_type, k_type_req))) break;
        nm = json_object_get(o, "name");
        if (!json_is_string(nm) || strlen(json_string_value(nm)) >= 32) {
            rc = fail(r, path, "name: expected a string of at most 31 characters");
            break;
        }
        op_copy_name(names[t], 32, json_string_value(nm)); /* printed in sim's table */
        json_t *lv = json_object_get(o, "layers");
        if (t == 0 && lv) {
            rc = fail(r, path, "layers: type 0's costs are the top-level \"layers\"");
        } else if (t > 0) {
            op_layer_cost *Lt = NULL;
            int nt = 0;
            snprintf(path, sizeof path, "device_types[%d].layers", t);
            if (!lv) rc = fail(r, path, "missing: each type after the first gives its layer costs");
            else if (!(rc = read_layers(r, lv, path, &Lt, &nt)) && nt != L)
                rc = fail(r, path, "%d layers but the plan has %d", nt, L);
            else if (!rc) {
                /* the line names the type's array: "layer 1" alone sent the reader to the
                 * top-level layers, which were fine */
                char what[512];
                snprintf(what, sizeof what, "%s: %s", r->src, path);
                if (!(rc = op_layer_costs_validate(Lt, nt, p->M, what, r->err)))
                    memcpy(rows + (size_t)t * L, Lt, sizeof *rows * (size_t)L);
            }
            free(Lt);
        }
    }
    if (!rc && dv) {
        if (!json_is_array(dv) || (int)json_array_size(dv) != P)
            rc = fail(r, "device_type", "expected %d type indices, one per device", P);
        for (int d = 0; d < P && !rc; d++) {
            int64_t x;
            snprintf(path, sizeof path, "device_type[%d]", d);
            if (!(rc = get_int(r, json_array_get(dv, (size_t)d), path, 0, n - 1, &x))) dt[d] = (int)x;
        }
    }
    if (!rc && mv) {
        lim = op_xcalloc((size_t)P, sizeof *lim);
        if (!json_is_array(mv) || (int)json_array_size(mv) != P)
            rc = fail(r, "device_mem_limit_bytes", "expected %d numbers, one per device (0 = none)", P);
        for (int d = 0; d < P && !rc; d++) {
            snprintf(path, sizeof path, "device_mem_limit_bytes[%d]", d);
            rc = get_num(r, json_array_get(mv, (size_t)d), path, &lim[d]);
        }
    }
    if (!rc) op_plan_set_types(p, n, (const char(*)[32])names, rows, dt, lim);
    free(names);
    free(rows);
    free(dt);
    free(lim);
    return rc;
}

static void op_name(char *buf, size_t n, int kind, int s, int m) {
    snprintf(buf, n, "%s(s%d,mb%d)", op_kind_name((op_kind)kind), s, m);
}

static double tol_of(double x) { return 1e-9 * (fabs(x) > 1 ? fabs(x) : 1); }

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
static int missing_op(rd *r, const op_plan *p, const int *split, int s, int m, int slot) {
    char path[64], nm[64];
    op_name(nm, sizeof nm, slot_kind(slot, split[s]), s, m);
    snprintf(path, sizeof path, "schedule[%d]", p->stage_dev[s]);
    return fail(r, path, "missing op %s (stage %d is placed on device %d)", nm, s, p->stage_dev[s]);
}

/* Duplicate and missing ops of a schedule that lists fewer ops than the plan needs, so one is
 * missing for sure: found by sorting the n listed ops, in time and memory proportional to the
 * file rather than to S*M.  Reports the same errors, in the same order, as the dense check. */
static int sparse_check(rd *r, const op_plan *p, const int *split, seen_op *l, int64_t n) {
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
        op_name(nm, sizeof nm, slot_kind((int)(id % 3), split[s]), s, m);
        snprintf(path, sizeof path, "schedule[%d][%d]", (int)(l[dup].at >> 32),
                 (int)(l[dup].at & 0xffffffff));
        return fail(r, path, "duplicate op %s (first at schedule[%d][%d])", nm,
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
static int read_schedule(rd *r, json_t *arr, json_t *split_arr, op_plan *p, op_op **rec,
                         int *has_times) {
    const int P = p->P, S = p->S, M = p->M;
    if (!json_is_array(arr)) return fail(r, "schedule", "expected one array of ops per device");
    if ((int)json_array_size(arr) != P)
        return fail(r, "schedule", "%zu device lists but devices = %d", json_array_size(arr), P);
    /* split given, or inferred: -1 unknown, 0 B, 1 I+W */
    int *split = op_xmalloc(sizeof(int) * (size_t)S);
    int64_t *seen = NULL;
    seen_op *list = NULL;
    int64_t listed = 0, need = 0, n_list = 0;
    int rc = OP_OK, timed = -1;
    char path[64], nm[64];
    if (split_arr) {
        if (!json_is_array(split_arr) || (int)json_array_size(split_arr) != S) {
            rc = fail(r, "split", "expected %d booleans (true = I+W, false = fused B)", S);
            goto out;
        }
        for (int s = 0; s < S; s++) {
            json_t *v = json_array_get(split_arr, (size_t)s);
            if (!json_is_boolean(v)) {
                snprintf(path, sizeof path, "split[%d]", s);
                rc = fail(r, path, "expected true (I+W) or false (fused B)");
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
            rc = fail(r, path, "expected an array of ops");
            break;
        }
        int n = (int)json_array_size(l);
        rec[d] = op_xcalloc((size_t)(n ? n : 1), sizeof(op_op));
        for (int i = 0; i < n; i++) {
            json_t *o = json_array_get(l, (size_t)i);
            snprintf(path, sizeof path, "schedule[%d][%d]", d, i);
            if ((rc = check_keys(r, o, path, k_op, k_op_req))) break;
            json_t *k = json_object_get(o, "op");
            const char *ks = json_is_string(k) ? json_string_value(k) : "";
            int kind = !strcmp(ks, "F") ? OP_F : !strcmp(ks, "I") ? OP_I
                     : !strcmp(ks, "W") ? OP_W : !strcmp(ks, "B") ? OP_B : -1;
            if (kind < 0) {
                rc = fail(r, path, "op: expected \"F\", \"I\", \"W\" or \"B\"");
                break;
            }
            int64_t s, m;
            char pp[96];
            snprintf(pp, sizeof pp, "%s.stage", path);
            if ((rc = get_int(r, json_object_get(o, "stage"), pp, INT32_MIN, INT32_MAX, &s))) break;
            snprintf(pp, sizeof pp, "%s.mb", path);
            if ((rc = get_int(r, json_object_get(o, "mb"), pp, INT32_MIN, INT32_MAX, &m))) break;
            if (s < 0 || s >= S) {
                rc = fail(r, path, "stage %lld does not exist (there are %d stages)", (long long)s, S);
                break;
            }
            if (m < 0 || m >= M) {
                rc = fail(r, path, "microbatch %lld out of range (microbatches = %d)", (long long)m, M);
                break;
            }
            op_name(nm, sizeof nm, kind, (int)s, (int)m);
            if (p->stage_dev[s] != d) {
                rc = fail(r, path, "%s is on device %d but stage %lld is placed on device %d", nm,
                          d, (long long)s, p->stage_dev[s]);
                break;
            }
            if (kind != OP_F) {
                int want = kind == OP_B ? 0 : 1;
                if (split[s] < 0 && !split_arr) split[s] = want;
                if (split[s] != want) {
                    rc = fail(r, path, "%s but stage %lld uses %s", nm, (long long)s,
                              split[s] ? "I+W (split[] or earlier ops)" : "fused B (split[] or earlier ops)");
                    break;
                }
            }
            int64_t id = ((int64_t)s * M + m) * 3 + (kind == OP_F ? 0 : kind == OP_W ? 2 : 1);
            if (!seen) {
                list[n_list++] = (seen_op){id, ((int64_t)d << 32) | i};
            } else if (seen[id] >= 0) {
                rc = fail(r, path, "duplicate op %s (first at schedule[%d][%d])", nm,
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
                rc = fail(r, path, t ? "has start/end but earlier ops do not"
                                     : "has no start/end but earlier ops do");
                break;
            }
            timed = t;
            if (t) {
                if (!a || !b) {
                    rc = fail(r, path, "needs both start and end");
                    break;
                }
                snprintf(pp, sizeof pp, "%s.start", path);
                if ((rc = get_num(r, a, pp, &x->start))) break;
                snprintf(pp, sizeof pp, "%s.end", path);
                if ((rc = get_num(r, b, pp, &x->end))) break;
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
static int check_times(rd *r, const op_plan *p) {
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
            op_name(nm, sizeof nm, o->kind, s, m);
            double dur = op_stage_ms(p, s, (op_kind)o->kind);
            if (fabs((o->end - o->start) - dur) > tol_of(o->end)) {
                rc = fail(r, path, "%s lasts %.17g ms (start %.17g, end %.17g) but stage %d's %s "
                          "costs %.17g ms", nm, o->end - o->start, o->start, o->end, s,
                          op_kind_name((op_kind)o->kind), dur);
                break;
            }
            if (i > 0 && o->start < p->ops[d][i - 1].end - tol_of(o->start)) {
                rc = fail(r, path, "%s starts at %.17g before the previous op on device %d ends "
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
            if (o->start < arrive - tol_of(arrive)) {
                op_name(pn, sizeof pn, pk, ps, m);
                rc = fail(r, path, "%s starts at %.17g, before its input from %s (schedule[%d][%d]) "
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
static int check_pred(rd *r, json_t *o, const op_plan *p, op_plan_file_info *info) {
    int rc = check_keys(r, o, "predicted", k_pred, k_pred_req);
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
        if ((rc = get_num(r, v, path, &x))) return rc;
        /* the bound is not a prediction of this plan but of what any plan could do; it
         * tightens as OctoPipe learns better bounds, so a file written by an older version
         * keeps loading (the value in memory is this version's) */
        if (!strcmp(dn[i].k, "lower_bound_ms")) continue;
        double rd_ = rel_diff(x, dn[i].sim);
        if (rd_ > info->max_pred_rel_diff) info->max_pred_rel_diff = rd_;
        if (rd_ > 1e-9)
            return fail(r, path, "the file says %.17g but a re-simulation gives %.17g", x, dn[i].sim);
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
            return fail(r, path, "expected %d numbers, one per device", P);
        for (int d = 0; d < P; d++) {
            snprintf(path, sizeof path, "predicted.%s[%d]", an[a].k, d);
            json_t *e = json_array_get(v, (size_t)d);
            if (an[a].i) {
                int64_t x;
                if ((rc = get_int(r, e, path, 0, INT64_MAX, &x))) return rc;
                if (x != an[a].i[d])
                    return fail(r, path, "the file says %lld but a re-simulation gives %lld",
                                (long long)x, (long long)an[a].i[d]);
            } else {
                double x;
                if ((rc = get_num(r, e, path, &x))) return rc;
                double rd_ = rel_diff(x, an[a].d[d]);
                if (rd_ > info->max_pred_rel_diff) info->max_pred_rel_diff = rd_;
                /* idle splits are sums of gaps: allow the last bits of the makespan */
                if (fabs(x - an[a].d[d]) > tol_of(q->makespan_ms))
                    return fail(r, path, "the file says %.17g but a re-simulation gives %.17g", x,
                                an[a].d[d]);
            }
        }
    }
    json_t *v = json_object_get(o, "peak_bytes_max");
    if (v) {
        int64_t x;
        if ((rc = get_int(r, v, "predicted.peak_bytes_max", 0, INT64_MAX, &x))) return rc;
        if (x != q->peak_bytes_max)
            return fail(r, "predicted.peak_bytes_max",
                        "the file says %lld but a re-simulation gives %lld", (long long)x,
                        (long long)q->peak_bytes_max);
    }
    return OP_OK;
}

int op_plan_from_json_ex(const char *text, const char *srcname, op_plan *p,
                         op_plan_file_info *info_out, op_err *err) {
    rd r = {srcname ? srcname : "plan", err};
    op_plan_file_info info = {0};
    json_error_t je;
    memset(p, 0, sizeof *p);
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) return op_errf(err, OP_EINVAL, "%s:%d:%d: %s", r.src, je.line, je.column, je.text);
    op_layer_cost *L = NULL;
    op_op **rec = NULL;
    double *pair_lat = NULL, *pair_bw = NULL, *host_devs = NULL;
    int nL = 0, inited = 0, rc;
    if ((rc = check_keys(&r, root, "top level", k_root, k_root_req))) goto out;
    json_t *v = json_object_get(root, "format");
    if (!json_is_string(v) || strcmp(json_string_value(v), OP_PLAN_FORMAT)) {
        rc = fail(&r, "format", "expected \"%s\"%s%s%s", OP_PLAN_FORMAT,
                  json_is_string(v) ? ", got \"" : "", json_is_string(v) ? json_string_value(v) : "",
                  json_is_string(v) ? "\"" : "");
        goto out;
    }
    int64_t P, M;
    if ((rc = get_int(&r, json_object_get(root, "devices"), "devices", 1, 1 << 16, &P)) ||
        (rc = get_int(&r, json_object_get(root, "microbatches"), "microbatches", 1, 1 << 20, &M)))
        goto out;
    op_comm comm = {0};
    if ((rc = read_comm(&r, json_object_get(root, "comm"), (int)P, &comm))) goto out;
    if ((rc = read_pairs(&r, json_object_get(root, "comm"), (int)P, &comm, &pair_lat, &pair_bw)) ||
        (rc = read_host_devs(&r, json_object_get(root, "comm"), (int)P, &comm, &host_devs)))
        goto out;
    if ((rc = read_layers(&r, json_object_get(root, "layers"), "layers", &L, &nL))) goto out;
    if ((rc = op_layer_costs_validate(L, nL, (int)M, r.src, err))) goto out;
    if ((rc = op_comm_validate(&comm, (int)P, err))) { op_err_prefix(err, "%s", r.src); goto out; }
    json_t *st = json_object_get(root, "stages");
    if (!json_is_array(st) || json_array_size(st) == 0 || (int)json_array_size(st) > nL) {
        rc = fail(&r, "stages", "expected between 1 and %d [first, last) pairs (one layer at least "
                  "per stage)", nL);
        goto out;
    }
    int S = (int)json_array_size(st);
    if ((int64_t)S * M > OP_PLAN_MAX_STAGE_MB) {
        rc = fail(&r, "stages", "%d stages x %lld microbatches is more ops than a plan file may "
                  "hold (64 Mi per kind)", S, (long long)M);
        goto out;
    }
    const char *name = "plan";
    if ((v = json_object_get(root, "name"))) {
        if (!json_is_string(v)) { rc = fail(&r, "name", "expected a string"); goto out; }
        name = json_string_value(v);
    }
    op_plan_init(p, name, L, nL, (int)P, (int)M, S, &comm);
    inited = 1;
    if ((v = json_object_get(root, "model"))) {
        if (!json_is_string(v)) { rc = fail(&r, "model", "expected a string"); goto out; }
        op_copy_name(p->model, sizeof p->model, json_string_value(v));
    }
    if ((rc = opt_num(&r, root, "tokens_per_mb", "", &p->tokens_per_mb)) ||
        (rc = opt_num(&r, root, "op_overhead_ms", "", &p->op_overhead_ms)) ||
        (rc = opt_num(&r, root, "mem_limit_bytes", "", &p->mem_limit_bytes)))
        goto out;
    /* added to every op's time: bounded like the layer times, or the error would only come
     * later, as ops that last less than their cost */
    if (p->op_overhead_ms > OP_MAX_MS) {
        rc = fail(&r, "op_overhead_ms", "%g ms is not in [0, %g]", p->op_overhead_ms, OP_MAX_MS);
        goto out;
    }
    if (p->op_overhead_ms > 0 && p->op_overhead_ms < OP_MIN_MS) { /* as the planner refuses it */
        rc = fail(&r, "op_overhead_ms", "%g ms is neither 0 nor at least %g ms", p->op_overhead_ms,
                  OP_MIN_MS);
        goto out;
    }
    if ((rc = read_types(&r, root, p))) goto out;
    if ((rc = read_stages(&r, st, nL, p->stage_first, S))) goto out;
    if ((rc = read_placement(&r, json_object_get(root, "placement"), (int)P, S, p->stage_dev)))
        goto out;
    if ((rc = read_activation(&r, json_object_get(root, "activation"), S, p->stage_act))) goto out;
    rec = op_xcalloc((size_t)P, sizeof *rec);
    if ((rc = read_schedule(&r, json_object_get(root, "schedule"), json_object_get(root, "split"),
                            p, rec, &info.has_times)))
        goto out;
    if ((rc = op_plan_validate(p, err))) { /* backstop: the checks above should catch it all */
        op_err_prefix(err, "%s", r.src);
        goto out;
    }
    if (info.has_times && (rc = check_times(&r, p))) goto out;
    /* re-simulate: the recorded times must be what the simulator predicts */
    if ((rc = op_sim_replay(p, NULL, err))) {
        op_err_prefix(err, "%s: schedule", r.src);
        goto out;
    }
    /* all layer times 0 and no per-op overhead: the planner refuses such a model ("nothing to
     * schedule"); read, it simulated to makespan 0, sim printed a 0 ms plan and every timeline
     * export said "simulate it first" */
    if (!(p->pred.makespan_ms > 0)) {
        rc = fail(&r, "layers", "every op takes 0 ms (all forward, backward and weight times are 0 "
                  "and op_overhead_ms is 0): nothing to schedule");
        goto out;
    }
    info.exact = 1;
    if (info.has_times) {
        char path[64], nm[64];
        for (int d = 0; d < P && rc == OP_OK; d++)
            for (int i = 0; i < p->n_ops[d]; i++) {
                const op_op *a = &rec[d][i], *b = &p->ops[d][i];
                double dt = fmax(fabs(a->start - b->start), fabs(a->end - b->end));
                if (dt > info.max_time_diff_ms) info.max_time_diff_ms = dt;
                if (dt > tol_of(b->end)) {
                    snprintf(path, sizeof path, "schedule[%d][%d]", d, i);
                    op_name(nm, sizeof nm, b->kind, b->stage, b->mb);
                    rc = fail(&r, path, "%s is recorded at [%.17g, %.17g] but a re-simulation runs "
                              "it at [%.17g, %.17g] (ops start as soon as their device is free and "
                              "their input has arrived)", nm, a->start, a->end, b->start, b->end);
                    break;
                }
            }
        if (rc) goto out;
        if (info.max_time_diff_ms != 0) info.exact = 0;
    }
    if ((v = json_object_get(root, "predicted"))) {
        info.has_pred = 1;
        if ((rc = check_pred(&r, v, p, &info))) goto out;
        if (info.max_pred_rel_diff != 0) info.exact = 0;
    }
out:
    if (rec) {
        for (int d = 0; d < (inited ? p->P : 0); d++) free(rec[d]);
        free(rec);
    }
    free(L);
    free(pair_lat);
    free(pair_bw);
    free(host_devs);
    json_decref(root);
    if (rc != OP_OK && inited) op_plan_free(p);
    if (info_out) *info_out = info;
    return rc;
}

int op_plan_from_json(const char *text, const char *srcname, op_plan *p, op_err *err) {
    return op_plan_from_json_ex(text, srcname, p, NULL, err);
}

int op_plan_read_ex(const char *path, op_plan *p, op_plan_file_info *info, op_err *err) {
    char *text = NULL;
    int rc = op_read_file(path, &text, NULL, err);
    if (rc != OP_OK) return rc;
    rc = op_plan_from_json_ex(text, path, p, info, err);
    free(text);
    return rc;
}

int op_plan_read(const char *path, op_plan *p, op_err *err) {
    return op_plan_read_ex(path, p, NULL, err);
}
