/* profile.c: measured per-layer costs in a profile file (docs/profile.md).
 *
 *   { "pattern": "EM-M*-M-L",            one symbol per layer; '|' (stage marks) is ignored
 *     "pattern_style": "octopipe",        or "megatron": --hybrid-layer-pattern symbols
 *                                         (M mamba, * / D attention, G gated delta net,
 *                                         + MLA, - MLP, E MoE; no embedding symbol)
 *     "forward_ms":  {"E": .., "M": .., "-": .., "*": .., "L": ..},   required, every symbol
 *     "backward_ms": {...},                I (activation gradient), required, every symbol
 *     "weight_ms":   {...},                W; optional: absent = 0 (backward_ms holds it all)
 *     "act_bytes":   {sym: n},             optional, activations stashed per microbatch
 *     "param_bytes": {sym: n},             optional, weights of one layer
 *     "out_bytes":   n or {sym: n},        optional, boundary message per microbatch
 *     "recompute_ms":  {sym: ms},          optional, the attention core's share of forward_ms
 *                                          (what selective recomputation re-runs)
 *     "act_sel_bytes": {sym: n},           optional, what F stashes under selective
 *     "hidden": n, "vocab": n,             optional, for whatever the cost model derives
 *     "seq": n, "mbs": n,                  optional, both or neither: the batch the times were
 *                                          measured at (tokens per sample, samples per
 *                                          microbatch); plans are costed and recorded at it
 *     "by_gpu": {                          optional: times measured on other GPUs
 *       "a100-80gb": {"forward_ms": {...}, "backward_ms": {...},        required, every symbol
 *                     "weight_ms": {...}, "recompute_ms": {...}}, ...},  optional, as above
 *                                          (recompute_ms absent: the top level's share of F)
 *     "name": "...", "description": "..." }
 *
 * The top-level times are taken as measured on the GPU the caller names (--gpu).  by_gpu keys
 * are GPU presets (a100-40gb, a100-80gb, h100-80gb, h200, b200, or an alias); on a GPU it lists the cost model
 * uses those times, on any other GPU the top-level ones (scaled per layer kind on a mixed
 * cluster, problem.h).  Sizes are per layer, not per GPU: they stay at the top level.
 *
 * Time and byte keys always use OctoPipe symbols ('#' MoE, 'E' embedding), also with
 * "pattern_style": "megatron".  E and L are added at the ends when the pattern has none (E goes
 * after any leading vision layers).  Keys starting with '_' are comments. */
#include <string.h>

#include "model/model_internal.h"

static const char *const known_keys[] = {"pattern", "pattern_style", "forward_ms", "backward_ms",
                                         "weight_ms", "act_bytes", "param_bytes", "out_bytes",
                                         "hidden", "vocab", "name", "description",
                                         "recompute_ms", "act_sel_bytes", "by_gpu", "seq", "mbs",
                                         NULL};

typedef struct {
    const char *file;
    op_err *err;
} pctx;

/* One symbol of a Megatron hybrid pattern -> kind + attention flavour; -1 if unknown. */
static int megatron_sym(char c, op_attn_kind *attn) {
    *attn = OP_ATTN_NONE;
    switch (c) {
    case 'M': return OP_LAYER_MAMBA;
    case '*':
    case 'D': *attn = OP_ATTN_FULL; return OP_LAYER_ATTN;
    case 'G': *attn = OP_ATTN_LINEAR; return OP_LAYER_ATTN;
    case '+': *attn = OP_ATTN_MLA; return OP_LAYER_ATTN;
    case '-': return OP_LAYER_MLP;
    case 'E': return OP_LAYER_MOE;
    default: return -1;
    }
}

/* recompute_ms is the share of F that selective recomputation re-runs: more than F would price
 * selective above full (100 ms beside an F of 1.25 was taken). */
static int recompute_check(pctx *c, const char *field, char sym, double rec, double f) {
    if (!(rec > f)) return OP_OK;
    return op_errf(c->err, OP_EINVAL, "%s: %s: %g ms for symbol '%c' is more than its forward_ms "
                   "(%g ms); it is the share of F that selective recomputation re-runs", c->file,
                   field, rec, sym, f);
}

/* dict[sym] as a number in [0, max]; *found = 0 when absent.  max is OP_MAX_MS for times and
 * OP_MAX_BYTES for sizes, so that every figure converts to int64 exactly (model.h). */
static int sym_number(pctx *c, json_t *dict, const char *field, char sym, double max, double *out,
                      int *found) {
    char key[2] = {sym, 0};
    json_t *v = dict ? json_object_get(dict, key) : NULL;
    *found = v != NULL;
    if (!v) return OP_OK;
    if (!json_is_number(v) || !(json_number_value(v) >= 0))
        return op_errf(c->err, OP_EINVAL, "%s: %s['%c']: expected a number >= 0", c->file, field, sym);
    if (!(json_number_value(v) <= max))
        return op_errf(c->err, OP_EINVAL, "%s: %s['%c']: %.17g is beyond any device (at most %.17g)",
                       c->file, field, sym, json_number_value(v), max);
    /* times: 0 (nothing to do) or a measurable time; 1e-300 ms once gave infinite tokens/s */
    if (max == OP_MAX_MS && json_number_value(v) > 0 && json_number_value(v) < OP_MIN_MS)
        return op_errf(c->err, OP_EINVAL, "%s: %s['%c']: %.6g ms is below any measurement (give 0, or "
                       "at least %g ms)", c->file, field, sym, json_number_value(v), OP_MIN_MS);
    *out = json_number_value(v);
    return OP_OK;
}

/* obj[key] as a {sym: n} object: must be an object whose keys are known symbols; messages
 * call it `shown`. */
static int check_dict_in(pctx *c, json_t *obj, const char *key, const char *shown, json_t **out) {
    json_t *d = json_object_get(obj, key);
    *out = NULL;
    if (!d) return OP_OK;
    if (!json_is_object(d))
        return op_errf(c->err, OP_EINVAL, "%s: %s: expected an object {symbol: value}", c->file, shown);
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) {
        char kk[40]; /* a control character ("\u001b") would act on the terminal */
        if (strlen(k) != 1 || op_layer_kind_from_sym(k[0]) < 0)
            return op_errf(c->err, OP_EINVAL, "%s: %s: unknown symbol '%s' (known: E L * M - # T H V m)",
                           c->file, shown, (op_copy_name(kk, sizeof kk, k), kk));
    }
    *out = d;
    return OP_OK;
}

static int check_dict(pctx *c, json_t *root, const char *field, json_t **out) {
    return check_dict_in(c, root, field, field, out);
}

static int opt_int(pctx *c, json_t *root, const char *key, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v) return OP_OK;
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 1 << 30)
        return op_errf(c->err, OP_EINVAL, "%s: %s: expected a positive integer", c->file, key);
    *out = (int)json_integer_value(v);
    return OP_OK;
}

/* Pattern -> layers (kinds only), E/L added. */
static int read_pattern(pctx *c, json_t *root, op_mbuild *b) {
    json_t *pv = json_object_get(root, "pattern");
    if (!pv) return op_errf(c->err, OP_EINVAL, "%s: missing required field 'pattern'", c->file);
    if (!json_is_string(pv))
        return op_errf(c->err, OP_EINVAL, "%s: pattern: expected a string", c->file);
    const char *style = "octopipe";
    json_t *sv = json_object_get(root, "pattern_style");
    if (sv && !json_is_string(sv))
        return op_errf(c->err, OP_EINVAL, "%s: pattern_style: expected a string", c->file);
    if (sv) style = json_string_value(sv);
    int megatron = !strcmp(style, "megatron");
    if (!megatron && strcmp(style, "octopipe") != 0)
        return op_errf(c->err, OP_EINVAL, "%s: pattern_style: '%s' (expected \"octopipe\" or \"megatron\")",
                       c->file, style);
    const char *p = json_string_value(pv);
    /* counted before any layer is built: a pattern of millions of symbols took half a minute
     * and gigabytes to be refused by the layer limit at the end */
    size_t n_sym = 0;
    for (size_t i = 0; p[i]; i++) n_sym += p[i] != '|';
    if (n_sym > OP_MODEL_MAX_LAYERS)
        return op_errf(c->err, OP_EINVAL, "%s: pattern: %zu layers; at most %d are supported", c->file,
                       n_sym, OP_MODEL_MAX_LAYERS);
    for (int i = 0; p[i]; i++) {
        if (p[i] == '|') continue;
        op_attn_kind attn = OP_ATTN_NONE;
        int k = megatron ? megatron_sym(p[i], &attn) : op_layer_kind_from_sym(p[i]);
        if (k < 0) {
            if (megatron && p[i] == '/')
                return op_errf(c->err, OP_EINVAL, "%s: pattern[%d]: MTP patterns ('/') are not supported",
                               c->file, i);
            char q[12];
            return op_errf(c->err, OP_EINVAL, "%s: pattern[%d]: unknown symbol %s (known: %s)", c->file, i,
                           op_show_char(p[i], q), megatron ? "M * D G + - E |" : "E L * M - # T H V m |");
        }
        op_layer *l = op_mbuild_add(b, (op_layer_kind)k, "x");
        l->attn = attn != OP_ATTN_NONE ? attn : (k == OP_LAYER_ATTN || k == OP_LAYER_DECODER ||
                                                 k == OP_LAYER_HYBRID || k == OP_LAYER_MTP)
                                                    ? OP_ATTN_FULL
                                                    : OP_ATTN_NONE;
        l->ffn = k == OP_LAYER_MLP ? OP_FFN_MLP : k == OP_LAYER_MOE ? OP_FFN_MOE : OP_FFN_NONE;
    }
    if (b->n == 0) return op_errf(c->err, OP_EINVAL, "%s: pattern: empty", c->file);
    /* E / L: at most one each; E before every non-vision layer, L last */
    int n_e = 0, n_l = 0, first_body = -1;
    for (int i = 0; i < b->n; i++) {
        op_layer_kind k = b->v[i].kind;
        if (k == OP_LAYER_EMBED) n_e++;
        if (k == OP_LAYER_HEAD) n_l++;
        if (k != OP_LAYER_VISION && first_body < 0) first_body = i;
        if ((k == OP_LAYER_EMBED && i != first_body) || (k == OP_LAYER_HEAD && i != b->n - 1) ||
            n_e > 1 || n_l > 1)
            return op_errf(c->err, OP_EINVAL,
                           "%s: pattern: '%c' at layer %d; E must come once, first (after any V), and L once, last",
                           c->file, op_layer_kind_sym(k), i);
    }
    if (!n_e) {
        int at = first_body < 0 ? b->n : first_body;
        op_mbuild_add(b, OP_LAYER_EMBED, "x");
        memmove(&b->v[at + 1], &b->v[at], sizeof *b->v * (size_t)(b->n - 1 - at));
        memset(&b->v[at], 0, sizeof *b->v);
        b->v[at].kind = OP_LAYER_EMBED;
        b->v[at].shares_params_with = -1;
    }
    if (!n_l) op_mbuild_add(b, OP_LAYER_HEAD, "x");
    return OP_OK;
}

static int fill_layers(pctx *c, json_t *root, op_mbuild *b) {
    json_t *fw, *bw, *ww, *act, *par, *outd = NULL;
    int rc;
    if ((rc = check_dict(c, root, "forward_ms", &fw)) || (rc = check_dict(c, root, "backward_ms", &bw)) ||
        (rc = check_dict(c, root, "weight_ms", &ww)) || (rc = check_dict(c, root, "act_bytes", &act)) ||
        (rc = check_dict(c, root, "param_bytes", &par)))
        return rc;
    json_t *rcd, *asd;
    if ((rc = check_dict(c, root, "recompute_ms", &rcd)) || (rc = check_dict(c, root, "act_sel_bytes", &asd)))
        return rc;
    if (!fw) return op_errf(c->err, OP_EINVAL, "%s: missing required field 'forward_ms'", c->file);
    if (!bw) return op_errf(c->err, OP_EINVAL, "%s: missing required field 'backward_ms'", c->file);
    json_t *ov = json_object_get(root, "out_bytes");
    double out_all = 0;
    if (ov && json_is_object(ov)) {
        if ((rc = check_dict(c, root, "out_bytes", &outd))) return rc;
    } else if (ov) {
        if (!json_is_number(ov) || !(json_number_value(ov) >= 0))
            return op_errf(c->err, OP_EINVAL, "%s: out_bytes: expected a number >= 0 or {symbol: n}", c->file);
        if (!(json_number_value(ov) <= OP_MAX_BYTES))
            return op_errf(c->err, OP_EINVAL, "%s: out_bytes: %.17g is beyond any device (at most %.17g)",
                           c->file, json_number_value(ov), OP_MAX_BYTES);
        out_all = json_number_value(ov);
    }
    int hidden = 0, vocab = 0;
    if ((rc = opt_int(c, root, "hidden", &hidden)) || (rc = opt_int(c, root, "vocab", &vocab))) return rc;

    for (int i = 0; i < b->n; i++) {
        op_layer *l = &b->v[i];
        char s = op_layer_kind_sym(l->kind);
        int found;
        double v = 0;
        if ((rc = sym_number(c, fw, "forward_ms", s, OP_MAX_MS, &l->f_ms, &found))) return rc;
        if (!found) return op_errf(c->err, OP_EINVAL, "%s: forward_ms has no time for symbol '%c'", c->file, s);
        if ((rc = sym_number(c, bw, "backward_ms", s, OP_MAX_MS, &l->i_ms, &found))) return rc;
        if (!found) return op_errf(c->err, OP_EINVAL, "%s: backward_ms has no time for symbol '%c'", c->file, s);
        if ((rc = sym_number(c, ww, "weight_ms", s, OP_MAX_MS, &l->w_ms, &found))) return rc;
        if (ww && !found)
            return op_errf(c->err, OP_EINVAL, "%s: weight_ms has no time for symbol '%c' (give 0 if none)",
                           c->file, s);
        if ((rc = sym_number(c, act, "act_bytes", s, OP_MAX_BYTES, &v, &found))) return rc;
        l->act_bytes_measured = found ? (int64_t)v : 0;
        v = 0;
        if ((rc = sym_number(c, par, "param_bytes", s, OP_MAX_BYTES, &v, &found))) return rc;
        l->param_bytes_measured = found ? (int64_t)v : 0;
        v = 0;
        if ((rc = sym_number(c, rcd, "recompute_ms", s, OP_MAX_MS, &v, &found))) return rc;
        l->recompute_ms = found ? v : 0;
        if ((rc = recompute_check(c, "recompute_ms", s, l->recompute_ms, l->f_ms))) return rc;
        v = 0;
        if ((rc = sym_number(c, asd, "act_sel_bytes", s, OP_MAX_BYTES, &v, &found))) return rc;
        l->act_sel_bytes_measured = found ? (int64_t)v : 0;
        v = out_all;
        if ((rc = sym_number(c, outd, "out_bytes", s, OP_MAX_BYTES, &v, &found))) return rc;
        l->out_bytes_measured = (int64_t)v;
        l->has_measured = 1;
        l->hidden = hidden;
        if (l->kind == OP_LAYER_EMBED || l->kind == OP_LAYER_HEAD || l->kind == OP_LAYER_MTP) l->vocab = vocab;
        if (l->kind == OP_LAYER_EMBED) snprintf(l->name, sizeof l->name, "embed");
        else if (l->kind == OP_LAYER_HEAD) snprintf(l->name, sizeof l->name, "head");
        else snprintf(l->name, sizeof l->name, "layers.%d.%s", i, op_layer_kind_name(l->kind));
    }
    return OP_OK;
}

/* One GPU's times under by_gpu: forward_ms and backward_ms for every symbol of the pattern,
 * weight_ms (absent: 0) and recompute_ms (absent: not measured), as at the top level. */
static int read_gpu_times(pctx *c, json_t *o, const char *gname, const op_mbuild *b, double *row) {
    static const char *const keys[] = {"forward_ms", "backward_ms", "weight_ms", "recompute_ms"};
    char shown[4][96];
    json_t *dict[4];
    const char *k;
    json_t *v;
    if (!json_is_object(o))
        return op_errf(c->err, OP_EINVAL, "%s: by_gpu.%s: expected an object {\"forward_ms\": {...}, "
                       "\"backward_ms\": {...}, ...}", c->file, gname);
    json_object_foreach(o, k, v) {
        int ok = k[0] == '_';
        for (int j = 0; j < 4 && !ok; j++) ok = !strcmp(k, keys[j]);
        if (!ok)
            return op_errf(c->err, OP_EINVAL, "%s: by_gpu.%s: unknown key '%.64s' (known: forward_ms, "
                           "backward_ms, weight_ms, recompute_ms)", c->file, gname, k);
    }
    for (int j = 0; j < 4; j++) {
        snprintf(shown[j], sizeof shown[j], "by_gpu.%s.%s", gname, keys[j]);
        int rc = check_dict_in(c, o, keys[j], shown[j], &dict[j]);
        if (rc) return rc;
        if (j < 2 && !dict[j])
            return op_errf(c->err, OP_EINVAL, "%s: %s: missing (every GPU under by_gpu needs forward_ms "
                           "and backward_ms)", c->file, shown[j]);
    }
    for (int i = 0; i < b->n; i++) {
        char s = op_layer_kind_sym(b->v[i].kind);
        double *x = row + (size_t)i * 4;
        for (int j = 0; j < 4; j++) {
            int found = 0, rc;
            x[j] = j == 3 ? -1 : 0;
            if ((rc = sym_number(c, dict[j], shown[j], s, OP_MAX_MS, &x[j], &found))) return rc;
            if (!found && (j < 2 || (j == 2 && dict[j])))
                return op_errf(c->err, OP_EINVAL, "%s: %s has no time for symbol '%c'%s", c->file,
                               shown[j], s, j == 2 ? " (give 0 if none)" : "");
        }
        int rc = recompute_check(c, shown[3], s, x[3], x[0]); /* x[3] < 0: not given */
        if (rc) return rc;
    }
    return OP_OK;
}

/* "by_gpu": {GPU: {...}, ...}: measured times per GPU preset (names or aliases of
 * op_gpu_name, stored under the canonical name; one entry per GPU). */
static int read_by_gpu(pctx *c, json_t *root, const op_mbuild *b, op_model *m) {
    json_t *bg = json_object_get(root, "by_gpu"), *v;
    const char *k;
    if (!bg) return OP_OK;
    int n = 0;
    if (json_is_object(bg)) json_object_foreach(bg, k, v) n += k[0] != '_';
    if (!json_is_object(bg) || n < 1 || n > 16)
        return op_errf(c->err, OP_EINVAL, "%s: by_gpu: expected an object of 1 to 16 GPUs {\"a100-80gb\": "
                       "{\"forward_ms\": {...}, \"backward_ms\": {...}}, ...}", c->file);
    m->gpu_name = op_arena_alloc(&m->arena, sizeof *m->gpu_name * (size_t)n);
    m->gpu_ms = OP_ARENA_NEW(&m->arena, double, (size_t)n * (size_t)b->n * 4);
    m->n_gpu = 0;
    json_object_foreach(bg, k, v) {
        if (k[0] == '_') continue;
        const char *gname;
        op_err e = {0};
        if (op_gpu_name(k, &gname, &e) != OP_OK)
            return op_errf(c->err, OP_EINVAL, "%s: by_gpu: %s", c->file, e.msg);
        for (int g = 0; g < m->n_gpu; g++)
            if (!strcmp(m->gpu_name[g], gname))
                return op_errf(c->err, OP_EINVAL, "%s: by_gpu: '%.64s' is %s again: one entry per GPU",
                               c->file, k, gname);
        int rc = read_gpu_times(c, v, gname, b, m->gpu_ms + (size_t)m->n_gpu * (size_t)b->n * 4);
        if (rc) return rc;
        snprintf(m->gpu_name[m->n_gpu++], sizeof *m->gpu_name, "%s", gname);
    }
    return OP_OK;
}

const double *op_model_gpu_ms(const op_model *m, const char *gpu) {
    for (int g = 0; m && gpu && g < m->n_gpu; g++)
        if (!strcmp(m->gpu_name[g], gpu)) return m->gpu_ms + (size_t)g * (size_t)m->n_layers * 4;
    return NULL;
}

int op_model_from_profile_json(const char *json_text, const char *name, op_model *m, op_err *err) {
    pctx c = {.file = name ? name : "profile.json", .err = err};
    if (m) memset(m, 0, sizeof *m);
    if (!json_text || !m) return op_errf(err, OP_EINVAL, "%s: no %s", c.file, m ? "text" : "model to fill");
    op_model_set_name(m, c.file);
    snprintf(m->model_type, sizeof m->model_type, "profile");
    json_t *root = op_json_parse_finite(json_text, c.file, err);
    if (!root) return OP_EINVAL;
    op_mbuild b = {0};
    int rc = OP_OK;
    if (!json_is_object(root)) {
        rc = op_errf(err, OP_EINVAL, "%s: expected a JSON object at the top level", c.file);
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        int ok = k[0] == '_';
        for (const char *const *q = known_keys; *q && !ok; q++) ok = !strcmp(*q, k);
        if (!ok) {
            rc = op_errf(err, OP_EINVAL, "%s: unknown key '%s' (known: pattern, pattern_style, forward_ms, "
                         "backward_ms, weight_ms, act_bytes, param_bytes, out_bytes, recompute_ms, act_sel_bytes, "
                         "by_gpu, hidden, vocab, name, description)", c.file, k);
            goto out;
        }
    }
    /* free text, so a number or an object there is a file of another shape */
    for (const char *const *q = (const char *const[]){"name", "description", NULL}; *q; q++) {
        v = json_object_get(root, *q);
        if (v && !json_is_string(v)) {
            rc = op_errf(err, OP_EINVAL, "%s: %s: expected a string (free text)", c.file, *q);
            goto out;
        }
    }
    if ((rc = read_pattern(&c, root, &b)) || (rc = fill_layers(&c, root, &b)) ||
        (rc = read_by_gpu(&c, root, &b, m)))
        goto out;
    json_t *hv = json_object_get(root, "hidden"), *vv = json_object_get(root, "vocab");
    m->hidden = hv ? (int)json_integer_value(hv) : 0;
    m->vocab = vv ? (int)json_integer_value(vv) : 0;
    /* the batch the times hold for: both or neither, in the ranges --seq and --mbs take */
    if ((rc = opt_int(&c, root, "seq", &m->measured_seq)) ||
        (rc = opt_int(&c, root, "mbs", &m->measured_mbs)))
        goto out;
    if (!m->measured_seq != !m->measured_mbs) {
        rc = op_errf(err, OP_EINVAL, "%s: \"%s\" without \"%s\": give both (the batch the times "
                     "were measured at) or neither", c.file, m->measured_seq ? "seq" : "mbs",
                     m->measured_seq ? "mbs" : "seq");
        goto out;
    }
    if (m->measured_seq > 16777216 || m->measured_mbs > 65536) { /* as --seq and --mbs */
        rc = op_errf(err, OP_EINVAL, "%s: seq %d, mbs %d: at most 16777216 and 65536", c.file,
                     m->measured_seq, m->measured_mbs);
        goto out;
    }
    rc = op_mbuild_finish(&b, m, err);
out:
    op_mbuild_free(&b);
    json_decref(root);
    if (rc != OP_OK) op_model_free(m);
    return rc;
}
