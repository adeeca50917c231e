/* plan_json.c: reading and checking the plan file `octopipe.plan/1` (format and checks in
 * plan_io.h): the header, layers, links, stages, placement and device types here, the schedule
 * and the recorded times and prediction in plan_json_sched.c.  Every error names the file and the JSON path of the offending value, since
 * jansson keeps line/column only for syntax errors: "plan.json: schedule[2][17]: duplicate op
 * F(s3,mb5) (first at schedule[2][4])". */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sim.h"
#include "plan/plan_json_int.h"

int pj_fail(pj_rd *r, const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return op_errf(r->err, OP_EINVAL, "%s: %s: %s", r->src, path, msg);
}

/* Unknown keys are errors (typos must not pass silently); so are missing required ones. */
int pj_check_keys(pj_rd *r, json_t *obj, const char *path, const char *const *allowed,
                  const char *const *required) {
    if (!json_is_object(obj)) return pj_fail(r, path, "expected an object");
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, k);
        if (!ok) return pj_fail(r, path, "unknown key \"%s\"", k);
    }
    for (const char *const *q = required; *q; q++)
        if (!json_object_get(obj, *q)) return pj_fail(r, path, "missing key \"%s\"", *q);
    return OP_OK;
}

int pj_get_int(pj_rd *r, json_t *v, const char *path, int64_t lo, int64_t hi, int64_t *out) {
    if (!json_is_integer(v)) return pj_fail(r, path, "expected an integer");
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return pj_fail(r, path, "%lld is out of range [%lld, %lld]", (long long)x,
                                      (long long)lo, (long long)hi);
    *out = x;
    return OP_OK;
}

int pj_get_num(pj_rd *r, json_t *v, const char *path, double *out) {
    if (!json_is_number(v)) return pj_fail(r, path, "expected a number");
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0) return pj_fail(r, path, "%g must be finite and >= 0", x);
    *out = x;
    return OP_OK;
}

/* optional member: leaves *out alone when absent */
static int opt_num(pj_rd *r, json_t *obj, const char *key, const char *path, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return OP_OK;
    char pp[256];
    snprintf(pp, sizeof pp, "%s%s", path, key);
    return pj_get_num(r, v, pp, out);
}



static const char *const k_root[] = {"format", "name", "model", "devices", "microbatches",
                                     "tokens_per_mb", "op_overhead_ms", "mem_limit_bytes",
                                     "comm", "layers", "stages", "split", "activation", "placement",
                                     "schedule", "predicted", "device_types", "device_type",
                                     "device_mem_limit_bytes", "parallel", "batch", NULL};
static const char *const k_root_req[] = {"format", "devices", "microbatches", "layers",
                                         "stages", "placement", "schedule", NULL};
static const char *const k_comm[] = {"none", "nodes_of", "intra_lat_ms", "intra_bw_GBps",
                                     "inter_lat_ms", "inter_bw_GBps", "host_lat_ms",
                                     "host_bw_GBps", "host_mem_bytes", "pair_lat_ms",
                                     "pair_bw_GBps", "host_bw_GBps_per_device", NULL};
static const char *const k_none[] = {NULL};
static const char *const k_parallel[] = {"tp", "ep", "dp", "zero1", NULL};
static const char *const k_batch[] = {"seq", "mbs", NULL};
static const char *const k_layer[] = {"name", "kind", "F", "I", "W", "out_bytes", "act_bytes",
                                      "act_w_bytes", "act_i_bytes", "param_bytes",
                                      "static_bytes", "F_sel", "act_sel_bytes", NULL};
static const char *const k_layer_req[] = {"kind", "F", "I", "W", "out_bytes", "act_bytes",
                                          NULL};
/* `what` names the array in messages ("layers", "device_types[1].layers"). */
static int read_layers(pj_rd *r, json_t *arr, const char *what, op_layer_cost **out, int *n_out) {
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return pj_fail(r, what, "expected a non-empty array");
    int n = (int)json_array_size(arr);
    op_layer_cost *L = op_xcalloc((size_t)n, sizeof *L);
    *out = L;
    *n_out = n;
    for (int l = 0; l < n; l++) {
        json_t *o = json_array_get(arr, (size_t)l);
        char path[96], pp[128];
        snprintf(path, sizeof path, "%s[%d]", what, l);
        int rc = pj_check_keys(r, o, path, k_layer, k_layer_req);
        if (rc) return rc;
        op_layer_cost *c = &L[l];
        json_t *v = json_object_get(o, "name");
        if (v) {
            if (!json_is_string(v)) return pj_fail(r, path, "name: expected a string");
            op_copy_name(c->name, sizeof c->name, json_string_value(v));
        }
        v = json_object_get(o, "kind");
        const char *k = json_is_string(v) ? json_string_value(v) : NULL;
        if (!k || strlen(k) != 1 || k[0] < 0x21 || k[0] > 0x7e)
            return pj_fail(r, path, "kind: expected a one-character layer symbol such as \"M\"");
        if (op_layer_kind_from_sym(k[0]) < 0) /* sim took it; only the Megatron export refused it */
            return pj_fail(r, path, "kind: unknown layer symbol '%c' (known: E L * M - # T H V m)", k[0]);
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
            if ((rc = pj_get_int(r, v, pp, 0, INT64_MAX / 4, iv[i]))) return rc;
        }
    }
    return OP_OK;
}

/* One n x n matrix of links (rows: from device a), each entry checked by `bw` (> 0) or as a
 * latency (>= 0); *out is heap memory the caller frees. */
static int read_matrix(pj_rd *r, json_t *v, const char *what, int n, int bw, double **out) {
    char path[96];
    if (!json_is_array(v) || (int)json_array_size(v) != n)
        return pj_fail(r, what, "expected %d rows of %d numbers (one per device pair a -> b)", n, n);
    double *m = op_xmalloc(sizeof(double) * (size_t)n * (size_t)n);
    *out = m;
    for (int a = 0; a < n; a++) {
        json_t *row = json_array_get(v, (size_t)a);
        snprintf(path, sizeof path, "%s[%d]", what, a);
        if (!json_is_array(row) || (int)json_array_size(row) != n)
            return pj_fail(r, path, "expected %d numbers", n);
        for (int b = 0; b < n; b++) {
            snprintf(path, sizeof path, "%s[%d][%d]", what, a, b);
            double x;
            int rc = pj_get_num(r, json_array_get(row, (size_t)b), path, &x);
            if (rc) return rc;
            if (bw && a != b && !(x >= OP_MIN_GBPS))
                return pj_fail(r, path, "bandwidth must be at least %g GB/s (1 kB/s)", OP_MIN_GBPS);
            if (!bw && x > OP_MAX_MS) return pj_fail(r, path, "latency %g is above %g ms", x, OP_MAX_MS);
            m[(size_t)a * n + b] = x;
        }
    }
    return OP_OK;
}

/* comm.host_bw_GBps_per_device: P host links (mixed clusters), each > 0. */
static int read_host_devs(pj_rd *r, json_t *o, int P, op_comm *c, double **out) {
    json_t *v = o ? json_object_get(o, "host_bw_GBps_per_device") : NULL;
    if (!v) return OP_OK;
    if (!json_is_array(v) || (int)json_array_size(v) != P)
        return pj_fail(r, "comm.host_bw_GBps_per_device", "expected %d numbers (one per device)", P);
    double *h = op_xmalloc(sizeof(double) * (size_t)P);
    *out = h;
    for (int d = 0; d < P; d++) {
        char path[64];
        snprintf(path, sizeof path, "comm.host_bw_GBps_per_device[%d]", d);
        int rc = pj_get_num(r, json_array_get(v, (size_t)d), path, &h[d]);
        if (rc) return rc;
        if (!(h[d] >= OP_MIN_GBPS)) return pj_fail(r, path, "bandwidth must be at least %g GB/s (1 kB/s)", OP_MIN_GBPS);
    }
    c->host_n = P;
    c->host_bw_dev_GBps = h;
    return OP_OK;
}

/* comm.pair_lat_ms / pair_bw_GBps: both or neither, P x P. */
static int read_pairs(pj_rd *r, json_t *o, int P, op_comm *c, double **lat, double **bw) {
    json_t *a = o ? json_object_get(o, "pair_lat_ms") : NULL, *b = o ? json_object_get(o, "pair_bw_GBps") : NULL;
    if (!a && !b) return OP_OK;
    if (!a || !b) return pj_fail(r, a ? "comm.pair_bw_GBps" : "comm.pair_lat_ms", "missing (per-pair "
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

/* "parallel": the TP, EP and DP degrees and ZeRO-1 the costs assume (optional; absent = none).
 * ZeRO-1 shards over the DP group, so it needs dp > 1. */
static int read_parallel(pj_rd *r, json_t *o, op_plan *p) {
    p->tp = p->ep = p->dp = 1, p->zero1 = 0;
    if (!o) return OP_OK;
    int rc = pj_check_keys(r, o, "parallel", k_parallel, k_none);
    int64_t t = 1, e = 1, d = 1;
    json_t *v;
    if (!rc && (v = json_object_get(o, "tp"))) rc = pj_get_int(r, v, "parallel.tp", 1, 1024, &t);
    if (!rc && (v = json_object_get(o, "ep"))) rc = pj_get_int(r, v, "parallel.ep", 1, 1024, &e);
    if (!rc && (v = json_object_get(o, "dp"))) rc = pj_get_int(r, v, "parallel.dp", 1, 1 << 20, &d);
    if (!rc && (v = json_object_get(o, "zero1"))) {
        if (!json_is_boolean(v)) rc = pj_fail(r, "parallel.zero1", "expected true or false");
        else if (json_is_true(v) && d < 2)
            rc = pj_fail(r, "parallel.zero1", "ZeRO-1 shards over the data-parallel group: it "
                                               "needs \"dp\" of 2 or more");
        else p->zero1 = json_is_true(v);
    }
    p->tp = (int)t, p->ep = (int)e, p->dp = (int)d;
    return rc;
}

/* "batch": tokens per sample and samples per microbatch (optional; both or neither), which
 * must multiply to tokens_per_mb where that is given. */
static int read_batch(pj_rd *r, json_t *o, op_plan *p, int have_tokens) {
    p->seq = p->mbs = 0;
    if (!o) return OP_OK;
    int rc = pj_check_keys(r, o, "batch", k_batch, k_batch);
    int64_t s = 0, b = 0;
    if (!rc) rc = pj_get_int(r, json_object_get(o, "seq"), "batch.seq", 1, 1 << 24, &s);
    if (!rc) rc = pj_get_int(r, json_object_get(o, "mbs"), "batch.mbs", 1, 1 << 20, &b);
    if (!rc && have_tokens && (double)s * (double)b != p->tokens_per_mb)
        rc = pj_fail(r, "batch", "seq %lld x mbs %lld is %.0f tokens, but tokens_per_mb is %g",
                     (long long)s, (long long)b, (double)s * (double)b, p->tokens_per_mb);
    p->seq = (int)s, p->mbs = (int)b;
    return rc;
}

static int read_comm(pj_rd *r, json_t *o, int P, op_comm *c) {
    c->none = 1;
    /* host link: optional keys (files written before offload existed get the default link) */
    c->host_lat_ms = 0.010;
    c->host_bw_GBps = 25;
    if (!o) return OP_OK;
    int rc = pj_check_keys(r, o, "comm", k_comm, k_none);
    if (rc) return rc;
    json_t *v = json_object_get(o, "none");
    if (v && !json_is_boolean(v)) return pj_fail(r, "comm.none", "expected true or false");
    c->none = v ? json_is_true(v) : 0;
    int64_t nodes = 0;
    if ((v = json_object_get(o, "nodes_of")) &&
        (rc = pj_get_int(r, v, "comm.nodes_of", 0, INT32_MAX, &nodes)))
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
        return pj_fail(r, "comm.intra_bw_GBps", "must be at least %g GB/s (1 kB/s) unless comm.none is true",
                    OP_MIN_GBPS);
    if (!c->none && c->nodes_of > 0 && P > c->nodes_of && !(c->inter_bw_GBps >= OP_MIN_GBPS))
        return pj_fail(r, "comm.inter_bw_GBps", "must be at least %g GB/s (1 kB/s) when devices span "
                    "nodes (more than nodes_of)", OP_MIN_GBPS);
    if (c->host_bw_GBps > 0 && !(c->host_bw_GBps >= OP_MIN_GBPS))
        return pj_fail(r, "comm.host_bw_GBps", "must be at least %g GB/s (1 kB/s), or 0 for no offload",
                    OP_MIN_GBPS);
    return OP_OK;
}

static int read_stages(pj_rd *r, json_t *arr, int n_layers, int *first, int S) {
    int64_t prev_end = 0;
    for (int s = 0; s < S; s++) {
        json_t *o = json_array_get(arr, (size_t)s);
        char path[48];
        snprintf(path, sizeof path, "stages[%d]", s);
        if (!json_is_array(o) || json_array_size(o) != 2)
            return pj_fail(r, path, "expected [first, last) as two integers");
        int64_t a, b;
        int rc;
        if ((rc = pj_get_int(r, json_array_get(o, 0), path, 0, n_layers, &a)) ||
            (rc = pj_get_int(r, json_array_get(o, 1), path, 0, n_layers, &b)))
            return rc;
        if (b <= a) return pj_fail(r, path, "[%lld, %lld) is empty", (long long)a, (long long)b);
        if (a != prev_end) {
            if (s == 0) return pj_fail(r, path, "starts at layer %lld, not 0", (long long)a);
            return pj_fail(r, path,
                        "[%lld, %lld) does not start where stages[%d] ends (%lld): stages must "
                        "cover the layers in order, without gaps or overlaps",
                        (long long)a, (long long)b, s - 1, (long long)prev_end);
        }
        first[s] = (int)a;
        prev_end = b;
    }
    first[S] = (int)prev_end;
    if (prev_end != n_layers)
        return pj_fail(r, "stages",
                    "the last stage ends at layer %lld but there are %d layers (layers %lld..%d "
                    "are in no stage)",
                    (long long)prev_end, n_layers, (long long)prev_end, n_layers - 1);
    return OP_OK;
}

static int read_placement(pj_rd *r, json_t *arr, int P, int S, int *dev) {
    if (!json_is_array(arr)) return pj_fail(r, "placement", "expected one array of stages per device");
    if ((int)json_array_size(arr) != P)
        return pj_fail(r, "placement", "%zu device lists but devices = %d", json_array_size(arr), P);
    for (int s = 0; s < S; s++) dev[s] = -1;
    for (int d = 0; d < P; d++) {
        json_t *l = json_array_get(arr, (size_t)d);
        char path[64];
        snprintf(path, sizeof path, "placement[%d]", d);
        if (!json_is_array(l)) return pj_fail(r, path, "expected an array of stage indices");
        for (size_t j = 0; j < json_array_size(l); j++) {
            snprintf(path, sizeof path, "placement[%d][%zu]", d, j);
            int64_t s;
            int rc = pj_get_int(r, json_array_get(l, j), path, INT32_MIN, INT32_MAX, &s);
            if (rc) return rc;
            if (s < 0 || s >= S)
                return pj_fail(r, path, "stage %lld does not exist (there are %d stages)",
                            (long long)s, S);
            if (dev[s] >= 0)
                return pj_fail(r, path, "stage %lld is already placed on device %d: a stage "
                            "lives on exactly one device", (long long)s, dev[s]);
            dev[s] = d;
        }
    }
    for (int s = 0; s < S; s++)
        if (dev[s] < 0) return pj_fail(r, "placement", "stage %d is on no device", s);
    return OP_OK;
}

/* "activation": optional, one policy name per stage (cost.h); absent = keep everywhere, so plan
 * files written before policies existed still load. */
static int read_activation(pj_rd *r, json_t *arr, int S, uint8_t *act) {
    if (!arr) return OP_OK;
    if (!json_is_array(arr) || (int)json_array_size(arr) != S)
        return pj_fail(r, "activation", "expected %d policy names (keep, selective, full, offload)", S);
    for (int s = 0; s < S; s++) {
        json_t *v = json_array_get(arr, (size_t)s);
        char path[64];
        snprintf(path, sizeof path, "activation[%d]", s);
        op_act_policy a;
        if (!json_is_string(v) || op_act_policy_parse(json_string_value(v), &a, NULL) != OP_OK)
            return pj_fail(r, path, "expected one of keep, selective, full, offload");
        act[s] = (uint8_t)a;
    }
    return OP_OK;
}

/* Mixed clusters (optional): "device_types" [{"name", "layers" (types >= 1)}], "device_type"
 * [P] and "device_mem_limit_bytes" [P].  Absent: the plan is uniform, as files before them. */
static int read_types(pj_rd *r, json_t *root, op_plan *p) {
    json_t *tv = json_object_get(root, "device_types"), *dv = json_object_get(root, "device_type");
    json_t *mv = json_object_get(root, "device_mem_limit_bytes");
    if (!tv && !dv && !mv) return OP_OK;
    if (!tv != !dv)
        return pj_fail(r, tv ? "device_type" : "device_types", "missing (a plan with device types "
                    "needs both device_types and device_type)");
    const int P = p->P, L = p->n_layers;
    int n = 1, rc = OP_OK;
    if (tv && (!json_is_array(tv) || json_array_size(tv) < 1 || json_array_size(tv) > 64))
        return pj_fail(r, "device_types", "expected 1 to 64 objects {\"name\", \"layers\"}");
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
        if ((rc = pj_check_keys(r, o, path, k_type, k_type_req))) break;
        nm = json_object_get(o, "name");
        if (!json_is_string(nm) || strlen(json_string_value(nm)) >= 32) {
            rc = pj_fail(r, path, "name: expected a string of at most 31 characters");
            break;
        }
        op_copy_name(names[t], 32, json_string_value(nm)); /* printed in sim's table */
        json_t *lv = json_object_get(o, "layers");
        if (t == 0 && lv) {
            rc = pj_fail(r, path, "layers: type 0's costs are the top-level \"layers\"");
        } else if (t > 0) {
            op_layer_cost *Lt = NULL;
            int nt = 0;
            snprintf(path, sizeof path, "device_types[%d].layers", t);
            if (!lv) rc = pj_fail(r, path, "missing: each type after the first gives its layer costs");
            else if (!(rc = read_layers(r, lv, path, &Lt, &nt)) && nt != L)
                rc = pj_fail(r, path, "%d layers but the plan has %d", nt, L);
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
            rc = pj_fail(r, "device_type", "expected %d type indices, one per device", P);
        for (int d = 0; d < P && !rc; d++) {
            int64_t x;
            snprintf(path, sizeof path, "device_type[%d]", d);
            if (!(rc = pj_get_int(r, json_array_get(dv, (size_t)d), path, 0, n - 1, &x))) dt[d] = (int)x;
        }
    }
    if (!rc && mv) {
        lim = op_xcalloc((size_t)P, sizeof *lim);
        if (!json_is_array(mv) || (int)json_array_size(mv) != P)
            rc = pj_fail(r, "device_mem_limit_bytes", "expected %d numbers, one per device (0 = none)", P);
        for (int d = 0; d < P && !rc; d++) {
            snprintf(path, sizeof path, "device_mem_limit_bytes[%d]", d);
            rc = pj_get_num(r, json_array_get(mv, (size_t)d), path, &lim[d]);
        }
    }
    if (!rc) op_plan_set_types(p, n, (const char(*)[32])names, rows, dt, lim);
    free(names);
    free(rows);
    free(dt);
    free(lim);
    return rc;
}


int op_plan_from_json_ex(const char *text, const char *srcname, op_plan *p,
                         op_plan_file_info *info_out, op_err *err) {
    pj_rd r = {srcname ? srcname : "plan", err};
    op_plan_file_info info = {0};
    json_error_t je;
    memset(p, 0, sizeof *p);
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) return op_errf(err, OP_EINVAL, "%s:%d:%d: %s", r.src, je.line, je.column, je.text);
    op_layer_cost *L = NULL;
    op_op **rec = NULL;
    double *pair_lat = NULL, *pair_bw = NULL, *host_devs = NULL;
    int nL = 0, inited = 0, rc;
    /* a model given where a plan goes: say so, not "unknown key" about its first field */
    if (json_is_object(root) && !json_object_get(root, "format") &&
        (json_object_get(root, "model_type") || json_object_get(root, "forward_ms"))) {
        rc = op_errf(err, OP_EINVAL, "%s: %s, not a plan file (make one with octopipe plan --model %s ...)",
                     r.src, json_object_get(root, "model_type") ? "an HF config.json" : "a profile", r.src);
        goto out;
    }
    if ((rc = pj_check_keys(&r, root, "top level", k_root, k_root_req))) goto out;
    json_t *v = json_object_get(root, "format");
    if (!json_is_string(v) || strcmp(json_string_value(v), OP_PLAN_FORMAT)) {
        rc = pj_fail(&r, "format", "expected \"%s\"%s%s%s", OP_PLAN_FORMAT,
                  json_is_string(v) ? ", got \"" : "", json_is_string(v) ? json_string_value(v) : "",
                  json_is_string(v) ? "\"" : "");
        goto out;
    }
    int64_t P, M;
    if ((rc = pj_get_int(&r, json_object_get(root, "devices"), "devices", 1, 1 << 16, &P)) ||
        (rc = pj_get_int(&r, json_object_get(root, "microbatches"), "microbatches", 1, 1 << 20, &M)))
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
        rc = pj_fail(&r, "stages", "expected between 1 and %d [first, last) pairs (one layer at least "
                  "per stage)", nL);
        goto out;
    }
    int S = (int)json_array_size(st);
    if ((int64_t)S * M > OP_PLAN_MAX_STAGE_MB) {
        rc = pj_fail(&r, "stages", "%d stages x %lld microbatches is more ops than a plan file may "
                  "hold (64 Mi per kind)", S, (long long)M);
        goto out;
    }
    const char *name = "plan";
    if ((v = json_object_get(root, "name"))) {
        if (!json_is_string(v)) { rc = pj_fail(&r, "name", "expected a string"); goto out; }
        name = json_string_value(v);
    }
    op_plan_init(p, name, L, nL, (int)P, (int)M, S, &comm);
    inited = 1;
    if ((v = json_object_get(root, "model"))) {
        if (!json_is_string(v)) { rc = pj_fail(&r, "model", "expected a string"); goto out; }
        op_copy_name(p->model, sizeof p->model, json_string_value(v));
    }
    if ((rc = read_parallel(&r, json_object_get(root, "parallel"), p)) ||
        (rc = opt_num(&r, root, "tokens_per_mb", "", &p->tokens_per_mb)) ||
        (rc = read_batch(&r, json_object_get(root, "batch"), p,
                         json_object_get(root, "tokens_per_mb") != NULL)) ||
        (rc = opt_num(&r, root, "op_overhead_ms", "", &p->op_overhead_ms)) ||
        (rc = opt_num(&r, root, "mem_limit_bytes", "", &p->mem_limit_bytes)))
        goto out;
    /* added to every op's time: bounded like the layer times, or the error would only come
     * later, as ops that last less than their cost */
    if (p->op_overhead_ms > OP_MAX_MS) {
        rc = pj_fail(&r, "op_overhead_ms", "%g ms is not in [0, %g]", p->op_overhead_ms, OP_MAX_MS);
        goto out;
    }
    if (p->op_overhead_ms > 0 && p->op_overhead_ms < OP_MIN_MS) { /* as the planner refuses it */
        rc = pj_fail(&r, "op_overhead_ms", "%g ms is neither 0 nor at least %g ms", p->op_overhead_ms,
                  OP_MIN_MS);
        goto out;
    }
    if ((rc = read_types(&r, root, p))) goto out;
    if ((rc = read_stages(&r, st, nL, p->stage_first, S))) goto out;
    if ((rc = read_placement(&r, json_object_get(root, "placement"), (int)P, S, p->stage_dev)))
        goto out;
    if ((rc = read_activation(&r, json_object_get(root, "activation"), S, p->stage_act))) goto out;
    rec = op_xcalloc((size_t)P, sizeof *rec);
    if ((rc = pj_read_schedule(&r, json_object_get(root, "schedule"), json_object_get(root, "split"),
                            p, rec, &info.has_times)))
        goto out;
    if ((rc = op_plan_validate(p, err))) { /* backstop: the checks above should catch it all */
        op_err_prefix(err, "%s", r.src);
        goto out;
    }
    if (info.has_times && (rc = pj_check_times(&r, p))) goto out;
    /* re-simulate: the recorded times must be what the simulator predicts */
    if ((rc = op_sim_replay(p, NULL, err))) {
        op_err_prefix(err, "%s: schedule", r.src);
        goto out;
    }
    /* all layer times 0 and no per-op overhead: the planner refuses such a model ("nothing to
     * schedule"); read, it simulated to makespan 0, sim printed a 0 ms plan and every timeline
     * export said "simulate it first" */
    if (!(p->pred.makespan_ms > 0)) {
        rc = pj_fail(&r, "layers", "every op takes 0 ms (all forward, backward and weight times are 0 "
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
                if (dt > pj_tol_of(b->end)) {
                    snprintf(path, sizeof path, "schedule[%d][%d]", d, i);
                    pj_op_name(nm, sizeof nm, b->kind, b->stage, b->mb);
                    rc = pj_fail(&r, path, "%s is recorded at [%.17g, %.17g] but a re-simulation runs "
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
        if ((rc = pj_check_pred(&r, v, p, &info))) goto out;
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
