/* nn.h: the reference hybrid language model in C (FP32, OpenBLAS sgemm, one thread).
 *
 * Layers are named by the profile symbols: E embedding, M Mamba (selective scan), * causal
 * attention, - gated MLP (SwiGLU), # top-k MoE, L final norm + LM head + cross-entropy.
 * M, *, - and # are pre-norm residual blocks: y = x + f(RMSNorm(x)).  Every layer has
 *   forward          F: x (N,d) -> y (N,d); E reads tokens, L returns the loss
 *   backward_input   I: dy (N,d) -> dx (N,d) += ...; stashes what W needs
 *   backward_weight  W: grad += dL/dparams of this microbatch
 * with N = batch * seq token rows and d the hidden width.  Gradients accumulate (+=).
 *
 * Memory follows the plan: a layer's F saves its tensors into two per-microbatch arenas,
 * `ai` (needed only by I: freed right after I) and `aw` (needed by W: freed after W); I also
 * stashes the output gradients W needs into `aw`.
 *
 * A stage is a contiguous layer range [first, last) with its own parameter, gradient and
 * AdamW arenas, and per-microbatch activation arenas (op_nn_stage_*).  Weight gradients of
 * the microbatches are folded into the stage gradient in microbatch order 0..M-1 whatever the
 * order W runs in, so any schedule gives bitwise the same gradients as one process. */
#ifndef OCTOPIPE_NN_H
#define OCTOPIPE_NN_H
#include <pthread.h>

#include "octopipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OP_NN_MAX_LAYERS 256

typedef struct op_nn_cfg {
    int vocab;      /* 256: byte-level tokens */
    int d;          /* hidden width */
    int seq, batch; /* T tokens per sample, B samples per microbatch: N = B*T rows */
    int n_heads;    /* attention heads, head_dim = d / n_heads */
    int window;     /* sliding window in tokens (0 = full causal) */
    int ssm_inner, ssm_state, ssm_conv, ssm_dt_rank; /* Mamba: Di, S, K, R */
    int ffn;                                         /* gated MLP intermediate size */
    int n_experts, top_k, expert_dim, shared_dim;    /* MoE; shared_dim 0 = no shared expert */
    float aux_coef;  /* weight of the MoE load-balancing loss */
    float norm_eps;  /* RMSNorm epsilon */
    uint64_t seed;   /* parameter init */
} op_nn_cfg;

/* What a microbatch brings besides activations. */
typedef struct op_nn_batch {
    const int32_t *tokens;  /* (N) input token ids, read by E */
    const int32_t *targets; /* (N) next-token ids, < 0 = ignored; read by L */
    float loss_scale;       /* d(step loss)/d(this microbatch's loss), usually 1/M */
} op_nn_batch;

/* Activation memory of one microbatch: a bump allocator over blocks borrowed from a pool
 * (the stage's), so releasing after I or W hands the blocks back for the next microbatch
 * instead of returning pages to the OS and faulting them in again.  used_bytes is what the
 * microbatch holds: the memory accounting follows it, not the pool. */
typedef struct op_nn_block op_nn_block;
typedef struct op_nn_mem {
    op_nn_block *head;
    size_t used_bytes;
    op_nn_block **pool; /* free list to borrow from and return to; NULL = malloc/free */
} op_nn_mem;
void *op_nn_mem_alloc(op_nn_mem *m, size_t n);     /* zeroed, 16-byte aligned */
void *op_nn_mem_alloc_raw(op_nn_mem *m, size_t n); /* not zeroed, 16-byte aligned */
void op_nn_mem_release(op_nn_mem *m);           /* everything, back to the pool */
/* Offload: copies every block's contents of dev into host (allocated there) and returns the
 * device pages to the OS (the addresses stay reserved: pointers into dev stay valid); reload
 * copies them back (host is then released by the caller, after every arena it holds came
 * back).  Returns the bytes moved (dev->used_bytes). */
size_t op_nn_mem_offload(op_nn_mem *dev, op_nn_mem *host);
size_t op_nn_mem_reload(op_nn_mem *dev, op_nn_mem *host);
void op_nn_pool_free(op_nn_block **pool);

/* One layer, one microbatch: where F saves what I and W need. */
typedef struct op_nn_ctx {
    op_nn_mem *ai; /* released after I */
    op_nn_mem *aw; /* released after W */
    op_nn_batch batch;
    void *saved; /* the layer's record, set by F */
    /* selective recomputation: F puts the attention core (scores / softmax probabilities) here
     * instead of `ai`; the stage drops it after F and I recomputes it into `ai`.  NULL = keep. */
    op_nn_mem *drop;
} op_nn_ctx;

typedef struct op_nn_layer {
    char sym;   /* E M * - # L */
    int index;  /* position in the model */
    const op_nn_cfg *cfg;
    float *p;   /* parameters, op_nn_layer_nparams floats */
} op_nn_layer;

/* Parameter count of a layer kind; 0 for an unknown symbol. */
size_t op_nn_layer_nparams(char sym, const op_nn_cfg *c);
/* Seeded init (depends only on cfg->seed and the layer index, not on the partition). */
void op_nn_layer_init(const op_nn_layer *l);
/* F: y (N,d) = layer(x); x is NULL for E, y is NULL for L.  Returns the layer's loss term
 * (L: mean cross-entropy over non-ignored targets; #: load-balancing loss; others 0). */
double op_nn_layer_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y);
/* I: dx (N,d) += dL/dx given dy (N,d); dy is NULL for L, dx is NULL for E. */
void op_nn_layer_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx);
/* W: grad (nparams) += dL/dparams.  Needs only `aw`. */
void op_nn_layer_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad);
/* The attention core of one microbatch (what selective recomputation drops and redoes):
 * att (B,H,T,T) = band softmax(Q K^T / sqrt(head_dim)) per (sample, head), from qkv (N,3d) =
 * [Q | K | V] rows; and its bytes in the activation arenas (B*H*T*T floats, 16-byte rounded). */
void op_nn_attn_core(const op_nn_cfg *g, const float *qkv, float *att);
size_t op_nn_attn_core_bytes(const op_nn_cfg *g);
/* True when the symbol is a layer kind this model knows. */
int op_nn_sym_valid(char sym);

/* ---- model and stages ---- */

typedef struct op_nn_model {
    char name[64];
    op_nn_cfg cfg;
    char pattern[OP_NN_MAX_LAYERS + 1];
    int n_layers;
    size_t off[OP_NN_MAX_LAYERS + 1]; /* parameter offsets in model order (floats) */
} op_nn_model;

/* pattern: one symbol per layer; E and L are added at the ends when missing. */
int op_nn_model_init(op_nn_model *m, const char *pattern, const op_nn_cfg *cfg, op_err *err);
/* "tiny", "small", a pattern (with the `small` dimensions), or PRESET:PATTERN. */
int op_nn_model_from_spec(op_nn_model *m, const char *spec, op_err *err);
void op_nn_cfg_preset(const char *name, op_nn_cfg *c); /* "tiny" or "small" dimensions */
const char *const *op_nn_preset_names(void);

typedef struct op_nn_mbstate {
    op_nn_mem ai, aw;
    op_nn_mem ax;   /* full: the stage input F keeps (freed once I has recomputed the forward) */
    op_nn_mem host; /* offload: the stash while it is away from the device */
    op_nn_batch batch; /* F's batch, for full's recomputation (tokens point into ax) */
    const float *x_in; /* full: the stashed stage input (NULL on the stage holding E) */
    op_nn_ctx *ctx; /* [n layers of the stage] */
    int state;      /* 0 idle, 1 after F, 2 after I, (W -> 0) */
    float *pending; /* weight grads of a W that ran ahead of the fixed order, or NULL */
} op_nn_mbstate;

/* Device activation bytes of a group of stages (one rank's), live and peak, shared with a copy
 * thread: every change of a stage's act_bytes is applied here under mu, so the peak is the
 * peak of the bytes really held at once, whichever thread freed or re-took them. */
typedef struct op_nn_meter {
    pthread_mutex_t mu;
    int64_t live, peak;
} op_nn_meter;
void op_nn_meter_init(op_nn_meter *mt);
void op_nn_meter_destroy(op_nn_meter *mt);

typedef struct op_nn_stage {
    const op_nn_model *m;
    int first, last; /* layers [first, last) */
    int n_mb;
    size_t n_params;
    float *params, *grads, *adam_m, *adam_v; /* n_params each, layer order */
    op_nn_layer *layers;                     /* [last-first] */
    op_nn_mbstate *mb;                       /* [n_mb] */
    float *buf[2], *wscratch;                /* ping-pong (N,d) and one microbatch's W grads */
    int next_w;                              /* next microbatch to fold into grads */
    size_t act_bytes, peak_act_bytes;        /* live per-microbatch activation bytes */
    size_t host_bytes, peak_host_bytes;      /* offload: stash bytes held in host memory */
    int policy;                              /* op_act_policy (cost.h): 0 keep, 1 selective,
                                              * 2 full, 3 offload; op_nn_stage_set_policy */
    op_nn_mem drop;                          /* F's scratch that no microbatch keeps */
    double aux_loss;                         /* MoE balance losses of this step's F calls */
    op_nn_block *pool;                       /* activation blocks not in use */
    op_nn_block *host_pool;                  /* offload: host blocks not in use */
    int copy_async;                          /* offload: 1 = a copy thread calls
                                              * op_nn_stage_offload / _reload (F and I do not) */
    op_nn_meter *meter;                      /* NULL, or where act_bytes changes also go */
    op_arena arena;                          /* static: everything above */
} op_nn_stage;

/* Also pins BLAS to one thread (op_nn_blas_single_thread): one thread per rank keeps results
 * bitwise reproducible and stops OpenBLAS workers spinning against other ranks. */
void op_nn_stage_init(op_nn_stage *s, const op_nn_model *m, int first, int last, int n_mb);
void op_nn_blas_single_thread(void);
void op_nn_stage_free(op_nn_stage *s);
/* Activation policy of the stage (op_act_policy of cost.h; set between steps, with no
 * microbatch in flight).  Every policy computes bitwise what keep computes; they differ in what
 * the activation arenas hold between F and I (act_bytes counts device memory only):
 *   keep       F holds every layer's stash until I (what the planner's memory rule says);
 *   selective  attention layers drop their scores / softmax probabilities (B*H*T*T floats)
 *              after F; I recomputes them from the kept Q, K, V before using them;
 *   full       F runs each layer with a scratch arena released after the layer and keeps only
 *              the stage input ((N,d) floats, or the N token ids on the stage holding E); I
 *              first re-runs the stage's forward into the arenas, frees the input, then runs;
 *   offload    F keeps everything, then copies it to a host arena (host_bytes) and gives the
 *              device pages back; I copies it back to the same addresses first.
 * Under full the batch's targets (and tokens) must stay valid until I, as they do for keep. */
void op_nn_stage_set_policy(op_nn_stage *s, int policy);
/* Offload on a copy thread (the plan's copy engine): with async on, F leaves the stash on the
 * device and I requires it back; the copy thread calls op_nn_stage_offload after F(mb) ends
 * and op_nn_stage_reload before I(mb) starts.  Only the microbatch's own arenas, the host pool
 * and host_bytes are touched there, so the rank may meanwhile run other microbatches' ops;
 * meter (shared by the stages of a rank) keeps the device bytes and their peak consistent
 * across both threads.  Device bytes drop when the offload's copy has ended and come back
 * when the reload starts (the simulator's copy-engine rule, sim.h).  Off (the default): F
 * offloads at its end and I reloads at its start, on the caller's thread. */
void op_nn_stage_set_copy_async(op_nn_stage *s, int on);
/* Every later change of s->act_bytes also goes to meter (NULL: none); set between steps. */
void op_nn_stage_set_meter(op_nn_stage *s, op_nn_meter *meter);
/* Moves microbatch mb's stash (held after F, state 1) to host memory / back.  Returns the
 * bytes moved (0 when nothing was away or the stage does not offload). */
size_t op_nn_stage_offload(op_nn_stage *s, int mb);
size_t op_nn_stage_reload(op_nn_stage *s, int mb);
/* Bytes full keeps per microbatch for a stage starting at layer `first`. */
size_t op_nn_stage_in_bytes(const op_nn_model *m, int first);
/* Floats in a boundary message: (N, d). */
size_t op_nn_io_floats(const op_nn_model *m);
/* F: x_in NULL iff the stage starts with E, x_out NULL iff it ends with L.  Returns the head's
 * mean cross-entropy (0 when the stage has no L); MoE balance losses add to s->aux_loss.
 * Their gradients enter in I either way (scaled by batch->loss_scale). */
double op_nn_stage_forward(op_nn_stage *s, int mb, const op_nn_batch *b, const float *x_in,
                           float *x_out);
/* I: dx_in (=) dL/dx_in; dy_out NULL iff the stage ends with L, dx_in NULL iff starts with E. */
void op_nn_stage_backward_input(op_nn_stage *s, int mb, const float *dy_out, float *dx_in);
void op_nn_stage_backward_weight(op_nn_stage *s, int mb);
void op_nn_stage_backward(op_nn_stage *s, int mb, const float *dy_out, float *dx_in); /* I, W */
/* Zeroes the gradient and restarts the microbatch order; call before each step. */
void op_nn_stage_zero_grad(op_nn_stage *s);
/* Bytes of parameters + gradients + AdamW state of the stage. */
size_t op_nn_stage_static_bytes(const op_nn_stage *s);

#ifdef __cplusplus
}
#endif
#endif
