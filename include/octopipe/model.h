/* model.h: a model as OctoPipe sees it: an ordered list of layers, each with the dimensions the
 * cost model needs (or measured costs when it came from a profile).
 *
 * Sources: a Hugging Face config.json (model/hf_*.c), a profile file (model/profile.c) or a
 * built-in preset (model/presets.c, made from real configs).  Layer granularity follows what
 * pipeline frameworks can cut: hybrid models (Nemotron-H, Jamba, ...) split each block into its
 * mixer (attention / Mamba) and its FFN (MLP / MoE), as Megatron's hybrid pattern does;
 * transformer models keep one DECODER layer per block (Megatron's 't').  EMBED comes first and
 * HEAD (final norm + LM head + loss) last; vision encoder layers come before the EMBED of the
 * language model they feed. */
#ifndef OCTOPIPE_MODEL_H
#define OCTOPIPE_MODEL_H
#include "octopipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest figures any input may carry.  One op of one layer and one microbatch beyond 1e9 ms
 * (11.6 days), or one per-layer byte figure beyond 2^53 bytes (8 PiB), describes no device;
 * the bounds keep every sum the simulator forms finite and every byte count exact in a double
 * and in an int64 (a wider value would be undefined behaviour to convert). */
#define OP_MAX_MS 1e9
/* Shortest measured time a profile may give, other than 0 (1 ns): below it is no measurement,
 * and a model whose every time is a denormal made makespans of 1e-323 ms, tokens/s infinite. */
#define OP_MIN_MS 1e-6
#define OP_MAX_BYTES 9007199254740992.0 /* 2^53 */
/* Slowest link any input may name (1 kB/s; every bandwidth in GB/s): slower is no link, and a
 * bandwidth of 1e-300 GB/s (or a denormal) would make a transfer's time overflow to infinity. */
#define OP_MIN_GBPS 1e-6

typedef enum op_layer_kind {
    OP_LAYER_EMBED,   /* 'E' token embedding */
    OP_LAYER_HEAD,    /* 'L' final norm + LM head + softmax cross-entropy */
    OP_LAYER_ATTN,    /* '*' attention sublayer (norm + attention + residual) */
    OP_LAYER_MAMBA,   /* 'M' Mamba / SSM sublayer */
    OP_LAYER_MLP,     /* '-' dense MLP sublayer */
    OP_LAYER_MOE,     /* '#' MoE sublayer (router + top-k experts + shared experts) */
    OP_LAYER_DECODER, /* 'T' transformer block: attention + (MLP or MoE) */
    OP_LAYER_HYBRID,  /* 'H' parallel attention + Mamba (+ FFN) in one block (falcon_h1) */
    OP_LAYER_VISION,  /* 'V' vision encoder block (or patch embedding / merger) */
    OP_LAYER_MTP,     /* 'm' multi-token-prediction block (DeepSeek-V3) */
    OP_LAYER_KIND_COUNT
} op_layer_kind;

typedef enum op_attn_kind {
    OP_ATTN_NONE,
    OP_ATTN_FULL,    /* causal softmax attention, seq^2 */
    OP_ATTN_SLIDING, /* causal, each query sees `window` keys */
    OP_ATTN_CHUNKED, /* causal within chunks of `window` tokens (llama4) */
    OP_ATTN_LINEAR,  /* linear attention / gated delta net / lightning: linear in seq */
    OP_ATTN_MLA,     /* multi-head latent attention (DeepSeek-V2/V3), causal seq^2 */
    OP_ATTN_BIDIR    /* non-causal (vision encoders) */
} op_attn_kind;

typedef enum op_ffn_kind { OP_FFN_NONE, OP_FFN_MLP, OP_FFN_MOE } op_ffn_kind;

typedef struct op_layer {
    op_layer_kind kind;
    char name[40]; /* "layers.3.mixer", "embed", "visual.blocks.0", ... */
    int hidden;    /* width of this layer's residual stream */
    int tokens;    /* tokens per sample this layer sees; 0 = the training sequence length */

    /* attention (ATTN, DECODER, HYBRID, VISION, MTP) */
    op_attn_kind attn;
    int n_heads, n_kv_heads, head_dim;
    int window; /* SLIDING / CHUNKED window in tokens */
    int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim; /* MLA */
    int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;                  /* LINEAR */

    /* FFN (MLP, MOE, DECODER, HYBRID, VISION, MTP) */
    op_ffn_kind ffn;
    int ffn_dim;    /* intermediate size of a dense MLP */
    int ffn_gated;  /* 1: gate+up+down (SwiGLU/GeGLU), 0: up+down (ReLU^2, GELU) */
    int n_experts, top_k, expert_dim;
    int n_shared, shared_dim; /* shared experts: count and intermediate size each */

    /* Mamba (MAMBA, HYBRID) */
    int ssm_version; /* 1 or 2 */
    int ssm_inner, ssm_state, ssm_heads, ssm_head_dim, ssm_groups, ssm_conv, ssm_dt_rank;

    /* EMBED / HEAD / MTP */
    int vocab;

    /* parameters shared with an earlier layer (zamba2 shared blocks, tied head): index of
     * that layer, or -1.  Shared parameters still cost memory on every device that holds a
     * copy; the cost model counts them per layer. */
    int shares_params_with;

    /* measured costs (profile input); when has_measured, the cost model uses these */
    int has_measured;
    double f_ms, i_ms, w_ms;
    int64_t act_bytes_measured, param_bytes_measured; /* 0 = derive */
    int64_t out_bytes_measured;                       /* boundary message, 0 = derive */
    double recompute_ms;                              /* attention core's F share, 0 = derive */
    int64_t act_sel_bytes_measured;                   /* stash under selective, 0 = derive */

    /* width this layer hands on when it differs from `hidden` (vision merger / projector
     * into the language model): 0 = hidden */
    int out_hidden;
    /* VISION patch embedding: input values per patch (channels * temporal * p * p); else 0 */
    int patch_dim;
    /* attention input width when it differs from `hidden` (zamba2's shared block attends
     * over concat(hidden, embeddings) = 2 * hidden): 0 = hidden */
    int attn_in_dim;
} op_layer;

/* Layers of one model: a longer pattern or HF config is refused when it loads. */
#define OP_MODEL_MAX_LAYERS 4095

typedef struct op_model {
    char name[64];       /* preset name or file stem */
    char model_type[32]; /* HF model_type, or "profile" */
    char pattern[OP_MODEL_MAX_LAYERS + 1]; /* one symbol per layer, e.g. "EM-M*-L" (op_layer_kind_sym) */
    int hidden, vocab;
    /* The batch a profile's times were measured at (its "seq" and "mbs"; 0: not said).  Where
     * given, problems from the model are costed at it (op_problem_from_model). */
    int measured_seq, measured_mbs;
    int tie_embeddings;
    int n_layers;
    op_layer *layers; /* n_layers, in model order */
    op_arena arena;   /* owns layers */
    /* Measured times per GPU type (a profile's "by_gpu"; 0 / NULL otherwise): gpu_name[g] a
     * GPU preset's own name, gpu_ms[(g * n_layers + l) * 4 + {0 F, 1 I, 2 W, 3 recompute}]
     * (recompute < 0: not measured).  The cost model uses them on that preset
     * (op_model_gpu_ms); the top-level times stay those of the GPU the caller names. */
    int n_gpu;
    char (*gpu_name)[32];
    double *gpu_ms;
} op_model;

/* Row of m's measured times on the GPU preset named `gpu` (its own name, not an alias):
 * [n_layers * 4] as gpu_ms above; NULL when m has none for it. */
const double *op_model_gpu_ms(const op_model *m, const char *gpu);

/* The GPU a name means: *canonical = its own name ("a100-80gb", "h100-80gb", "b200", ...) for the
 * name or an alias (a100, h100-sxm, ...; case, '_' and ' ' ignored).  The names live with the
 * model because profiles name GPUs; each one's numbers are op_device_preset's (cost.h). */
int op_gpu_name(const char *name, const char **canonical, op_err *err);

/* Loads FILE (HF config.json or profile JSON, told apart by content) or a preset name.  A NULL
 * file, text or m is OP_EINVAL (m, when given, is left empty: op_model_free takes it). */
int op_model_load(const char *file_or_preset, op_model *m, op_err *err);
int op_model_from_hf_json(const char *json_text, const char *name, op_model *m, op_err *err);
int op_model_from_profile_json(const char *json_text, const char *name, op_model *m, op_err *err);
int op_model_preset(const char *name, op_model *m, op_err *err);
void op_model_free(op_model *m);

/* Built-in presets: NULL-terminated list of names and one-line descriptions. */
const char *const *op_model_preset_names(void);
const char *op_model_preset_desc(const char *name);

/* Supported HF model_type values, NULL-terminated. */
const char *const *op_model_supported_types(void);

/* Greatest common divisor of the routed-expert counts of m's MoE layers (kind MoE, or an MoE
 * FFN inside a block) that the cost model derives from dimensions; 0 when it has none.  An
 * expert-parallel degree must divide it (each rank holds whole experts). */
int op_model_expert_gcd(const op_model *m);

char op_layer_kind_sym(op_layer_kind k);        /* '?' for a value outside the enum */
const char *op_layer_kind_name(op_layer_kind k); /* "?" likewise */
int op_layer_kind_from_sym(char sym); /* -1 if unknown */

#ifdef __cplusplus
}
#endif
#endif
