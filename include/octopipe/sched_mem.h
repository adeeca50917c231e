/* sched_mem.h: activation policies applied uniformly, for building schedules under memory.
 *
 * Megatron users who run out of memory turn on recomputation for the whole model: first
 * selective (the attention core), then full.  op_sched_build_fit gives every classic schedule
 * that choice, so a baseline never "does not fit" only for want of a flag.  The tuner uses the
 * same layer view to search with a policy (tune_mem.c). */
#ifndef OCTOPIPE_SCHED_MEM_H
#define OCTOPIPE_SCHED_MEM_H
#include "octopipe/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-layer costs as a scheduler sees them when every stage runs `policy` (keep, selective or
 * full; offload is not a per-layer rule and is refused):
 *   selective  act = act_sel_bytes, i_ms += f_sel_ms, act_i += act_bytes - act_sel_bytes
 *   full       act = the layer's input (out_bytes of the layer before; the first layer keeps
 *              its own out_bytes), i_ms += f_ms, act_i += act_bytes - that input
 * (during I the recomputed activations are live again, so the peak of I is what keep has).
 * For full this over-counts a stage's stash (a stage keeps only its own input, not every
 * layer's): schedules built on it are conservative; the plan is then re-simulated with the
 * true layers and stage_act.  out[n] may alias nothing in `in`.  Returns 1 if the policy
 * changes any layer's memory, 0 if it saves nothing (so trying it is pointless). */
int op_act_layers(const op_layer_cost *in, int n, int policy, op_layer_cost *out);

/* Mixed clusters (sched/mixed_view.c): the view of `policy` on layers [0, cut) of every device
 * type's row (a malloc'd [n_types * n_layers] copy of pr->type_layers; NULL when pr is
 * uniform), for a problem searched under the policy; and, for the plan built from it, every
 * type's true costs put back (no-op when uniform). */
op_layer_cost *op_act_type_layers(const op_problem *pr, int policy, int cut);
void op_plan_restore_types(op_plan *p, const op_problem *pr);

/* Builds baseline `name` with the cheapest uniform recomputation that fits pr->mem_limit_bytes:
 * keep, else selective, else full; among those that fit, the fastest (recomputation can let a
 * memory-capped schedule go deeper, so a heavier policy is occasionally faster).  The plan
 * carries the true layers and stage_act, simulated by op_sim_replay; info->settings ends with
 * " recompute=selective" (or full) when a policy is used.  When none fits, the keep plan is
 * returned (its peak says by how much).  opts, info may be NULL. */
int op_sched_build_fit(const char *name, const op_problem *pr, const op_sched_opts *opts,
                       op_plan *out, op_sched_info *info, op_err *err);

#ifdef __cplusplus
}
#endif
#endif
