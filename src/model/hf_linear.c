/* hf_linear.c: linear-attention hybrids, split into mixer and FFN layers: qwen3_next (gated
 * delta net + gated full attention, MoE) and minimax_text_01 (lightning + softmax attention,
 * MoE).  Linear mixers are ATTN layers with attn = OP_ATTN_LINEAR. */
#include <string.h>

#include "model/model_internal.h"

int op_hf_build_qwen3_next(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab, inter;
    if (op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter) != OP_OK) return OP_EINVAL;
    int interval = op_hf_int(h, "full_attention_interval", 4);
    int lkh = op_hf_int(h, "linear_num_key_heads", 16), lvh = op_hf_int(h, "linear_num_value_heads", 32);
    int lkd = op_hf_int(h, "linear_key_head_dim", 128), lvd = op_hf_int(h, "linear_value_head_dim", 128);
    int experts = op_hf_int(h, "num_experts", 512), top_k = op_hf_int(h, "num_experts_per_tok", 10);
    int moe_dim = op_hf_int(h, "moe_intermediate_size", 512);
    int shared_dim = op_hf_int(h, "shared_expert_intermediate_size", 512);
    int step = op_hf_int(h, "decoder_sparse_step", 1);
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    op_hf_need_pos(h, "full_attention_interval", interval);
    op_hf_need_pos(h, "decoder_sparse_step", step);
    unsigned char mlp_only[OP_HF_MAX_BLOCKS] = {0};
    op_hf_layer_ids(h, "mlp_only_layers", n, mlp_only);
    if (h->bad) return OP_EINVAL;
    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_ATTN, "layers.%d.attn", i);
        l->hidden = hidden;
        if (!op_hf_layer_type(h, l, n, i, 0))
            l->attn = (i + 1) % interval == 0 ? OP_ATTN_FULL : OP_ATTN_LINEAR;
        if (h->bad) return OP_EINVAL;
        if (l->attn == OP_ATTN_LINEAR) {
            snprintf(l->name, sizeof l->name, "layers.%d.linear_attn", i);
            l->lin_k_heads = lkh;
            l->lin_v_heads = lvh;
            l->lin_k_dim = lkd;
            l->lin_v_dim = lvd;
        } else {
            op_hf_attn(h, l, hidden);
            if (!op_hf_has(h, "head_dim")) l->head_dim = 256;
        }
        int is_moe = experts > 0 && (i + 1) % step == 0 && !mlp_only[i];
        if (is_moe) {
            l = op_hf_moe_layer(h, b, i, "num_experts", experts, top_k, moe_dim, shared_dim > 0, shared_dim);
        } else {
            l = op_mbuild_add(b, OP_LAYER_MLP, "layers.%d.mlp", i);
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
        }
        l->hidden = hidden;
        l->ffn_gated = 1;
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

/* attn_type_list[i]: 0 = lightning (linear) attention, 1 = softmax attention.  Without it (and
 * without layer_types) MiniMax-Text-01's layout: every 8th layer softmax. */
static int minimax_softmax(op_hf *h, int n, int i) {
    int softmax = op_hf_list_flag(h, "attn_type_list", n, i, "0 (linear) or 1 (softmax)");
    return softmax < 0 ? (i + 1) % 8 == 0 : softmax;
}

int op_hf_build_minimax(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab, inter;
    if (op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter) != OP_OK) return OP_EINVAL;
    int experts = op_hf_int(h, "num_local_experts", 32), top_k = op_hf_int(h, "num_experts_per_tok", 2);
    int shared_dim = op_hf_int(h, "shared_intermediate_size", 0);
    int window = op_hf_int(h, "sliding_window", 0);
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    if (h->bad) return OP_EINVAL;
    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_ATTN, "layers.%d.attn", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        if (!op_hf_layer_type(h, l, n, i, window) && !minimax_softmax(h, n, i))
            l->attn = OP_ATTN_LINEAR;
        if (h->bad) return OP_EINVAL;
        if (l->attn == OP_ATTN_LINEAR) {
            snprintf(l->name, sizeof l->name, "layers.%d.lightning_attn", i);
            l->lin_k_heads = l->lin_v_heads = l->n_heads;
            l->lin_k_dim = l->lin_v_dim = l->head_dim;
        }
        l = op_hf_moe_layer(h, b, i, "num_local_experts", experts, top_k, inter, shared_dim > 0, shared_dim);
        l->hidden = hidden;
        l->ffn_gated = 1;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}
