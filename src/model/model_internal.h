/* model_internal.h: helpers shared by the model importers (not public API).
 *
 *  - op_mbuild: a growing list of layers; op_mbuild_finish moves it into the model's arena and
 *    writes m->pattern.
 *  - op_hf: typed look-ups in one JSON object of an HF config with a sticky first error, so
 *    each architecture reads like the config it mirrors and checks for errors once at the end. */
#ifndef OCTOPIPE_MODEL_INTERNAL_H
#define OCTOPIPE_MODEL_INTERNAL_H
#include <jansson.h>
#include <limits.h>

#include "octopipe/model.h"

typedef struct op_mbuild {
    op_layer *v;
    int n, cap;
} op_mbuild;

/* Appends a zeroed layer of kind k (shares_params_with = -1) named by fmt. */
op_layer *op_mbuild_add(op_mbuild *b, op_layer_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copies the layers into m->arena, sets n_layers and pattern, frees b. */
int op_mbuild_finish(op_mbuild *b, op_model *m, op_err *err);
void op_mbuild_free(op_mbuild *b);

/* ---- HF config look-ups ---- */
#define OP_HF_REQUIRED INT_MIN /* pass as default: the key must be present */

/* Defaults of the transformers config class for fields real configs (nested ones above all)
 * often leave out; 0 = required (vocab, heads) or derived (kv heads = heads, head_dim =
 * hidden / heads). */
typedef struct op_hf_defaults {
    int vocab, heads, kv, head_dim;
} op_hf_defaults;

typedef struct op_hf {
    const op_hf_defaults *defs; /* NULL: vocab and heads required */
    json_t *obj;        /* the object keys are read from (config or its text_config) */
    const char *file;   /* for messages */
    const char *prefix; /* "" or "text_config." / "vision_config." for messages */
    op_err *err;
    int bad; /* a look-up failed; err holds the first message */
} op_hf;

int op_hf_has(op_hf *h, const char *key); /* present and not null */
/* Integer (a real with an integral value is accepted); null or absent gives def. */
int op_hf_int(op_hf *h, const char *key, int def);
double op_hf_num(op_hf *h, const char *key, double def);
int op_hf_bool(op_hf *h, const char *key, int def);
const char *op_hf_str(op_hf *h, const char *key, const char *def);
json_t *op_hf_array(op_hf *h, const char *key); /* NULL when absent or null */
/* Records an error "<file>: <prefix><key>: <what>" unless one is recorded already. */
void op_hf_fail(op_hf *h, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Layer i of a per-layer list `key` of n strings (e.g. layer_types): NULL if absent; records an
 * error when the list has the wrong length or a non-string item. */
const char *op_hf_list_str(op_hf *h, const char *key, int n, int i);
/* Layer i of a per-layer list `key` of n flags, 0 or 1 (or false / true), e.g.
 * no_rope_layers: -1 if absent; records an error when the list has the wrong length or an
 * entry is anything else ("entry [i]: expected <meaning>"). */
int op_hf_list_flag(op_hf *h, const char *key, int n, int i, const char *meaning);
/* The list `key` of layer indices (e.g. mlp_only_layers, moe_layers; 0-based, as transformers
 * reads them): sets in[i] = 1 for each index listed (in holds n entries, zeroed by the
 * caller) and returns 1, or returns 0 when the list is absent.  An entry that is not a whole
 * number in 0..n-1 is an error. */
int op_hf_layer_ids(op_hf *h, const char *key, int n, unsigned char *in);
/* The same, for a list whose layer count the config names otherwise (count_key, e.g. a vision
 * encoder's "depth"): the message of an entry out of range names it. */
int op_hf_layer_ids_of(op_hf *h, const char *key, int n, unsigned char *in, const char *count_key);

/* Parses JSON text after rewriting the bare non-standard tokens Infinity and -Infinity (outside
 * strings) into numbers of the same width, so line:col in errors stay right, and NaN into a
 * mark of the same width that every typed look-up above refuses as "NaN" (op_hf_is_nan).
 * Returns NULL with "<file>:<line>:<col>: <what>" in err. */
json_t *op_json_parse_lenient(const char *text, const char *file, op_err *err);
int op_hf_is_nan(const json_t *v);
/* The same, for files of measured numbers (profiles): a bare Infinity or NaN is an error
 * "<file>:<line>:<col>: NaN is not allowed here ..." rather than a stand-in value, and a key
 * given twice in one object is an error rather than its last value. */
json_t *op_json_parse_finite(const char *text, const char *file, op_err *err);

/* Architecture builders (hf_*.c): read h (and root for nested configs), append layers. */
typedef int (*op_hf_build_fn)(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_dense(op_hf *h, json_t *root, op_mbuild *b, op_model *m);    /* llama family */
int op_hf_build_gemma3(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_deepseek(op_hf *h, json_t *root, op_mbuild *b, op_model *m); /* v2 / v3 */
int op_hf_build_glm4_moe(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_ernie4_5_moe(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_hunyuan_v1_moe(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_llama4(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_qwen2_vl(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_qwen2_5_vl(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_qwen3_vl(op_hf *h, json_t *root, op_mbuild *b, op_model *m); /* and qwen3_vl_moe */
int op_hf_build_jamba(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_nemotron_h(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_qwen3_next(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_falcon_h1(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_zamba2(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_minimax(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_granitemoehybrid(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_bamba(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_mamba2(op_hf *h, json_t *root, op_mbuild *b, op_model *m);
int op_hf_build_mamba(op_hf *h, json_t *root, op_mbuild *b, op_model *m); /* and falcon_mamba */

/* Shared pieces of the builders (hf_import.c, unless a comment names another file). */
void op_hf_attn(op_hf *h, op_layer *l, int hidden);          /* heads, kv heads, head_dim */
/* num_key_value_heads, as a config gives it or as the model type defaults it when absent: at
 * most the heads and a divisor of them (grouped query attention shares each KV head among
 * heads / kv query heads).  A default that does not fit is reported on num_attention_heads. */
void op_hf_need_kv_groups(op_hf *h, int heads, int kv);
int op_hf_vocab(op_hf *h);                                   /* vocab_size or its default */
void op_hf_embed(op_mbuild *b, int hidden, int vocab);       /* appends EMBED */
void op_hf_head(op_mbuild *b, op_model *m, int hidden, int vocab, int tie, int embed_idx);
/* Applies layer_types[i] ("full_attention", "sliding_attention", "chunked_attention",
 * "linear_attention") to l when the config has it; returns 1 if it did. */
int op_hf_layer_type(op_hf *h, op_layer *l, int n_layers, int i, int window);
/* hidden_size (required), num_hidden_layers (n_def, or OP_HF_REQUIRED) and vocab_size, each
 * checked; OP_EINVAL when one is missing or out of range.  _ffn: all required, and
 * intermediate_size too (the families whose FFN width has no default). */
int op_hf_base_dims(op_hf *h, int *hidden, int *n, int *vocab, int n_def);
int op_hf_base_dims_ffn(op_hf *h, int *hidden, int *n, int *vocab, int *inter);
/* A Mamba2 mixer's shape as transformers builds it: heads split into groups that share B and C
 * (n_groups must divide the heads), a state and a convolution of at least one.  keys name the
 * family's fields: heads, groups, state, conv.  (A config with 3 groups of 128 heads, or a
 * million, was priced as given: 199000 GiB a device.) */
void op_hf_mamba2_shape(op_hf *h, const char *const keys[4], int heads, int groups, int state, int conv);
/* Fills mamba fields of a Mamba2 layer. */
void op_hf_mamba2(op_layer *l, int inner, int state, int heads, int head_dim, int groups, int conv);

/* Appends EMBED, n_layers transformer blocks and HEAD for the llama-like families (arch is the
 * model_type whose defaults apply, e.g. "qwen2" for qwen2_vl's language model). */
int op_hf_dense_body(op_hf *h, op_mbuild *b, op_model *m, const char *arch);

/* A vision encoder in front of a language model (hf_vision.c): a patch embedding, `depth`
 * bidirectional blocks over `patches` tokens, and a merger / projector that hands `out_tokens`
 * tokens of width out_hidden to the language model. */
typedef struct op_vis_tower {
    const char *prefix;               /* layer name prefix: "visual", "vision_tower", ... */
    int depth, width, heads, mlp_dim, gated;
    /* window attention (qwen2_5_vl): window > 0 gives every block not marked in full[] the
     * attention of a window of `window` patches (see op_hf_vision_tower); 0: all full */
    int window;
    const unsigned char *full;
    int patches, patch_dim;           /* tokens per image in the encoder; values per patch */
    int merge_in, merge_mlp;          /* merger input width and MLP width (0: a plain linear) */
    int out_tokens, out_hidden;
    /* DeepStack (qwen3_vl): deepstack[i] = k + 1 puts "<prefix>.deepstack.<k>", a merger of the
     * merger's shape, right after block i; NULL or 0: none */
    const int *deepstack;
} op_vis_tower;
void op_hf_vision_tower(op_mbuild *b, const op_vis_tower *v);
/* A sub-object's error carried to its parent: OP_EINVAL once either is bad. */
int op_hf_fold(op_hf *from, op_hf *to);
/* Qwen2.5-VL's and Qwen3-VL's ViT, the fields both read alike (hf_vision.c): depth and width
 * (their defaults depth_def, width_def), heads, intermediate_size (mlp_def), in_channels,
 * patch_size (patch_def), spatial_merge_size, temporal_patch_size and out_hidden_size, each
 * checked, and out_hidden_size against the language model's text_hidden.  Fills those fields
 * of v and the image fields of q; OP_EINVAL with the error in h. */
typedef struct op_qwen_vit {
    int chans, patch, merge, tpatch;
    int depth_def, width_def, mlp_def, patch_def; /* in: the family's defaults */
} op_qwen_vit;
int op_hf_qwen_vit(op_hf *vc, op_hf *h, int text_hidden, op_vis_tower *v, op_qwen_vit *q);
/* Sub-object `key` of root as an op_hf (obj NULL when absent: every look-up gives its default). */
op_hf op_hf_sub(op_hf *parent, json_t *root, const char *key, const char *prefix);
/* Default image for vision models: one 448x448 image per sample. */
#define OP_HF_IMAGE_SIZE 448

/* 1 when JSON text looks like a profile (pattern + forward_ms) rather than an HF config. */
int op_model_text_is_profile(const char *text);

/* m->name from a path or preset name ("dir/x.json" -> "x"). */
void op_model_set_name(op_model *m, const char *name);

/* key as a whole number or "auto": 1 when the config leaves it to the model (absent, null or
 * "auto"; *v untouched), 0 when *v holds the number read; another string is refused (0, the
 * error in h). */
int op_hf_int_auto(op_hf *h, const char *key, int *v);
/* Positive-value check for a dimension already read. */
void op_hf_need_pos(op_hf *h, const char *key, int v);
/* Expert counts of a MoE layer the builder appends: `experts_key` (the config's name for the
 * expert count) and num_experts_per_tok positive, and no more experts per token than there
 * are.  Checked where a MoE layer is made, so expert fields a dense layout never reads pass. */
void op_hf_need_moe(op_hf *h, const char *experts_key, int experts, int top_k);
/* The same where the config names top-k otherwise (ERNIE's moe_k, Hunyuan's moe_topk). */
void op_hf_need_moe_k(op_hf *h, const char *experts_key, int experts, const char *top_k_key, int top_k);
/* Layer i's MoE FFN, "layers.<i>.moe", after op_hf_need_moe: experts routed experts of
 * expert_dim (top_k per token) and n_shared shared experts of shared_dim each (0: none).  The
 * caller sets hidden and ffn_gated. */
op_layer *op_hf_moe_layer(op_hf *h, op_mbuild *b, int i, const char *experts_key, int experts,
                          int top_k, int expert_dim, int n_shared, int shared_dim);
/* Makes l's FFN a MoE: experts of expert_dim, top_k of them per token, and n_shared shared
 * experts of shared_dim (none when n_shared is 0). */
void op_hf_set_moe(op_layer *l, int experts, int top_k, int expert_dim, int n_shared, int shared_dim);
/* A layer count: 1..OP_HF_MAX_BLOCKS. */
#define OP_HF_MAX_BLOCKS 2000
void op_hf_need_layers(op_hf *h, const char *key, int n);
/* A size derived from config values (products, ratios), checked to fit 1 << 30; 0 on failure. */
int op_hf_derived(op_hf *h, const char *key, double v);
/* A size a config leaves to be derived as whole / parts (a head width from a width and a head
 * count): more parts than the whole would make it 0, a layer that computes nothing, so that is
 * refused on parts_key, the count at fault: "<parts> is more than <whole_key> <whole> (<derived>
 * = ... would be 0)".  Returns whole / parts, or 0 (nothing recorded when h is bad already or a
 * value is not positive, which its own check reports). */
int op_hf_split(op_hf *h, const char *parts_key, int parts, const char *whole_key, int whole,
                const char *derived);
/* op_hf_split where the parts must be equal: a vision encoder's attention (SigLIP, Qwen2-VL's
 * ViT) has no head_dim of its own, and its loaders refuse a width the heads do not divide. */
int op_hf_split_even(op_hf *h, const char *parts_key, int parts, const char *whole_key, int whole,
                     const char *derived);
/* Integers read from configs are 0 .. OP_HF_MAX_INT: larger values are no real dimension and
 * would overflow the products the cost model forms. */
#define OP_HF_MAX_INT (1 << 24)

/* Presets data (presets_data.c, generated by scripts/gen_presets.sh). */
typedef struct op_preset_src {
    const char *name, *desc, *text;
} op_preset_src;
extern const op_preset_src op_preset_table[];
#endif
