/* model.c: layer kinds and symbols, the layer list builder, loading by file or preset name. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

static const struct {
    char sym;
    const char *name;
} kinds[OP_LAYER_KIND_COUNT] = {
    [OP_LAYER_EMBED] = {'E', "embed"},     [OP_LAYER_HEAD] = {'L', "head"},
    [OP_LAYER_ATTN] = {'*', "attention"},  [OP_LAYER_MAMBA] = {'M', "mamba"},
    [OP_LAYER_MLP] = {'-', "mlp"},         [OP_LAYER_MOE] = {'#', "moe"},
    [OP_LAYER_DECODER] = {'T', "decoder"}, [OP_LAYER_HYBRID] = {'H', "hybrid"},
    [OP_LAYER_VISION] = {'V', "vision"},   [OP_LAYER_MTP] = {'m', "mtp"},
};

/* A kind outside the enum is the caller's value (op_layer.kind of a model built by hand), not
 * a state of ours: '?' and "?", as op_act_policy_name answers an unknown policy. */
char op_layer_kind_sym(op_layer_kind k) {
    return (unsigned)k < OP_LAYER_KIND_COUNT ? kinds[k].sym : '?';
}

const char *op_layer_kind_name(op_layer_kind k) {
    return (unsigned)k < OP_LAYER_KIND_COUNT ? kinds[k].name : "?";
}

int op_layer_kind_from_sym(char sym) {
    for (int k = 0; k < OP_LAYER_KIND_COUNT; k++)
        if (kinds[k].sym == sym) return k;
    return -1;
}

int op_model_expert_gcd(const op_model *m) {
    int g = 0;
    for (int i = 0; m && i < m->n_layers; i++) {
        const op_layer *l = &m->layers[i];
        if (l->has_measured || l->n_experts <= 0) continue;
        if (l->kind != OP_LAYER_MOE && l->ffn != OP_FFN_MOE) continue;
        g = op_gcd(l->n_experts, g);
    }
    return g;
}

op_layer *op_mbuild_add(op_mbuild *b, op_layer_kind k, const char *fmt, ...) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->v = op_xrealloc(b->v, sizeof *b->v * (size_t)b->cap);
    }
    op_layer *l = &b->v[b->n++];
    memset(l, 0, sizeof *l);
    l->kind = k;
    l->shares_params_with = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->name, sizeof l->name, fmt, ap);
    va_end(ap);
    return l;
}

void op_mbuild_free(op_mbuild *b) {
    free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

int op_mbuild_finish(op_mbuild *b, op_model *m, op_err *err) {
    if (b->n > OP_MODEL_MAX_LAYERS) {
        int n = b->n;
        op_mbuild_free(b);
        return op_errf(err, OP_EINVAL, "%s: %d layers; at most %d are supported", m->name, n,
                       OP_MODEL_MAX_LAYERS);
    }
    m->layers = OP_ARENA_NEW(&m->arena, op_layer, b->n > 0 ? b->n : 1);
    memcpy(m->layers, b->v, sizeof *b->v * (size_t)b->n);
    m->n_layers = b->n;
    for (int i = 0; i < b->n; i++) m->pattern[i] = op_layer_kind_sym(b->v[i].kind);
    m->pattern[b->n] = 0;
    op_mbuild_free(b);
    return OP_OK;
}

void op_model_free(op_model *m) {
    if (!m) return;
    op_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

/* "dir/foo.json" -> "foo" */
static void stem_of(const char *path, char *out, size_t n) {
    const char *s = strrchr(path, '/');
    s = s ? s + 1 : path;
    op_copy_name(out, n, s); /* UTF-8 kept whole: the name reaches plan files */
    char *dot = strrchr(out, '.');
    if (dot && dot != out && !strcmp(dot, ".json")) *dot = 0;
}

/* A profile has a pattern and per-symbol times; an HF config has a model_type. */
int op_model_text_is_profile(const char *text) {
    return strstr(text, "\"pattern\"") && strstr(text, "\"forward_ms\"");
}

int op_model_load(const char *file_or_preset, op_model *m, op_err *err) {
    if (m) memset(m, 0, sizeof *m); /* op_model_free takes it either way */
    if (!file_or_preset || !m) return op_errf(err, OP_EINVAL, "op_model_load: no %s", m ? "file or preset name" : "model to fill");
    for (const char *const *p = op_model_preset_names(); *p; p++)
        if (!strcmp(*p, file_or_preset)) return op_model_preset(file_or_preset, m, err);
    char *text = NULL;
    size_t len = 0;
    op_err rerr = {0};
    if (op_read_file(file_or_preset, &text, &len, &rerr) != OP_OK) {
        op_buf names = {0};
        for (const char *const *p = op_model_preset_names(); *p; p++)
            op_buf_printf(&names, "%s%s", p == op_model_preset_names() ? "" : ", ", *p);
        int rc = op_errf(err, OP_EINVAL, "'%s' is neither a readable file (%s) nor a preset (%s)",
                         file_or_preset, rerr.msg, names.data ? names.data : "");
        op_buf_free(&names);
        return rc;
    }
    if (memchr(text, 0, len)) {
        free(text);
        return op_errf(err, OP_EINVAL, "%s: not a text file (NUL byte)", file_or_preset);
    }
    int rc = op_model_text_is_profile(text) ? op_model_from_profile_json(text, file_or_preset, m, err)
                                      : op_model_from_hf_json(text, file_or_preset, m, err);
    free(text);
    return rc;
}

void op_model_set_name(op_model *m, const char *name) {
    stem_of(name ? name : "model", m->name, sizeof m->name);
}
