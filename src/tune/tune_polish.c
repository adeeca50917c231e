/* tune_polish.c: the tuned plan's last step: its orders polished (tn_polish_plan), and on small
 * problems the schedule knobs judged after the polish (tn_polish_knobs).
 *
 * The search ranks candidates by the engine's list schedule; the plan it returns is then
 * polished (op_sched_polish), which can reorder a lot.  A knob setting the engine ranks a
 * little worse can polish to a better plan: on nemotron-h-8b-profile P=4 M=8 `--comm none`,
 * the best candidate's warm-up caps all lowered by one schedule 385.96 ms in the engine
 * against 379.78, and polish to 377.73 against 377.95.  So each knob neighbour of the best
 * candidate (a device's warm-up cap +-1, all caps +-1, the pending-W limit, F tie-break,
 * F-before-I, I tie-break, lookahead, fused or split backward) that the engine puts within
 * TN_KNOB_MARGIN of it is polished, and the first that beats the plan replaces it; repeated
 * from the new one.  Only where a simulation is a few hundred ops (tn_polish_knobs' caller),
 * where each polish is a few ms; deterministic (a fixed order of neighbours, no random
 * stream). */
#include <math.h>
#include <string.h>

#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "tune/tune_int.h"

#define TN_KNOB_MARGIN 0.03 /* of the engine's makespan of the current candidate */
#define TN_KNOB_POLISH 40   /* polished neighbours at most, over all steps */
#define TN_KNOB_SIMS 3000   /* simulations per polish */

/* Neighbour v of c written to t (a copy of c); 0 when v does not apply.  r: the engine's
 * result for c (its in-flight depth is where a cap of "none" starts from). */
static int knob_variant(const tn_prob *pb, const tn_cand *c, const tn_res *r, int v, tn_cand *t) {
    int P = pb->P;
    if (v < 2 * P) { /* device v / 2: cap -1, +1 */
        int d = v / 2, base = c->cap[d] > 0 ? c->cap[d] : r->max_inflight[d];
        int nv = base + (v % 2 ? 1 : -1);
        if (nv < 1 || nv == c->cap[d]) return 0;
        t->cap[d] = nv;
        return 1;
    }
    v -= 2 * P;
    if (v < 2 * P) { /* device v / 2: pending-W limit 0 (none) or 1 */
        int d = v / 2;
        if (!c->split || c->wlim[d] == v % 2) return 0;
        t->wlim[d] = v % 2;
        return 1;
    }
    v -= 2 * P;
    if (v < 2) { /* every cap -1, +1 */
        int changed = 0;
        for (int d = 0; d < P; d++) {
            int base = c->cap[d] > 0 ? c->cap[d] : r->max_inflight[d], nv = base + (v ? 1 : -1);
            if (nv >= 1 && nv != c->cap[d]) t->cap[d] = nv, changed = 1;
        }
        return changed;
    }
    v -= 2;
    if (v < 3) return c->fmode != v ? (t->fmode = v, 1) : 0;
    v -= 3;
    if (v < 4) return c->look != v ? (t->look = v, 1) : 0;
    v -= 4;
    if (v == 0) return t->ffirst = !c->ffirst, 1;
    if (v == 1) return t->imode = !c->imode, 1;
    if (v == 2) return t->split = !c->split, 1;
    return 0;
}

/* c as a polished plan in *out; its makespan, or INFINITY (out freed) when it fails or does
 * not fit. */
static double polished(tn_search *st, const tn_cand *c, op_plan *out) {
    op_err err = {0};
    tn_res r;
    tn_res_alloc(&r, st->pb->P);
    int rc = tn_cand_plan(st->e, st->pb, c, &r, "octopipe", out, &err);
    tn_res_free(&r);
    if (rc != OP_OK) return INFINITY;
    op_sched_polish(out, TN_KNOB_SIMS);
    if (!op_plan_fits(out)) {
        op_plan_free(out);
        return INFINITY;
    }
    return out->pred.makespan_ms;
}

void tn_polish_knobs(tn_search *st, const tn_cand *from, op_plan *best) {
    const tn_prob *pb = st->pb;
    int nvar = 4 * pb->P + 12, polishes = 0;
    tn_cand cur, t;
    tn_cand_alloc(&cur, pb);
    tn_cand_alloc(&t, pb);
    tn_res cr;
    tn_res_alloc(&cr, pb->P);
    tn_cand_copy(&cur, from, pb);
    for (int improved = 1; improved && polishes < TN_KNOB_POLISH;) {
        improved = 0;
        double sc = tn_score(st, &cur);
        if (sc >= TN_NOFIT) break;
        tn_res_copy(&cr, &st->r, pb->P);
        for (int v = 0; v < nvar && !improved && polishes < TN_KNOB_POLISH; v++) {
            tn_cand_copy(&t, &cur, pb);
            if (!knob_variant(pb, &cur, &cr, v, &t)) continue;
            double cut = sc * (1 + TN_KNOB_MARGIN);
            if (tn_score_cut(st, &t, cut) > cut) continue; /* the engine's bar, cheap */
            op_plan p;
            polishes++;
            double ms = polished(st, &t, &p);
            if (!isfinite(ms)) continue;
            if (ms < best->pred.makespan_ms * (1 - 1e-9)) {
                op_plan_free(best);
                *best = p;
                tn_cand_copy(&cur, &t, pb);
                improved = 1;
            } else {
                op_plan_free(&p);
            }
        }
    }
    tn_res_free(&cr);
    tn_cand_free(&cur);
    tn_cand_free(&t);
}

/* The engine's orders are list schedules (FIFO per stage and kind, non-delay but for
 * lookahead); the baselines' hill climbing on the simulated orders (op_sched_polish) finds
 * what they miss, within about TN_POLISH_OPS simulated ops (the baselines' budget: ~7,600
 * simulations at P=4, M=8, 11 stages; ~40 at P=64, M=256).  On nemotron-h-8b-profile P=4 M=8
 * `--comm none` it takes the tuned plan from 379.78 to 377.95 ms.  It only keeps moves that
 * lower the makespan without raising the peak, so the plan still fits (on mixed clusters, where
 * each device has its own limit, a polish that leaves one over it is undone). */
#define TN_POLISH_OPS 2e6
void tn_polish_plan(op_plan *p) {
    long ops = 0;
    for (int d = 0; d < p->P; d++) ops += p->n_ops[d];
    long sims = (long)(TN_POLISH_OPS / (double)(ops > 0 ? ops : 1));
    if (sims < 1) return;
    /* the polish holds the largest peak, not each device's: where devices have their own
     * limits a device under a lower one could end over it, and then the plan as it was stays */
    op_plan before;
    op_plan_copy(&before, p);
    if (op_sched_polish(p, sims) > 0 && !op_plan_fits(p) && op_plan_fits(&before)) {
        op_plan_free(p);
        op_plan_copy(p, &before);
    }
    op_plan_free(&before);
}
