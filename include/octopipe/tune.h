/* tune.h: OctoPipe's tuner: co-optimizes partition x placement x schedule against the
 * simulator, bubble-guided and memory-aware (docs/tuner.md).
 *
 * Search space: number of stages (several per device, unequal counts allowed), contiguous
 * partitions, any stage -> device placement (sequential, looped, V, irregular), and per-device
 * schedules built by list scheduling under tunable knobs (in-flight cap per device = warm-up
 * depth, W deferral with a per-device pending-W limit, F tie-break, fused B or split I+W).
 *
 * Loop: seeds (balanced partitions x sequential/looped/V placements x schedule knobs) are
 * simulated; the best few are refined by a bubble-guided local search (device imbalance ->
 * move layers / split / merge stages; warm-up and cool-down idle dominate -> move stages
 * between devices; else refine schedule knobs), accepting only simulated improvements, with
 * seeded perturbations.  Every baseline of sched.h is simulated too and the tuner never returns
 * a plan slower than the best baseline that fits memory.
 *
 * Deterministic for a seed: the search is bounded by a number of simulations derived from the
 * problem size (max_evals), not by wall time, unless time_budget_s is set. */
#ifndef OCTOPIPE_TUNE_H
#define OCTOPIPE_TUNE_H
#include <signal.h>

#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum op_tune_placement {
    OP_TUNE_PLACE_ANY = 0, /* any stage -> device map, unequal stage counts allowed */
    OP_TUNE_PLACE_LOOP = 1, /* stage s on device s % P, S = v*P (torchtitan "loop") */
    OP_TUNE_PLACE_V = 2     /* V: S = 2P, device d holds stages d and 2P-1-d (torchtitan "v") */
} op_tune_placement;

/* Filled by op_tune when opts->stats is set. */
typedef struct op_tune_stats {
    long evals;              /* simulations run by the search */
    double seconds;          /* wall time of op_tune */
    double best_baseline_ms; /* fastest baseline that fits memory (0: none ran / fitted) */
    char best_baseline[32];
    char source[48];         /* where the returned plan came from: "search", "baseline:zbv" */
    int S;                   /* stages of the returned plan */
    char shape[32];          /* placement family of the returned plan: seq, loop, v, irregular */
    /* activation policies (tune_mem.c) */
    int mem_binds;           /* 0: memory does not bind the plan; 1: it binds, the plan is within
                              * 5% of the bound (no policy searched); 2: policies were searched */
    int n_recompute;         /* stages of the returned plan with a policy other than keep */
    char policies[64];       /* "keep", "selective on 5 of 16 stages", ... */
} op_tune_stats;

/* What the tuner may do with activations when memory binds (zero = auto everywhere). */
typedef enum op_tune_recompute {
    OP_TUNE_RC_AUTO = 0,      /* per stage: none where memory does not bind, the cheapest that fits */
    OP_TUNE_RC_NONE = 1,      /* keep every stash */
    OP_TUNE_RC_SELECTIVE = 2, /* selective on every stage */
    OP_TUNE_RC_FULL = 3       /* full on every stage */
} op_tune_recompute;

typedef struct op_tune_opts {
    op_tune_placement placement;
    double time_budget_s; /* > 0: also stop after this wall time, counted from started_s, all
                           * of op_tune's work included (results then depend on speed) */
    long max_evals;       /* simulations for the search; 0 = derived from the problem size;
                           * above 2^50 counts as 2^50 (LONG_MAX: stop by time_budget_s);
                           * negative is OP_EINVAL */
    uint64_t seed;
    int verbose;          /* 1: progress lines on stderr once a run is past one second */
    int no_baselines;     /* 1: skip the sched.h baselines (tests of the search alone) */
    /* Optional progress hook, called about once a second after the first second. */
    void (*progress)(void *ctx, const char *phase, double best_ms, double gap);
    void *progress_ctx;
    op_tune_stats *stats; /* optional out */
    /* Optional: set to nonzero (e.g. from a SIGINT handler) to stop the search; op_tune then
     * returns the best plan found so far as usual. */
    volatile sig_atomic_t *cancel;
    const char *label;    /* prefix of the verbose progress lines (default "octopipe plan") */
    op_tune_recompute recompute; /* default auto */
    int no_offload;       /* 1: never choose offload (--offload none) */
    /* When the run began (op_now_s), for its progress lines and time budget; 0: when the call
     * began.  op_tune sets it so that the searches it runs one after another (policies, layer
     * views, refinements) count from its own start, not each from theirs. */
    double started_s;
    /* 1..1000 (0 counts as 1): after the search at the derived budget, one more at this many
     * times it (max_evals 0), and the faster plan of the two (tune_canon.c): never slower
     * than 1, about effort + 1 times the time. */
    int effort;
} op_tune_opts;

void op_tune_opts_default(op_tune_opts *o);

/* Tunes pr into *out (initialised here; free with op_plan_free), named "octopipe", simulated,
 * pred filled (lower bound and gap included).  Returns OP_OK; OP_ENOMEM when no plan fits
 * pr->mem_limit_bytes (err names the smallest per-device limit that a plan found would need);
 * OP_ETIMEOUT when time_budget_s ran out before a plan that fits was found; OP_EINVAL for a
 * bad problem. */
int op_tune(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err);
/* What op_tune refuses as OP_EINVAL whatever the memory limit or time: a bad problem, fewer
 * layers than devices, --placement v with fewer than 2 layers per device, a placement or
 * recompute value outside its enum, a negative max_evals (o may be NULL).
 * OP_OK, or OP_EINVAL with err set.  op_tune checks it first; sweeps check it before any row. */
int op_tune_check(const op_problem *pr, const op_tune_opts *o, op_err *err);

/* A tighter lower bound than op_plan_lower_bound, valid for every plan: also, for each layer l
 * (a layer is never split, so all its ops share one device):
 *   sum_{k<l} F_k + M (F_l + I_l) + sum_{k<l} I_k     (first F(l) waits for the forward chain,
 *                                                      the last I(l) for the backward chain)
 *   sum_{k<l} F_k + M (F_l + I_l + W_l)
 * and, layers being indivisible, for every k: (k+1) M w_(kP+1), w_(j) the j-th heaviest layer
 * F+I+W (some device holds k+1 of the kP+1 heaviest layers), and the warm-up bound: the
 * device whose lowest layer is the i-th smallest cannot start before F_0 + ... + F_(i-1), so
 * P T >= M * work + the sum of those chains (op_lower_bound_warmup).
 * With a big head (Nemotron-H: head F+I ~ 9x a layer), few microbatches or few layers per
 * device this is well above work / P.  Communication and memory are ignored (they only raise
 * makespans). */
double op_tune_lower_bound(const op_problem *pr);

/* Parses "auto" | "none" | "selective" | "full". Returns 0, or -1 if unknown. */
int op_tune_recompute_parse(const char *s, op_tune_recompute *out);


/* When no plan fits: the smallest change that would, found by re-costing the model and tuning
 * briefly (tune_mem.c): the lowest tensor-parallel degree, the fewest extra devices, ZeRO-1 over
 * a data-parallel group of 2, and the memory limit the best plan needs.  Static memory
 * (weights, gradients, optimizer state) that alone exceeds the limit is named as such.  No
 * memory limit above d->mem_GiB is suggested (one limit for every device: on a mixed cluster
 * pass d with the smallest device's memory).  Writes one line per suggestion into buf, then
 * (not counted) one line "no plan fits with: ..." naming the changes searched without a
 * fit, where there were any and no time budget cut the searches.  Returns the number of
 * suggestions.  The four kinds of change are searched on threads of their own (tune_advise.c),
 * the lines put together in the order above: the same answer as one thread gives. */
int op_tune_advise(const op_model *m, const op_train_cfg *t, const op_device *d,
                   const op_problem *pr, char *buf, size_t n);
/* The same, calling pg->trying(ctx, what) before each of its searches ("--tp 2", "12
 * devices", "--mem-limit 21.59"): on large models they take seconds each, and a caller can
 * show which one runs.  The calls come from the searching threads, one at a time (a callback
 * need not be thread-safe), in order within a kind of change, the kinds interleaved.  pg may
 * be NULL. */
typedef struct {
    void (*trying)(void *ctx, const char *what); /* may be NULL */
    void *ctx;
    /* > 0 (op_now_s's clock): no search starts after it and each stops at it, so a caller's
     * time budget covers the advice too (a change whose search it cut is not suggested) */
    double deadline;
    /* the caller's choices each search keeps (placement, --recompute, --offload, seed; NULL:
     * the defaults): a change is suggested only if it fits the way the user will run it */
    const op_tune_opts *base;
} op_tune_advise_progress;
int op_tune_advise_with(const op_model *m, const op_train_cfg *t, const op_device *d,
                        const op_problem *pr, char *buf, size_t n, const op_tune_advise_progress *pg);

/* Parses "any" | "loop" | "v". Returns 0, or -1 if unknown. */
int op_tune_placement_parse(const char *s, op_tune_placement *out);

#ifdef __cplusplus
}
#endif
#endif
