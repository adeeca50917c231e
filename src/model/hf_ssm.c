/* hf_ssm.c: IBM's Mamba2 hybrids and the pure Mamba language models.  As in hf_hybrid.c each
 * block is split into its mixer and its FFN (Megatron's hybrid pattern):
 *   granitemoehybrid  Granite 4.0 H: Mamba2 or attention per layer (layer_types), then a dense
 *                     gated MLP (shared_intermediate_size), or, where num_local_experts > 0, a
 *                     MoE whose routed experts (intermediate_size) are added to that MLP's output
 *                     with no gate on the sum: one shared expert of that width.
 *   bamba             Mamba2 layers, attention at attn_layer_indices, a gated MLP in every block.
 *   mamba2            Mamba2 mixers alone (Mamba-Codestral): no attention, no MLP.
 *   mamba, falcon_mamba  Mamba-1 mixers alone (FalconMamba's extra RMSNorms on dt, B and C have
 *                     no weights, so both share one builder). */
#include <string.h>

#include "model/model_internal.h"

/* The Mamba2 mixer bamba and granitemoehybrid share (transformers' BambaMixer): width
 * mamba_expand x hidden_size in mamba_n_heads heads of mamba_d_head ("auto": the width over the
 * heads), which transformers refuses unless heads x head width is that width. */
typedef struct {
    int inner, heads, head_dim, groups, state, conv;
} ssm2;

static void bamba_mixer(op_hf *h, int hidden, ssm2 *s) {
    int expand = op_hf_int(h, "mamba_expand", 2);
    s->heads = op_hf_int(h, "mamba_n_heads", 128);
    s->groups = op_hf_int(h, "mamba_n_groups", 1);
    s->state = op_hf_int(h, "mamba_d_state", 256);
    s->conv = op_hf_int(h, "mamba_d_conv", 4);
    op_hf_need_pos(h, "mamba_expand", expand);
    static const char *const mk[4] = {"mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_conv"};
    op_hf_mamba2_shape(h, mk, s->heads, s->groups, s->state, s->conv);
    if (h->bad) return;
    s->inner = op_hf_derived(h, "mamba_expand", (double)expand * hidden);
    if (h->bad) return;
    if (!op_hf_int_auto(h, "mamba_d_head", &s->head_dim)) {
        op_hf_need_pos(h, "mamba_d_head", s->head_dim);
    } else if (s->inner % s->heads) {
        op_hf_fail(h, "mamba_n_heads", "%d heads do not divide mamba_expand x hidden_size %d", s->heads,
                   s->inner);
    } else {
        s->head_dim = s->inner / s->heads;
    }
    if (!h->bad && (long long)s->head_dim * s->heads != s->inner)
        op_hf_fail(h, "mamba_d_head", "%d x %d mamba_n_heads is not mamba_expand x hidden_size %d",
                   s->head_dim, s->heads, s->inner);
}

static op_layer *add_mamba2(op_mbuild *b, int i, int hidden, const ssm2 *s) {
    op_layer *l = op_mbuild_add(b, OP_LAYER_MAMBA, "layers.%d.mamba", i);
    l->hidden = hidden;
    op_hf_mamba2(l, s->inner, s->state, s->heads, s->head_dim, s->groups, s->conv);
    return l;
}

static op_layer *add_attn(op_hf *h, op_mbuild *b, int i, int hidden) {
    op_layer *l = op_mbuild_add(b, OP_LAYER_ATTN, "layers.%d.attn", i);
    l->hidden = hidden;
    op_hf_attn(h, l, hidden);
    return l;
}

static op_layer *add_mlp(op_mbuild *b, int i, int hidden, int dim) {
    op_layer *l = op_mbuild_add(b, OP_LAYER_MLP, "layers.%d.mlp", i);
    l->hidden = hidden;
    l->ffn = OP_FFN_MLP;
    l->ffn_dim = dim;
    l->ffn_gated = 1;
    return l;
}

/* Marks attn[i] for the attention layers of granitemoehybrid's per-layer list: layer_types
 * (layers_block_type in older configs), "mamba" / "attention" or the names transformers maps
 * them to, "linear_attention" / "full_attention".  Absent: every layer is Mamba, as in
 * transformers. */
static void granite_layer_types(op_hf *h, int n, unsigned char *attn) {
    const char *key = op_hf_has(h, "layer_types") || !op_hf_has(h, "layers_block_type") ? "layer_types"
                                                                                       : "layers_block_type";
    if (!op_hf_has(h, key)) return;
    for (int i = 0; i < n && !h->bad; i++) {
        const char *t = op_hf_list_str(h, key, n, i);
        if (!t) continue;
        if (!strcmp(t, "attention") || !strcmp(t, "full_attention")) attn[i] = 1;
        else if (strcmp(t, "mamba") && strcmp(t, "linear_attention"))
            op_hf_fail(h, key, "entry [%d]: unknown layer type '%s' (expected \"mamba\" or \"attention\")", i, t);
    }
}

int op_hf_build_granitemoehybrid(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, OP_HF_REQUIRED) != OP_OK) return OP_EINVAL;
    int experts = op_hf_int(h, "num_local_experts", 8), top_k = op_hf_int(h, "num_experts_per_tok", 2);
    int shared = op_hf_int(h, "shared_intermediate_size", OP_HF_REQUIRED);
    op_hf_need_pos(h, "shared_intermediate_size", shared);
    /* the routed experts' width: read only where there are experts */
    int inter = experts > 0 ? op_hf_int(h, "intermediate_size", OP_HF_REQUIRED) : 0;
    if (experts > 0) {
        op_hf_need_pos(h, "intermediate_size", inter);
        op_hf_need_moe(h, "num_local_experts", experts, top_k);
    }
    ssm2 s = {0};
    if (!h->bad) bamba_mixer(h, hidden, &s);
    unsigned char attn[OP_HF_MAX_BLOCKS] = {0};
    if (!h->bad) granite_layer_types(h, n, attn);
    if (h->bad) return OP_EINVAL;
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        if (attn[i]) add_attn(h, b, i, hidden);
        else add_mamba2(b, i, hidden, &s);
        /* transformers: block_sparse_moe(x) + shared_mlp(x), a plain sum; shared_mlp alone
         * without experts */
        op_layer *l = experts > 0 ? op_hf_moe_layer(h, b, i, "num_local_experts", experts, top_k, inter, 1, shared)
                                  : add_mlp(b, i, hidden, shared);
        l->hidden = hidden;
        l->ffn_gated = 1;
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

int op_hf_build_bamba(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab, inter;
    if (op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter) != OP_OK) return OP_EINVAL;
    ssm2 s = {0};
    if (!h->bad) bamba_mixer(h, hidden, &s);
    unsigned char attn[OP_HF_MAX_BLOCKS] = {0};
    if (!h->bad) op_hf_layer_ids(h, "attn_layer_indices", n, attn); /* absent or null: none */
    if (h->bad) return OP_EINVAL;
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        if (attn[i]) add_attn(h, b, i, hidden);
        else add_mamba2(b, i, hidden, &s);
        add_mlp(b, i, hidden, inter);
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

int op_hf_build_mamba2(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, OP_HF_REQUIRED) != OP_OK) return OP_EINVAL;
    int expand = op_hf_int(h, "expand", 2);
    ssm2 s = {0};
    s.heads = op_hf_int(h, "num_heads", 128);
    s.head_dim = op_hf_int(h, "head_dim", 64);
    s.groups = op_hf_int(h, "n_groups", 8);
    s.state = op_hf_int(h, "state_size", 128);
    s.conv = op_hf_int(h, "conv_kernel", 4);
    op_hf_need_pos(h, "expand", expand);
    static const char *const mk[4] = {"num_heads", "n_groups", "state_size", "conv_kernel"};
    op_hf_mamba2_shape(h, mk, s.heads, s.groups, s.state, s.conv);
    op_hf_need_pos(h, "head_dim", s.head_dim);
    if (h->bad) return OP_EINVAL;
    s.inner = op_hf_derived(h, "expand", (double)expand * hidden);
    /* transformers refuses a config whose heads do not make up the mixer's width */
    if (!h->bad && (long long)s.heads * s.head_dim != s.inner)
        op_hf_fail(h, "num_heads", "%d heads x head_dim %d is not hidden_size x expand %d", s.heads, s.head_dim,
                   s.inner);
    if (h->bad) return OP_EINVAL;
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) add_mamba2(b, i, hidden, &s);
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

int op_hf_build_mamba(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab;
    if (op_hf_base_dims(h, &hidden, &n, &vocab, OP_HF_REQUIRED) != OP_OK) return OP_EINVAL;
    int expand = op_hf_int(h, "expand", 2);
    int state = op_hf_int(h, "state_size", 16), conv = op_hf_int(h, "conv_kernel", 4);
    op_hf_need_pos(h, "expand", expand);
    op_hf_need_pos(h, "state_size", state);
    op_hf_need_pos(h, "conv_kernel", conv);
    if (h->bad) return OP_EINVAL;
    /* intermediate_size as the config gives it (transformers sets it from the config after
     * deriving expand x hidden_size); absent, that product */
    int inner = op_hf_has(h, "intermediate_size") ? op_hf_int(h, "intermediate_size", 0)
                                                  : op_hf_derived(h, "expand", (double)expand * hidden);
    op_hf_need_pos(h, "intermediate_size", inner);
    int dt_rank = (hidden + 15) / 16; /* time_step_rank "auto": ceil(hidden_size / 16) */
    op_hf_int_auto(h, "time_step_rank", &dt_rank);
    op_hf_need_pos(h, "time_step_rank", dt_rank);
    if (h->bad) return OP_EINVAL;
    int tie = op_hf_bool(h, "tie_word_embeddings", 1);

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_MAMBA, "layers.%d.mamba", i);
        l->hidden = hidden;
        l->ssm_version = 1;
        l->ssm_inner = inner;
        l->ssm_state = state;
        l->ssm_conv = conv;
        l->ssm_dt_rank = dt_rank;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}
