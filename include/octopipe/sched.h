/* sched.h: the classic pipeline schedules, each built at the settings its own users would pick.
 * They are the honest baselines every OctoPipe speedup is measured against.
 *
 * Names (op_sched_names):
 *   gpipe          all F then all B (fused), Megatron even split (best valid split option)
 *   1f1b           Megatron non-interleaved 1F1B, fused B, warm-up min(P-d-1, M); split = the best
 *                  valid Megatron option: plain even split, account_for_embedding/loss_in_
 *                  pipeline_split, --decoder-first/last-pipeline-num-layers, or a cost-balanced
 *                  --pipeline-model-parallel-layout (gpipe likewise)
 *   i1f1b          Megatron interleaved 1F1B: loop placement (stage c*P+d on device d), v chunks
 *                  per device, warm-up (P-d-1)*2 + (v-1)*G, microbatch groups of G (P <= G <= M,
 *                  M % G == 0 or >= P); v (every v up to 16, then steps of ~1.5x), G and split
 *                  (the options above) chosen by simulation: the fastest that fits
 *                  pr->mem_limit_bytes
 *   zbh1, zbh2     Zero Bubble, I/W split, one stage per device; activation memory capped at P
 *                  (H1, like 1F1B) or 2P (H2) microbatches of the stage (the in-flight limit,
 *                  lowered step by step when nothing fits the memory limit); order = best of
 *                  ZB's greedy heuristic variants and the handcrafted ZB-H1 pattern (valid for
 *                  H2 too, so zbh2 <= zbh1), then polished (adjacent moves, re-simulated);
 *                  split = even, ZB's padding, Megatron's first/last counts, or a layout
 *   zbv            ZB-V: V placement (device d holds stages d and 2P-1-d), I/W split, memory
 *                  capped at 1F1B's (P microbatches of the device's layers): greedy variants
 *                  (per-chunk accounting, W lookahead) and the V pattern of the ZB-V figure
 *                  (DualPipeV's steps, steady step backward first) when it holds no more, then
 *                  polished
 *   dualpipev      DeepSeek DualPipeV's 8-step order, V placement, I/W split; needs M >= 2P
 *   vhalf, vmin    the controllable-memory V schedules (V-Half, V-Min): ZB-V's search with
 *                  (P+2)/2 and (P+4)/3 microbatches in flight (about 1/2 and 1/3 of 1F1B's)
 *   (zbv, dualpipev, vhalf, vmin splits: even, padding, stage 0 / stage 2P-1 counts with the
 *    rest even, or a cost-balanced layout, per stage and per device)
 *   On a mixed cluster (device types) every split list above also holds the speed-proportional
 *   split (op_sched_speed_split, what Metis-style planners give), and for one stage per device
 *   its variant that keeps each stage within its device's memory; settings say which won.
 *   balanced-1f1b  contiguous split of all layers minimizing the max stage F+I+W (exact), one
 *                  stage per device, Megatron 1F1B order (what Mist/AdaPipe-style tuners give)
 *
 * Every plan returned is complete (stages, placement, stage_split, per-device orders) and
 * simulated (p->pred filled by op_sim_replay).  A baseline that cannot be built for the problem
 * (too few layers for the stages, M < 2P for dualpipev, ...) returns OP_EINVAL with the reason. */
#ifndef OCTOPIPE_SCHED_H
#define OCTOPIPE_SCHED_H
#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Knobs; zero-initialised = the automatic choice everywhere. */
typedef struct op_sched_opts {
    int v;     /* i1f1b: chunks per device (>= 2); 0 = search for the fastest that fits */
    int group; /* i1f1b: microbatch group size G; 0 = search over Megatron-valid values */
    /* Explicit partition (optional): S stages, stage_first[S+1].  Replaces the split search for
     * every schedule whose stage count matches (S = P for gpipe/1f1b/zbh1/zbh2/balanced-1f1b,
     * v*P for i1f1b, 2P for zbv/dualpipev); a mismatch is OP_EINVAL. */
    const int *stage_first;
    int S;
    /* i1f1b, zbv, dualpipev: 1 = only the even / account_for (padding) / first-last splits;
     * 0 (default) also tries a cost-balanced layout (Megatron's --pipeline-model-parallel-
     * layout or '|' segments of a hybrid pattern; DualPipe's hand-built stage modules), which
     * a user tuning a heterogeneous model writes by hand. */
    int classic_splits;
} op_sched_opts;

/* What a generator picked, for reports ("v=4 G=4 split=first/last 3/5"). */
typedef struct op_sched_info {
    char settings[160];
    int candidates; /* plans simulated to pick this one */
} op_sched_info;

/* Builds baseline `name` for pr into *out (initialised here; free with op_plan_free).
 * Returns OP_OK, or OP_EINVAL (unknown name, baseline not applicable) with err set. */
int op_sched_build(const char *name, const op_problem *pr, op_plan *out, op_err *err);
int op_sched_build_opts(const char *name, const op_problem *pr, const op_sched_opts *opts,
                        op_plan *out, op_sched_info *info, op_err *err);

/* NULL-terminated list of baseline names, in the order compare prints them. */
const char *const *op_sched_names(void);

/* Building blocks, public for the tuner and tests. ------------------------------------------- */

/* Megatron 1F1B order for a plan with one stage per device in chain placement (stage d on
 * device d) and fused B on every stage.  Sets stage_split to 0 and fills p->ops; OP_EINVAL
 * (p unchanged) when S != P. */
int op_sched_order_1f1b(op_plan *p);

/* Megatron interleaved order: S = v*P stages in loop placement, fused B, group size G.
 * OP_EINVAL (p unchanged) unless v >= 1, G >= 1 and S = v*P. */
int op_sched_order_interleaved(op_plan *p, int v, int G);

/* Contiguous split of all layers into S non-empty stages minimizing the max stage F+I+W time;
 * ties broken by the smallest sum of squared stage times.  stage_first[S+1].  Returns OP_EINVAL
 * when there are fewer layers than stages, or a cost is negative, NaN or sums to infinity. */
int op_sched_balanced_split(const op_layer_cost *layers, int n_layers, int S, int *stage_first,
                            op_err *err);

/* Mixed clusters: contiguous split into S non-empty stages, stage s on device stage_dev[s],
 * minimizing the busiest stage's F+I+W time as costed on its own device
 * (op_problem_dev_layers): a faster device gets more layers (what Metis-style planners give).
 * On a uniform cluster it is a plain cost-balanced split.  OP_EINVAL when L < S or a stage's
 * device is not in 0..P-1. */
int op_sched_speed_split(const op_problem *pr, int S, const int *stage_dev, int *first,
                         op_err *err);

/* Hill climbing on a simulated plan's per-device orders (what the baselines above get after
 * their greedy pass): moves one op of a device up to 4 places, re-simulates, keeps moves that
 * lower the makespan (or keep it and end the I chain earlier) without raising the peak memory.
 * At most max_sims simulations; deterministic.  p is simulated first and left simulated.
 * Returns the number of moves kept, or OP_EINVAL when p does not validate or its order does not
 * simulate (a deadlock); p is then as op_sim_replay left it. */
int op_sched_polish(op_plan *p, long max_sims);
/* The same, also stopping at the first move past deadline (op_now_s() time; 0: none, then
 * exactly op_sched_polish). */
int op_sched_polish_until(op_plan *p, long max_sims, double deadline);

/* One move of op_sched_polish: op i of a device's order o[0, n) to position j, the ops between
 * shifted by one.  Refused (returns 0, o unchanged) where an op passed over is of op i's stage
 * and microbatch, or of its stage and kind: the move would deadlock or reorder one stage's
 * microbatches.  op_sched_unmove(o, i, j) puts a move that was made back. */
int op_sched_move(op_op *o, int n, int i, int j);
void op_sched_unmove(op_op *o, int i, int j);

/* Zero-bubble greedy list scheduler (the kind of ZB's heuristic): fills p->ops for a plan whose
 * stages, placement and stage_split (all 1 = I+W) are set.  Whenever a device is free it runs
 * a ready I, else a ready F that fits memory, else a pending W (lazily: only if no I or F it
 * could run is due before the W would end).  Memory: F reserves a = max(act_bytes,
 * act_w_bytes) (I may leave more than F stored), I frees a - act_w, W frees act_w; device d
 * may hold at most cap_mb[d] microbatches' worth of its stages' activations (NULL = no cap),
 * and static + activations <= mem_limit_bytes (0 = none); I's transient act_i_bytes is not
 * reserved (the simulated peak of the result counts it).
 * Layers without activation bytes count one unit per stage and microbatch, freed by W.  If no
 * device can move, the oldest ready F runs over the cap, so the result never deadlocks.
 * flags: OP_ZB_F_FIRST (F before a ready I), OP_ZB_W_EAGER (W whenever nothing else is ready),
 * OP_ZB_F_SHALLOW (among ready F on one device, the lower stage first; default the deeper),
 * OP_ZB_PER_CHUNK (memory per stage: F adds only its own stage's activations, an entering
 * microbatch still needs room for its whole pass), OP_ZB_W_LOOKAHEAD (a lazy W also waits
 * for an I whose input chain, run as soon as possible, would arrive before the W ends). */
enum { OP_ZB_F_FIRST = 1, OP_ZB_W_EAGER = 2, OP_ZB_F_SHALLOW = 4, OP_ZB_PER_CHUNK = 8,
       OP_ZB_W_LOOKAHEAD = 16 };
/* OP_EINVAL (p unchanged) when a stage's stage_split is 0. */
int op_sched_zb_greedy(op_plan *p, const double *cap_mb, double mem_limit_bytes, int flags);

#ifdef __cplusplus
}
#endif
#endif
