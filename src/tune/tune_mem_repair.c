/* tune_mem_repair.c: where memory binds, a fully recomputing stage back to keep, its device
 * orders repaired until the plan fits again (tn_mem_repair).
 *
 * Why: relax (tune_mem.c) tries keep on the plan's orders as they are; a kept stash is then
 * held from F to I, and the orders, built around full recomputation, put several F of that
 * stage before its first I: over the limit.  A few moves of single ops usually bring such a
 * plan back within it (an F later, an I earlier), and the stage then saves its whole forward
 * per microbatch.  The stage tried on each device is its last recomputing one (the highest
 * stage index: the round trip from its F to its I is the shortest, so its stash is held the
 * least).  DeepSeek-V2-Lite on 4 H100s, 8 microbatches, 72 GiB: stage 25 (device 3) back to
 * keep, 475.1 -> 466.4 ms.
 *
 * The repair is a hill climbing like op_sched_polish's (one op moved up to 8 places, the
 * nearest first) on a score that puts memory first: the bytes over each device's limit, then
 * the makespan.  Deterministic (fixed budgets of simulated ops, fixed order of moves). */
#include <stdlib.h>
#include <string.h>

#include "octopipe/cost.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"

/* simulated ops per try (repair and polish each): ~20,000 simulations of DeepSeek-V2-Lite
 * P=4 M=8 (464 ops, a third of a second) */
#define TN_REPAIR_OPS 1e7

/* Bytes over the limits summed over devices (how far from fitting), and the makespan. */
static int score(op_plan *p, op_sim_ws *ws, double *over, double *ms) {
    op_err e = {0};
    if (op_sim_replay(p, ws, &e) != OP_OK) return 0;
    *over = 0;
    for (int d = 0; d < p->P; d++) {
        double lim = op_plan_dev_mem_limit(p, d), x = (double)p->pred.peak_bytes[d] - lim;
        if (lim > 0 && x > 0) *over += x;
    }
    *ms = p->pred.makespan_ms;
    return 1;
}

/* Hill climbing on (over, makespan), lexicographic, within max_sims simulations and until
 * deadline (op_now_s() time, 0: none).  Moves that
 * pass an op of the same stage and microbatch, or of the same stage and kind, are not tried
 * (op_sched_polish's rule: they would deadlock or reorder one stage's microbatches). */
static void climb(op_plan *p, long max_sims, double deadline, op_sim_ws *ws) {
    double over, ms;
    if (!score(p, ws, &over, &ms)) return;
    static const int ks[] = {1, -1, 2, -2, 3, -3, 4, -4, 6, -6, 8, -8};
    long sims = 0;
    for (int improved = 1; improved && sims < max_sims;) {
        improved = 0;
        for (int kk = 0; kk < (int)(sizeof ks / sizeof *ks) && sims < max_sims; kk++)
            for (int d = 0; d < p->P && sims < max_sims; d++)
                for (int i = 0; i < p->n_ops[d] && sims < max_sims; i++) {
                    int j = i + ks[kk];
                    if (j < 0 || j >= p->n_ops[d]) continue;
                    op_op *o = p->ops[d];
                    if (!op_sched_move(o, p->n_ops[d], i, j)) continue;
                    sims++;
                    double ov2, ms2;
                    int ok = score(p, ws, &ov2, &ms2) &&
                             (ov2 < over || (ov2 <= over && ms2 < ms * (1 - 1e-12)));
                    if (ok) {
                        over = ov2, ms = ms2;
                        improved = 1;
                    } else { /* undo */
                        op_sched_unmove(o, i, j);
                    }
                    if (op_past(deadline)) max_sims = sims; /* out of time: ends every loop */
                }
    }
    op_err e = {0};
    int rc = op_sim_replay(p, ws, &e);
    OP_ASSERT(rc == OP_OK, "a repaired order does not simulate: %s", e.msg);
}

/* Stage s is its device's last stage (by index) whose policy is full. */
static int last_full(const op_plan *p, int s) {
    if (p->stage_act[s] != OP_ACT_FULL) return 0;
    for (int t = s + 1; t < p->S; t++)
        if (p->stage_dev[t] == p->stage_dev[s] && p->stage_act[t] == OP_ACT_FULL) return 0;
    return 1;
}

void tn_mem_repair(op_plan *p, double deadline) {
    if (!p->pred.valid || !op_plan_fits(p)) return;
    long ops = 0;
    for (int d = 0; d < p->P; d++) ops += p->n_ops[d];
    long sims = (long)(TN_REPAIR_OPS / (double)(ops > 0 ? ops : 1));
    if (sims < 1) return;
    op_sim_ws *ws = op_sim_ws_new();
    int *failed = op_xmalloc(sizeof(int) * (size_t)p->S), ver = 1;
    for (int s = 0; s < p->S; s++) failed[s] = 0;
    /* rounds until one keeps nothing; a stage that failed is tried again only after the plan
     * changed (the same try on the same plan fails the same way) */
    for (int kept = 1; kept && !op_past(deadline);) {
        kept = 0;
        for (int s = p->S - 1; s >= 0 && !op_past(deadline); s--) {
            if (!last_full(p, s) || failed[s] == ver) continue;
            op_plan q;
            op_plan_copy(&q, p);
            q.stage_act[s] = OP_ACT_KEEP;
            climb(&q, sims, deadline, ws);
            if (op_plan_fits(&q)) op_sched_polish_until(&q, sims, deadline);
            if (op_plan_fits(&q) && q.pred.makespan_ms < p->pred.makespan_ms * (1 - 1e-9)) {
                op_plan_free(p);
                *p = q;
                kept = 1;
                ver++;
            } else {
                failed[s] = ver;
                op_plan_free(&q);
            }
        }
    }
    free(failed);
    op_sim_ws_free(ws);
}
