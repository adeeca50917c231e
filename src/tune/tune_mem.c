/* tune_mem.c: the tuner's activation policies.  tn_tune_mem (op_tune's work, tune_canon.c) = the
 * search of tune.c wrapped in the choice of what to do with activations when memory binds.
 *
 * Why this shape: recomputation trades time for memory per stage, and memory binds per device.
 * The search (tune.c) already trades warm-up depth for memory under the limit; a policy changes
 * what one stash costs.  So:
 *   1. search with keep (no recomputation).  Memory binds if nothing fits, or the plan's peak
 *      is at the limit while the plan is more than 2% above the memory-free lower bound; unless
 *      nothing fits or it is more than 5% above, that plan is the answer (today's figures,
 *      today's speed);
 *   2. where it binds, the joint search (tn_tune_core_pol): each stage's policy is one more
 *      searched dimension, from full everywhere and from keep everywhere; then
 *      search again on the layer view of selective recomputation on every
 *      stage (op_act_layers; the partition, placement and depth are chosen knowing the smaller
 *      stash), and, while nothing lighter fits or the best so far is still more than 5% above
 *      the memory-free bound, of full recomputation on the first quarter, the first half, and
 *      all of the layers (early stages hold the most microbatches in flight); last, the joint
 *      search once more, seeded with the best plan so far and with each layer view's plan split
 *      at its cut, with the memory reserve and partial-recompute moves (tn_search.refine)
 *      that only this seeded search uses, then once more with per-stage in-flight quotas
 *      (tn_cand.memres), and once more with quotas from the best plan alone (no standard
 *      seeds); then those three refining searches again as a chain of their own, from the plan
 *      the first started from, with the engine's byte-aware W (wfree_chain); and on mixed
 *      clusters where layers two of which fill a device bind, the joint search from keep with
 *      the heavy-layer seeds' policies per device (tune_mixed_heavy.c): the earlier trials run
 *      as before, so the result can only improve;
 *   3. relax per stage, with the simulator as judge: each stage in turn gets the cheaper
 *      policy (full -> selective -> keep, or offload to host) when the plan still fits and is
 *      no slower, so recomputation stays only on the stages whose device needs it;
 *   4. every classic schedule with its own best uniform recomputation (op_sched_build_fit) is
 *      the bar: the tuner never returns a plan slower than one of them that fits;
 *   5. where memory binds, the plan's orders are polished longer and offload is tried on the
 *      busiest devices' first stages (tn_mem_polish), step 3 runs once more, then each
 *      device's last fully recomputing stage tries keep with the orders repaired to fit
 *      (tn_mem_repair), and step 3 once more again;
 *   6. on two-type clusters where the plan keeps every stash, the affinity trial, then on
 *      mixed clusters whose devices hold unequal numbers of heavy layers the roomy trial
 *      (tune_mixed_affinity.c): each plan, polished, replaces the result where faster. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sched_mem.h"
#include "octopipe/sim.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"
#include "tune/tune_mixed_heavy.h"

#define GIB 1073741824.0

int op_tune_recompute_parse(const char *s, op_tune_recompute *out) {
    if (!s) return OP_EINVAL;
    if (!strcmp(s, "auto")) *out = OP_TUNE_RC_AUTO;
    else if (!strcmp(s, "none")) *out = OP_TUNE_RC_NONE;
    else if (!strcmp(s, "selective")) *out = OP_TUNE_RC_SELECTIVE;
    else if (!strcmp(s, "full")) *out = OP_TUNE_RC_FULL;
    else return -1;
    return 0;
}

/* Profiles without memory fields give zero bytes everywhere: no policy can mean anything. */
static int mem_modelled(const op_problem *pr) {
    for (int l = 0; l < pr->n_layers; l++)
        if (pr->layers[l].act_bytes > 0) return 1;
    return 0;
}

static int plan_fits(const op_problem *pr, const op_plan *p) {
    (void)pr;
    return op_plan_fits(p); /* each device against its own limit */
}

/* Memory binds a keep plan when its peak is at the limit and it is not already within 2% of
 * the memory-free bound (then no policy could gain more than that).  Policies are searched
 * only beyond 5%: below it a second search costs more tuner time than it has ever gained. */
static int binds(const op_problem *pr, const op_plan *p, double margin) {
    int at = 0; /* some device at its own limit (mixed clusters: limits differ) */
    for (int d = 0; d < p->P; d++)
        at |= (double)p->pred.peak_bytes[d] > 0.9 * op_problem_dev_mem_limit(pr, d);
    return at && p->pred.makespan_ms > (1 + margin) * op_plan_lower_bound_quick(p);
}

/* Searches on the layer view of policy pol on layers [0, cut) (keep after them), then gives the
 * plan its true layers and stage_act (pol on stages starting before cut); the simulator
 * re-times it and has the last word on its peak.  A prefix because early stages hold the most
 * microbatches in flight (P - d in a 1F1B-like steady state): they need memory first.
 * cut < 0: the joint search instead (-1; -2, -3, -4: seeded, refining at level 1, 2, 3; -5:
 * from keep with the heavy-layer seeds' policies per device, tn_tune_core_heavy_pol). */
static int tune_policy(const op_problem *pr, const op_tune_opts *o, int pol, int cut,
                       const op_plan *const *seeds, const int *cuts, int nseeds, op_plan *out,
                       op_tune_stats *st, op_err *err) {
    op_tune_opts oo = *o;
    oo.stats = st;
    if (cut == -5) return tn_tune_core_heavy_pol(pr, &oo, out, err);
    if (cut < 0) /* policies searched per stage; cut -2, -3, -4: refining level 1, 2, 3 */
        return tn_tune_core_refine(pr, &oo, pol, seeds, cuts, nseeds, cut < -1 ? -cut - 1 : 1,
                                   out, err);
    if (pol == OP_ACT_KEEP && cut >= pr->n_layers) return tn_tune_core_keep(pr, &oo, out, err);
    if (pol == OP_ACT_KEEP || cut <= 0) return tn_tune_core(pr, &oo, out, err);
    int L = pr->n_layers;
    if (cut > L) cut = L;
    op_layer_cost *lv = op_xmalloc(sizeof *lv * (size_t)L);
    op_act_layers(pr->layers, L, pol, lv);
    memcpy(lv + cut, pr->layers + cut, sizeof *lv * (size_t)(L - cut));
    op_problem q = *pr;
    q.layers = lv;
    op_layer_cost *tv = op_act_type_layers(pr, pol, cut); /* mixed: every type's view */
    if (tv) q.type_layers = tv;
    int rc = tn_tune_core(&q, &oo, out, err);
    free(lv);
    free(tv);
    if (rc != OP_OK) return rc;
    memcpy(out->layers, pr->layers, sizeof *lv * (size_t)L);
    op_plan_restore_types(out, pr);
    for (int s = 0; s < out->S; s++)
        out->stage_act[s] = (uint8_t)(out->stage_first[s] < cut ? pol : OP_ACT_KEEP);
    rc = op_sim_replay(out, NULL, err);
    if (rc != OP_OK) op_plan_free(out);
    return rc;
}

/* o with its statistics going to *tmp (zeroed): a trial of its own, whose statistics the caller
 * takes or merges. */
static op_tune_opts trial_opts(const op_tune_opts *o, op_tune_stats *tmp) {
    op_tune_opts oo = *o;
    memset(tmp, 0, sizeof *tmp);
    oo.stats = tmp;
    return oo;
}

static void relax(const op_problem *pr, op_plan *p, const op_tune_opts *o);

/* The refining trials -2, -3, -4 once more, from the plan -2 started from (`from`, with the
 * same layer-view seeds), with the engine's byte-aware W where an F waits for memory
 * (TN_REFINE_WFREE).  A chain of its own, not a rule of the first: the rule helps where
 * long-held W bound the drain (Jamba P=16 M=32: 1754.3 -> 1734.3 ms, M=64: 3237.6 -> 3225.6),
 * and in the first chain it slowed Mixtral P=16 M=32 and DeepSeek-V2-Lite P=4 M=8 by 1%.  *out
 * (the best so far) is replaced by anything faster that fits; st receives that trial's stats. */
static void wfree_chain(const op_problem *pr, const op_tune_opts *o, const op_plan *from,
                        const op_plan *const *seeds, const int *cuts, int nseeds,
                        const op_plan *skip, op_plan *out, op_tune_stats *st) {
    op_plan cur;
    op_plan_copy(&cur, from);
    const op_plan *s2[8];
    int c2[8], n = 0;
    for (int i = 0; i < nseeds && n < 7; i++) /* the views; the chain's own best replaces skip */
        if (seeds[i] != skip) s2[n] = seeds[i], c2[n++] = cuts[i];
    s2[n] = &cur;
    c2[n++] = 0;
    for (int level = 1; level <= 3 && !tn_stopped(o); level++) {
        op_tune_stats tmp;
        op_tune_opts oo = trial_opts(o, &tmp);
        op_plan p;
        op_err e = {0};
        const op_plan *alone = &cur;
        const int zero = 0;
        int rc = level == 3 ? tn_tune_core_refine(pr, &oo, OP_ACT_KEEP, &alone, &zero, 1,
                                                  level | TN_REFINE_WFREE, &p, &e)
                            : tn_tune_core_refine(pr, &oo, OP_ACT_KEEP, s2, c2, n,
                                                  level | TN_REFINE_WFREE, &p, &e);
        if (rc != OP_OK) continue;
        tmp.evals += st->evals;
        if (plan_fits(pr, &p)) relax(pr, &p, o);
        if (plan_fits(pr, &p) && p.pred.makespan_ms < cur.pred.makespan_ms) {
            op_plan_free(&cur);
            op_plan_copy(&cur, &p);
        }
        if (plan_fits(pr, &p) && p.pred.makespan_ms < out->pred.makespan_ms) {
            op_plan_free(out);
            op_plan_copy(out, &p);
            *st = tmp;
            st->mem_binds = 2;
        } else {
            st->evals = tmp.evals;
        }
        op_plan_free(&p);
    }
    op_plan_free(&cur);
}

/* Sets stage s to policy pol if the plan still fits and is no slower; else restores it. */
static int try_stage(const op_problem *pr, op_plan *p, int s, int pol) {
    int old = p->stage_act[s];
    double before = p->pred.makespan_ms;
    op_err e = {0};
    p->stage_act[s] = (uint8_t)pol;
    if (op_sim_replay(p, NULL, &e) == OP_OK && plan_fits(pr, p) &&
        p->pred.makespan_ms <= before * (1 + 1e-9))
        return 1;
    p->stage_act[s] = (uint8_t)old;
    OP_ASSERT(op_sim_replay(p, NULL, &e) == OP_OK, "re-simulating a plan that ran: %s", e.msg);
    return 0;
}

/* Step 3: cheaper policies stage by stage, the stage with the most recompute time first. */
static void relax(const op_problem *pr, op_plan *p, const op_tune_opts *o) {
    int S = p->S;
    int *ord = op_xmalloc(sizeof(int) * (size_t)S);
    double *redo = op_xmalloc(sizeof(double) * (size_t)S);
    for (int s = 0; s < S; s++) {
        ord[s] = s;
        redo[s] = 0;
        for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) redo[s] += p->layers[l].f_ms;
    }
    for (int i = 1; i < S; i++) /* insertion sort, most recompute first */
        for (int j = i; j > 0 && redo[ord[j]] > redo[ord[j - 1]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    for (int i = 0; i < S; i++)
        if (p->stage_act[ord[i]] == OP_ACT_FULL) try_stage(pr, p, ord[i], OP_ACT_SELECTIVE);
    for (int i = 0; i < S; i++)
        if (p->stage_act[ord[i]] != OP_ACT_KEEP) try_stage(pr, p, ord[i], OP_ACT_KEEP);
    if (!o->no_offload)
        for (int i = 0; i < S; i++)
            if (p->stage_act[ord[i]] != OP_ACT_KEEP) try_stage(pr, p, ord[i], OP_ACT_OFFLOAD);
    free(ord);
    free(redo);
}

/* Step 4: the classic schedules with their own best uniform recomputation. */
void tn_baseline_bar(const op_problem *pr, const op_tune_opts *o, op_plan *best, int *have,
                     op_tune_stats *st) {
    st->best_baseline_ms = 0; /* the bar is now each baseline with its recomputation */
    st->best_baseline[0] = 0;
    for (const char *const *n = op_sched_names(); *n && !tn_late(o); n++) {
        op_plan b;
        op_err e = {0};
        op_sched_info info = {0};
        if (op_sched_build_fit(*n, pr, NULL, &b, &info, &e) != OP_OK) continue;
        /* every baseline sets the bar the summary reports, but only one whose layout
         * --placement admits may become the plan (ZB-V's V under --placement loop was returned,
         * and then refused by the Megatron export the user had asked for loop to get) */
        int fits = plan_fits(pr, &b);
        int better = fits && (!*have || b.pred.makespan_ms < best->pred.makespan_ms * (1 - 1e-9)) &&
                     tn_shape_allowed(tn_shape_of(b.stage_dev, b.S, pr->P), o->placement);
        if (fits && (st->best_baseline_ms <= 0 || b.pred.makespan_ms < st->best_baseline_ms)) {
            const char *rc = strstr(info.settings, "recompute=");
            st->best_baseline_ms = b.pred.makespan_ms;
            snprintf(st->best_baseline, sizeof st->best_baseline, "%s%s%.12s", *n, rc ? "+" : "",
                     rc ? rc + 10 : "");
        }
        if (better) {
            if (*have) op_plan_free(best);
            op_plan_copy(best, &b);
            snprintf(best->name, sizeof best->name, "octopipe");
            snprintf(st->source, sizeof st->source, "baseline:%s", *n);
            st->S = b.S;
            snprintf(st->shape, sizeof st->shape, "%s", strstr(info.settings, "layout") ? "layout" : "baseline");
            *have = 1;
        }
        op_plan_free(&b);
    }
}

void tn_describe(const op_plan *p, op_tune_stats *st) {
    int cnt[OP_ACT_N] = {0};
    for (int s = 0; s < p->S; s++) cnt[p->stage_act[s] < OP_ACT_N ? p->stage_act[s] : 0]++;
    st->n_recompute = p->S - cnt[OP_ACT_KEEP];
    if (!st->n_recompute) {
        snprintf(st->policies, sizeof st->policies, "keep");
        return;
    }
    /* "full on 33 of 46 stages"; several policies share one "of S stages" ("selective on 1,
     * full on 33, offload on 2 of 46 stages"): each with its own took 79 characters, and the
     * 64 of op_tune_stats.policies cut the line mid-word ("... offload o") */
    size_t k = 0;
    for (int a = 1; a < OP_ACT_N; a++)
        if (cnt[a] && k < sizeof st->policies)
            k += (size_t)snprintf(st->policies + k, sizeof st->policies - k, "%s%s on %d",
                                  k ? ", " : "", op_act_policy_name(a), cnt[a]);
    if (k < sizeof st->policies)
        snprintf(st->policies + k, sizeof st->policies - k, " of %d stages", p->S);
}

/* Mixed clusters: the affinity trials (tn_tune_core_affinity), after everything else, each
 * plan polished as the plan returned was (tn_polish_plan) and taken only where then faster, so
 * that no case ends slower.  As a restart inside the first trial its plan became the one the
 * policy trials started from, and they ended slower (qwen2-vl-7b on 8 H100 + 8 A100 as two
 * nodes, M=32: 1266.4 -> 1293.6 ms); compared before the polish it replaced a plan that the
 * polish made faster than itself (1266.4 -> 1269.4).  tn_mem_polish, which the plan returned
 * gets where memory binds, took 2 s on nemotron-h-8b there, seven times the trial, for 0.1%.
 * roomy and pol_moves as tn_tune_core_affinity's. */
static void affinity_one(const op_problem *pr, const op_tune_opts *o, int roomy, int pol_moves,
                         op_plan *out, op_tune_stats *st) {
    op_tune_stats tmp;
    op_tune_opts oo = trial_opts(o, &tmp);
    op_plan p;
    op_err e = {0};
    if (tn_tune_core_affinity(pr, &oo, roomy, pol_moves, &p, &e) != OP_OK) return;
    st->evals += tmp.evals;
    if (!tn_stopped(o)) tn_polish_plan(&p);
    if (plan_fits(pr, &p) && p.pred.makespan_ms < out->pred.makespan_ms * (1 - 1e-9)) {
        op_plan_free(out);
        op_plan_copy(out, &p);
        snprintf(st->source, sizeof st->source, "search");
        st->S = tmp.S;
        snprintf(st->shape, sizeof st->shape, "%s", tmp.shape);
    }
    op_plan_free(&p);
}

static void affinity_trial(const op_problem *pr, const op_tune_opts *o, int pol_moves,
                           op_plan *out, op_tune_stats *st) {
    if (pr->n_types < 2 || o->placement != OP_TUNE_PLACE_ANY || tn_stopped(o)) return;
    /* the kinds' trial keeps every stash: where the plan recomputes, its layouts of one-layer
     * stages (each holding its microbatches in flight) did not fit, and nothing from them did
     * (Jamba on 8 H100 + 8 A100 as two nodes: 4024.1 ms against 2729.5; from full recompute
     * on every stage where keep does not fit, 3539.7) */
    int keep = 1;
    for (int s = 0; s < out->S; s++) keep &= out->stage_act[s] == OP_ACT_KEEP;
    if (keep && pr->n_types == 2) affinity_one(pr, o, 0, 0, out, st);
    /* the roomy layouts: a no-op unless some devices hold two heavy layers and others one;
     * with policy moves only where the policies are the tuner's to choose (--recompute auto,
     * memory modelled, a limit), keep-only under --recompute none, and not at all where every
     * stage must have the policy asked for (selective, full) */
    if (tn_stopped(o) || o->recompute == OP_TUNE_RC_SELECTIVE || o->recompute == OP_TUNE_RC_FULL)
        return;
    affinity_one(pr, o, 1, pol_moves, out, st);
}

static int tune_mem(const op_problem *pr, const op_tune_opts *oin, op_plan *out, op_err *err) {
    op_tune_opts o;
    if (oin) o = *oin;
    else op_tune_opts_default(&o);
    op_tune_stats st, tmp;
    memset(&st, 0, sizeof st);
    double t0 = op_now_s();
    if (o.started_s <= 0) o.started_s = t0; /* every search below counts from here */
    int modelled = mem_modelled(pr), lim = pr->mem_limit_bytes > 0;
    int first = o.recompute == OP_TUNE_RC_SELECTIVE ? OP_ACT_SELECTIVE
              : o.recompute == OP_TUNE_RC_FULL      ? OP_ACT_FULL
                                                    : OP_ACT_KEEP;
    if (!modelled) first = OP_ACT_KEEP;
    int rc = tune_policy(pr, &o, first, pr->n_layers, NULL, NULL, 0, out, &st, err);
    int have = rc == OP_OK && plan_fits(pr, out);
    if (rc == OP_OK && !have) op_plan_free(out);
    if (rc != OP_OK && rc != OP_ENOMEM) return rc;
    int auto_mode = o.recompute == OP_TUNE_RC_AUTO && modelled && lim;
    if (auto_mode && have && binds(pr, out, 0.02)) st.mem_binds = 1;
    if (auto_mode && (!have || binds(pr, out, 0.05))) {
        st.mem_binds = 2;
        op_layer_cost *lv = op_xmalloc(sizeof *lv * (size_t)pr->n_layers);
        /* trials: the joint search (per-stage policies as a searched dimension, from full
         * everywhere, then from keep everywhere); then the layer views: selective everywhere,
         * and, while the best is still far from the bound, full on the first eighth / quarter
         * / half of the layers, and full everywhere */
        int L = pr->n_layers;
        enum { NT = 11 };
        const int tpol[NT] = {OP_ACT_FULL, OP_ACT_KEEP, OP_ACT_SELECTIVE, OP_ACT_FULL,
                              OP_ACT_FULL, OP_ACT_FULL, OP_ACT_FULL,      OP_ACT_KEEP,
                              OP_ACT_KEEP, OP_ACT_KEEP, OP_ACT_KEEP};
        /* -1: the joint search; -2: the joint search again, seeded with the best plan so far
         * (its layout and policies), where its moves (partial recomputation inside a stage,
         * policy by policy) refine what a layer view found; -3: once more from the same seeds
         * (the best plan is now the refined one) with per-stage in-flight quotas that share
         * each device's memory among its stages by need (tn_cand.memres), a separate trial so
         * that the earlier ones run as before and the result can only improve; -4: the
         * quota search once more from the best plan alone (tn_tune_core_refine level 3: no
         * standard seed placements), so that its whole budget deepens that plan's basin: the
         * standard seeds score well early and take most of a round's budget, and the search
         * then ends where they lead (Jamba P=16 M=32: 1776.3 -> 1754.3 ms); -5: on mixed
         * clusters where layers two of which fill a device bind, the joint search from keep
         * once more with the heavy-layer seeds' policies per device (tune_mixed_heavy.c: full
         * on the fast devices' early stages), last so that the trials before run as they did
         * (Jamba on 8 H100 + 8 A100, M=32: 3061.3 -> 2801.3 ms) */
        const int tcut[NT] = {-1, -1, L, L / 8, L / 4, L / 2, L, -2, -3, -4, -5};
        enum { NV = 5 };
        op_plan views[NV];
        const op_plan *seeds[NV + 1];
        int cuts[NV + 1], nseeds = 0, have2 = 0;
        op_plan from2; /* the plan -2 started from, for wfree_chain */
        for (int k = 0; k < NT; k++) {
            int pol = tpol[k];
            /* full costs a whole forward per stage: worth a search only when nothing lighter
             * fits, or what fits is still far (> 5%) from the memory-free bound */
            if (k > 2 && have && out->pred.makespan_ms <= 1.05 * op_plan_lower_bound_quick(out)) break;
            if ((have && tn_cancelled(&o)) || tn_late(&o)) break;
            /* the refining searches need a plan to start from; on mixed clusters too (8 H100 +
             * 8 A100 as two nodes, Jamba M=32: 3195 -> 3061 ms) */
            if (tcut[k] < -1 && tcut[k] > -5 && !have) continue;
            if (tcut[k] == -5 && !tn_mixed_heavy_pol_applies(pr, o.placement)) continue;
            if (tcut[k] >= 0 && (!op_act_layers(pr->layers, tcut[k], pol, lv) || tcut[k] < 1)) continue;
            op_plan p;
            op_err e2 = {0};
            memset(&tmp, 0, sizeof tmp);
            long ev = st.evals;
            if (tcut[k] == -2) { /* the best plan so far, and each layer view's plan */
                seeds[nseeds] = out;
                cuts[nseeds++] = 0;
                op_plan_copy(&from2, out);
                have2 = 1;
            }
            /* -4 only on uniform clusters and free placement: from one layout, its partial
             * recomputation splits can leave devices with unequal stage counts, which
             * --placement loop|v excludes, and mixed clusters have their own restart */
            if (tcut[k] == -4 && (o.placement != OP_TUNE_PLACE_ANY || op_plan_is_mixed(out))) continue;
            const op_plan *alone = out; /* -4's one seed */
            const int zero = 0;
            int trc = tcut[k] == -4 ? tune_policy(pr, &o, pol, tcut[k], &alone, &zero, 1, &p, &tmp, &e2)
                                    : tune_policy(pr, &o, pol, tcut[k], seeds, cuts,
                                                  tcut[k] < -1 ? nseeds : 0, &p, &tmp, &e2);
            if (trc != OP_OK) continue;
            tmp.evals += ev;
            if (tcut[k] > 0 && pol == OP_ACT_FULL && nseeds < NV) { /* kept for the last search */
                op_plan_copy(&views[nseeds], &p);
                seeds[nseeds] = &views[nseeds];
                cuts[nseeds++] = tcut[k];
            }
            if (plan_fits(pr, &p)) relax(pr, &p, &o); /* before comparing: offload may replace it */
            if (plan_fits(pr, &p) && (!have || p.pred.makespan_ms < out->pred.makespan_ms)) {
                if (have) op_plan_free(out);
                op_plan_copy(out, &p);
                st = tmp;
                st.mem_binds = 2;
                have = 1;
            } else {
                st.evals = tmp.evals;
            }
            op_plan_free(&p);
        }
        /* as -4: uniform clusters and free placement, while still far from the bound */
        if (have2 && o.placement == OP_TUNE_PLACE_ANY && !op_plan_is_mixed(out) &&
            out->pred.makespan_ms > 1.05 * op_plan_lower_bound_quick(out))
            wfree_chain(pr, &o, &from2, seeds, cuts, nseeds, out, out, &st);
        if (have2) op_plan_free(&from2);
        free(lv);
        for (int i = 0; i < nseeds; i++)
            if (seeds[i] != out) op_plan_free(&views[i]);
        if (!o.no_baselines) tn_baseline_bar(pr, &o, out, &have, &st);
    }
    /* a forced policy (--recompute selective|full) stays on every stage, as the user's
     * framework will run it: relaxed where memory did not need it, `plan --recompute full`
     * wrote a plan of keep stages for a job that recomputes */
    if (!have && tn_late(&o)) return tn_err_late(pr, &o, err);
    if (!have) {
        char lim_text[96];
        op_problem_limit_text(pr, lim_text, sizeof lim_text);
        if (rc == OP_OK || !err->msg[0])
            return op_errf(err, OP_ENOMEM, "no plan fits %s%s", lim_text,
                           auto_mode ? ", even with recomputation" : "");
        if (auto_mode) {
            /* the keep search's message names its own smallest peak: a limit that fits
             * without recomputation; with it a lower one may (the advice computes that), so
             * say which, or the two read as a contradiction */
            char *w = strstr(err->msg, " would fit)");
            if (w) {
                char tail[sizeof err->msg];
                snprintf(tail, sizeof tail, "%s", w + strlen(" would fit)"));
                snprintf(w, sizeof err->msg - (size_t)(w - err->msg),
                         " would fit without recomputation)%s", tail);
            }
            size_t k = strlen(err->msg);
            snprintf(err->msg + k, sizeof err->msg - k, "; recomputation does not fit %s either", lim_text);
        }
        return OP_ENOMEM;
    }
    if (!tn_stopped(&o))
        tn_polish_plan(out); /* once, on the plan returned (tn_tune_core_pol says why not per trial) */
    if (st.mem_binds == 2 && !tn_stopped(&o)) { /* where memory binds: polished longer, offload tried, keep
                              * repaired in; a reordered plan may need less recomputation */
        tn_mem_polish(out, o.no_offload, tn_deadline(&o));
        relax(pr, out, &o);
        tn_mem_repair(out, tn_deadline(&o));
        relax(pr, out, &o);
    }
    affinity_trial(pr, &o, auto_mode, out, &st);
    snprintf(out->name, sizeof out->name, "octopipe");
    if (modelled) tn_describe(out, &st);
    else snprintf(st.policies, sizeof st.policies, "not modelled");
    st.seconds = op_now_s() - t0;
    if (o.stats) *o.stats = st;
    return OP_OK;
}

/* The searches below build the classic schedules of pr once (tune_blmemo.c). */
int tn_tune_mem(const op_problem *pr, const op_tune_opts *oin, op_plan *out, op_err *err) {
    tn_blmemo_begin(pr);
    int rc = tune_mem(pr, oin, out, err);
    tn_blmemo_end();
    return rc;
}
