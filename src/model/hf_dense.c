/* hf_dense.c: the llama-like families, one DECODER layer (attention + MLP or MoE) per block:
 * llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3(_text),
 * gpt_oss, olmoe, phimoe, minimax_m2, olmo2, olmo3, exaone4, smollm3, seed_oss (and the
 * language models of qwen2_vl / qwen2_5_vl / qwen3_vl / qwen3_vl_moe).  Defaults are those of
 * the transformers config classes.
 *
 * What the cost model leaves out of these layers, each well under 0.1% of a layer's weights
 * and time: attention biases (qwen2, phimoe's attention_bias, seed_oss), q/k norms (olmoe,
 * qwen3, minimax_m2, olmo2, olmo3, exaone4) and LayerNorm in place of RMSNorm (phimoe).
 * olmo2 / olmo3 normalise after each sublayer rather than before it: the same kernels. */
#include <string.h>

#include "model/model_internal.h"

/* Window from `sliding_window`: absent -> def, explicit null -> 0 (no window). */
static int window_of(op_hf *h, int def) {
    json_t *v = json_object_get(h->obj, "sliding_window");
    if (!v) return def;
    if (json_is_null(v)) return 0;
    return op_hf_int(h, "sliding_window", def);
}

typedef struct {
    int moe;          /* 0 none, 1 every layer, 2 qwen-style sparse step */
    int experts, top_k, expert_dim, shared_dim;
    const char *experts_key; /* the config's name for the expert count, for messages */
    int sparse_step;
    int window;
    int tie, gated;
} dense_cfg;

int op_hf_dense_body(op_hf *h, op_mbuild *b, op_model *m, const char *t) {
    int hidden = op_hf_int(h, "hidden_size", OP_HF_REQUIRED);
    int n = op_hf_int(h, "num_hidden_layers", OP_HF_REQUIRED);
    int vocab = op_hf_vocab(h);
    int inter = op_hf_int(h, "intermediate_size", OP_HF_REQUIRED);
    op_hf_need_pos(h, "hidden_size", hidden);
    op_hf_need_layers(h, "num_hidden_layers", n);
    op_hf_need_pos(h, "vocab_size", vocab);
    op_hf_need_pos(h, "intermediate_size", inter);
    if (h->bad) return OP_EINVAL;

    int gemma = !strncmp(t, "gemma", 5), qwen = !strncmp(t, "qwen", 4);
    int smol = !strcmp(t, "smollm3"), exaone = !strcmp(t, "exaone4");
    dense_cfg c = {.gated = 1, .tie = op_hf_bool(h, "tie_word_embeddings", gemma || smol)};
    if (!strcmp(t, "mixtral")) {
        c.moe = 1;
        c.experts_key = "num_local_experts";
        c.experts = op_hf_int(h, c.experts_key, 8);
        c.top_k = op_hf_int(h, "num_experts_per_tok", 2);
        c.expert_dim = inter;
    } else if (!strcmp(t, "gpt_oss")) {
        c.moe = 1;
        c.experts_key = "num_local_experts";
        c.experts = op_hf_int(h, c.experts_key, 128);
        c.top_k = op_hf_int(h, "num_experts_per_tok", op_hf_int(h, "experts_per_token", 4));
        c.expert_dim = inter;
    } else if (!strcmp(t, "olmoe") || !strcmp(t, "phimoe")) {
        /* OlmoeConfig: 64 experts, top 8; PhimoeConfig: 16 experts, top 2.  Every layer is MoE
         * and each expert is a SwiGLU MLP of intermediate_size; no shared expert. */
        int olmoe = !strcmp(t, "olmoe");
        c.moe = 1;
        c.experts_key = olmoe ? "num_experts" : "num_local_experts";
        c.experts = op_hf_int(h, c.experts_key, olmoe ? 64 : 16);
        c.top_k = op_hf_int(h, "num_experts_per_tok", olmoe ? 8 : 2);
        c.expert_dim = inter;
    } else if (!strcmp(t, "minimax_m2")) {
        /* MiniMaxM2Config: 256 experts of intermediate_size, top 8, on every layer; full
         * attention everywhere (no sliding window), no shared expert */
        c.moe = 1;
        c.experts_key = "num_local_experts";
        c.experts = op_hf_int(h, "num_local_experts", 256);
        c.top_k = op_hf_int(h, "num_experts_per_tok", 8);
        c.expert_dim = inter;
    } else if (!strcmp(t, "qwen2_moe") || !strcmp(t, "qwen3_moe") || !strcmp(t, "qwen3_vl_moe")) {
        /* Qwen3VLMoeTextConfig keeps Qwen2MoeConfig's expert defaults, without its shared expert */
        int q2 = !strcmp(t, "qwen2_moe"), q2d = q2 || !strcmp(t, "qwen3_vl_moe");
        c.moe = 2;
        c.experts_key = "num_experts";
        c.experts = op_hf_int(h, c.experts_key, q2d ? 60 : 128);
        c.top_k = op_hf_int(h, "num_experts_per_tok", q2d ? 4 : 8);
        c.expert_dim = op_hf_int(h, "moe_intermediate_size", q2d ? 1408 : 768);
        c.shared_dim = q2 ? op_hf_int(h, "shared_expert_intermediate_size", 5632) : 0;
        c.sparse_step = op_hf_int(h, "decoder_sparse_step", 1);
        op_hf_need_pos(h, "decoder_sparse_step", c.sparse_step);
    }
    if (c.moe) op_hf_need_moe(h, c.experts_key, c.experts, c.top_k);
    if (!strcmp(t, "mistral")) c.window = window_of(h, 4096);
    else if (!strcmp(t, "gemma2") || !strncmp(t, "gemma3", 6)) c.window = window_of(h, 4096);
    else if (!strcmp(t, "gpt_oss")) c.window = window_of(h, 128);
    else if (!strncmp(t, "qwen3_vl", 8)) c.window = 0; /* its attention has no window */
    else if (qwen) c.window = op_hf_bool(h, "use_sliding_window", 0) ? window_of(h, 4096) : 0;
    else if (!strcmp(t, "minimax_m2") || !strcmp(t, "olmo2") || !strcmp(t, "seed_oss"))
        c.window = 0; /* their models read no sliding_window */
    else if (!strcmp(t, "olmo3") || !strcmp(t, "exaone4")) c.window = window_of(h, 4096);
    else if (smol) c.window = op_hf_bool(h, "use_sliding_window", 0) ? window_of(h, 0) : 0;
    else c.window = window_of(h, 0); /* llama, mixtral, gemma, olmoe, phimoe: none unless set */
    /* Qwen2_5_VLTextConfig defaults max_window_layers to 80, Qwen2Config to 28 */
    int max_window_layers =
        qwen ? op_hf_int(h, "max_window_layers", !strcmp(t, "qwen2_5_vl") ? 80 : 28) : 0;
    /* gemma3: every sliding_window_pattern-th layer is global (older key names too); exaone4
     * reads the key its own way below */
    int g3_pattern = exaone ? 6
                            : op_hf_int(h, "sliding_window_pattern",
                                        op_hf_int(h, "_sliding_window_pattern", 6));
    if (!strncmp(t, "gemma3", 6)) op_hf_need_pos(h, "sliding_window_pattern", g3_pattern);
    /* exaone4 without layer_types: sliding_window_pattern, an integer p (every p-th layer
     * global, the rest sliding) or a string of 'L' (local) and 'G' (global) repeated from
     * layer 0, as Exaone4Config describes it */
    int ex_every = 4;
    const char *ex_pattern = NULL;
    if (exaone && c.window > 0 && !op_hf_array(h, "layer_types")) {
        json_t *pv = json_object_get(h->obj, "sliding_window_pattern");
        if (json_is_string(pv) && !op_hf_is_nan(pv)) {
            ex_pattern = json_string_value(pv);
            if (!*ex_pattern || strspn(ex_pattern, "LG") != strlen(ex_pattern))
                op_hf_fail(h, "sliding_window_pattern", "'%.40s': expected 'L' (local) and 'G' "
                           "(global) letters, one per layer of the repeating pattern", ex_pattern);
        } else {
            ex_every = op_hf_int(h, "sliding_window_pattern", 4);
            op_hf_need_pos(h, "sliding_window_pattern", ex_every);
        }
    }
    /* smollm3: no_rope_layers[i] = 1 means RoPE; without it every no_rope_layer_interval-th
     * layer is NoPE.  NoPE costs what RoPE does (RoPE is priced on every layer); it only
     * decides which layers slide when layer_types is absent. */
    int smol_every = smol ? op_hf_int(h, "no_rope_layer_interval", 4) : 1;
    if (smol) op_hf_need_pos(h, "no_rope_layer_interval", smol_every);
    unsigned char mlp_only[OP_HF_MAX_BLOCKS] = {0};
    if (c.moe == 2) op_hf_layer_ids(h, "mlp_only_layers", n, mlp_only);
    if (h->bad) return OP_EINVAL;

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_DECODER, "layers.%d", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        /* default attention pattern of each family; layer_types (newer configs) overrides */
        int sliding = 0;
        if (!strcmp(t, "mistral")) sliding = c.window > 0;
        else if (!strcmp(t, "gemma2") || !strcmp(t, "gpt_oss")) sliding = i % 2 == 0;
        else if (!strncmp(t, "gemma3", 6)) sliding = (i + 1) % g3_pattern != 0;
        else if (qwen) sliding = c.window > 0 && i >= max_window_layers;
        else if (!strcmp(t, "olmo3")) sliding = (i + 1) % 4 != 0; /* 3 sliding, 1 full */
        else if (exaone) sliding = ex_pattern ? ex_pattern[i % strlen(ex_pattern)] == 'L'
                                              : (i + 1) % ex_every != 0;
        else if (smol) {
            int rope = op_hf_list_flag(h, "no_rope_layers", n, i, "0 (NoPE) or 1 (RoPE)");
            if (rope < 0) rope = (i + 1) % smol_every != 0;
            sliding = !rope; /* the NoPE layers slide when sliding is on */
        } else sliding = c.window > 0;
        /* smollm3 slides only with use_sliding_window and a window: its layer_types entries
         * 'sliding_attention' are full attention otherwise, as in its model */
        int lt_window = smol && c.window <= 0 ? 1 : c.window;
        if (!op_hf_layer_type(h, l, n, i, lt_window) && sliding && c.window > 0) {
            l->attn = OP_ATTN_SLIDING;
            l->window = c.window;
        }
        if (smol && c.window <= 0 && l->attn == OP_ATTN_SLIDING)
            l->attn = OP_ATTN_FULL, l->window = 0;
        int is_moe = c.moe == 1 ||
                     (c.moe == 2 && (i + 1) % c.sparse_step == 0 &&
                      !mlp_only[i]);
        if (is_moe) {
            op_hf_set_moe(l, c.experts, c.top_k, c.expert_dim, c.shared_dim > 0, c.shared_dim);
        } else {
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
        }
        l->ffn_gated = c.gated;
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, c.tie, embed);
    return h->bad ? OP_EINVAL : OP_OK;
}

int op_hf_build_dense(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    return op_hf_dense_body(h, b, m, m->model_type);
}
