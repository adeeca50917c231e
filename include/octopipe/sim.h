/* sim.h: the graph simulator.  Predicts per-op start/end, makespan, per-device busy and idle
 * (warm-up / cool-down / residual), bubble ratio, per-device peak memory and the gap to the
 * lower bound, for any plan.
 *
 * Semantics (DESIGN.md): data dependencies of plan.h; each device runs one compute op at a time
 * in its order; a cross-device dependency arrives op_comm_ms() after the producer ends and
 * transfers overlap compute fully (the executor progresses communication while computing);
 * memory per device = static bytes of its stages + activations (allocated at F start, act_bytes
 * - act_w_bytes freed at I end, the rest at W end; B frees all at its end).
 *
 * Two modes:
 *  - replay: runs the plan's given per-device orders (op_sim_replay);
 *  - dynamic list scheduling: builds the orders: whenever a device is free it starts the ready
 *    op of highest priority under a policy (op_sim_dynamic). */
#ifndef OCTOPIPE_SIM_H
#define OCTOPIPE_SIM_H
#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reusable scratch space so repeated simulations (the tuner) do not allocate. */
typedef struct op_sim_ws op_sim_ws;
op_sim_ws *op_sim_ws_new(void);
void op_sim_ws_free(op_sim_ws *ws);

/* Replays p's orders; writes start/end into p->ops and fills p->pred.  A deadlocking order
 * returns OP_EDEADLOCK with the cycle of ops in err->msg ("F(s1,mb0)@d1 waits for ...").
 * ws may be NULL. */
int op_sim_replay(op_plan *p, op_sim_ws *ws, op_err *err);

/* Priority policy for dynamic list scheduling.  Among a device's ready ops, the one with the
 * smallest key wins (ties: smaller mb, then larger stage for I/B, smaller stage for F/W). */
typedef struct op_sim_policy {
    /* Built-in rule when prio == NULL:
     *  - backward (I/B) before F before W, except that a device runs F while it has fewer than
     *    warmup[d] microbatches in flight (F done, I not yet) on it;
     *  - W ops are deferred: a W runs only if no F/I/B is ready, or if the number of pending W
     *    on the device reaches w_limit[d] (0 = no limit);
     *  - in-flight activations are capped by mem_limit_bytes (0 = none): an F that would exceed
     *    it waits (it still runs if nothing else can, so progress is guaranteed). */
    const int *warmup;  /* [P] or NULL: defaults to the number of stages after the device's first */
    const int *w_limit; /* [P] or NULL */
    double mem_limit_bytes;
    /* Custom rule: key of running op (kind, stage, mb) on device d now.  NULL = built-in. */
    double (*prio)(void *ctx, int d, op_kind kind, int stage, int mb, double now);
    void *ctx;
} op_sim_policy;

/* Builds p's schedule (p->ops) by list scheduling under pol, then fills p->pred as
 * op_sim_replay would (replaying the result gives the same times).  Stages, placement and
 * stage_split must be set. */
int op_sim_dynamic(op_plan *p, const op_sim_policy *pol, op_sim_ws *ws, op_err *err);

/* Makespan only, no memory or idle accounting: the tuner's fast path. Returns < 0 on deadlock. */
double op_sim_makespan(const op_plan *p, op_sim_ws *ws);

#ifdef __cplusplus
}
#endif
#endif
