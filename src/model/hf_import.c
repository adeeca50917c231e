/* hf_import.c: Hugging Face config.json -> op_model.  Dispatches on model_type to the
 * architecture builders (hf_dense.c, hf_moe.c, hf_vision.c, hf_hybrid.c, hf_ssm.c,
 * hf_linear.c) and holds the pieces they share. */
#include <pthread.h>
#include <string.h>

#include "model/model_internal.h"

typedef struct {
    const char *type;
    op_hf_build_fn fn;
    int nested; /* text fields may sit under "text_config" */
    op_hf_defaults defs;
} arch;

/* hidden_size, num_hidden_layers and (where used) intermediate_size are always required: a
 * config without them is truncated, and a default would silently model another size. */
static const arch archs[] = {
    {"llama", op_hf_build_dense, 0, {32000, 32, 0, 0}},
    {"mistral", op_hf_build_dense, 0, {32000, 32, 8, 0}},
    {"mixtral", op_hf_build_dense, 0, {32000, 32, 8, 0}},
    {"qwen2", op_hf_build_dense, 0, {151936, 32, 0, 0}},
    {"qwen2_moe", op_hf_build_dense, 0, {151936, 16, 0, 0}},
    {"qwen3", op_hf_build_dense, 0, {151936, 32, 8, 128}},
    {"qwen3_moe", op_hf_build_dense, 0, {151936, 32, 4, 0}},
    {"gemma", op_hf_build_dense, 0, {256000, 16, 16, 256}},
    {"gemma2", op_hf_build_dense, 0, {256000, 8, 4, 256}},
    {"gemma3", op_hf_build_gemma3, 1, {262208, 8, 4, 256}},
    {"gemma3_text", op_hf_build_gemma3, 0, {262208, 8, 4, 256}},
    {"gpt_oss", op_hf_build_dense, 0, {201088, 64, 8, 64}},
    {"olmoe", op_hf_build_dense, 0, {50304, 16, 0, 0}},
    {"phimoe", op_hf_build_dense, 0, {32064, 32, 8, 0}},
    {"minimax_m2", op_hf_build_dense, 0, {200064, 48, 8, 128}},
    {"olmo2", op_hf_build_dense, 0, {50304, 32, 0, 0}},
    {"olmo3", op_hf_build_dense, 0, {50304, 32, 0, 0}},
    {"exaone4", op_hf_build_dense, 0, {102400, 32, 32, 0}},
    {"smollm3", op_hf_build_dense, 0, {128256, 16, 4, 0}},
    {"seed_oss", op_hf_build_dense, 0, {155136, 80, 8, 128}},
    {"deepseek_v2", op_hf_build_deepseek, 0, {102400, 32, 0, 0}},
    {"deepseek_v3", op_hf_build_deepseek, 0, {129280, 128, 0, 0}},
    {"glm4_moe", op_hf_build_glm4_moe, 0, {151552, 96, 8, 0}},
    {"ernie4_5_moe", op_hf_build_ernie4_5_moe, 0, {103424, 20, 4, 0}},
    {"hunyuan_v1_moe", op_hf_build_hunyuan_v1_moe, 0, {290943, 32, 0, 0}},
    {"llama4", op_hf_build_llama4, 1, {202048, 40, 8, 128}},
    {"llama4_text", op_hf_build_llama4, 0, {202048, 40, 8, 128}},
    {"qwen2_vl", op_hf_build_qwen2_vl, 1, {152064, 32, 0, 0}},
    {"qwen2_5_vl", op_hf_build_qwen2_5_vl, 1, {152064, 64, 8, 0}},
    {"qwen3_vl", op_hf_build_qwen3_vl, 1, {151936, 32, 32, 128}},
    {"qwen3_vl_moe", op_hf_build_qwen3_vl, 1, {151936, 16, 16, 0}},
    {"jamba", op_hf_build_jamba, 0, {65536, 32, 8, 0}},
    {"nemotron_h", op_hf_build_nemotron_h, 0, {131072, 32, 8, 0}},
    {"qwen3_next", op_hf_build_qwen3_next, 0, {151936, 16, 2, 256}},
    {"falcon_h1", op_hf_build_falcon_h1, 0, {128000, 32, 8, 0}},
    {"zamba2", op_hf_build_zamba2, 0, {32000, 32, 0, 0}},
    {"minimax_text_01", op_hf_build_minimax, 0, {0, 0, 8, 0}},
    {"minimax", op_hf_build_minimax, 0, {0, 0, 8, 0}},
    {"granitemoehybrid", op_hf_build_granitemoehybrid, 0, {32000, 32, 0, 0}},
    {"bamba", op_hf_build_bamba, 0, {128000, 32, 8, 0}},
    {"mamba2", op_hf_build_mamba2, 0, {32768, 0, 0, 0}},
    {"mamba", op_hf_build_mamba, 0, {50280, 0, 0, 0}},
    {"falcon_mamba", op_hf_build_mamba, 0, {50280, 0, 0, 0}},
};
#define N_ARCHS (sizeof archs / sizeof archs[0])

/* Filled once (pthread_once): the first calls may come from several threads at once. */
static const char *type_names[N_ARCHS + 1];

static void fill_type_names(void) {
    for (size_t i = 0; i < N_ARCHS; i++) type_names[i] = archs[i].type;
}

const char *const *op_model_supported_types(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_type_names);
    return type_names;
}

int op_model_from_hf_json(const char *json_text, const char *name, op_model *m, op_err *err) {
    const char *file = name ? name : "config.json";
    if (m) memset(m, 0, sizeof *m);
    if (!json_text || !m) return op_errf(err, OP_EINVAL, "%s: no %s", file, m ? "text" : "model to fill");
    op_model_set_name(m, file);
    json_t *root = op_json_parse_lenient(json_text, file, err);
    if (!root) return OP_EINVAL;
    int rc = OP_EINVAL;
    if (!json_is_object(root)) {
        op_errf(err, OP_EINVAL, "%s: expected a JSON object at the top level", file);
        goto out;
    }
    json_t *mt = json_object_get(root, "model_type");
    if (!mt) {
        /* a profile without "pattern" or "forward_ms" comes here as an HF config: name what
         * the profile lacks, not the model_type no profile has */
        const char *has = json_object_get(root, "forward_ms") ? "forward_ms"
                          : json_object_get(root, "pattern")  ? "pattern"
                                                               : NULL;
        json_t *fmt = json_object_get(root, "format");
        const char *fs = json_is_string(fmt) ? json_string_value(fmt) : "";
        if (has)
            op_errf(err, OP_EINVAL, "%s: a profile (it has \"%s\") needs \"%s\" too", file, has,
                    strcmp(has, "pattern") ? "pattern" : "forward_ms");
        else if (!strncmp(fs, "octopipe.", 9)) /* a plan or cluster file given as the model */
            op_errf(err, OP_EINVAL, "%s: an %.40s file, not a model (an HF config.json, a profile or a "
                    "preset)%s", file, fs, !strncmp(fs, "octopipe.plan", 13) ? "; octopipe sim reads plan files" : "");
        else
            op_errf(err, OP_EINVAL, "%s: missing required field 'model_type'", file);
        goto out;
    }
    if (!json_is_string(mt) || op_hf_is_nan(mt)) {
        op_errf(err, OP_EINVAL, "%s: model_type: expected a string", file);
        goto out;
    }
    const char *type = json_string_value(mt);
    const arch *a = NULL;
    for (size_t i = 0; i < N_ARCHS; i++)
        if (!strcmp(archs[i].type, type)) a = &archs[i];
    if (!a) {
        op_buf b = {0};
        for (size_t i = 0; i < N_ARCHS; i++) op_buf_printf(&b, "%s%s", i ? ", " : "", archs[i].type);
        op_errf(err, OP_EINVAL, "%s: unsupported model_type '%s' (supported: %s)", file, type, b.data);
        op_buf_free(&b);
        goto out;
    }
    snprintf(m->model_type, sizeof m->model_type, "%s", type);
    op_hf h = {.defs = &a->defs, .obj = root, .file = file, .prefix = "", .err = err};
    json_t *tc = json_object_get(root, "text_config");
    /* anything but an object there was read past, and the fields were then looked for (or
     * found) at the top level */
    if (a->nested && tc && !json_is_null(tc) && !json_is_object(tc)) {
        op_errf(err, OP_EINVAL, "%s: text_config: expected an object", file);
        goto out;
    }
    if (a->nested && tc && json_is_object(tc)) {
        h.obj = tc;
        h.prefix = "text_config.";
    }
    op_mbuild b = {0};
    rc = a->fn(&h, root, &b, m);
    if (rc == OP_OK && h.bad) rc = OP_EINVAL;
    if (rc != OP_OK) {
        if (err && !err->msg[0]) op_errf(err, rc, "%s: invalid config", file);
        op_mbuild_free(&b);
        op_arena_free(&m->arena);
        goto out;
    }
    rc = op_mbuild_finish(&b, m, err);
out:
    json_decref(root);
    if (rc != OP_OK) op_model_free(m);
    return rc;
}

/* ---- shared pieces ---- */

void op_hf_attn(op_hf *h, op_layer *l, int hidden) {
    const op_hf_defaults *d = h->defs;
    l->attn = OP_ATTN_FULL;
    l->n_heads = op_hf_int(h, "num_attention_heads", d && d->heads ? d->heads : OP_HF_REQUIRED);
    op_hf_need_pos(h, "num_attention_heads", l->n_heads);
    if (h->bad) return;
    /* null: as many as the heads, as the config classes resolve None; absent: the default */
    json_t *kv = json_object_get(h->obj, "num_key_value_heads");
    int kv_def = d && d->kv && !(kv && json_is_null(kv)) ? d->kv : l->n_heads;
    l->n_kv_heads = op_hf_int(h, "num_key_value_heads", kv_def);
    /* a head_dim derived as 0 comes from the head count, which the message must name */
    if (!(d && d->head_dim) && !op_hf_has(h, "head_dim") && hidden / l->n_heads == 0) {
        op_hf_fail(h, "num_attention_heads", "%d heads are more than hidden_size %d (head_dim = "
                   "hidden_size / heads would be 0; give head_dim if that is meant)", l->n_heads, hidden);
        return;
    }
    l->head_dim = op_hf_int(h, "head_dim", d && d->head_dim ? d->head_dim : hidden / l->n_heads);
    op_hf_need_pos(h, "num_key_value_heads", l->n_kv_heads);
    op_hf_need_pos(h, "head_dim", l->head_dim);
    op_hf_need_kv_groups(h, l->n_heads, l->n_kv_heads);
}

void op_hf_need_kv_groups(op_hf *h, int heads, int kv) {
    if (h->bad || kv <= 0 || heads <= 0 || (kv <= heads && heads % kv == 0)) return;
    if (!op_hf_has(h, "num_key_value_heads"))
        op_hf_fail(h, "num_attention_heads", "%d %s %d, the default num_key_value_heads of this model "
                   "type (num_key_value_heads is absent; give it)", heads,
                   kv > heads ? "is fewer than" : "is not a multiple of", kv);
    else if (kv > heads)
        op_hf_fail(h, "num_key_value_heads", "%d is more than the %d attention heads", kv, heads);
    else
        op_hf_fail(h, "num_key_value_heads", "%d does not divide the %d attention heads (each KV "
                   "head serves an equal group of query heads)", kv, heads);
}

int op_hf_vocab(op_hf *h) {
    int v = op_hf_int(h, "vocab_size", h->defs && h->defs->vocab ? h->defs->vocab : OP_HF_REQUIRED);
    op_hf_need_pos(h, "vocab_size", v);
    return v;
}

int op_hf_base_dims(op_hf *h, int *hidden, int *n, int *vocab, int n_def) {
    *hidden = op_hf_int(h, "hidden_size", OP_HF_REQUIRED);
    *n = op_hf_int(h, "num_hidden_layers", n_def);
    *vocab = op_hf_vocab(h);
    op_hf_need_pos(h, "hidden_size", *hidden);
    op_hf_need_layers(h, "num_hidden_layers", *n);
    return h->bad ? OP_EINVAL : OP_OK;
}

int op_hf_base_dims_ffn(op_hf *h, int *hidden, int *n, int *vocab, int *inter) {
    op_hf_base_dims(h, hidden, n, vocab, OP_HF_REQUIRED);
    *inter = op_hf_int(h, "intermediate_size", OP_HF_REQUIRED);
    op_hf_need_pos(h, "intermediate_size", *inter);
    return h->bad ? OP_EINVAL : OP_OK;
}

void op_hf_embed(op_mbuild *b, int hidden, int vocab) {
    op_layer *l = op_mbuild_add(b, OP_LAYER_EMBED, "embed");
    l->hidden = hidden;
    l->vocab = vocab;
}

void op_hf_head(op_mbuild *b, op_model *m, int hidden, int vocab, int tie, int embed_idx) {
    op_layer *l = op_mbuild_add(b, OP_LAYER_HEAD, "head");
    l->hidden = hidden;
    l->vocab = vocab;
    if (tie) l->shares_params_with = embed_idx;
    m->hidden = hidden;
    m->vocab = vocab;
    m->tie_embeddings = tie;
}

int op_hf_layer_type(op_hf *h, op_layer *l, int n_layers, int i, int window) {
    const char *t = op_hf_list_str(h, "layer_types", n_layers, i);
    if (!t) return 0;
    if (!strcmp(t, "full_attention")) l->attn = OP_ATTN_FULL, l->window = 0;
    else if (!strcmp(t, "sliding_attention")) l->attn = OP_ATTN_SLIDING, l->window = window;
    else if (!strcmp(t, "chunked_attention")) l->attn = OP_ATTN_CHUNKED, l->window = window;
    else if (!strcmp(t, "linear_attention")) l->attn = OP_ATTN_LINEAR, l->window = 0;
    else {
        op_hf_fail(h, "layer_types", "entry [%d]: unknown layer type '%s'", i, t);
        return 0;
    }
    if ((l->attn == OP_ATTN_SLIDING || l->attn == OP_ATTN_CHUNKED) && window <= 0)
        op_hf_fail(h, "layer_types", "entry [%d] is '%s' but the config sets no window size", i, t);
    return 1;
}

void op_hf_mamba2(op_layer *l, int inner, int state, int heads, int head_dim, int groups, int conv) {
    l->ssm_version = 2;
    l->ssm_inner = inner;
    l->ssm_state = state;
    l->ssm_heads = heads;
    l->ssm_head_dim = head_dim;
    l->ssm_groups = groups;
    l->ssm_conv = conv;
}
