/* sched_mem.c: classic schedules with Megatron's recomputation choice (sched_mem.h).
 *
 * A baseline is built on the layer view of a uniform policy (op_act_layers), so its own knobs
 * (i1f1b's v and G, ZB's memory caps) are chosen knowing the smaller stash; the result then
 * gets the true layers back with stage_act set, and the simulator has the last word on time
 * and peak memory. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/sched_mem.h"
#include "octopipe/sim.h"

/* The attention core's share of a layer: what selective recomputation drops and redoes. */
static void sel_part(const op_layer_cost *l, double *f_ms, int64_t *kept) {
    *f_ms = l->f_sel_ms;
    *kept = op_layer_sel_bytes(l);
}

int op_act_layers(const op_layer_cost *in, int n, int policy, op_layer_cost *out) {
    int saves = 0;
    for (int l = 0; l < n; l++) {
        op_layer_cost c = in[l];
        int64_t kept = c.act_bytes;
        double redo = 0;
        if (policy == OP_ACT_SELECTIVE) {
            sel_part(&in[l], &redo, &kept);
        } else if (policy == OP_ACT_FULL) {
            kept = l > 0 ? in[l - 1].out_bytes : in[l].out_bytes;
            redo = c.f_ms;
        }
        if (kept > c.act_bytes) kept = c.act_bytes; /* never worse than keep */
        if (kept < 0) kept = 0;
        if (kept < c.act_bytes) saves = 1;
        c.act_i_bytes += c.act_bytes - kept;
        c.act_bytes = kept;
        c.i_ms += redo;
        out[l] = c;
    }
    return saves;
}

/* Builds `name` on the policy's layer view, then puts the true layers and stage_act back and
 * re-simulates.  Returns the builder's / simulator's status. */
static int build_with(const char *name, const op_problem *pr, const op_sched_opts *opts,
                      int policy, op_plan *out, op_sched_info *info, op_err *err) {
    if (policy == OP_ACT_KEEP) return op_sched_build_opts(name, pr, opts, out, info, err);
    op_layer_cost *lv = op_xmalloc(sizeof *lv * (size_t)pr->n_layers);
    op_act_layers(pr->layers, pr->n_layers, policy, lv);
    op_problem q = *pr;
    q.layers = lv;
    op_layer_cost *tv = op_act_type_layers(pr, policy, pr->n_layers); /* mixed: every type */
    if (tv) q.type_layers = tv;
    int rc = op_sched_build_opts(name, &q, opts, out, info, err);
    free(lv);
    free(tv);
    if (rc != OP_OK) return rc;
    memcpy(out->layers, pr->layers, sizeof *lv * (size_t)pr->n_layers);
    op_plan_restore_types(out, pr);
    for (int s = 0; s < out->S; s++) out->stage_act[s] = (uint8_t)policy;
    rc = op_sim_replay(out, NULL, err);
    if (rc != OP_OK) op_plan_free(out);
    return rc;
}

int op_sched_build_fit(const char *name, const op_problem *pr, const op_sched_opts *opts,
                       op_plan *out, op_sched_info *info, op_err *err) {
    op_sched_info inf0 = {0}, bi = {0};
    int rc = build_with(name, pr, opts, OP_ACT_KEEP, out, &inf0, err);
    /* each device against its own limit; where static memory alone cannot fit
     * (op_problem_static_need), no recomputation does either, and building every variant took
     * most of a minute on DeepSeek-V3 at tp 1 on 32 devices */
    if (rc != OP_OK || op_plan_fits(out) || op_problem_static_need(pr, NULL) > 1) {
        if (info) *info = inf0;
        return rc;
    }
    /* keep does not fit: the fastest of selective and full that fits, else keep */
    op_layer_cost *lv = op_xmalloc(sizeof *lv * (size_t)pr->n_layers);
    int have = 0, best_pol = OP_ACT_KEEP;
    op_plan best;
    for (int pol = OP_ACT_SELECTIVE; pol <= OP_ACT_FULL; pol++) {
        if (!op_act_layers(pr->layers, pr->n_layers, pol, lv)) continue;
        op_plan p;
        op_sched_info pi = {0};
        op_err e2 = {0};
        if (build_with(name, pr, opts, pol, &p, &pi, &e2) != OP_OK) continue;
        if (op_plan_fits(&p) &&
            (!have || p.pred.makespan_ms < best.pred.makespan_ms)) {
            if (have) op_plan_free(&best);
            op_plan_copy(&best, &p);
            op_plan_free(&p);
            bi = pi;
            best_pol = pol;
            have = 1;
        } else {
            op_plan_free(&p);
        }
    }
    free(lv);
    if (have) {
        op_plan_free(out);
        op_plan_copy(out, &best);
        op_plan_free(&best);
        inf0 = bi;
        size_t n = strlen(inf0.settings);
        snprintf(inf0.settings + n, sizeof inf0.settings - n, " recompute=%s",
                 op_act_policy_name(best_pol));
    }
    if (info) *info = inf0;
    return OP_OK;
}
