/* nn_ref.c: runs the C reference model (src/nn) on weights and a batch read from a file, and
 * writes every layer's output, input gradient and weight gradient, for the comparison with
 * torch autograd (tests/torch/test_nn_vs_torch.py).  Built and run only by `make test-torch`.
 *
 *   nn_ref IN.safetensors OUT.safetensors
 *
 * Files are safetensors (8-byte little-endian header length, JSON header, raw data), F32 and
 * I32 only.  IN holds __metadata__ {"pattern": "EM*-#L", "cfg": "<op_nn_cfg as JSON>"},
 * "layer.<i>" (the layer's flat parameters in the src/nn order), "tokens" and "targets"
 * (N = batch*seq, int32).  OUT holds, per layer i: "y.<i>" (N,d) forward output (not for L),
 * "dx.<i>" (N,d) dL/d(input) from I (not for E), "dw.<i>" dL/dparams from W, "loss.<i>" the
 * layer's loss term (head cross-entropy, MoE balance loss); L = the sum, loss_scale 1. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct tensor {
    char name[64];
    int is_int;
    size_t n;     /* elements */
    int64_t shape[2];
    int ndim;
    void *data;
} tensor;

static int read_st(const char *path, tensor **out, int *n_out, json_t **meta, op_err *err) {
    char *buf = NULL;
    size_t len = 0;
    int rc = op_read_file(path, &buf, &len, err);
    if (rc) return rc;
    uint64_t hl = 0;
    for (int i = 0; i < 8 && (size_t)i < len; i++) hl |= (uint64_t)(unsigned char)buf[i] << (8 * i);
    if (len < 8 || hl > len - 8) {
        free(buf);
        return op_errf(err, OP_EINVAL, "%s: not a safetensors file", path);
    }
    json_error_t je;
    json_t *h = json_loadb(buf + 8, (size_t)hl, 0, &je);
    if (!json_is_object(h)) {
        free(buf);
        json_decref(h);
        return op_errf(err, OP_EINVAL, "%s: bad header: %s", path, je.text);
    }
    size_t cap = json_object_size(h), nt = 0;
    tensor *ts = op_xcalloc(cap ? cap : 1, sizeof *ts);
    const char *key;
    json_t *v;
    const char *data = buf + 8 + hl;
    size_t dlen = len - 8 - (size_t)hl;
    json_object_foreach(h, key, v) {
        if (!strcmp(key, "__metadata__")) {
            *meta = json_incref(v);
            continue;
        }
        tensor *t = &ts[nt];
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        json_t *off = json_object_get(v, "data_offsets"), *shp = json_object_get(v, "shape");
        size_t b = (size_t)json_integer_value(json_array_get(off, 0));
        size_t e = (size_t)json_integer_value(json_array_get(off, 1));
        if (!dt || (strcmp(dt, "F32") && strcmp(dt, "I32")) || e < b || e > dlen || (e - b) % 4 ||
            strlen(key) >= sizeof t->name || json_array_size(shp) > 2) {
            rc = op_errf(err, OP_EINVAL, "%s: tensor '%s': want F32/I32 within the file", path, key);
            break;
        }
        snprintf(t->name, sizeof t->name, "%s", key);
        t->is_int = !strcmp(dt, "I32");
        t->n = (e - b) / 4;
        t->data = op_xmalloc(e - b + 1);
        memcpy(t->data, data + b, e - b);
        nt++;
    }
    json_decref(h);
    free(buf);
    *out = ts;
    *n_out = (int)nt;
    return rc;
}

static tensor *find(tensor *ts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(ts[i].name, name)) return &ts[i];
    return NULL;
}

/* Appends one F32 tensor to the header (JSON) and data (raw). */
static void put(json_t *hdr, op_buf *data, const char *name, const float *x, size_t n, int rows) {
    json_t *o = json_object();
    json_object_set_new(o, "dtype", json_string("F32"));
    json_object_set_new(o, "shape", rows > 1 ? json_pack("[I,I]", (json_int_t)rows,
                                                         (json_int_t)(n / (size_t)rows))
                                             : json_pack("[I]", (json_int_t)n));
    json_object_set_new(o, "data_offsets",
                        json_pack("[I,I]", (json_int_t)data->len, (json_int_t)(data->len + 4 * n)));
    json_object_set_new(hdr, name, o);
    op_buf_put(data, x, 4 * n);
}

static int cfg_from_json(json_t *j, op_nn_cfg *c) {
    memset(c, 0, sizeof *c);
#define I(f) c->f = (int)json_integer_value(json_object_get(j, #f))
    I(vocab); I(d); I(seq); I(batch); I(n_heads); I(window); I(ssm_inner); I(ssm_state);
    I(ssm_conv); I(ssm_dt_rank); I(ffn); I(n_experts); I(top_k); I(expert_dim); I(shared_dim);
#undef I
    c->aux_coef = (float)json_number_value(json_object_get(j, "aux_coef"));
    c->norm_eps = (float)json_number_value(json_object_get(j, "norm_eps"));
    return c->d > 0 && c->vocab > 0 && c->seq > 0 && c->batch > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: nn_ref IN.safetensors OUT.safetensors\n");
        return 2;
    }
    op_nn_blas_single_thread();
    op_err e = {0};
    tensor *ts = NULL;
    int nt = 0;
    json_t *meta = NULL, *cfgj = NULL;
    if (read_st(argv[1], &ts, &nt, &meta, &e)) {
        fprintf(stderr, "nn_ref: %s\n", e.msg);
        return 1;
    }
    const char *pattern = json_string_value(json_object_get(meta, "pattern"));
    const char *cfgs = json_string_value(json_object_get(meta, "cfg"));
    json_error_t je;
    if (cfgs) cfgj = json_loads(cfgs, 0, &je);
    op_nn_model m;
    op_nn_cfg c;
    if (!pattern || !cfgj || cfg_from_json(cfgj, &c) || op_nn_model_init(&m, pattern, &c, &e)) {
        fprintf(stderr, "nn_ref: bad __metadata__ (pattern, cfg): %s\n", e.msg);
        return 1;
    }
    int N = c.batch * c.seq, d = c.d, nl = m.n_layers;
    tensor *tok = find(ts, nt, "tokens"), *tgt = find(ts, nt, "targets");
    if (!tok || !tgt || !tok->is_int || !tgt->is_int || tok->n != (size_t)N || tgt->n != (size_t)N) {
        fprintf(stderr, "nn_ref: want int32 tokens and targets of %d elements\n", N);
        return 1;
    }
    for (int n = 0; n < N; n++) {
        int32_t a = ((int32_t *)tok->data)[n], b = ((int32_t *)tgt->data)[n];
        if (a < 0 || a >= c.vocab || b >= c.vocab) {
            fprintf(stderr, "nn_ref: token or target %d out of range\n", n);
            return 1;
        }
    }
    op_nn_layer *L = op_xcalloc((size_t)nl, sizeof *L);
    op_nn_ctx *ctx = op_xcalloc((size_t)nl, sizeof *ctx);
    op_nn_mem *ai = op_xcalloc((size_t)nl, sizeof *ai), *aw = op_xcalloc((size_t)nl, sizeof *aw);
    float **act = op_xcalloc((size_t)nl + 1, sizeof *act); /* act[i]: input of layer i (N,d) */
    float **grad = op_xcalloc((size_t)nl + 1, sizeof *grad);
    double *loss = op_xcalloc((size_t)nl, sizeof *loss);
    op_nn_batch batch = {tok->data, tgt->data, 1.0f};
    for (int i = 0; i < nl; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "layer.%d", i);
        tensor *w = find(ts, nt, nm);
        size_t np = op_nn_layer_nparams(m.pattern[i], &c);
        if (!w || w->is_int || w->n != np) {
            fprintf(stderr, "nn_ref: %s: want %zu F32 parameters\n", nm, np);
            return 1;
        }
        L[i] = (op_nn_layer){m.pattern[i], i, &m.cfg, w->data};
        ctx[i] = (op_nn_ctx){.ai = &ai[i], .aw = &aw[i], .batch = batch}; /* keep: no drop */
    }
    for (int i = 0; i <= nl; i++) {
        act[i] = op_xcalloc((size_t)N * d, sizeof(float));
        grad[i] = op_xcalloc((size_t)N * d, sizeof(float));
    }
    for (int i = 0; i < nl; i++) /* F, layer by layer: act[i+1] = layer(act[i]) */
        loss[i] = op_nn_layer_forward(&L[i], &ctx[i], i ? act[i] : NULL, act[i + 1]);
    for (int i = nl - 1; i >= 0; i--) /* I: grad[i] = dL/d act[i] */
        op_nn_layer_backward_input(&L[i], &ctx[i], i == nl - 1 ? NULL : grad[i + 1],
                                   i ? grad[i] : NULL);
    json_t *hdr = json_object();
    op_buf data = {0};
    for (int i = 0; i < nl; i++) {
        char nm[32];
        size_t np = op_nn_layer_nparams(L[i].sym, &c);
        float *dw = op_xcalloc(np, sizeof(float));
        op_nn_layer_backward_weight(&L[i], &ctx[i], dw); /* W */
        float lv = (float)loss[i];
        if (L[i].sym != 'L') snprintf(nm, sizeof nm, "y.%d", i), put(hdr, &data, nm, act[i + 1], (size_t)N * d, N);
        if (i) snprintf(nm, sizeof nm, "dx.%d", i), put(hdr, &data, nm, grad[i], (size_t)N * d, N);
        snprintf(nm, sizeof nm, "dw.%d", i), put(hdr, &data, nm, dw, np, 1);
        snprintf(nm, sizeof nm, "loss.%d", i), put(hdr, &data, nm, &lv, 1, 1);
        free(dw);
    }
    char *h = json_dumps(hdr, JSON_COMPACT);
    size_t hl = strlen(h), pad = (8 - hl % 8) % 8;
    op_buf file = {0};
    uint64_t hl8 = hl + pad;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl8 >> (8 * i));
    op_buf_put(&file, le, 8);
    op_buf_put(&file, h, hl);
    op_buf_put(&file, "        ", pad);
    op_buf_put(&file, data.data, data.len);
    int rc = op_write_file_atomic(argv[2], file.data, file.len, &e);
    if (rc) fprintf(stderr, "nn_ref: %s\n", e.msg);
    free(h);
    op_buf_free(&file);
    op_buf_free(&data);
    json_decref(hdr);
    return rc ? 1 : 0;
}
