/* plan.h: a pipeline plan = partition (stages) + placement (stage -> device) + schedule (per
 * device op order), plus the per-layer costs it was made from and its prediction.  The plan
 * file (`octopipe.plan/1`, plan/plan_json.c) is the contract between the tuner, the simulator,
 * the executor, the exports and users.
 *
 * Ops: F forward, I backward-input, W backward-weight, B = I then W fused.  A stage uses either
 * B or I+W for all its microbatches (stage_split[s]).
 * Dependencies (S stages, microbatch m):  F(s,m) <- F(s-1,m);  I|B(s,m) <- I|B(s+1,m), and on the
 * last stage <- F(S-1,m);  W(s,m) <- I(s,m).  A cross-device edge costs op_comm_ms() of the
 * message over the boundary it crosses: F(s-1)->F(s) and its gradient I(s)->I(s-1) both carry
 * op_stage_out_bytes(s-1), the activation at the s-1 | s boundary. */
#ifndef OCTOPIPE_PLAN_H
#define OCTOPIPE_PLAN_H
#include "octopipe/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum op_kind { OP_F = 0, OP_I = 1, OP_W = 2, OP_B = 3 } op_kind;

typedef struct op_op {
    uint8_t kind; /* op_kind */
    int32_t stage, mb;
    double start, end; /* ms, from the last simulation */
} op_op;

/* What the simulator predicts for a plan. */
typedef struct op_pred {
    double makespan_ms, lower_bound_ms, bubble_ratio, tokens_per_s;
    double *busy_ms, *warmup_ms, *cooldown_ms, *residual_ms; /* [P] idle split */
    int64_t *peak_bytes, *static_bytes;                       /* [P] */
    int64_t peak_bytes_max;
    int valid; /* 1 after a successful simulation */
    /* offload stages only (NULL when the plan has none): per (stage s, microbatch m), at
     * [(s * M + m) * 4 + k], k = 0 offload start, 1 offload end, 2 reload start, 3 reload end
     * (ms, on the device's copy engine); -1 when that stash stayed on the device (host budget) */
    double *copy_ms;
    int64_t *host_peak_bytes; /* [P] host memory held for offloaded stashes (NULL: no offload) */
} op_pred;

/* Stages x microbatches a plan may hold (ops per kind): what a plan file may name, and so what
 * a problem may ask for (each device runs at least one stage, so S >= P). */
#define OP_PLAN_MAX_STAGE_MB (64 * 1024 * 1024)

typedef struct op_plan {
    char name[48];  /* schedule name: "1f1b", "octopipe", ... */
    char model[64]; /* model name it was made for */
    int n_layers;
    op_layer_cost *layers; /* [n_layers] */
    int P, M;
    op_comm comm;
    double tokens_per_mb;  /* for tokens/s */
    double op_overhead_ms; /* added to every op's duration (executor dispatch cost) */
    double mem_limit_bytes; /* 0 = none; what the plan was built to fit */
    /* TP and EP degrees inside each stage that the layer costs assume (1: none; op_plan_init
     * sets 1); the plan file records them ("parallel") so an export can give a framework the
     * same ones */
    int tp, ep;
    /* The rest of the training setup the costs assume (the plan file's "parallel" and
     * "batch"), for exports: data-parallel degree (1: none) and ZeRO-1 (optimizer state
     * sharded over dp); tokens per sample and samples per microbatch (0: not recorded, as in
     * files written before them; tokens_per_mb = seq * mbs where both are known). */
    int dp, zero1;
    int seq, mbs;

    int S;
    int *stage_first;     /* [S+1]: stage s = layers [stage_first[s], stage_first[s+1]) */
    int *stage_dev;       /* [S] placement */
    uint8_t *stage_split; /* [S] 1 = I+W, 0 = B */
    uint8_t *stage_act;   /* [S] op_act_policy; OP_ACT_KEEP (0) unless a policy was chosen */
    /* Mixed clusters: device d is of type dev_type[d]; type t's per-layer costs are row t of
     * type_layers ([n_types * n_layers]; row 0 is a copy of `layers`), its GPU preset name
     * type_name[t].  A uniform cluster has n_types = 1, type_layers = layers, dev_type all 0,
     * type_name[0] "" (unknown) and dev_mem_limit NULL (every device has mem_limit_bytes). */
    int n_types;
    char (*type_name)[32];      /* [n_types] */
    op_layer_cost *type_layers; /* [n_types * n_layers] */
    int *dev_type;              /* [P] */
    double *dev_mem_limit;      /* [P] per-device limit (0 = none), or NULL */

    int *n_ops;   /* [P] */
    op_op **ops;  /* [P][n_ops[d]] per-device order */

    op_pred pred;
    op_arena arena; /* owns every array above */
} op_plan;

/* A planning problem: what the schedule generators and the tuner start from. */
typedef struct op_problem {
    const char *model;             /* model name, copied into plans */
    const op_layer_cost *layers;   /* [n_layers] per-microbatch costs */
    int n_layers;
    int P, M;                      /* devices, microbatches */
    op_comm comm;
    double tokens_per_mb;          /* tokens in one microbatch (seq * mbs), for tokens/s */
    double mem_limit_bytes;        /* per device; 0 = no limit */
    double op_overhead_ms;         /* per-op dispatch cost the executor adds */
    int tp, ep;                    /* TP and EP degrees the costs were made for (0 or 1: none) */
    int dp, zero1;                 /* data-parallel degree (0 or 1: none), ZeRO-1 over it */
    int seq, mbs;                  /* tokens per sample, samples per microbatch (0: unknown) */
    /* Mixed clusters (all zero/NULL: every device alike, costs `layers`, limit mem_limit_bytes):
     * device d is of type dev_type[d], whose per-layer costs are row dev_type[d] of type_layers
     * ([n_types * n_layers], row 0 equal to `layers`) and GPU preset name type_name[t]. */
    int n_types;                  /* 0 or 1: uniform */
    const op_layer_cost *type_layers;
    const int *dev_type;          /* [P] */
    const char (*type_name)[32];  /* [n_types] (NULL: unnamed) */
    const double *dev_mem_limit;  /* [P] per-device limit (0 = none); NULL: mem_limit_bytes */
} op_problem;

/* Whether a problem is one every scheduler, the tuner and the simulator can take: P, M >= 1,
 * at least P layers, every time in [0, OP_MAX_MS] and every byte figure in [0, 2^53]
 * (model.h), tokens_per_mb in [0, 2^53], memory sums that fit an int64, some time to
 * schedule, links with bandwidth >= OP_MIN_GBPS (1 kB/s) wherever they are used (unless
 * comm.none).  OP_EINVAL with one line saying what is wrong.
 * op_sched_build and op_tune call it first. */
int op_problem_validate(const op_problem *pr, op_err *err);
/* The per-layer part of it (also for the layers of a plan file); `what` names them in messages. */
int op_layer_costs_validate(const op_layer_cost *layers, int n_layers, int M, const char *what,
                            op_err *err);

/* The link part of it: latencies in [0, OP_MAX_MS] and bandwidths >= OP_MIN_GBPS for the links
 * P devices use (intra-node when P > 1, inter-node when nodes_of > 0 and P > nodes_of), the
 * host links (offload) where set (a finite host_bw_GBps: > 0 a link, <= 0 none) and the host
 * budget host_mem_bytes in [0, 2^53].  Every figure a plan records, used or not (comm.none),
 * is finite and >= 0; a per-pair matrix is P x P. */
int op_comm_validate(const op_comm *c, int P, op_err *err);

/* op_plan_init from a problem: copies layers, comm, model name, tokens, overhead, limit. */
void op_plan_init_problem(op_plan *p, const char *name, const op_problem *pr, int S);

/* The most of each count op_plan_init takes (devices, microbatches, stages, layers): S + 1
 * stage bounds and S x M x 3 op slots stay in range. */
#define OP_PLAN_MAX_COUNT (1 << 28)
/* Allocates the arrays for P devices, M microbatches, S stages over n_layers layers (copied
 * from `layers`).  Schedules start empty (op_plan_set_ops fills a device).  OP_EINVAL when a
 * count is below 1 or above OP_PLAN_MAX_COUNT (p is then empty: op_plan_free takes it). */
int op_plan_init(op_plan *p, const char *name, const op_layer_cost *layers, int n_layers,
                 int P, int M, int S, const op_comm *comm);
void op_plan_free(op_plan *p);
/* p->comm = *comm, its per-pair and per-device host link arrays copied into p's arena (the
 * plan owns what it points to). */
void op_plan_set_comm(op_plan *p, const op_comm *comm);
/* Deep copy (dst must be uninitialised or freed). */
void op_plan_copy(op_plan *dst, const op_plan *src);
/* Sets device d's order (copied into the arena).  OP_EINVAL (p unchanged) when d is not one
 * of p's devices, n < 0, or ops is NULL with n > 0. */
int op_plan_set_ops(op_plan *p, int d, const op_op *ops, int n);

/* Mixed clusters: sets the device types of p (copied into its arena; `layers` becomes a copy
 * of row 0).  names may be NULL; dev_mem_limit may be NULL (every device mem_limit_bytes).
 * OP_EINVAL, p unchanged, for n_types < 1 or a device type outside 0..n_types-1. */
int op_plan_set_types(op_plan *p, int n_types, const char (*names)[32],
                      const op_layer_cost *type_layers, const int *dev_type,
                      const double *dev_mem_limit);
/* 1 when p's devices are of more than one type or have their own memory limits. */
int op_plan_is_mixed(const op_plan *p);
/* Per-layer costs on device d (row dev_type[d] of type_layers), and on stage s's device. */
const op_layer_cost *op_plan_dev_layers(const op_plan *p, int d);
const op_layer_cost *op_stage_layers(const op_plan *p, int s);
/* Memory limit of device d (0 = none). */
double op_plan_dev_mem_limit(const op_plan *p, int d);
/* The same for a problem: costs on device d, d's limit. */
const op_layer_cost *op_problem_dev_layers(const op_problem *pr, int d);
double op_problem_dev_mem_limit(const op_problem *pr, int d);
/* The limits in words for messages: "72.00 GiB per device", or "each device's own limit (A to
 * B GiB)" where devices differ.  buf[n]. */
void op_problem_limit_text(const op_problem *pr, char *buf, size_t n);

/* Smallest per-device static bytes (weights, gradients, optimizer state) any plan of these
 * layers on P devices must hold: max(total / P, the heaviest layer). */
double op_problem_static_floor(const op_layer_cost *layers, int n_layers, int P);
/* The same per device (mixed clusters: each device its own type's costs and its own limit,
 * problem_static.c): the smallest factor a such that static memory could fit every device within
 * a x its limit.  Above 1, no plan fits.  *worst_layer (may be NULL): the layer that sets it
 * (it fits on no device within its limit), or -1 when the total does.  0 when some device has
 * no limit.  On a uniform problem: op_problem_static_floor / mem_limit_bytes. */
double op_problem_static_need(const op_problem *pr, int *worst_layer);
/* The smallest one limit for every device at which static memory could fit (each layer at its
 * cheapest type): op_problem_static_floor of a uniform problem. */
double op_problem_static_floor_any(const op_problem *pr);

/* Stage aggregates (sums over the stage's layers as costed on the stage's device,
 * op_stage_layers, plus op_overhead_ms per op).
 * I and B include the stage's recomputation (op_stage_recompute_ms): it runs on the device's
 * compute timeline immediately before I, inside the same op, as Megatron runs it. */
double op_stage_ms(const op_plan *p, int s, op_kind k); /* k = OP_B gives I + W */
int64_t op_stage_out_bytes(const op_plan *p, int s);     /* message to stage s+1 (and grad back) */
int64_t op_stage_act_bytes(const op_plan *p, int s);
int64_t op_stage_act_w_bytes(const op_plan *p, int s);
int64_t op_stage_act_i_bytes(const op_plan *p, int s);  /* transient during I (or B) */
int64_t op_stage_static_bytes(const op_plan *p, int s);

/* Activation policies (stage_act[s], cost.h).  Memory of one microbatch of stage s:
 *   keep       F start: +act                        I end: -> act_w (as cost.h)
 *   selective  F start: +stash (sum act_sel_bytes)  I start: +remat (act - stash) for the
 *              recompute and I; I end: -> act_w
 *   full       F start: +stash (op_stage_in_bytes)  I start: +remat (act - stash)
 *   offload    F start: +act; copy end: -act (to host); reload start: +act; I waits for the
 *              reload's end; I end: -> act_w
 * During I (or B) the peak always includes act + act_i: recomputed activations are live. */
/* Per layer, for the tuner and the memory bound: bytes F leaves held on the device until I
 * (or until the offload copy ends) under `policy`.  full: 0 (the stage keeps only its input,
 * which op_stage_in_bytes adds once per stage); offload: act_bytes (until the copy ends). */
int64_t op_layer_stash_bytes(const op_layer_cost *l, int policy);
/* Per layer: compute time the policy adds before I (selective f_sel_ms, full f_ms, else 0). */
double op_layer_recompute_ms(const op_layer_cost *l, int policy);
/* What full keeps of a stage's input to re-run its forward: out_bytes of the layer before it;
 * for stage 0, the model's input: the microbatch's token ids, 4 bytes (int32) per token
 * (tokens_per_mb), rounded up to 16 bytes as activation arenas round, which is what the
 * reference model keeps (op_nn_stage_in_bytes) and all a framework needs to redo the
 * embedding.  A vision front-end's pixels are not counted apart.  A plan without a token count
 * (tokens_per_mb 0) falls back to layer 0's out_bytes. */
int64_t op_stage_in_bytes(const op_plan *p, int s);
/* What F leaves held on the device until I under the stage's policy (offload: until the
 * copy to host ends). */
int64_t op_stage_stash_bytes(const op_plan *p, int s);
/* Bytes re-materialised from the start of I (its recompute) until I ends: act - stash for
 * selective and full, 0 otherwise. */
int64_t op_stage_remat_bytes(const op_plan *p, int s);
/* Recompute time included in I/B of stage s (0 for keep and offload). */
double op_stage_recompute_ms(const op_plan *p, int s);
/* One copy of the stage's stash over the host link (offload stages; 0 otherwise). */
double op_stage_copy_ms(const op_plan *p, int s);

/* Lower bound on the makespan of any plan of these layers on P devices with M microbatches:
 * the largest of total work / P, one microbatch's F and I chain, the work and chain through
 * each indivisible layer, the indivisible-jobs bound, the warm-up bound, the joint bound and
 * the pipeline-fill bound (plan.c says why each holds).  0 (no bound) when layers is NULL or
 * n_layers, P or M is below 1. */
double op_lower_bound(const op_layer_cost *layers, int n_layers, int P, int M);
/* Its warm-up term: min over k = 1..min(P, L) used devices of (M * work + H_k) / k, H_k the sum
 * of the forward chains F_0 + ... + F_(i-1) for i < k (device i in order of lowest layer cannot
 * start earlier).  Always >= M * work / P. */
double op_lower_bound_warmup(const op_layer_cost *layers, int n_layers, int P, int M);
/* The joint warm-up x balance x drain bound (plan/bound_joint.c proves it): the least over
 * assignments of layers to devices of the largest, over devices, of
 *   head(r) + M * (f + i of its layers) + max(M * (w of its layers), tail(r)),
 * r the device's rank by lowest layer, head(r) the F chain below layer r, tail(r) the longest
 * I chain below r ending in a W.  Solved exactly over layer kinds when the search is small,
 * else (and never less than) op_lower_bound_joint_frac.  Always >= op_lower_bound_warmup. */
double op_lower_bound_joint(const op_layer_cost *layers, int n_layers, int P, int M);
/* Its fractional relaxation, O(L): min over k used devices of the larger of
 * (M * work + sum_(r<k) head(r)) / k and (M * (f + i) + sum_(r<k) (head(r) + tail(r))) / k. */
double op_lower_bound_joint_frac(const op_layer_cost *layers, int n_layers, int P, int M);
/* The pipeline-fill bound (plan/bound_fill.c proves it): every (kind, layer, microbatch) piece
 * of work has a release, the flow-shop recurrence over layers and the microbatch ranks of each
 * layer's pieces, and T >= t + (work not doable before t) / P for every t up to the latest
 * release + length.  0 when L > 1024 or 3 L M > 2e5 (not computed). */
double op_lower_bound_fill(const op_layer_cost *layers, int n_layers, int P, int M);
/* op_plan_lower_bound: op_plan_lower_bound_mixed on a plan with device types. */
double op_plan_lower_bound(const op_plan *p);
/* Mixed clusters (plan/bound_mixed.c says why it holds): valid for any partition, placement,
 * policies and order of these layers on devices of types dev_type[P] (costs: row t of
 * type_layers [n_types * n_layers]).  The uniform bound over each layer's fastest type, the
 * work bound over unequal speeds (the dual of the fractional layer-to-type assignment; exact
 * for two types), and that work bound with the warm-up (a device waits for the F chain below
 * its lowest layer; the plan's best choice of which devices wait), whole layers counted per
 * type, and the joint bound with each device's layers at its own type's times (a search of up
 * to a few tenths of a second; the last four problems' values are kept per thread).  n_types <= 1 or
 * dev_type NULL: op_lower_bound of row 0. */
double op_lower_bound_mixed(const op_layer_cost *type_layers, int n_types, int n_layers,
                            const int *dev_type, int P, int M);
double op_plan_lower_bound_mixed(const op_plan *p);
/* The same without the per-type joint search (the same on uniform clusters): cheap, and what
 * the tuner's rules for when a policy search may still gain are measured against. */
double op_lower_bound_mixed_quick(const op_layer_cost *type_layers, int n_types, int n_layers,
                                  const int *dev_type, int P, int M);
double op_plan_lower_bound_quick(const op_plan *p);
/* The bound of a problem: op_lower_bound_mixed when it has device types, else op_lower_bound. */
double op_problem_lower_bound(const op_problem *pr);
/* Lower bound that knows memory: valid for any plan of these layers whose peak per device
 * stays within mem_limit_bytes (0 = none: equals op_lower_bound), whatever its policies.
 * The largest of op_lower_bound, the recomputation one microbatch must do when all its
 * stashes are held at once (host budget aside), and the least makespan of a memory x time
 * relaxation: each stash lives at least the F-I chain below its layer, the devices' free
 * memory over the makespan must hold it, and each layer's stash may instead be recomputed
 * (work and chain grow) or offloaded (held through its F, I and both copies; the copies take
 * 2 * act / host_bw of the device's copy engine each microbatch; a host budget caps device +
 * host memory x time); solved exactly as a linear program by duality (plan/bound_mem.c proves it).
 * comm: the host link and budget (NULL or host_bw <= 0: no offload).  Returns +inf when
 * static memory alone exceeds P * limit (no plan fits). */
double op_lower_bound_mem(const op_layer_cost *layers, int n_layers, int P, int M,
                          double mem_limit_bytes, const op_comm *comm);
/* Whole layers counted against time and memory (plan/bound_count.c proves it): for any set S
 * of layers, a device holds at most as many of them as both its time (M x the sum of the
 * smallest works on its type) and its limit (the sum of the smallest static bytes) allow, and
 * all devices together must hold S.  Valid for any plan whose devices keep their layers'
 * static bytes within their limits.  type_layers [n_types * n_layers] (n_types <= 1 or
 * dev_type NULL: row 0 for every device); dev_lim [P] per-device limits or NULL (every
 * device lim_all); a limit <= 0 is none. */
double op_lower_bound_count_mem(const op_layer_cost *type_layers, int n_types, int n_layers,
                                const int *dev_type, const double *dev_lim, double lim_all, int P,
                                int M);
/* The same relaxation on any cluster (plan/bound_mem.c proves it): devices of types
 * dev_type[P] (costs row t of type_layers [n_types * n_layers]; n_types <= 1 or dev_type NULL:
 * row 0 everywhere), limits dev_lim[P] (NULL: every device lim_all; a device without a limit
 * makes it the memory-free bound).  Each layer at its fastest type for the chains and the
 * recompute, the devices' limits summed, each device's busy time scaled by its type's best
 * speed ratio over layers and op kinds, each device's own host link (op_comm_host_bw) for the
 * copies.  On one type and one limit it equals op_lower_bound_mem. */
double op_lower_bound_mem_mixed(const op_layer_cost *type_layers, int n_types, int n_layers,
                                const int *dev_type, const double *dev_lim, double lim_all, int P,
                                int M, const op_comm *comm);
/* The same relaxation per group of like devices (type, limit, host link; plan/bound_memgroup.c
 * proves it): each group's own time, memory x time and copy engines must carry the layers it
 * runs, with their static bytes, stashes, recompute and copies at that group's costs.  Returns
 * the largest T above `lo` (a bound the caller already has) that it proves impossible, else
 * lo.  Arguments as op_lower_bound_mem_mixed. */
double op_lower_bound_mem_groups(const op_layer_cost *type_layers, int n_types, int n_layers,
                                 const int *dev_type, const double *dev_lim, double lim_all, int P,
                                 int M, const op_comm *comm, double lo);
/* The memory-aware bound of a plan: the largest of op_lower_bound_mem_mixed (the memory-free
 * bound of the plan's cluster included), op_lower_bound_count_mem with each device's own limit
 * and the per-device joint bound with memory (src/plan/bound_memjoint.c: each device's static
 * bytes within its limit, the recompute a microbatch's stashes force at its deepest I). */
double op_plan_lower_bound_mem(const op_plan *p);
/* The same from a problem (its per-device types and limits). */
double op_problem_lower_bound_mem(const op_problem *pr);
/* The same problem on devices idx[0..k) of pr (plan/problem_subset.c): each keeps its type,
 * limit and host link, a measured link matrix keeps their rows and columns, and devices all of
 * one type and limit make a uniform problem (that type's costs as `layers`).  *q points into
 * pr and into the block returned, which the caller frees (free()) after the last use of *q. */
void *op_problem_subset(const op_problem *pr, const int *idx, int k, op_problem *q);

/* How many devices the problem's bound can use (plan/bound_devices.c): the least k in 1..P
 * (found by halving) whose bound, the larger of op_problem_lower_bound and
 * op_problem_lower_bound_mem at k devices, is within tol (a fraction) of the bound at P.  k < P
 * means no plan on the P devices can beat by more than tol what the bound allows on k: a layer
 * that runs whole on one device, or one microbatch's chain, sets the makespan.  Uniform
 * clusters only (mixed ones and per-device limits return P at once).  lb_p, lb_k (either may be
 * NULL): the bound at P and at the count returned, set where the bound was computed (always on
 * a uniform cluster with P > 1). */
int op_problem_bound_devices(const op_problem *pr, double tol, double *lb_p, double *lb_k);

/* Shape and layout only: P, M, S >= 1; stages contiguous, non-empty, covering every layer;
 * every stage on a device in 0..P-1. */
int op_plan_validate_layout(const op_plan *p, op_err *err);
/* 1 when the layout is valid and device d's ops (every device's for d < 0) are in range, each
 * on its stage's device: what a walk over a caller's plan indexes by, without
 * op_plan_validate's completeness check (O(S + those ops), no allocation). */
int op_plan_ops_in_range(const op_plan *p, int d);
/* The layout and the numbers the simulator sums (as op_plan_validate), not the ops: for a plan
 * whose schedule is still to be built (op_sim_dynamic).  O(layers x types + devices). */
int op_plan_validate_numbers(const op_plan *p, op_err *err);
/* Structural validation: stages contiguous and non-empty, every stage on one device, every
 * required op present exactly once, ops on the device of their stage; and the numbers the
 * simulator sums: each device type's costs (op_layer_costs_validate), device types in range,
 * links (op_comm_validate), overhead, tokens, limits, activation policies.  Does not simulate. */
int op_plan_validate(const op_plan *p, op_err *err);

/* Plan file I/O (plan/plan_json.c).  Writing follows octopipe/out.h ("-" is stdout; a regular
 * file is replaced atomically).  Reading validates everything
 * (op_plan_validate, and predicted times against durations) and names file and position.
 * op_plan_write refuses (OP_EINVAL, nothing written) a plan op_plan_validate refuses or with
 * a non-finite number: a file written reads back.  op_plan_to_json serializes any plan
 * (non-finite numbers aside), for tests of the reader and for debugging. */
int op_plan_write(const op_plan *p, const char *path, op_err *err);
int op_plan_to_json(const op_plan *p, op_buf *out);
int op_plan_read(const char *path, op_plan *p, op_err *err);
int op_plan_from_json(const char *text, const char *srcname, op_plan *p, op_err *err);

static inline const char *op_kind_name(op_kind k) {
    return k == OP_F ? "F" : k == OP_I ? "I" : k == OP_W ? "W" : "B";
}

#ifdef __cplusplus
}
#endif
#endif
