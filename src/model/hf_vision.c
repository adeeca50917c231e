/* hf_vision.c: vision encoders in front of a language model (qwen2_vl, qwen2_5_vl, gemma3).
 *
 * Tokens per sample: one OP_HF_IMAGE_SIZE x OP_HF_IMAGE_SIZE (448 x 448) image per sample,
 * unless the config fixes the image size (gemma3's SigLIP).  Qwen2-VL with patch 14 and
 * spatial_merge 2: (448/14)^2 = 1024 patches in the encoder, 1024 / 2^2 = 256 tokens handed
 * to the language model.  The language model's own sequence length is the training setup's. */
#include <string.h>

#include "model/model_internal.h"

op_hf op_hf_sub(op_hf *parent, json_t *root, const char *key, const char *prefix) {
    op_hf s = {.obj = NULL, .file = parent->file, .prefix = prefix, .err = parent->err, .bad = parent->bad};
    json_t *v = json_object_get(root, key);
    if (v && json_is_object(v)) s.obj = v;
    else if (v && !json_is_null(v)) {
        /* key sits at the top level: the message leaves out parent's prefix (text_config.) */
        op_hf top = *parent;
        top.prefix = "";
        op_hf_fail(&top, key, "expected an object");
        parent->bad = top.bad;
    }
    return s;
}

/* the merger's fields on l: the tower's last layer and each DeepStack merger */
static void add_merger(const op_vis_tower *v, op_layer *l) {
    l->hidden = v->merge_in;
    l->tokens = v->out_tokens;
    l->out_hidden = v->out_hidden;
    if (v->merge_mlp > 0) {
        l->ffn = OP_FFN_MLP;
        l->ffn_dim = v->merge_mlp;
    }
}

void op_hf_vision_tower(op_mbuild *b, const op_vis_tower *v) {
    op_layer *l = op_mbuild_add(b, OP_LAYER_VISION, "%s.patch_embed", v->prefix);
    l->hidden = v->width;
    l->tokens = v->patches;
    l->patch_dim = v->patch_dim;
    for (int i = 0; i < v->depth; i++) {
        l = op_mbuild_add(b, OP_LAYER_VISION, "%s.blocks.%d", v->prefix, i);
        l->hidden = v->width;
        l->tokens = v->patches;
        l->attn = OP_ATTN_BIDIR;
        /* Window attention (Qwen2.5-VL): each patch attends, both ways, to the `window`
         * patches of its own window, so every query sees `window` keys.  OP_ATTN_SLIDING
         * prices exactly that (min(i + 1, window) keys for query i) except over the first
         * `window` queries of a sample, window * (window - 1) / 2 pairs short: 3% of the
         * windowed attention core at 448 x 448 (1024 patches, windows of 64).  OP_ATTN_CHUNKED
         * would be causal inside each window, half the pairs.  A window as large as the image
         * is full attention. */
        if (v->window > 0 && v->window < v->patches && !(v->full && v->full[i])) {
            l->attn = OP_ATTN_SLIDING;
            l->window = v->window;
        }
        l->n_heads = l->n_kv_heads = v->heads;
        l->head_dim = v->width / v->heads;
        l->ffn = OP_FFN_MLP;
        l->ffn_dim = v->mlp_dim;
        l->ffn_gated = v->gated;
        if (v->deepstack && v->deepstack[i])
            add_merger(v, op_mbuild_add(b, OP_LAYER_VISION, "%s.deepstack.%d", v->prefix,
                                           v->deepstack[i] - 1));
    }
    add_merger(v, op_mbuild_add(b, OP_LAYER_VISION, "%s.merger", v->prefix));
}

int op_hf_fold(op_hf *from, op_hf *to) {
    if (from->bad && !to->bad) to->bad = 1;
    return to->bad ? OP_EINVAL : OP_OK;
}

int op_hf_qwen_vit(op_hf *vc, op_hf *h, int text_hidden, op_vis_tower *v, op_qwen_vit *q) {
    /* attribute_map: num_hidden_layers -> depth, num_attention_heads -> num_heads */
    v->depth = op_hf_int(vc, "depth", op_hf_int(vc, "num_hidden_layers", q->depth_def));
    v->width = op_hf_int(vc, "hidden_size", q->width_def);
    v->heads = op_hf_int(vc, "num_heads", op_hf_int(vc, "num_attention_heads", 16));
    v->mlp_dim = op_hf_int(vc, "intermediate_size", q->mlp_def);
    q->chans = op_hf_int(vc, "in_channels", op_hf_int(vc, "in_chans", 3));
    q->patch = op_hf_int(vc, "patch_size", op_hf_int(vc, "spatial_patch_size", q->patch_def));
    q->merge = op_hf_int(vc, "spatial_merge_size", 2);
    q->tpatch = op_hf_int(vc, "temporal_patch_size", 2);
    v->out_hidden = op_hf_int(vc, "out_hidden_size", 3584);
    op_hf_need_layers(vc, "depth", v->depth);
    op_hf_need_pos(vc, "hidden_size", v->width);
    op_hf_need_pos(vc, "num_heads", v->heads);
    op_hf_need_pos(vc, "intermediate_size", v->mlp_dim);
    op_hf_need_pos(vc, "in_channels", q->chans);
    op_hf_need_pos(vc, "patch_size", q->patch);
    op_hf_need_pos(vc, "spatial_merge_size", q->merge);
    op_hf_need_pos(vc, "temporal_patch_size", q->tpatch);
    op_hf_need_pos(vc, "out_hidden_size", v->out_hidden);
    op_hf_split_even(vc, "num_heads", v->heads, "hidden_size", v->width, "head_dim");
    if (op_hf_fold(vc, h) != OP_OK) return OP_EINVAL;
    /* the merger's output stands in for image tokens of the language model */
    if (text_hidden > 0 && v->out_hidden != text_hidden)
        op_hf_fail(vc, "out_hidden_size", "%d differs from the language model's hidden_size %d "
                   "(the merger's output takes the place of image tokens)%s", v->out_hidden,
                   text_hidden, op_hf_has(vc, "out_hidden_size") ? "" : "; the default is 3584: give it");
    if (op_hf_fold(vc, h) != OP_OK) return OP_EINVAL;
    int side = OP_HF_IMAGE_SIZE / q->patch / q->merge * q->merge; /* as qwen2_vl */
    if (side <= 0)
        op_hf_fail(vc, "patch_size", "patch %d x merge %d does not fit a %d px image", q->patch,
                   q->merge, OP_HF_IMAGE_SIZE);
    v->patches = side * side;
    v->out_tokens = v->patches / (q->merge * q->merge);
    return op_hf_fold(vc, h);
}

int op_hf_build_qwen2_vl(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    op_hf vc = op_hf_sub(h, root, "vision_config", "vision_config.");
    int text_hidden = op_hf_int(h, "hidden_size", OP_HF_REQUIRED);
    op_vis_tower v = {.prefix = "visual"};
    v.depth = op_hf_int(&vc, "depth", 32);
    v.width = op_hf_int(&vc, "embed_dim", 1280);
    v.heads = op_hf_int(&vc, "num_heads", 16);
    double ratio = op_hf_num(&vc, "mlp_ratio", 4.0);
    int chans = op_hf_int(&vc, "in_chans", op_hf_int(&vc, "in_channels", 3));
    int patch = op_hf_int(&vc, "patch_size", op_hf_int(&vc, "spatial_patch_size", 14));
    int merge = op_hf_int(&vc, "spatial_merge_size", 2);
    int tpatch = op_hf_int(&vc, "temporal_patch_size", 2);
    op_hf_need_layers(&vc, "depth", v.depth);
    op_hf_need_pos(&vc, "embed_dim", v.width);
    op_hf_need_pos(&vc, "num_heads", v.heads);
    op_hf_need_pos(&vc, "patch_size", patch);
    op_hf_need_pos(&vc, "spatial_merge_size", merge);
    op_hf_need_pos(&vc, "temporal_patch_size", tpatch);
    op_hf_split_even(&vc, "num_heads", v.heads, "embed_dim", v.width, "head_dim");
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    /* grid side rounded down to a multiple of the merge size, as the image processor resizes */
    int side = OP_HF_IMAGE_SIZE / patch / merge * merge;
    if (side <= 0) {
        op_hf_fail(&vc, "patch_size", "patch %d x merge %d does not fit a %d px image", patch, merge,
                   OP_HF_IMAGE_SIZE);
        return op_hf_fold(&vc, h);
    }
    v.patches = side * side;
    v.patch_dim = op_hf_derived(&vc, "patch_size", (double)chans * tpatch * patch * patch);
    v.mlp_dim = op_hf_derived(&vc, "mlp_ratio", v.width * ratio);
    v.gated = 0; /* fc1 -> quick_gelu -> fc2 */
    v.merge_in = op_hf_derived(&vc, "spatial_merge_size", (double)v.width * merge * merge);
    v.merge_mlp = v.merge_in;
    v.out_tokens = v.patches / (merge * merge);
    v.out_hidden = text_hidden;
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    op_hf_vision_tower(b, &v);
    return op_hf_dense_body(h, b, m, "qwen2");
}

/* qwen2_5_vl: Qwen2.5-VL's ViT, then the qwen2-style language model (Qwen2_5_VLTextConfig's
 * defaults).  Against qwen2_vl's ViT: a SwiGLU MLP of intermediate_size (not mlp_ratio), RMSNorm
 * (priced as any norm), the width in hidden_size (no embed_dim), attention within windows of
 * window_size pixels except in the blocks of fullatt_block_indexes, and a merger whose output
 * width is out_hidden_size.  A window holds (window_size / spatial_merge_size / patch_size)^2
 * merged tokens, each spatial_merge_size^2 patches: 112 / 2 / 14 = 4, 4 x 4 x 4 = 64 patches.
 * tie_word_embeddings may sit at the top level or (older saves) in text_config: either ties. */
static const int q25_full_default[] = {7, 15, 23, 31};

int op_hf_build_qwen2_5_vl(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    op_hf vc = op_hf_sub(h, root, "vision_config", "vision_config.");
    op_hf top = {.obj = root, .file = h->file, .prefix = "", .err = h->err};
    int text_hidden = op_hf_int(h, "hidden_size", OP_HF_REQUIRED);
    int tie_top = op_hf_bool(&top, "tie_word_embeddings", 0);
    if (op_hf_fold(&top, h) != OP_OK || op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    op_vis_tower v = {.prefix = "visual"};
    op_qwen_vit q = {.depth_def = 32, .width_def = 3584, .mlp_def = 3420, .patch_def = 14};
    if (op_hf_qwen_vit(&vc, h, text_hidden, &v, &q) != OP_OK) return OP_EINVAL;
    int chans = q.chans, patch = q.patch, merge = q.merge, tpatch = q.tpatch;
    int window_px = op_hf_int(&vc, "window_size", 112);
    op_hf_need_pos(&vc, "window_size", window_px);
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    unsigned char full[OP_HF_MAX_BLOCKS] = {0};
    if (!op_hf_layer_ids_of(&vc, "fullatt_block_indexes", v.depth, full, "depth"))
        for (size_t k = 0; k < sizeof q25_full_default / sizeof q25_full_default[0]; k++)
            if (q25_full_default[k] < v.depth) full[q25_full_default[k]] = 1;
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    int win_tokens = window_px / merge / patch; /* merged tokens per window side */
    if (win_tokens <= 0) {
        op_hf_fail(&vc, "window_size", "%d px is less than patch_size %d x spatial_merge_size %d "
                   "(a window of no merged patch)", window_px, patch, merge);
        return op_hf_fold(&vc, h);
    }
    v.patch_dim = op_hf_derived(&vc, "patch_size", (double)chans * tpatch * patch * patch);
    v.merge_in = op_hf_derived(&vc, "spatial_merge_size", (double)v.width * merge * merge);
    v.window = op_hf_derived(&vc, "window_size", (double)win_tokens * merge * win_tokens * merge);
    v.full = full;
    v.merge_mlp = v.merge_in;
    v.gated = 1; /* gate_proj, up_proj -> silu -> down_proj */
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    op_hf_vision_tower(b, &v);
    int embed = b->n;
    if (op_hf_dense_body(h, b, m, "qwen2_5_vl") != OP_OK) return OP_EINVAL;
    if (tie_top && !m->tie_embeddings) { /* the head is the last layer, after embed */
        b->v[b->n - 1].shares_params_with = embed;
        m->tie_embeddings = 1;
    }
    return OP_OK;
}

/* gemma3: SigLIP encoder (when vision_config is present) + avg-pool projector, then the
 * gemma3 text model.  gemma3_text has no encoder. */
int op_hf_build_gemma3(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    json_t *vcv = json_object_get(root, "vision_config");
    /* present and not null: an object, as op_hf_sub checks (anything else dropped the encoder) */
    if (!strcmp(m->model_type, "gemma3") && vcv && !json_is_null(vcv)) {
        op_hf vc = op_hf_sub(h, root, "vision_config", "vision_config.");
        op_hf top = {.obj = root, .file = h->file, .prefix = "", .err = h->err};
        op_vis_tower v = {.prefix = "vision_tower"};
        v.depth = op_hf_int(&vc, "num_hidden_layers", 27);
        v.width = op_hf_int(&vc, "hidden_size", 1152);
        v.heads = op_hf_int(&vc, "num_attention_heads", 16);
        v.mlp_dim = op_hf_int(&vc, "intermediate_size", 4304);
        int image = op_hf_int(&vc, "image_size", 896);
        int patch = op_hf_int(&vc, "patch_size", 14);
        int chans = op_hf_int(&vc, "num_channels", 3);
        v.out_tokens = op_hf_int(&top, "mm_tokens_per_image", 256);
        op_hf_need_layers(&vc, "num_hidden_layers", v.depth);
        op_hf_need_pos(&vc, "hidden_size", v.width);
        op_hf_need_pos(&vc, "num_attention_heads", v.heads);
        op_hf_need_pos(&vc, "patch_size", patch);
        op_hf_split_even(&vc, "num_attention_heads", v.heads, "hidden_size", v.width, "head_dim");
        if (op_hf_fold(&top, h) != OP_OK || op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
        double side = (double)(image / patch);
        v.patches = op_hf_derived(&vc, "image_size", side * side);
        v.patch_dim = op_hf_derived(&vc, "patch_size", (double)chans * patch * patch);
        if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
        v.gated = 0; /* gelu MLP */
        v.merge_in = v.width;
        v.merge_mlp = 0; /* avg pool + RMSNorm + one linear */
        v.out_hidden = op_hf_int(h, "hidden_size", OP_HF_REQUIRED);
        if (h->bad) return OP_EINVAL;
        op_hf_vision_tower(b, &v);
    }
    return op_hf_dense_body(h, b, m, "gemma3");
}
