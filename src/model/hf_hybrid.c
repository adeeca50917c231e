/* hf_hybrid.c: Mamba hybrids.  Each block is split into its mixer and its FFN as separate
 * layers (Megatron's hybrid pattern): jamba, nemotron_h, falcon_h1 (the parallel attention +
 * Mamba2 mixer is one HYBRID layer, its MLP another), zamba2 (shared attention+MLP blocks in
 * front of some Mamba layers, sharing parameters).  The Mamba2 shape check here serves
 * hf_ssm.c too. */
#include <string.h>

#include "model/model_internal.h"

static void period(op_hf *h, const char *pk, int p, const char *ok, int o) {
    op_hf_need_pos(h, pk, p);
    if (!h->bad && (o < 0 || o >= p)) op_hf_fail(h, ok, "%d is outside 0..%s-1 (%d)", o, pk, p - 1);
}

void op_hf_mamba2_shape(op_hf *h, const char *const keys[4], int heads, int groups, int state, int conv) {
    op_hf_need_pos(h, keys[0], heads);
    op_hf_need_pos(h, keys[1], groups);
    op_hf_need_pos(h, keys[2], state);
    op_hf_need_pos(h, keys[3], conv);
    if (!h->bad && heads % groups)
        op_hf_fail(h, keys[1], "%d groups do not divide the %d Mamba heads (%s)", groups, heads, keys[0]);
}

int op_hf_build_jamba(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, OP_HF_REQUIRED) != OP_OK) return OP_EINVAL;
    int inter = op_hf_int(h, "intermediate_size", OP_HF_REQUIRED);
    int ap = op_hf_int(h, "attn_layer_period", 8), ao = op_hf_int(h, "attn_layer_offset", 4);
    int ep = op_hf_int(h, "expert_layer_period", 2), eo = op_hf_int(h, "expert_layer_offset", 1);
    int experts = op_hf_int(h, "num_experts", 16), top_k = op_hf_int(h, "num_experts_per_tok", 2);
    int d_state = op_hf_int(h, "mamba_d_state", 16), d_conv = op_hf_int(h, "mamba_d_conv", 4);
    int expand = op_hf_int(h, "mamba_expand", 2);
    int window = op_hf_int(h, "sliding_window", 0);
    int dt_rank = (hidden + 15) / 16; /* mamba_dt_rank "auto": ceil(hidden / 16) */
    op_hf_int_auto(h, "mamba_dt_rank", &dt_rank);
    op_hf_need_pos(h, "intermediate_size", inter);
    period(h, "attn_layer_period", ap, "attn_layer_offset", ao);
    period(h, "expert_layer_period", ep, "expert_layer_offset", eo);
    op_hf_need_pos(h, "mamba_expand", expand);
    op_hf_need_pos(h, "mamba_d_state", d_state);
    op_hf_need_pos(h, "mamba_d_conv", d_conv);
    op_hf_need_pos(h, "mamba_dt_rank", dt_rank);
    op_hf_need_pos(h, "num_experts", experts); /* 1: a dense MLP in every layer */
    if (h->bad) return OP_EINVAL;
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l;
        if (i % ap == ao) {
            l = op_mbuild_add(b, OP_LAYER_ATTN, "layers.%d.attn", i);
            l->hidden = hidden;
            op_hf_attn(h, l, hidden);
            if (window > 0) l->attn = OP_ATTN_SLIDING, l->window = window;
        } else {
            l = op_mbuild_add(b, OP_LAYER_MAMBA, "layers.%d.mamba", i);
            l->hidden = hidden;
            l->ssm_version = 1;
            l->ssm_inner = op_hf_derived(h, "mamba_expand", (double)expand * hidden);
            l->ssm_state = d_state;
            l->ssm_conv = d_conv;
            l->ssm_dt_rank = dt_rank;
        }
        /* transformers: experts in layer i = num_experts if i % period == offset, else 1 */
        if (experts > 1 && i % ep == eo) {
            l = op_hf_moe_layer(h, b, i, "num_experts", experts, top_k, inter, 0, 0);
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

#define NEMOTRON_H_8B_PATTERN "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"

int op_hf_build_nemotron_h(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, 52) != OP_OK) return OP_EINVAL;
    const char *pat = op_hf_str(h, "hybrid_override_pattern", NEMOTRON_H_8B_PATTERN);
    int inter = op_hf_int(h, "intermediate_size", 21504);
    int m_heads = op_hf_int(h, "mamba_num_heads", 128), m_hd = op_hf_int(h, "mamba_head_dim", 64);
    int state = op_hf_int(h, "ssm_state_size", 128), groups = op_hf_int(h, "n_groups", 8);
    int conv = op_hf_int(h, "conv_kernel", 4);
    int hd = op_hf_int(h, "attention_head_dim", op_hf_int(h, "head_dim", 128));
    int experts = op_hf_int(h, "n_routed_experts", 8), top_k = op_hf_int(h, "num_experts_per_tok", 2);
    int moe_dim = op_hf_int(h, "moe_intermediate_size", 7688);
    int shared = op_hf_int(h, "n_shared_experts", 1);
    int shared_dim = op_hf_int(h, "moe_shared_expert_intermediate_size", 7688);
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    static const char *const mk[4] = {"mamba_num_heads", "n_groups", "ssm_state_size", "conv_kernel"};
    op_hf_mamba2_shape(h, mk, m_heads, groups, state, conv);
    op_hf_need_pos(h, "mamba_head_dim", m_hd);
    if (h->bad) return OP_EINVAL;
    if ((int)strlen(pat) != n) {
        op_hf_fail(h, "hybrid_override_pattern", "has %zu symbols but num_hidden_layers is %d",
                   strlen(pat), n);
        return OP_EINVAL;
    }
    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l;
        switch (pat[i]) {
        case 'M':
            l = op_mbuild_add(b, OP_LAYER_MAMBA, "layers.%d.mamba", i);
            op_hf_mamba2(l, op_hf_derived(h, "mamba_num_heads", (double)m_heads * m_hd), state, m_heads,
                         m_hd, groups, conv);
            break;
        case '*':
            l = op_mbuild_add(b, OP_LAYER_ATTN, "layers.%d.attn", i);
            op_hf_attn(h, l, hidden);
            l->head_dim = hd;
            break;
        case '-':
            l = op_mbuild_add(b, OP_LAYER_MLP, "layers.%d.mlp", i);
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
            l->ffn_gated = 0; /* relu^2: up + down */
            break;
        case 'E':
            l = op_hf_moe_layer(h, b, i, "n_routed_experts", experts, top_k, moe_dim, shared, shared_dim);
            l->ffn_gated = 0;
            break;
        default: {
            char q[12];
            op_hf_fail(h, "hybrid_override_pattern", "[%d]: unknown symbol %s (M mamba, * attention, - MLP, E MoE)",
                       i, op_show_char(pat[i], q));
            return OP_EINVAL;
        }
        }
        l->hidden = hidden;
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

int op_hf_build_falcon_h1(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, OP_HF_REQUIRED) != OP_OK) return OP_EINVAL;
    int inter = op_hf_int(h, "intermediate_size", OP_HF_REQUIRED);
    int expand = op_hf_int(h, "mamba_expand", 2);
    int inner = op_hf_int(h, "mamba_d_ssm", op_hf_derived(h, "mamba_expand", (double)expand * hidden));
    int m_heads = op_hf_int(h, "mamba_n_heads", 128);
    op_hf_need_pos(h, "mamba_n_heads", m_heads);
    op_hf_need_pos(h, "mamba_d_ssm", inner);
    if (h->bad) return OP_EINVAL;
    int m_hd = 0;
    if (op_hf_int_auto(h, "mamba_d_head", &m_hd)) /* mamba_d_ssm / heads, 0 with more heads */
        m_hd = op_hf_split(h, "mamba_n_heads", m_heads, "mamba_d_ssm", inner, "mamba_d_head");
    int groups = op_hf_int(h, "mamba_n_groups", 1), state = op_hf_int(h, "mamba_d_state", 256);
    int conv = op_hf_int(h, "mamba_d_conv", 4);
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    static const char *const mk[4] = {"mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_conv"};
    op_hf_mamba2_shape(h, mk, m_heads, groups, state, conv);
    if (h->bad) return OP_EINVAL;
    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_HYBRID, "layers.%d.mixer", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        op_hf_mamba2(l, inner, state, m_heads, m_hd, groups, conv);
        l = op_mbuild_add(b, OP_LAYER_MLP, "layers.%d.mlp", i);
        l->hidden = hidden;
        l->ffn = OP_FFN_MLP;
        l->ffn_dim = inter;
        l->ffn_gated = 1;
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

/* Marks hybrid[i] for the layers that are "hybrid" (shared transformer block + Mamba) rather
 * than "mamba". */
static void zamba2_hybrids(op_hf *h, int n, unsigned char *hybrid) {
    if (op_hf_has(h, "layers_block_type")) {
        for (int i = 0; i < n && !h->bad; i++) {
            const char *t = op_hf_list_str(h, "layers_block_type", n, i);
            if (t && !strcmp(t, "hybrid")) hybrid[i] = 1;
            else if (t && strcmp(t, "mamba") != 0)
                op_hf_fail(h, "layers_block_type", "entry [%d]: unknown block type '%s'", i, t);
        }
    } else if (!op_hf_layer_ids(h, "hybrid_layer_ids", n, hybrid)) {
        op_hf_fail(h, "layers_block_type", "missing (or give hybrid_layer_ids)");
    }
}

int op_hf_build_zamba2(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, 54) != OP_OK) return OP_EINVAL;
    int heads = op_hf_int(h, "num_attention_heads", 32);
    op_hf_need_pos(h, "num_attention_heads", heads);
    if (h->bad) return OP_EINVAL;
    int attn_hidden = op_hf_int(h, "attention_hidden_size", 2 * hidden); /* hidden <= 2^24 */
    int kv = op_hf_int(h, "num_key_value_heads", heads);
    op_hf_need_pos(h, "num_key_value_heads", kv);
    op_hf_need_kv_groups(h, heads, kv);
    /* absent: attention_hidden_size / heads, which more heads than that width make 0 */
    int hd = op_hf_has(h, "attention_head_dim")
                 ? op_hf_int(h, "attention_head_dim", 0)
                 : op_hf_split(h, "num_attention_heads", heads, "attention_hidden_size", attn_hidden,
                               "attention_head_dim");
    int inter = op_hf_int(h, "intermediate_size", 4 * hidden);
    int mem_blocks = op_hf_int(h, "num_mem_blocks", 1);
    int expand = op_hf_int(h, "mamba_expand", 2), m_hd = op_hf_int(h, "mamba_headdim", 64);
    int state = op_hf_int(h, "mamba_d_state", 64), conv = op_hf_int(h, "mamba_d_conv", 4);
    int groups = op_hf_int(h, "mamba_ngroups", 1);
    op_hf_need_pos(h, "mamba_headdim", m_hd);
    op_hf_need_pos(h, "num_mem_blocks", mem_blocks);
    if (h->bad) return OP_EINVAL;
    int inner = op_hf_derived(h, "mamba_expand", (double)expand * hidden);
    /* absent: the SSM width / mamba_headdim, which a head wider than the SSM makes 0 */
    int m_heads = op_hf_has(h, "n_mamba_heads")
                      ? op_hf_int(h, "n_mamba_heads", 0)
                      : op_hf_split(h, "mamba_headdim", m_hd, "mamba_expand x hidden_size", inner,
                                    "n_mamba_heads");
    int tie = op_hf_bool(h, "tie_word_embeddings", 1);
    static const char *const mk[4] = {"n_mamba_heads", "mamba_ngroups", "mamba_d_state", "mamba_d_conv"};
    op_hf_mamba2_shape(h, mk, m_heads, groups, state, conv);
    unsigned char hybrid[OP_HF_MAX_BLOCKS] = {0};
    zamba2_hybrids(h, n, hybrid);
    if (h->bad) return OP_EINVAL;

    /* first layer index of each shared block's attention (its MLP follows it) */
    int first_use[64];
    for (int s = 0; s < 64; s++) first_use[s] = -1;
    int embed = b->n, hybrids = 0;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        if (hybrid[i]) {
            int s = hybrids++ % mem_blocks % 64;
            op_layer *l = op_mbuild_add(b, OP_LAYER_ATTN, "layers.%d.shared_attn", i);
            l->hidden = hidden;
            l->attn = OP_ATTN_FULL;
            l->attn_in_dim = 2 * hidden; /* attends over concat(hidden, input embeddings) */
            l->n_heads = heads;
            l->n_kv_heads = kv;
            l->head_dim = hd;
            l->shares_params_with = first_use[s];
            int attn_idx = b->n - 1;
            l = op_mbuild_add(b, OP_LAYER_MLP, "layers.%d.shared_mlp", i);
            l->hidden = hidden;
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
            l->ffn_gated = 1;
            l->shares_params_with = first_use[s] >= 0 ? first_use[s] + 1 : -1;
            if (first_use[s] < 0) first_use[s] = attn_idx;
        }
        op_layer *l = op_mbuild_add(b, OP_LAYER_MAMBA, "layers.%d.mamba", i);
        l->hidden = hidden;
        op_hf_mamba2(l, inner, state, m_heads, m_hd, groups, conv);
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}
