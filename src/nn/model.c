/* model.c: a reference model = a layer pattern in profile symbols + dimensions; the named
 * presets `tiny` (tests, trains in seconds) and `small` (a few million parameters). */
#include <string.h>

#include "nn/nn_impl.h"

static const char *const kPresets[] = {"tiny", "small", NULL};

const char *const *op_nn_preset_names(void) { return kPresets; }

static const char *preset_pattern(const char *name) {
    if (!strcmp(name, "tiny")) return "EM*-#L";
    if (!strcmp(name, "small")) return "EM-M*-M#-M*-M#-L"; /* Nemotron-H-like interleave */
    return NULL;
}

void op_nn_cfg_preset(const char *name, op_nn_cfg *c) {
    memset(c, 0, sizeof *c);
    c->vocab = 256;
    c->aux_coef = 0.01f;
    c->norm_eps = 1e-5f;
    c->seed = 1;
    if (!strcmp(name, "tiny")) {
        c->d = 32, c->seq = 16, c->batch = 4, c->n_heads = 2;
        c->ssm_inner = 64, c->ssm_state = 8, c->ssm_conv = 4, c->ssm_dt_rank = 4;
        c->ffn = 64, c->n_experts = 4, c->top_k = 2, c->expert_dim = 32, c->shared_dim = 32;
    } else { /* small */
        c->d = 128, c->seq = 64, c->batch = 4, c->n_heads = 4;
        c->ssm_inner = 256, c->ssm_state = 16, c->ssm_conv = 4, c->ssm_dt_rank = 8;
        c->ffn = 384, c->n_experts = 8, c->top_k = 2, c->expert_dim = 192, c->shared_dim = 192;
    }
}

static int check_cfg(const op_nn_cfg *c, op_err *err) {
    if (c->vocab < 2 || c->d < 1 || c->seq < 1 || c->batch < 1)
        return op_errf(err, OP_EINVAL, "model: vocab, d, seq and batch must be positive");
    if (c->n_heads < 1 || c->d % c->n_heads)
        return op_errf(err, OP_EINVAL, "model: d=%d is not a multiple of n_heads=%d", c->d,
                       c->n_heads);
    if (c->n_experts < 1 || c->top_k < 1 || c->top_k > c->n_experts)
        return op_errf(err, OP_EINVAL, "model: top_k=%d must be in [1, n_experts=%d]", c->top_k,
                       c->n_experts);
    if (c->ssm_inner < 1 || c->ssm_state < 1 || c->ssm_conv < 1 || c->ssm_dt_rank < 1 ||
        c->ffn < 1 || c->expert_dim < 1 || c->shared_dim < 0 || c->window < 0)
        return op_errf(err, OP_EINVAL, "model: a layer dimension is not positive");
    return OP_OK;
}

int op_nn_model_init(op_nn_model *m, const char *pattern, const op_nn_cfg *cfg, op_err *err) {
    memset(m, 0, sizeof *m);
    int rc = check_cfg(cfg, err);
    if (rc) return rc;
    m->cfg = *cfg;
    size_t n = strlen(pattern);
    for (size_t i = 0; i < n; i++) {
        char s = pattern[i];
        char q[12];
        if (!op_nn_sym_valid(s))
            return op_errf(err, OP_EINVAL, "pattern: position %zu: unknown layer symbol %s (use E M * - # L)",
                           i + 1, op_show_char(s, q));
        if ((s == 'E' && i != 0) || (s == 'L' && i != n - 1))
            return op_errf(err, OP_EINVAL,
                           "pattern \"%s\": position %zu: '%c' may only stand at the %s", pattern,
                           i + 1, s, s == 'E' ? "start" : "end");
    }
    size_t body = n - (n > 0 && pattern[0] == 'E') - (n > 1 && pattern[n - 1] == 'L');
    if (body == 0) /* embedding and head alone: nothing for a pipeline to split or a profile to time */
        return op_errf(err, OP_EINVAL, "pattern \"%s\": no layers (give at least one of M * - #, e.g. EM*-L)",
                       pattern);
    /* E and L are added at the ends when missing, as in the profile format */
    size_t k = 0;
    if (n == 0 || pattern[0] != 'E') m->pattern[k++] = 'E';
    if (n + 2 > OP_NN_MAX_LAYERS)
        return op_errf(err, OP_EINVAL, "pattern: %zu layers, at most %d", n, OP_NN_MAX_LAYERS - 2);
    memcpy(m->pattern + k, pattern, n);
    k += n;
    if (n == 0 || pattern[n - 1] != 'L') m->pattern[k++] = 'L';
    m->pattern[k] = 0;
    m->n_layers = (int)k;
    m->off[0] = 0;
    for (int i = 0; i < m->n_layers; i++)
        m->off[i + 1] = m->off[i] + op_nn_layer_nparams(m->pattern[i], &m->cfg);
    snprintf(m->name, sizeof m->name, "%.63s", m->pattern);
    return OP_OK;
}

int op_nn_model_from_spec(op_nn_model *m, const char *spec, op_err *err) {
    op_nn_cfg c;
    const char *colon = strchr(spec, ':');
    if (colon) { /* PRESET:PATTERN: that preset's dimensions, another pattern */
        char pre[16];
        size_t n = (size_t)(colon - spec);
        snprintf(pre, sizeof pre, "%.*s", (int)(n < 15 ? n : 15), spec);
        if (n >= sizeof pre || !preset_pattern(pre))
            return op_errf(err, OP_EINVAL, "model \"%s\": unknown preset before ':' (tiny, small)", spec);
        op_nn_cfg_preset(pre, &c);
        return op_nn_model_init(m, colon + 1, &c, err);
    }
    const char *pat = preset_pattern(spec);
    op_nn_cfg_preset(pat ? spec : "small", &c);
    int rc = op_nn_model_init(m, pat ? pat : spec, &c, err);
    if (rc) return rc;
    if (pat) snprintf(m->name, sizeof m->name, "%.63s", spec);
    return OP_OK;
}
