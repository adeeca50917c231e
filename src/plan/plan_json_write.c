/* plan_json_write.c: writing the plan file `octopipe.plan/1` (format: include/octopipe/plan_io.h).
 *
 * Written by hand rather than through jansson's dumper so that the layout stays readable (one
 * op per line) and numbers are the shortest decimal that reads back to the same double: a
 * write/read round trip is exact, and 0.1 stays "0.1".  The reader (plan_json.c) uses jansson. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/out.h"
#include "octopipe/plan.h"
#include "octopipe/plan_io.h"

/* Shortest %.{15,16,17}g that round-trips; returns 0 for a non-finite value (JSON has none). */
int op_json_num(op_buf *b, double x) {
    if (!isfinite(x)) return 0;
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, x);
        if (strtod(s, NULL) == x) break;
    }
    if (!strcmp(s, "-0")) strcpy(s, "0");
    op_buf_printf(b, "%s", s);
    return 1;
}

static void put_str(op_buf *b, const char *s) {
    op_buf_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') op_buf_printf(b, "\\%c", *c);
        else if (*c < 0x20) op_buf_printf(b, "\\u%04x", *c);
        else op_buf_put(b, c, 1);
    }
    op_buf_put(b, "\"", 1);
}

#define NUM(x)                         \
    do {                               \
        if (!op_json_num(b, (x))) bad = 1; \
    } while (0)

static void put_darr(op_buf *b, const double *v, int n, int *badp) {
    int bad = 0;
    op_buf_put(b, "[", 1);
    for (int i = 0; i < n; i++) {
        if (i) op_buf_put(b, ", ", 2);
        NUM(v[i]);
    }
    op_buf_put(b, "]", 1);
    if (bad) *badp = 1;
}

static void put_iarr(op_buf *b, const int64_t *v, int n) {
    op_buf_put(b, "[", 1);
    for (int i = 0; i < n; i++) op_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v[i]);
    op_buf_put(b, "]", 1);
}

static void put_layers(op_buf *b, const op_layer_cost *L, int n, const char *ind, int *badp) {
    int bad = 0;
    for (int l = 0; l < n; l++) {
        const op_layer_cost *x = &L[l];
        char kind[2] = {x->sym >= 0x21 && x->sym < 0x7f && x->sym != '"' && x->sym != '\\'
                            ? x->sym
                            : '?',
                        0};
        op_buf_printf(b, "%s{\"name\": ", ind);
        put_str(b, x->name);
        op_buf_printf(b, ", \"kind\": \"%s\", \"F\": ", kind);
        NUM(x->f_ms);
        op_buf_printf(b, ", \"I\": ");
        NUM(x->i_ms);
        op_buf_printf(b, ", \"W\": ");
        NUM(x->w_ms);
        op_buf_printf(b,
                      ", \"out_bytes\": %lld, \"act_bytes\": %lld, \"act_w_bytes\": %lld, "
                      "\"act_i_bytes\": %lld, \"param_bytes\": %lld, "
                      "\"static_bytes\": %lld",
                      (long long)x->out_bytes, (long long)x->act_bytes,
                      (long long)x->act_w_bytes, (long long)x->act_i_bytes,
                      (long long)x->param_bytes, (long long)x->static_bytes);
        if (x->f_sel_ms > 0 || x->act_sel_bytes > 0) { /* selective's share, when known */
            op_buf_printf(b, ", \"F_sel\": ");
            NUM(x->f_sel_ms);
            /* <= 0 means act_bytes (cost.h); the file holds no negative count */
            op_buf_printf(b, ", \"act_sel_bytes\": %lld",
                          (long long)(x->act_sel_bytes > 0 ? x->act_sel_bytes : 0));
        }
        op_buf_printf(b, "}%s\n", l + 1 < n ? "," : "");
    }
    if (bad) *badp = 1;
}

/* Pairs links as rows of the n x n matrix (a -> b). */
static void put_matrix(op_buf *b, const double *v, int n, int *badp) {
    op_buf_put(b, "[", 1);
    for (int a = 0; a < n; a++) {
        if (a) op_buf_put(b, ", ", 2);
        put_darr(b, v + (size_t)a * n, n, badp);
    }
    op_buf_put(b, "]", 1);
}

/* Mixed clusters: each device's type (its name), type t >= 1's layer costs (type 0's are
 * "layers"), each device's memory limit.  Written only for mixed plans: uniform files are as
 * before. */
static void put_types(op_buf *b, const op_plan *p, int *badp) {
    int bad = 0;
    op_buf_printf(b, ",\n  \"device_types\": [\n");
    for (int t = 0; t < p->n_types; t++) {
        op_buf_printf(b, "    {\"name\": ");
        put_str(b, p->type_name[t]);
        if (t > 0) {
            op_buf_printf(b, ", \"layers\": [\n");
            put_layers(b, p->type_layers + (size_t)t * p->n_layers, p->n_layers, "      ", &bad);
            op_buf_printf(b, "    ]");
        }
        op_buf_printf(b, "}%s\n", t + 1 < p->n_types ? "," : "");
    }
    op_buf_printf(b, "  ],\n  \"device_type\": [");
    for (int d = 0; d < p->P; d++) op_buf_printf(b, "%s%d", d ? ", " : "", p->dev_type[d]);
    op_buf_printf(b, "]");
    if (p->dev_mem_limit) {
        op_buf_printf(b, ",\n  \"device_mem_limit_bytes\": ");
        put_darr(b, p->dev_mem_limit, p->P, &bad);
    }
    if (bad) *badp = 1;
}

int op_plan_to_json(const op_plan *p, op_buf *out) {
    op_buf *b = out;
    int bad = 0;
    const int with_times = p->pred.valid;
    op_buf_printf(b, "{\n  \"format\": \"%s\",\n  \"name\": ", OP_PLAN_FORMAT);
    put_str(b, p->name);
    op_buf_printf(b, ",\n  \"model\": ");
    put_str(b, p->model);
    op_buf_printf(b, ",\n  \"devices\": %d,\n  \"microbatches\": %d,\n  \"tokens_per_mb\": ", p->P,
                  p->M);
    NUM(p->tokens_per_mb);
    op_buf_printf(b, ",\n  \"op_overhead_ms\": ");
    NUM(p->op_overhead_ms);
    op_buf_printf(b, ",\n  \"mem_limit_bytes\": ");
    NUM(p->mem_limit_bytes);
    if (p->seq > 0 && p->mbs > 0) /* absent: not recorded, as files written before it */
        op_buf_printf(b, ",\n  \"batch\": {\"seq\": %d, \"mbs\": %d}", p->seq, p->mbs);
    if (p->tp > 1 || p->ep > 1 || p->dp > 1) { /* absent: none, as files written before it */
        op_buf_printf(b, ",\n  \"parallel\": {\"tp\": %d, \"ep\": %d", p->tp, p->ep);
        if (p->dp > 1) op_buf_printf(b, ", \"dp\": %d", p->dp);
        if (p->zero1 && p->dp > 1) op_buf_printf(b, ", \"zero1\": true");
        op_buf_printf(b, "}");
    }
    const op_comm *c = &p->comm;
    op_buf_printf(b, ",\n  \"comm\": {\"none\": %s, \"nodes_of\": %d, \"intra_lat_ms\": ",
                  c->none ? "true" : "false", c->nodes_of);
    NUM(c->intra_lat_ms);
    const struct { const char *key; double v; } links[] = {
        {"intra_bw_GBps", c->intra_bw_GBps}, {"inter_lat_ms", c->inter_lat_ms},
        {"inter_bw_GBps", c->inter_bw_GBps}, {"host_lat_ms", c->host_lat_ms},
        /* no host link is any bandwidth <= 0 (cost.h); the file says 0, since it reads no
         * negative number */
        {"host_bw_GBps", c->host_bw_GBps > 0 ? c->host_bw_GBps : 0},
        {"host_mem_bytes", c->host_mem_bytes}};
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) {
        op_buf_printf(b, ", \"%s\": ", links[k].key);
        NUM(links[k].v);
    }
    if (c->pair_n > 0) {
        op_buf_printf(b, ",\n    \"pair_lat_ms\": ");
        put_matrix(b, c->pair_lat_ms, c->pair_n, &bad);
        op_buf_printf(b, ",\n    \"pair_bw_GBps\": ");
        put_matrix(b, c->pair_bw_GBps, c->pair_n, &bad);
    }
    if (c->host_n > 0) { /* each device's own host link (mixed clusters) */
        op_buf_printf(b, ",\n    \"host_bw_GBps_per_device\": ");
        put_darr(b, c->host_bw_dev_GBps, c->host_n, &bad);
    }
    op_buf_printf(b, "},\n  \"layers\": [\n");
    put_layers(b, p->layers, p->n_layers, "    ", &bad);
    if (op_plan_is_mixed(p)) {
        op_buf_printf(b, "  ]");
        put_types(b, p, &bad);
        op_buf_printf(b, ",\n  \"stages\": [");
    } else {
        op_buf_printf(b, "  ],\n  \"stages\": [");
    }
    for (int s = 0; s < p->S; s++)
        op_buf_printf(b, "%s[%d, %d]", s ? ", " : "", p->stage_first[s], p->stage_first[s + 1]);
    op_buf_printf(b, "],\n  \"split\": [");
    for (int s = 0; s < p->S; s++)
        op_buf_printf(b, "%s%s", s ? ", " : "", p->stage_split[s] ? "true" : "false");
    int any_act = 0; /* written only when used, so keep-only plans read as before */
    for (int s = 0; s < p->S; s++) any_act |= p->stage_act[s] != OP_ACT_KEEP;
    if (any_act) {
        op_buf_printf(b, "],\n  \"activation\": [");
        for (int s = 0; s < p->S; s++)
            op_buf_printf(b, "%s\"%s\"", s ? ", " : "", op_act_policy_name(p->stage_act[s]));
    }
    op_buf_printf(b, "],\n  \"placement\": [");
    for (int d = 0; d < p->P; d++) {
        op_buf_printf(b, "%s[", d ? ", " : "");
        int k = 0;
        for (int s = 0; s < p->S; s++)
            if (p->stage_dev[s] == d) op_buf_printf(b, "%s%d", k++ ? ", " : "", s);
        op_buf_printf(b, "]");
    }
    op_buf_printf(b, "],\n  \"schedule\": [\n");
    for (int d = 0; d < p->P; d++) {
        op_buf_printf(b, "    [\n");
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            op_buf_printf(b, "      {\"op\": \"%s\", \"stage\": %d, \"mb\": %d",
                          op_kind_name((op_kind)o->kind), o->stage, o->mb);
            if (with_times) {
                op_buf_printf(b, ", \"start\": ");
                NUM(o->start);
                op_buf_printf(b, ", \"end\": ");
                NUM(o->end);
            }
            op_buf_printf(b, "}%s\n", i + 1 < p->n_ops[d] ? "," : "");
        }
        op_buf_printf(b, "    ]%s\n", d + 1 < p->P ? "," : "");
    }
    op_buf_printf(b, "  ]");
    if (with_times) {
        const op_pred *r = &p->pred;
        op_buf_printf(b, ",\n  \"predicted\": {\n    \"makespan_ms\": ");
        NUM(r->makespan_ms);
        op_buf_printf(b, ",\n    \"bubble_ratio\": ");
        NUM(r->bubble_ratio);
        op_buf_printf(b, ",\n    \"lower_bound_ms\": ");
        NUM(r->lower_bound_ms);
        op_buf_printf(b, ",\n    \"tokens_per_s\": ");
        NUM(r->tokens_per_s);
        op_buf_printf(b, ",\n    \"peak_bytes_max\": %lld,\n    \"peak_bytes\": ",
                      (long long)r->peak_bytes_max);
        put_iarr(b, r->peak_bytes, p->P);
        op_buf_printf(b, ",\n    \"static_bytes\": ");
        put_iarr(b, r->static_bytes, p->P);
        op_buf_printf(b, ",\n    \"busy_ms\": ");
        put_darr(b, r->busy_ms, p->P, &bad);
        op_buf_printf(b, ",\n    \"warmup_ms\": ");
        put_darr(b, r->warmup_ms, p->P, &bad);
        op_buf_printf(b, ",\n    \"cooldown_ms\": ");
        put_darr(b, r->cooldown_ms, p->P, &bad);
        op_buf_printf(b, ",\n    \"residual_ms\": ");
        put_darr(b, r->residual_ms, p->P, &bad);
        op_buf_printf(b, "\n  }");
    }
    op_buf_printf(b, "\n}\n");
    return bad ? OP_EINVAL : OP_OK;
}

int op_plan_write(const op_plan *p, const char *path, op_err *err) {
    /* a file the reader would refuse (a stage on no device, an op twice) is not written */
    int vrc = op_plan_validate(p, err);
    if (vrc != OP_OK) {
        op_err_prefix(err, "%s: not written", path);
        return vrc;
    }
    op_buf b = {0};
    int rc = op_plan_to_json(p, &b);
    if (rc != OP_OK) {
        op_buf_free(&b);
        return op_errf(err, rc, "%s: plan has a non-finite number (inf or NaN); not written",
                       path);
    }
    rc = op_out_write(path, b.data, b.len, err); /* '-', devices, FIFOs, symlinks: out.h */
    op_buf_free(&b);
    return rc;
}
