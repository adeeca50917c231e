/* hf_vision3.c: qwen3_vl and qwen3_vl_moe (Qwen3-VL dense and MoE), as transformers'
 * configuration_qwen3_vl*.py / modeling_qwen3_vl*.py build them.
 *
 * Vision encoder (vision_config; Qwen3VLVisionConfig's defaults): a Conv3d patch embedding of
 * in_channels x temporal_patch_size x patch_size^2 values, learned position embeddings
 * (num_position_embeddings x hidden_size, bilinearly resampled to the image's grid), `depth`
 * bidirectional blocks whose MLP is fc1 -> hidden_act -> fc2 of intermediate_size (never
 * gated, whatever hidden_act names), and a merger (norm, fc1 of hidden_size *
 * spatial_merge_size^2, GELU, fc2 to out_hidden_size) that hands one token per
 * spatial_merge_size^2 patches to the language model.  One 448 x 448 image per sample, as for
 * qwen2_vl: patch 16 gives a 28 x 28 grid, 784 patches, 196 tokens.
 *
 * DeepStack: after each block listed in deepstack_visual_indexes, a merger of the same shape
 * (its norm over the merged width) turns that block's output into features that are added to
 * the hidden states of the first language layers (the k-th listed into layer k).  Each is
 * priced as a merger layer right after the block it reads ("visual.deepstack.<k>",
 * transformers' deepstack_merger_list.<k>), so its weights and time sit on the stage that
 * holds that block.  What the cost model cannot
 * express: the features travel from there to the first language layers beside the main stream
 * (out_tokens x out_hidden_size values per sample and merger), and no boundary message counts
 * them; the additions themselves are elementwise and left out.
 *
 * Position embeddings: the resampled look-up equals a (patches x num_position_embeddings)
 * matrix of interpolation weights times the table, so they are priced as num_position_embeddings
 * more input values per patch of the patch embedding (patch_dim).  The weights come out exact;
 * the time counts that matrix as dense where it has four entries per row (0.7% of the
 * encoder's FLOPs for Qwen3-VL-8B's encoder at 448 x 448, far less of the whole model).
 *
 * Language model (text_config): Qwen3VLTextConfig (qwen3_vl) or Qwen3VLMoeTextConfig
 * (qwen3_vl_moe), each with its own defaults (op_hf_dense_body).  The LM head is tied only when
 * the top-level tie_word_embeddings says so (default false): the conditional-generation model
 * reads that one, and a text_config's own flag does not tie it. */
#include <string.h>

#include "model/model_internal.h"

static const int deepstack_default[] = {8, 16, 24};

/* ds[block] = k + 1 for the k-th entry of deepstack_visual_indexes (or its default); returns
 * the number of entries, or -1 with the error in vc. */
static int deepstack_blocks(op_hf *vc, int depth, int *ds) {
    unsigned char in[OP_HF_MAX_BLOCKS] = {0};
    if (!op_hf_layer_ids_of(vc, "deepstack_visual_indexes", depth, in, "depth")) {
        if (vc->bad) return -1;
        int n = (int)(sizeof deepstack_default / sizeof deepstack_default[0]);
        for (int k = 0; k < n; k++) {
            if (deepstack_default[k] >= depth) {
                op_hf_fail(vc, "deepstack_visual_indexes", "absent, and its default [8, 16, 24] names "
                           "block %d, outside 0..%d (%sdepth is %d); give it", deepstack_default[k],
                           depth - 1, vc->prefix, depth);
                return -1;
            }
            ds[deepstack_default[k]] = k + 1;
        }
        return n;
    }
    json_t *a = op_hf_array(vc, "deepstack_visual_indexes");
    size_t k;
    json_t *v;
    json_array_foreach(a, k, v) {
        int i = (int)json_number_value(v); /* checked above: a whole number in 0..depth-1 */
        if (ds[i]) {
            op_hf_fail(vc, "deepstack_visual_indexes", "entry [%zu] is %d, listed before as "
                       "entry [%d] (each block feeds at most one merger)", k, i, ds[i] - 1);
            return -1;
        }
        ds[i] = (int)k + 1;
    }
    return (int)json_array_size(a);
}

int op_hf_build_qwen3_vl(op_hf *h, json_t *root, op_mbuild *b, op_model *m) {
    int moe = !strcmp(m->model_type, "qwen3_vl_moe");
    op_hf vc = op_hf_sub(h, root, "vision_config", "vision_config.");
    op_hf top = {.obj = root, .file = h->file, .prefix = "", .err = h->err};
    int text_hidden = op_hf_int(h, "hidden_size", OP_HF_REQUIRED);
    int tie = op_hf_bool(&top, "tie_word_embeddings", 0);
    if (op_hf_fold(&top, h) != OP_OK || op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    op_vis_tower v = {.prefix = "visual"};
    op_qwen_vit q = {.depth_def = 27, .width_def = 1152, .mlp_def = 4304, .patch_def = 16};
    if (op_hf_qwen_vit(&vc, h, text_hidden, &v, &q) != OP_OK) return OP_EINVAL;
    int chans = q.chans, patch = q.patch, merge = q.merge, tpatch = q.tpatch;
    int n_pos = op_hf_int(&vc, "num_position_embeddings", 2304);
    op_hf_need_pos(&vc, "num_position_embeddings", n_pos);
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;
    int ds[OP_HF_MAX_BLOCKS] = {0};
    if (deepstack_blocks(&vc, v.depth, ds) < 0) return op_hf_fold(&vc, h);
    v.patch_dim = op_hf_derived(&vc, "patch_size", (double)chans * tpatch * patch * patch + n_pos);
    v.merge_in = op_hf_derived(&vc, "spatial_merge_size", (double)v.width * merge * merge);
    v.merge_mlp = v.merge_in;
    v.gated = 0; /* linear_fc1 -> hidden_act -> linear_fc2 */
    if (op_hf_fold(&vc, h) != OP_OK) return OP_EINVAL;

    v.deepstack = ds;
    op_hf_vision_tower(b, &v);

    int embed = b->n;
    if (op_hf_dense_body(h, b, m, moe ? "qwen3_vl_moe" : "qwen3_vl") != OP_OK) return OP_EINVAL;
    op_layer *head = &b->v[b->n - 1]; /* the head is the last layer, after embed */
    head->shares_params_with = tie ? embed : -1;
    m->tie_embeddings = tie;
    return OP_OK;
}
