/* hf_moe.c: transformer families whose MoE placement and attention need more than a flag:
 * deepseek_v2 / deepseek_v3 (MLA, first_k_dense_replace, moe_layer_freq, MTP), glm4_moe
 * (grouped query attention, first_k_dense_replace, MTP), ernie4_5_moe (MoE over a layer range
 * and interval, shared experts), hunyuan_v1_moe (per-layer top-k, a shared MLP) and llama4
 * (interleave_moe_layer_step / moe_layers, chunked attention on RoPE layers, vision encoder).
 * One DECODER layer per block; MTP blocks come after the decoders, before the head. */
#include <math.h>
#include <string.h>

#include "model/model_internal.h"

/* key absent -> def; explicit null -> 0 (q_lora_rank: null means a dense q projection) */
static int int_or_null(op_hf *h, const char *key, int def) {
    json_t *v = json_object_get(h->obj, key);
    if (!v) return def;
    if (json_is_null(v)) return 0;
    return op_hf_int(h, key, def);
}

int op_hf_build_deepseek(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int v3 = !strcmp(m->model_type, "deepseek_v3");
    int hidden, n, vocab, inter;
    op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter);
    int heads = op_hf_int(h, "num_attention_heads", h->defs->heads);
    op_hf_need_pos(h, "num_attention_heads", heads);
    int kv = op_hf_int(h, "num_key_value_heads", heads);
    int q_lora = int_or_null(h, "q_lora_rank", 1536);
    int kv_lora = op_hf_int(h, "kv_lora_rank", 512);
    int nope = op_hf_int(h, "qk_nope_head_dim", 128);
    int rope = op_hf_int(h, "qk_rope_head_dim", 64);
    int vdim = op_hf_int(h, "v_head_dim", 128);
    /* DeepseekV2Config leaves the expert fields None (a dense model) by default */
    int experts = int_or_null(h, "n_routed_experts", v3 ? 256 : 0);
    int top_k = int_or_null(h, "num_experts_per_tok", v3 ? 8 : 0);
    int shared = int_or_null(h, "n_shared_experts", v3 ? 1 : 0);
    int moe_dim = op_hf_int(h, "moe_intermediate_size", v3 ? 2048 : 1407);
    int first_dense = op_hf_int(h, "first_k_dense_replace", v3 ? 3 : 0);
    int freq = op_hf_int(h, "moe_layer_freq", 1);
    /* DeepseekV3Config: num_mtp_layers (saved as num_nextn_predict_layers), default 1 */
    int mtp = op_hf_int(h, "num_nextn_predict_layers", op_hf_int(h, "num_mtp_layers", v3 ? 1 : 0));
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    op_hf_need_pos(h, "kv_lora_rank", kv_lora);
    op_hf_need_pos(h, "moe_layer_freq", freq);
    if (!h->bad && experts > 0) {
        op_hf_need_pos(h, "num_experts_per_tok", top_k);
        op_hf_need_pos(h, "moe_intermediate_size", moe_dim);
        if (!h->bad && top_k > experts)
            op_hf_fail(h, "num_experts_per_tok", "%d is more than the %d experts", top_k, experts);
    }
    if (!h->bad && mtp > 64) op_hf_fail(h, "num_nextn_predict_layers", "%d; expected 0..64", mtp);
    if (h->bad) return OP_EINVAL;

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n + mtp; i++) {
        int is_mtp = i >= n;
        op_layer *l = is_mtp ? op_mbuild_add(b, OP_LAYER_MTP, "mtp.%d", i - n)
                             : op_mbuild_add(b, OP_LAYER_DECODER, "layers.%d", i);
        l->hidden = hidden;
        l->attn = OP_ATTN_MLA;
        l->n_heads = heads;
        l->n_kv_heads = kv;
        l->head_dim = nope + rope;
        l->q_lora_rank = q_lora;
        l->kv_lora_rank = kv_lora;
        l->qk_nope_dim = nope;
        l->qk_rope_dim = rope;
        l->v_head_dim = vdim;
        l->ffn_gated = 1;
        /* MTP blocks are full decoder layers at index n + k, so the same MoE rule applies */
        if (experts > 0 && i >= first_dense && i % freq == 0) {
            op_hf_set_moe(l, experts, top_k, moe_dim, shared, moe_dim);
        } else {
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
        }
        if (is_mtp) l->vocab = vocab; /* its own (shared) output head and loss */
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

/* glm4_moe (GLM-4.5, GLM-4.6, GLM-4.5-Air): grouped query attention (head_dim may exceed
 * hidden / heads), the first first_k_dense_replace layers a SwiGLU MLP of intermediate_size,
 * the rest MoE: n_routed_experts of moe_intermediate_size, top num_experts_per_tok, and one
 * shared MLP of n_shared_experts * moe_intermediate_size (priced as n_shared_experts experts of
 * moe_intermediate_size: the same weights and FLOPs).  num_nextn_predict_layers MTP blocks
 * (Glm4MoeConfig's num_mtp_layers, default 1) follow, built as DeepSeek-V3's: an MoE decoder
 * block with its own embedding, projection and head.
 *
 * Left out of the cost, as for the other GQA families: attention_bias (q, k, v biases),
 * use_qk_norm (RMSNorm over head_dim on q and k) and partial_rotary_factor (RoPE on part of
 * each head: the cost model prices RoPE on all of q and k, an element-wise op far below the
 * layer's GEMMs).  All are checked for type and range. */
int op_hf_build_glm4_moe(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab, inter;
    op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter);
    int experts = op_hf_int(h, "n_routed_experts", op_hf_int(h, "num_local_experts", 128));
    int top_k = op_hf_int(h, "num_experts_per_tok", 8);
    int moe_dim = op_hf_int(h, "moe_intermediate_size", 1408);
    int shared = op_hf_int(h, "n_shared_experts", 1);
    int first_dense = op_hf_int(h, "first_k_dense_replace", 1);
    int mtp = op_hf_int(h, "num_nextn_predict_layers", op_hf_int(h, "num_mtp_layers", 1));
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    (void)op_hf_bool(h, "attention_bias", 0);
    (void)op_hf_bool(h, "use_qk_norm", 0);
    double rot = op_hf_num(h, "partial_rotary_factor", 0.5);
    if (!h->bad && !(rot > 0 && rot <= 1))
        op_hf_fail(h, "partial_rotary_factor", "must be in (0, 1], got %g", rot);
    if (!h->bad && first_dense > n)
        op_hf_fail(h, "first_k_dense_replace", "%d is more than the %d layers (num_hidden_layers)",
                   first_dense, n);
    if (!h->bad && mtp > 64) op_hf_fail(h, "num_nextn_predict_layers", "%d; expected 0..64", mtp);
    if (h->bad) return OP_EINVAL;

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n + mtp; i++) {
        int is_mtp = i >= n;
        op_layer *l = is_mtp ? op_mbuild_add(b, OP_LAYER_MTP, "mtp.%d", i - n)
                             : op_mbuild_add(b, OP_LAYER_DECODER, "layers.%d", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        l->ffn_gated = 1;
        /* an MTP block is layer n + k, past the dense ones: MoE */
        if (i >= first_dense) {
            op_hf_need_moe(h, "n_routed_experts", experts, top_k);
            op_hf_need_pos(h, "moe_intermediate_size", moe_dim);
            op_hf_set_moe(l, experts, top_k, moe_dim, shared, moe_dim);
        } else {
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
        }
        if (is_mtp) l->vocab = vocab; /* its own head and loss */
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

/* llama4's vision encoder (when vision_config is present): patch embedding, blocks, and the
 * pixel-shuffle adapter + projector into the text model. */
static int llama4_vision(op_hf *h, json_t *root, op_mbuild *b, int text_hidden) {
    op_hf vc = op_hf_sub(h, root, "vision_config", "vision_config.");
    if (!vc.obj) return h->bad ? OP_EINVAL : OP_OK;
    op_vis_tower v = {.prefix = "vision_model"};
    v.depth = op_hf_int(&vc, "num_hidden_layers", 34);
    v.width = op_hf_int(&vc, "hidden_size", 768);
    v.heads = op_hf_int(&vc, "num_attention_heads", 16);
    v.mlp_dim = op_hf_int(&vc, "intermediate_size", 5632);
    int image = op_hf_int(&vc, "image_size", OP_HF_IMAGE_SIZE);
    int patch = op_hf_int(&vc, "patch_size", 14);
    int chans = op_hf_int(&vc, "num_channels", 3);
    double shuffle = op_hf_num(&vc, "pixel_shuffle_ratio", 0.5);
    v.merge_mlp = op_hf_int(&vc, "projector_input_dim", 4096);
    op_hf_need_layers(&vc, "num_hidden_layers", v.depth);
    op_hf_need_pos(&vc, "hidden_size", v.width);
    op_hf_need_pos(&vc, "num_attention_heads", v.heads);
    op_hf_need_pos(&vc, "patch_size", patch);
    op_hf_split_even(&vc, "num_attention_heads", v.heads, "hidden_size", v.width, "head_dim");
    if (!vc.bad && !(shuffle > 0.01 && shuffle <= 1))
        op_hf_fail(&vc, "pixel_shuffle_ratio", "must be in (0.01, 1], got %g", shuffle);
    if (vc.bad) return h->bad = 1, OP_EINVAL;
    double side = (double)(image / patch);
    v.patches = op_hf_derived(&vc, "image_size", side * side);
    v.patch_dim = op_hf_derived(&vc, "patch_size", (double)chans * patch * patch);
    v.gated = 0;
    v.out_tokens = op_hf_derived(&vc, "pixel_shuffle_ratio", v.patches * shuffle * shuffle);
    v.merge_in = op_hf_derived(&vc, "pixel_shuffle_ratio", v.width / (shuffle * shuffle));
    if (vc.bad) return h->bad = 1, OP_EINVAL;
    v.out_hidden = text_hidden;
    op_hf_vision_tower(b, &v);
    return OP_OK;
}

int op_hf_build_llama4(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int hidden, n, vocab;
    op_hf_base_dims(h, &hidden, &n, &vocab, OP_HF_REQUIRED);
    int expert_dim = op_hf_int(h, "intermediate_size", 8192);
    int mlp_dim = op_hf_int(h, "intermediate_size_mlp", 16384);
    int experts = op_hf_int(h, "num_local_experts", 16);
    int top_k = op_hf_int(h, "num_experts_per_tok", 1);
    int step = op_hf_int(h, "interleave_moe_layer_step", 1);
    int chunk = op_hf_int(h, "attention_chunk_size", 8192);
    int nope_every = op_hf_int(h, "no_rope_layer_interval", 4);
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    op_hf_need_pos(h, "interleave_moe_layer_step", step);
    op_hf_need_pos(h, "no_rope_layer_interval", nope_every);
    unsigned char moe_at[OP_HF_MAX_BLOCKS] = {0};
    int moe_list = op_hf_layer_ids(h, "moe_layers", n, moe_at);
    json_t *no_rope = op_hf_array(h, "no_rope_layers");
    int rope_list = no_rope && json_array_size(no_rope) > 0; /* [] means "use the default" */
    if (h->bad) return OP_EINVAL;
    if (llama4_vision(h, root, b, hidden) != OP_OK) return OP_EINVAL;

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_DECODER, "layers.%d", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        /* RoPE layers attend within chunks; every no_rope_layer_interval-th layer is NoPE and
         * global (no_rope_layers[i] = 1 means "uses RoPE") */
        int rope = rope_list ? op_hf_list_flag(h, "no_rope_layers", n, i, "0 (NoPE) or 1 (RoPE)")
                             : (i + 1) % nope_every != 0;
        if (!op_hf_layer_type(h, l, n, i, chunk) && rope && chunk > 0) {
            l->attn = OP_ATTN_CHUNKED;
            l->window = chunk;
        }
        int is_moe = moe_list ? moe_at[i] : (i + 1) % step == 0;
        l->ffn_gated = 1;
        if (is_moe && experts > 0) {
            op_hf_need_moe(h, "num_local_experts", experts, top_k);
            /* llama4's shared expert, same size as a routed one */
            op_hf_set_moe(l, experts, top_k, expert_dim, 1, expert_dim);
        } else {
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = mlp_dim;
        }
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

/* ernie4_5_moe (ERNIE-4.5 MoE, e.g. ERNIE-4.5-21B-A3B, ERNIE-4.5-300B-A47B): grouped query
 * attention; layer i is MoE when (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <=
 * i <= moe_layer_end_index (-1: the last layer), else a SwiGLU MLP of intermediate_size.  An MoE
 * layer has moe_num_experts routed experts of moe_intermediate_size, top moe_k, and one shared
 * MLP of moe_num_shared_experts * moe_intermediate_size (priced as that many experts of
 * moe_intermediate_size: the same weights and FLOPs).  Ernie4_5_MoeConfig's defaults: 64
 * experts top 6 of 1536, 2 shared, MoE from layer 1, tied embeddings, vocab 103424.
 * The MTP block (num_nextn_predict_layers) is not built by transformers, which skips its
 * weights on load, so it is left out here too.  use_bias (biases on every projection) is left
 * out of the cost, well under 0.1% of a layer's weights. */
int op_hf_build_ernie4_5_moe(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab, inter;
    op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter);
    int experts = op_hf_int(h, "moe_num_experts", 64);
    int top_k = op_hf_int(h, "moe_k", 6);
    int moe_dim = op_hf_int(h, "moe_intermediate_size", 1536);
    int shared = op_hf_int(h, "moe_num_shared_experts", 2);
    int start = op_hf_int(h, "moe_layer_start_index", 1);
    int interval = op_hf_int(h, "moe_layer_interval", 1);
    int tie = op_hf_bool(h, "tie_word_embeddings", 1);
    (void)op_hf_bool(h, "use_bias", 0);
    /* moe_layer_end_index: -1 (the default) means the last layer */
    json_t *ev = json_object_get(h->obj, "moe_layer_end_index");
    int end = n - 1;
    if (ev && json_is_number(ev) && json_number_value(ev) < 0 && json_number_value(ev) != -1)
        op_hf_fail(h, "moe_layer_end_index", "%g: expected a layer index or -1 (the last layer)",
                   json_number_value(ev));
    else if (ev && !json_is_null(ev) && !(json_is_number(ev) && json_number_value(ev) == -1))
        end = op_hf_int(h, "moe_layer_end_index", n - 1);
    op_hf_need_pos(h, "moe_layer_interval", interval);
    if (!h->bad && start >= n)
        op_hf_fail(h, "moe_layer_start_index", "%d is past the last layer (num_hidden_layers %d)",
                   start, n);
    if (!h->bad && end >= n)
        op_hf_fail(h, "moe_layer_end_index", "%d is past the last layer (num_hidden_layers %d)",
                   end, n);
    if (h->bad) return OP_EINVAL;

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_DECODER, "layers.%d", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        l->ffn_gated = 1;
        if ((i + 1) % interval == 0 && i >= start && i <= end) {
            op_hf_need_moe_k(h, "moe_num_experts", experts, "moe_k", top_k);
            op_hf_need_pos(h, "moe_intermediate_size", moe_dim);
            op_hf_set_moe(l, experts, top_k, moe_dim, shared, moe_dim);
        } else {
            l->ffn = OP_FFN_MLP;
            l->ffn_dim = inter;
        }
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}

/* hunyuan_v1_moe's moe_topk for layer i: one integer for every layer, or a list of one per
 * layer (HunYuanMoEV1Config accepts both).  Each must be 1..experts. */
static int hunyuan_topk(op_hf *h, int n, int i, int experts) {
    json_t *v = json_object_get(h->obj, "moe_topk");
    int k;
    if (!json_is_array(v)) {
        k = op_hf_int(h, "moe_topk", 1);
    } else if ((int)json_array_size(v) != n) {
        op_hf_fail(h, "moe_topk", "has %d entries but the model has %d layers",
                   (int)json_array_size(v), n);
        return 0;
    } else {
        json_t *it = json_array_get(v, (size_t)i);
        double d = json_is_number(it) && !op_hf_is_nan(it) ? json_number_value(it) : -1;
        if (!(d >= 0 && d <= OP_HF_MAX_INT && d == floor(d))) {
            op_hf_fail(h, "moe_topk", "entry [%d]: expected a positive integer", i);
            return 0;
        }
        k = (int)d;
        if (!h->bad && (k <= 0 || k > experts))
            op_hf_fail(h, "moe_topk", "entry [%d]: %d; expected 1..%d (num_experts)", i, k,
                       experts);
        return k;
    }
    op_hf_need_moe_k(h, "num_experts", experts, "moe_topk", k);
    return k;
}

/* hunyuan_v1_moe (Hunyuan-A13B): grouped query attention with q / k RMSNorm; every layer is MoE:
 * num_experts routed experts of intermediate_size, top moe_topk (one value or one per layer),
 * plus one shared SwiGLU MLP of intermediate_size, as HunYuanMoEV1Moe builds it (released
 * configs also carry moe_intermediate_size and num_shared_expert lists, which transformers does
 * not read).  HunYuanMoEV1Config's defaults: 1 expert, top 1, 32 heads (KV heads as many),
 * vocab 290943, untied.  q / k norms and attention_bias are left out of the cost, as for the
 * other GQA families. */
int op_hf_build_hunyuan_v1_moe(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    (void)root;
    int hidden, n, vocab, inter;
    op_hf_base_dims_ffn(h, &hidden, &n, &vocab, &inter);
    int experts = op_hf_int(h, "num_experts", 1);
    op_hf_need_pos(h, "num_experts", experts);
    int tie = op_hf_bool(h, "tie_word_embeddings", 0);
    (void)op_hf_bool(h, "attention_bias", 0);
    if (h->bad) return OP_EINVAL;

    int embed = b->n;
    op_hf_embed(b, hidden, vocab);
    for (int i = 0; i < n; i++) {
        op_layer *l = op_mbuild_add(b, OP_LAYER_DECODER, "layers.%d", i);
        l->hidden = hidden;
        op_hf_attn(h, l, hidden);
        l->ffn_gated = 1;
        op_hf_set_moe(l, experts, hunyuan_topk(h, n, i, experts), inter, 1, inter);
        if (h->bad) return OP_EINVAL;
    }
    op_hf_head(b, m, hidden, vocab, tie, embed);
    return OP_OK;
}
