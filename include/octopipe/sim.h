/* sim.h: the graph simulator.  Predicts per-op start/end, makespan, per-device busy and idle
 * (warm-up / cool-down / residual), bubble ratio, per-device peak memory and the gap to the
 * lower bound, for any plan.
 *
 * Semantics: data dependencies of plan.h; each device runs one compute op at a time
 * in its order; a cross-device dependency arrives op_comm_ms() after the producer ends and
 * transfers overlap compute fully (the executor progresses communication while computing);
 * memory per device = static bytes of its stages + activations: F allocates act_bytes at its
 * start; during I (or B) the peak additionally includes act_i_bytes; at I end the held amount
 * becomes act_w_bytes (which MAY be larger than act_bytes: I can leave more than F stored);
 * W frees act_w_bytes at its end; B frees everything at its end.  All sums over the stage.
 *
 * Activation policies (plan.h, stage_act): selective and full stash less at F and run their
 * recompute inside I (op_stage_ms includes it; the recomputed bytes are held from I's start).
 * offload: each device has one copy engine, FIFO, overlapping compute.  After F(s,m) ends, its
 * stash is copied to host (the device frees it when the copy ends); the reload of I|B(s,m) is
 * issued when an earlier op of the device's order starts: as early as the device's memory
 * allows (op_sim_reload_at), at the latest the op before it; the stash is held again from the
 * reload's start and I|B waits for the reload's end.  If the host
 * budget (comm.host_mem_bytes) cannot take a stash when its copy would start, that stash stays
 * on the device (no copy, no reload).  Copy times land in pred.copy_ms.
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

/* Where each reload of an offload stage is issued: for every op of every device, at
 * [base_d + i] (base_d = the ops of devices before d), the position in device d's order of the
 * op whose start issues the reload of I|B at position i; -1 for other ops and for an I|B first
 * in its order (issued at its own start).  The rule, from the order alone: device d's memory
 * per op of its order (static, stashes from F to I|B, offloaded ones only during their F and
 * from their reload, I|B transients, act_w to W) plus the stash must stay within the plan's
 * limit from the reload point to the I|B; reloads are placed in order of their I|B, each as
 * early as that allows (never at or before its own F), at the latest the op before it (also
 * without a limit).  The executor issues them at the same points.  NULL when no stage
 * offloads; the caller frees it. */
int *op_sim_reload_at(const op_plan *p);

/* Replays p's orders; writes start/end into p->ops and fills p->pred.  A deadlocking order
 * returns OP_EDEADLOCK with the cycle of ops in err->msg ("deadlock: B(s1,mb1)@dev1 waits for
 * F(s1,mb1)@dev1, which waits behind ... (a cycle over 1 device)").  ws may be NULL. */
int op_sim_replay(op_plan *p, op_sim_ws *ws, op_err *err);

/* Priority policy for dynamic list scheduling.  Among a device's ready ops, the one with the
 * smallest key wins (ties: smaller mb, then larger stage for I/B, smaller stage for F/W). */
struct op_sim_view;
typedef struct op_sim_policy {
    /* Built-in rule when prio == NULL:
     *  - backward (I/B) before F before W, except that a device runs F while it has fewer than
     *    warmup[d] stashes in flight (F done, its I/B not yet; one per stage and microbatch);
     *  - W ops are deferred: a W runs only if no F/I/B is ready, or if the number of pending W
     *    on the device reaches w_limit[d] (0 = no limit; 1 = each W right after its I);
     *  - in-flight activations are capped by mem_limit_bytes (0 = none): an F waits if the
     *    bytes held plus its stash plus what its own I|B adds on top (max(0, act_i, act_w -
     *    act) of its stage) would exceed it (it still runs if nothing else can, so progress
     *    is guaranteed). */
    const int *warmup;  /* [P] or NULL: defaults to the number of stages after the device's first */
    const int *w_limit; /* [P] or NULL */
    double mem_limit_bytes;
    const double *dev_mem_limit_bytes; /* [P] per-device caps (mixed clusters; 0 = none) or
                                        * NULL: mem_limit_bytes on every device */
    /* Custom rule: key of running op (kind, stage, mb) on device d now.  NULL = built-in.
     * A key of +INFINITY (or NaN) holds the op back for now (see "holds" below). */
    double (*prio)(void *ctx, int d, op_kind kind, int stage, int mb, double now);
    void *ctx;

    /* ---- extensions (zero-initialise the struct; every knob off by default) ---- */
    /* Hard cap on activations held per device: an F waits while the device holds
     * max_inflight[d] stashes (F done, its I/B not yet); 0 = no cap.  With warmup[d] = P-1-d
     * and max_inflight[d] = P-d this is exactly 1F1B (one F, one B in the steady state). */
    const int *max_inflight; /* [P] or NULL */
    /* Like prio, with the device's state in view (in-flight count, pending W, memory), so a
     * rule can depend on it.  Used when non-NULL (takes precedence over prio). */
    double (*prio_ex)(void *ctx, const struct op_sim_view *v, op_kind kind, int stage, int mb);
} op_sim_policy;

/* What a custom priority sees of device v->d at the moment it picks its next op. */
typedef struct op_sim_view {
    int d;
    double now;          /* ms */
    int inflight;        /* stashes held: F done, I/B not yet (ops, over all its stages) */
    int pending_w;       /* I done, W not yet */
    int n_done;          /* ops completed on this device so far */
    int64_t act_bytes;   /* activations held now */
    int64_t static_bytes;
} op_sim_view;

/* Dynamic-mode rules common to both priority kinds:
 *  - Ops of one (stage, kind) run in microbatch order (F(s,m) before F(s,m+1), ...): the
 *    candidates on a device are the next F, I|B and W of each of its stages, when their input
 *    has arrived.  This is what every executor and classic schedule does, and keeps a
 *    decision O(stages on the device).
 *  - Holds: caps (max_inflight, mem_limit_bytes) and infinite keys keep a ready op waiting;
 *    the device re-decides when an input arrives or one of its ops ends.  If the whole
 *    pipeline stalls on holds, the held op that comes first over all devices (by key, then
 *    tie order: oldest microbatch first) runs anyway, so list scheduling always finishes.
 *  - Events are taken in time order (ties: lower device first) and a device decides at its
 *    own event (its op ends, or an input arrives while it is idle).
 *  - The result is the per-device order; times and the prediction come from replaying it
 *    (ops start as soon as their device and inputs allow, as the executor runs them), so
 *    op_sim_replay of the output reproduces it exactly. */

/* Builds p's schedule (p->ops) by list scheduling under pol, then fills p->pred as
 * op_sim_replay would (replaying the result gives the same times).  Stages, placement and
 * stage_split must be set. */
int op_sim_dynamic(op_plan *p, const op_sim_policy *pol, op_sim_ws *ws, op_err *err);

/* Makespan only, no memory or idle accounting: the tuner's fast path. Returns < 0 on deadlock.
 * Does not run op_plan_validate (the caller built the plan); ops out of range return < 0. */
double op_sim_makespan(const op_plan *p, op_sim_ws *ws);
/* Same replay, but writes every op's start/end into p->ops (as op_sim_replay does) and fills
 * no prediction: for searches that re-time many orders of one validated plan and need the
 * full prediction only for the few they keep.  Returns < 0 on deadlock or a bad layout. */
double op_sim_retime(op_plan *p, op_sim_ws *ws);
/* op_sim_retime after device d's order changed at positions lo..hi only (the same ops,
 * reordered), while p->ops still holds every op's times under the order before the change
 * (from op_sim_retime or op_sim_replay): the ops that started before the moved ones keep
 * their times and only the rest is replayed.  The same times and result as op_sim_retime.
 * from[P] (or NULL) receives each device's first position whose times were rewritten
 * (0 everywhere when everything was); a search that undoes the change restores those. */
double op_sim_retime_from(op_plan *p, op_sim_ws *ws, int d, int lo, int hi, int *from);

/* Fills p->pred from the start/end times already in p->ops (memory walk, idle split, bubble
 * ratio, lower bound, tokens/s).  op_sim_replay and op_sim_dynamic call it. */
void op_sim_fill_pred(op_plan *p);  /* pred.valid = 0 for a layout or op out of range */
/* The p->pred.peak_bytes_max op_sim_fill_pred would give, alone (no idle split, no lower
 * bound): for searches that test memory on many orders.  A plan that offloads gets the full
 * op_sim_fill_pred (its peaks need the copy engines' times). */
int64_t op_sim_peak_max(op_plan *p); /* INT64_MAX for a layout or op out of range */
/* 1 when every device's predicted peak (p->pred.peak_bytes, from a simulation) is within its
 * own limit, op_plan_dev_mem_limit (0 = none): on a mixed cluster a small device can refuse a
 * plan that a larger one would hold. */
int op_plan_fits(const op_plan *p);

/* Iteration time under device speed variation.  Devices are not always as fast as their
 * profile: a shared or virtual machine's cores, a throttling GPU, a straggler node.  Sample k
 * of speed[n * P] makes every op on device d take speed[k * P + d] times its modelled compute
 * time (op overhead and communication unchanged); the plan is replayed once per sample and
 * makespans[k] receives the result.  Because the makespan is a max-plus function of the
 * durations, the mean (and median) over samples exceeds the makespan at the mean speed, more
 * so the more the devices' speeds vary independently.  Returns OP_OK, OP_EINVAL for a factor
 * that is not finite and > 0 or makes an op last beyond OP_MAX_MS, or the replay's error. */
int op_sim_speed_samples(const op_plan *p, const double *speed, int n, double *makespans,
                         op_err *err);

/* Idle split used in op_pred (the OctoPipe authors' definition): with Tb = the first I/B start
 * anywhere and Tf = the last F end anywhere, a device's idle time in [0, Tb) is warm-up, in
 * [max(Tb, Tf), makespan] cool-down, and the rest residual; the three sum to its idle time. */

#ifdef __cplusplus
}
#endif
#endif
