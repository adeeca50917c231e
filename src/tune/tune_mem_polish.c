/* tune_mem_polish.c: where memory binds, the returned plan's orders polished longer, and
 * offload on the busiest devices' first stages tried with the same polish.
 *
 * Why: tn_polish_plan's budget (TN_POLISH_OPS) is the baselines', sized for plans where memory
 * does not bind; there the polish converges within it.  Under a memory limit the engine's list
 * schedules leave much more for the hill climbing to find (every move must keep the peak, so
 * progress is slow and steady): Mixtral 8x7B on 16 H100s, 32 microbatches, 72 GiB, moves on
 * to 1695.5 ms after 60,000 simulations where the standard budget stops at 1721.2.  And the
 * engine never schedules offload (relax only swaps it in on a fixed order, where its copies
 * rarely fit): the first stage of a device holds its stashes longest, and on the busiest device
 * (the embedding and head device of Mixtral) its copies to host free the memory that the
 * device otherwise idles for in its warm-up; the polish then reorders around the copies.
 * Deterministic: fixed budgets of simulated ops, candidates in a fixed order. */
#include <string.h>

#include "octopipe/cost.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"

/* Simulated ops per polish: ~25,000 simulations of a 16-device, 64-microbatch plan with two
 * stages per device (about a second on one core); small plans converge long before. */
#define TN_MEM_POLISH_OPS 1.5e8
/* per offload trial, from the polished plan: a tenth of a second to a second; an offload
 * simulation costs several plain ones (each move re-places the reloads) */
#define TN_MEM_OFFLOAD_OPS 3e7
#define TN_MEM_OFFLOAD_DEVS 2 /* busiest devices whose first stage tries offload */
#define TN_MEM_OFFLOAD_SLACK 0.002 /* of the makespan: an offload start polished */

/* p polished within `budget` simulated ops and until deadline; 0 (and p as it was) when no
 * move was kept or the result would not fit. */
static int polish_fit(op_plan *p, double budget, double deadline) {
    long ops = 0;
    for (int d = 0; d < p->P; d++) ops += p->n_ops[d];
    long sims = (long)(budget / (double)(ops > 0 ? ops : 1));
    if (sims < 1 || !op_plan_fits(p)) return 0;
    op_plan before;
    op_plan_copy(&before, p);
    /* the polish holds the largest peak, not each device's (mixed clusters: tn_polish_plan) */
    int ok = op_sched_polish_until(p, sims, deadline) > 0 && op_plan_fits(p);
    if (!ok) {
        op_plan_free(p);
        op_plan_copy(p, &before);
    }
    op_plan_free(&before);
    return ok;
}

void tn_mem_polish(op_plan *p, int no_offload, double deadline) {
    if (!p->pred.valid || !op_plan_fits(p)) return;
    op_plan best;
    op_plan_copy(&best, p);
    polish_fit(&best, TN_MEM_POLISH_OPS, deadline);
    /* devices by busy time, the busiest first (ties: the lower device) */
    int P = p->P;
    for (int k = 0; !no_offload && k < TN_MEM_OFFLOAD_DEVS && k < P && !op_past(deadline); k++) {
        int d = -1;
        for (int x = 0; x < P; x++) {
            int seen = 0; /* already among the k busiest */
            for (int y = 0; y < P; y++)
                if (y != x && (p->pred.busy_ms[y] > p->pred.busy_ms[x] ||
                               (p->pred.busy_ms[y] == p->pred.busy_ms[x] && y < x)))
                    seen++;
            if (seen == k) d = x;
        }
        if (d < 0 || p->n_ops[d] < 1) continue;
        int s = best.ops[d][0].stage; /* the stage whose stashes wait longest */
        if (best.stage_act[s] == OP_ACT_OFFLOAD) continue;
        op_plan t;
        op_plan_copy(&t, &best);
        t.stage_act[s] = OP_ACT_OFFLOAD;
        op_err e = {0};
        /* polished only when the copies already hide under compute (the order as it was is
         * no slower): the gains seen came from there (Mixtral, Jamba P=16), and a slower start
         * did not polish back (Jamba P=8 M=32: 1500.6 against 1402.3) */
        if (op_sim_replay(&t, NULL, &e) == OP_OK && op_plan_fits(&t) &&
            t.pred.makespan_ms <= best.pred.makespan_ms * (1 + TN_MEM_OFFLOAD_SLACK)) {
            polish_fit(&t, TN_MEM_OFFLOAD_OPS, deadline);
            if (op_plan_fits(&t) && t.pred.makespan_ms < best.pred.makespan_ms * (1 - 1e-9)) {
                op_plan_free(&best);
                op_plan_copy(&best, &t);
            }
        }
        op_plan_free(&t);
    }
    if (best.pred.makespan_ms < p->pred.makespan_ms * (1 - 1e-9)) {
        op_plan_free(p);
        op_plan_copy(p, &best);
    }
    op_plan_free(&best);
}
