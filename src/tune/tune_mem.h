/* tune_mem.h: the tuner's activation-policy layer (tune_mem.c) around the search (tune.c). */
#ifndef OCTOPIPE_TUNE_MEM_H
#define OCTOPIPE_TUNE_MEM_H
#include "octopipe/tune.h"

/* op_tune on the problem as given (tune_canon.c relabels a mixed cluster first). */
int tn_tune_mem(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err);
/* Every classic schedule with its cheapest fitting recomputation on pr: the fastest is
 * st->best_baseline, and replaces *best (renamed octopipe; st->source, S, shape) when faster
 * or when !*have.  Those after o's time budget ran out (tn_late) are left out. */
void tn_baseline_bar(const op_problem *pr, const op_tune_opts *o, op_plan *best, int *have,
                     op_tune_stats *st);
/* st->n_recompute and st->policies ("keep", "full on 3 of 16 stages, ...") of plan p. */
void tn_describe(const op_plan *p, op_tune_stats *st);

/* The partition x placement x schedule search on pr's layers as given (tune.c). */
int tn_tune_core(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err);
/* tn_tune_core as op_tune's first trial (keep on the problem's own layers), which on mixed
 * clusters ends with the shift restart (tn_mixed_shift_kick); the layer views' searches do
 * not, so that the trials they seed run as before. */
int tn_tune_core_keep(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err);
/* op_tune's last trials on mixed clusters (on the problem's own layers): no baselines, seeds
 * or rounds, only the searches from the layouts that give the slow devices the kinds of layer
 * they are least slow at (tn_mixed_affinity), or with roomy set, the devices whose limit holds
 * two or more heavy layers those layers (tn_mixed_affinity_roomy); with pol_moves the search
 * starts from keep and also moves each stage's policy, else it keeps every stash.  OP_ENOMEM
 * where those layouts do not apply or nothing they led to fits. */
int tn_tune_core_affinity(const op_problem *pr, const op_tune_opts *o, int roomy, int pol_moves,
                          op_plan *out, op_err *err);
/* The same search with per-stage activation policies (keep, selective, full) as a searched
 * dimension: seeds start with pol0 on every stage and the local search moves policies stage by
 * stage (pol0 < 0: tn_tune_core).  seeds[0..nseeds) (plans of pr) seed the search too, each
 * with its layout and policies, or, where cuts[i] > 0, as the layer view of full recomputation
 * on layers [0, cuts[i]) that it came from (tune.c: seed_plan).  A seeded search refines:
 * its candidates also reserve memory for their devices' later stages and its local search
 * splits recomputing stages (tn_search.refine); unseeded searches run as they always did. */
int tn_tune_core_pol(const op_problem *pr, const op_tune_opts *o, int pol0,
                     const op_plan *const *seeds, const int *cuts, int nseeds, op_plan *out,
                     op_err *err);
/* tn_tune_core_pol with the refining level given (seeded searches only): 1 as there; 2 also
 * tries the seeds with per-stage quotas and lets the local search move between every memory
 * reserve mode (tn_cand.memres); 3 as 2, from the given seeds alone (no standard placements:
 * the whole budget goes to where the seeds lead).  Level | TN_REFINE_WFREE: the same, and where
 * an F waits for memory the engine runs the W that frees the most bytes per ms (tn_prob.wfree). */
#define TN_REFINE_WFREE 16
int tn_tune_core_refine(const op_problem *pr, const op_tune_opts *o, int pol0,
                        const op_plan *const *seeds, const int *cuts, int nseeds, int level,
                        op_plan *out, op_err *err);
/* tune_mem_polish.c: where memory binds, the plan's orders polished longer than
 * tn_polish_plan does, and (unless no_offload) offload tried on the first stage of each of the
 * busiest devices with the same polish; p, simulated and fitting, is replaced by the fastest
 * that still fits.  deadline (op_now_s() time, 0: none): stops there, as tn_mem_repair. */
void tn_mem_polish(op_plan *p, int no_offload, double deadline);
/* tune_mem_repair.c: where memory binds, each device's last fully recomputing stage tried back
 * at keep, the orders repaired by hill climbing until the plan fits, then polished; p,
 * simulated and fitting, is replaced by the fastest that fits, in rounds until none gains. */
void tn_mem_repair(op_plan *p, double deadline);
/* The unseeded policy search from keep everywhere (tn_tune_core_pol with pol0 keep) whose
 * heavy-layer seeds on mixed clusters also come with policies per device: full recomputation
 * on the fast devices' early stages, keep elsewhere (tune_mixed_heavy.c). */
int tn_tune_core_heavy_pol(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err);

#endif
