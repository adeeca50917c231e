/* tune.c: op_tune, the tuner's top level: baselines, seeds, local search, plan output.
 *
 * Order of work: (1) build every baseline of sched.h (they set the bar and seed the search
 * with their partitions and placements); (2) simulate seeds = balanced partitions x {seq,
 * looped, V} placements with v = 1..8 stages per device x schedule knobs; (3) refine the best
 * few distinct seeds with the bubble-guided local search (tune_search.c), then the overall
 * best with what is left of the budget; (4) build the plan, re-simulate it with the simulator
 * (op_sim_replay), and return the best baseline instead if that is faster and fits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"
#include "tune/tune_mixed_heavy.h"

/* Search restarts (tn_tune_core): one per TN_ROUND_EVALS simulations of budget, at most
 * TN_ROUNDS (a round with fewer simulations than that stops short of a local optimum). */
#define TN_ROUNDS 4
#define TN_ROUND_EVALS 15000
#define TN_FIRST_SHARE 0.7 /* of the budget, for the first of several rounds */

#ifndef TN_EVAL_UNITS
#define TN_EVAL_UNITS 5e6
#endif

void op_tune_opts_default(op_tune_opts *o) {
    memset(o, 0, sizeof *o);
    o->placement = OP_TUNE_PLACE_ANY;
    o->seed = 1;
}

int op_tune_placement_parse(const char *s, op_tune_placement *out) {
    if (!strcmp(s, "any")) *out = OP_TUNE_PLACE_ANY;
    else if (!strcmp(s, "loop")) *out = OP_TUNE_PLACE_LOOP;
    else if (!strcmp(s, "v")) *out = OP_TUNE_PLACE_V;
    else return -1;
    return 0;
}

/* Kept for callers of the tuner API; the bound itself lives with the plan type. */
double op_tune_lower_bound(const op_problem *pr) {
    return op_problem_lower_bound(pr); /* over each device's own speed on mixed clusters */
}

int tn_out_of_budget(const tn_search *st) {
    return st->evals >= st->max_evals || tn_stopped(st->o);
}

int tn_err_late(const op_problem *pr, const op_tune_opts *o, op_err *err) {
    char lim[96];
    op_problem_limit_text(pr, lim, sizeof lim);
    return op_errf(err, OP_ETIMEOUT,
                   "no plan that fits %s was found within the %g s time budget (a longer "
                   "--time-budget, or none, may find one)", lim, o->time_budget_s);
}

static void progress(tn_search *st) {
    if (tn_run_tick(st->phase, st->evals, st->max_evals)) return; /* within op_tune: the run's line */
    double now = op_now_s();
    if (now - st->run0 < 1.0 || now - st->last_progress < 1.0) return;
    st->last_progress = now;
    double best = st->best_score < TN_NOFIT ? st->best_score : 0;
    double gap = best > 0 ? best / st->pb->lb - 1 : 0;
    if (st->o->progress) st->o->progress(st->o->progress_ctx, st->phase, best, gap);
    if (st->o->verbose) { /* time left: the simulation budget at the rate so far (an upper
                            * bound: the search may stop early), or the wall-time budget */
        double left = st->evals > 0 ? (now - st->t0) * (st->max_evals - st->evals) / st->evals : 0;
        if (st->deadline > 0 && st->deadline - now < left) left = st->deadline - now;
        char at[64] = "no plan fits yet";
        if (best > 0) snprintf(at, sizeof at, "best %.3f ms  gap %.2f%%", best, 100 * gap);
        fprintf(stderr, "%s: %-9s %s  (%ld/%ld sims, %.1f s, <= %.0f s left)\n",
                st->o->label ? st->o->label : "octopipe plan", st->phase, at, st->evals,
                st->max_evals, now - st->run0, left > 0 ? left : 0);
    }
}

double tn_score(tn_search *st, const tn_cand *c) { return tn_score_cut(st, c, 0); }

double tn_score_cut(tn_search *st, const tn_cand *c, double cutoff) {
    double mk = tn_eval(st->e, st->pb, c, &st->r, NULL, NULL, cutoff < TN_NOFIT ? cutoff : 0);
    st->sims++;
    tn_run_sim();
    /* a simulation costs its op count: S stages over s_ref count S / s_ref times, so plans
     * with many stages do not stretch the tune time the budget was sized for */
    st->evals += c->S > st->s_ref ? (c->S + st->s_ref - 1) / st->s_ref : 1;
    if (mk == -2) return 1e300;
    OP_ASSERT(mk > 0, "tune engine deadlocked (S=%d)", c->S);
    if (st->r.peak_max < st->min_peak) st->min_peak = st->r.peak_max;
    double sc = st->r.fits ? mk : TN_NOFIT + (double)st->r.peak_max;
    if (sc < st->best_score * (1 - 1e-12)) {
        st->best_score = sc;
        tn_cand_copy(&st->best, c, st->pb);
        if (st->r.fits) tn_run_fit(mk);
    }
    if ((st->sims & 63) == 0 && (st->o->verbose || st->o->progress)) progress(st);
    return sc;
}

/* Natural warm-up depth: each local stage s holds about (S - s) / v microbatches in flight in
 * a steady 1F1B-like state (P - d for the sequential pipeline). */
static void cap_natural(const tn_prob *pb, tn_cand *c, double scale) {
    double v = (double)c->S / pb->P, *acc = op_xcalloc((size_t)pb->P, sizeof(double));
    for (int s = 0; s < c->S; s++) acc[c->dev[s]] += (c->S - s) / v;
    for (int d = 0; d < pb->P; d++) c->cap[d] = acc[d] > 0 ? (int)ceil(acc[d] * scale) : 0;
    free(acc);
}

/* The seed pool: the best candidates per distinct (S, shape), kept sorted by score. */
#define TN_POOL 6
typedef struct tn_pool {
    tn_cand c[TN_POOL];
    double score[TN_POOL];
    char shape[TN_POOL][16];
    int n;
} tn_pool;

static void pool_offer(tn_pool *pl, const tn_prob *pb, const tn_cand *c, double sc,
                       const char *shape) {
    int i;
    for (i = 0; i < pl->n; i++)
        if (pl->c[i].S == c->S && !strcmp(pl->shape[i], shape)) break;
    if (i < pl->n) { /* same family: keep the better */
        if (sc >= pl->score[i]) return;
    } else if (pl->n < TN_POOL) {
        i = pl->n++;
    } else {
        i = TN_POOL - 1;
        if (sc >= pl->score[i]) return;
    }
    tn_cand_copy(&pl->c[i], c, pb);
    pl->score[i] = sc;
    snprintf(pl->shape[i], sizeof pl->shape[i], "%s", shape);
    for (; i > 0 && pl->score[i] < pl->score[i - 1]; i--) { /* bubble up */
        tn_cand t = pl->c[i];
        pl->c[i] = pl->c[i - 1];
        pl->c[i - 1] = t;
        double ts = pl->score[i];
        pl->score[i] = pl->score[i - 1];
        pl->score[i - 1] = ts;
        char tsh[16];
        memcpy(tsh, pl->shape[i], 16);
        memcpy(pl->shape[i], pl->shape[i - 1], 16);
        memcpy(pl->shape[i - 1], tsh, 16);
    }
}

/* Schedule-knob variants of one (partition, placement): split x warm-up cap; the best is
 * then re-partitioned a few rounds by idle (so layouts are ranked on a fair partition) and
 * offered to the pool. */
static void seed_knobs(tn_search *st, tn_pool *pl, tn_cand *c, const char *shape) {
    const tn_prob *pb = st->pb;
    tn_cand best;
    tn_cand_alloc(&best, pb);
    double bsc = 1e300;
    if (tn_late(st->o)) { /* out of time: no more seeds */
        tn_cand_free(&best);
        return;
    }
    /* a plan given as seed, and the "policies" seeds (tune_mixed_heavy.c), come with their own */
    if (strcmp(shape, "plan") && strcmp(shape, "policies"))
        for (int s = 0; s < c->S; s++) c->pol[s] = (uint8_t)(st->pol0 > 0 ? st->pol0 : OP_ACT_KEEP);
    for (int split = 1; split >= 0; split--)
        for (int cm = 0; cm < (st->refine > 1 ? 6 : 3); cm++) { /* refine 2: also with quotas */
            c->split = split;
            c->look = split ? 1 : 0;
            c->fmode = 0;
            c->ffirst = 0;
            c->imode = 0;
            c->memres = cm >= 3 ? TN_MEMRES_QUOTA : st->refine ? TN_MEMRES_ONE : 0;
            memset(c->wlim, 0, sizeof(int) * (size_t)pb->P);
            if (cm % 3 == 0) memset(c->cap, 0, sizeof(int) * (size_t)pb->P);
            else cap_natural(pb, c, cm % 3 == 1 ? 1.0 : 2.0);
            double sc = tn_score(st, c);
            if (getenv("OCTOPIPE_TUNE_DEBUG"))
                fprintf(stderr, "seed %-9s S=%-3d split=%d cap=%d: %.3f\n", shape, c->S, split, cm, sc);
            if (sc < bsc) bsc = sc, tn_cand_copy(&best, c, pb);
        }
    if (bsc < TN_NOFIT && !tn_late(st->o)) tn_rebalance(st, &best, &bsc, 4);
    if (getenv("OCTOPIPE_TUNE_DEBUG"))
        fprintf(stderr, "seed %-9s S=%-3d rebalanced: %.3f\n", shape, best.S, bsc);
    pool_offer(pl, pb, &best, bsc, shape);
    tn_cand_free(&best);
}

static void seed_offer(tn_search *st, void *pl, tn_cand *c, const char *shape) {
    seed_knobs(st, pl, c, shape);
}

static void seed_all(tn_search *st, tn_pool *pl) {
    const tn_prob *pb = st->pb;
    int P = pb->P, L = pb->L;
    tn_cand c;
    tn_cand_alloc(&c, pb);
    int vmax = L / P < 8 ? L / P : 8;
    for (int v = 1; v <= vmax; v++) {
        int S = v * P;
        if (st->mode != OP_TUNE_PLACE_V) {
            tn_place_loop(&c, P, S);
            tn_partition_balanced(pb, &c, 0);
            seed_knobs(st, pl, &c, v == 1 ? "seq" : "loop");
        }
        /* torchtitan's V style takes exactly 2 stages per rank */
        if (v >= 2 && st->mode != OP_TUNE_PLACE_LOOP && (st->mode == OP_TUNE_PLACE_ANY || v == 2)) {
            tn_place_v(&c, P, S);
            static const double FRONT[] = {0, 0.2, 0.4};
            for (int f = 0; f < (st->mode == OP_TUNE_PLACE_ANY && v <= 4 ? 3 : 1); f++) {
                tn_partition_balanced(pb, &c, FRONT[f]); /* 0, then light first stages */
                seed_knobs(st, pl, &c, "v");
            }
        }
    }
    tn_cand_free(&c);
}

/* Baselines: the best that fits sets the bar; each seeds the pool with its layout.  Built here
 * once per problem that tn_tune_mem searches several times (tune_blmemo.c), then reused. */
static void run_baselines(tn_search *st, tn_pool *pl, const op_problem *pr, op_plan *best_bl,
                          int *have_bl, char *best_name, size_t name_sz, int64_t *min_peak) {
    *have_bl = 0;
    if (st->o->no_baselines) return;
    tn_blmemo *memo = tn_blmemo_for(pr);
    const int reuse = tn_blmemo_complete(memo);
    tn_cand c;
    tn_cand_alloc(&c, st->pb);
    const char *const *n = op_sched_names();
    for (; *n && !(*have_bl && tn_cancelled(st->o)) && !tn_late(st->o); n++) {
        const int i = (int)(n - op_sched_names());
        op_plan bp;
        const op_plan *b = reuse ? tn_blmemo_plan(memo, i) : NULL;
        if (!reuse) {
            op_err e = {0};
            if (op_sched_build(*n, pr, &bp, &e) == OP_OK) b = &bp;
        }
        if (!b) continue;
        if (b->pred.peak_bytes_max < *min_peak) *min_peak = b->pred.peak_bytes_max;
        int fits = op_plan_fits(b);
        c.S = b->S;
        memcpy(c.first, b->stage_first, sizeof(int) * (size_t)(b->S + 1));
        memcpy(c.dev, b->stage_dev, sizeof(int) * (size_t)b->S);
        const char *shape = tn_shape(&c, st->pb->P);
        if (tn_shape_allowed(shape, st->mode)) {
            /* V-Half / V-Min share ZB-V's layouts; their memory caps say nothing new */
            if (strcmp(*n, "vhalf") && strcmp(*n, "vmin")) seed_knobs(st, pl, &c, shape);
            if (fits && (!*have_bl || b->pred.makespan_ms < best_bl->pred.makespan_ms)) {
                if (*have_bl) op_plan_free(best_bl);
                op_plan_copy(best_bl, b);
                snprintf(best_name, name_sz, "%s", *n);
                *have_bl = 1;
            }
        }
        if (reuse) continue;
        if (memo) tn_blmemo_put(memo, i, &bp);
        else op_plan_free(&bp);
    }
    if (memo && !reuse) tn_blmemo_done(memo, !*n); /* a stopped loop leaves some untried */
    tn_cand_free(&c);
}

int tn_cand_plan(tn_eng *e, const tn_prob *pb, const tn_cand *c, tn_res *r, const char *name,
                 op_plan *out, op_err *err) {
    int P = pb->P;
    op_plan_init_problem(out, name, pb->pr, c->S);
    memcpy(out->stage_first, c->first, sizeof(int) * (size_t)(c->S + 1));
    memcpy(out->stage_dev, c->dev, sizeof(int) * (size_t)c->S);
    for (int s = 0; s < c->S; s++) out->stage_split[s] = (uint8_t)c->split;
    for (int s = 0; s < c->S; s++) out->stage_act[s] = c->pol[s];
    size_t per = (size_t)c->S * (size_t)pb->M * 3;
    op_op *buf = op_xmalloc(sizeof(op_op) * per * (size_t)P);
    op_op **ops = op_xmalloc(sizeof(op_op *) * (size_t)P);
    int *n = op_xcalloc((size_t)P, sizeof(int));
    for (int d = 0; d < P; d++) ops[d] = buf + per * (size_t)d;
    tn_eval(e, pb, c, r, ops, n, 0);
    for (int d = 0; d < P; d++) op_plan_set_ops(out, d, ops[d], n[d]);
    free(buf);
    free(ops);
    free(n);
    int rc = op_plan_validate(out, err);
    if (rc == OP_OK) rc = op_sim_replay(out, NULL, err);
    if (rc != OP_OK) {
        op_err_prefix(err, "tuned plan failed validation");
        op_plan_free(out);
    }
    return rc;
}

static long auto_evals(const tn_prob *pb, int *s_ref) {
    /* An evaluation costs ~100 ns per op on one core (bench_plan).  Small problems get ~0.5 s
     * (P=8, M=32, 60 layers: ~3,300 simulations); large ones up to 3,000 simulations, ~35 s at
     * P=64, M=256, 200 layers.  Tiny ones (a few hundred ops, e.g. P=4, M=8) get 30,000, under
     * a second: their simulations are so short that the search, not the budget, is what
     * limits them, and two restarts narrow how much the result swings with the seed. */
    double S = 2.0 * pb->P < pb->L ? 2.0 * pb->P : pb->L;
    double ops = 3.0 * S * pb->M;
    double n = TN_EVAL_UNITS / ops, big = 3e8 / ops < 3000 ? 3e8 / ops : 3000;
    if (big > n) n = big;
    *s_ref = (int)S;
    if (ops <= 400) n = 30000, *s_ref = pb->L; /* every simulation costs one */
    return n < 300 ? 300 : n > 30000 ? 30000 : (long)n;
}

int tn_tune_core(const op_problem *pr, const op_tune_opts *oin, op_plan *out, op_err *err) {
    return tn_tune_core_pol(pr, oin, -1, NULL, NULL, 0, out, err);
}

/* A plan's partition, placement and policies as one more seed (offload, which the engine
 * does not model, as full: the lighter stash; relax may bring it back).  cut > 0: the plan
 * came from the layer view of full recomputation on layers [0, cut); a stage that straddles
 * the cut splits there into two stages on its device, full before, keep after, so the seed
 * is the plan that view described (a stage's policy covers all its layers). */
static void seed_plan(tn_search *st, tn_pool *pl, const op_plan *sp, int cut) {
    const tn_prob *pb = st->pb;
    if (!sp || sp->S < 1 || sp->S >= pb->L || sp->P != pb->P || sp->n_layers != pb->L) return;
    tn_cand c;
    tn_cand_alloc(&c, pb);
    int S = 0;
    for (int s = 0; s < sp->S; s++) {
        int a = sp->stage_first[s], b = sp->stage_first[s + 1], pol = sp->stage_act[s];
        if (pol == OP_ACT_OFFLOAD) pol = OP_ACT_FULL;
        if (cut > 0) pol = a < cut ? OP_ACT_FULL : OP_ACT_KEEP;
        c.first[S] = a;
        c.dev[S] = sp->stage_dev[s];
        c.pol[S++] = (uint8_t)pol;
        /* a split adds a stage on one device: only where the placement is free (loop and V
         * give every device the same number of stages; there the stage keeps one policy) */
        if (cut > a && cut < b && S < pb->L && st->mode == OP_TUNE_PLACE_ANY) {
            c.first[S] = cut;
            c.dev[S] = sp->stage_dev[s];
            c.pol[S++] = OP_ACT_KEEP;
        }
    }
    c.S = S;
    c.first[S] = pb->L;
    seed_knobs(st, pl, &c, "plan");
    tn_cand_free(&c);
}

int tn_tune_core_pol(const op_problem *pr, const op_tune_opts *oin, int pol0,
                     const op_plan *const *seeds, const int *cuts, int nseeds, op_plan *out,
                     op_err *err) {
    return tn_tune_core_refine(pr, oin, pol0, seeds, cuts, nseeds, 1, out, err);
}

int op_tune_check(const op_problem *pr, const op_tune_opts *o, op_err *err) {
    int rc = op_problem_validate(pr, err);
    if (rc != OP_OK) return rc;
    /* the options are the caller's too: an enum value outside its list was searched as some
     * other mode (placement 99 gave a plan no mode names), and a negative simulation budget
     * said nothing the caller could mean */
    if (o && o->placement != OP_TUNE_PLACE_ANY && o->placement != OP_TUNE_PLACE_LOOP &&
        o->placement != OP_TUNE_PLACE_V)
        return op_errf(err, OP_EINVAL, "tune: placement %d is not any (0), loop (1) or v (2)",
                       (int)o->placement);
    if (o && (o->recompute < OP_TUNE_RC_AUTO || o->recompute > OP_TUNE_RC_FULL))
        return op_errf(err, OP_EINVAL, "tune: recompute %d is not auto (0), none (1), selective (2) "
                       "or full (3)", (int)o->recompute);
    if (o && (o->effort < 0 || o->effort > 1000))
        return op_errf(err, OP_EINVAL, "tune: effort %d is not in [1, 1000] (0: 1)", o->effort);
    if (o && o->max_evals < 0)
        return op_errf(err, OP_EINVAL, "tune: max_evals %ld is negative (0: derived from the problem)",
                       o->max_evals);
    if (pr->P < 1 || pr->M < 1 || pr->n_layers < 1)
        return op_errf(err, OP_EINVAL, "tune: need devices, microbatches and layers >= 1");
    if (pr->n_layers < pr->P)
        return op_errf(err, OP_EINVAL, "tune: %d layers cannot fill %d devices", pr->n_layers, pr->P);
    if (o && o->placement == OP_TUNE_PLACE_V && pr->n_layers < 2 * pr->P)
        return op_errf(err, OP_EINVAL, "tune: --placement v needs >= 2 layers per device (%d < %d)",
                       pr->n_layers, 2 * pr->P);
    return OP_OK;
}

static int core(const op_problem *pr, const op_tune_opts *oin, int pol0, const op_plan *const *seeds,
                const int *cuts, int nseeds, int level, int heavy_pol, int shift, int affinity,
                op_plan *out, op_err *err) {
    op_tune_opts o;
    if (oin) o = *oin;
    else op_tune_opts_default(&o);
    if (op_tune_check(pr, &o, err) != OP_OK) return OP_EINVAL;
    tn_prob pb;
    tn_prob_init(&pb, pr);
    tn_search st;
    memset(&st, 0, sizeof st);
    st.pb = &pb;
    st.e = tn_eng_new(&pb);
    tn_res_alloc(&st.r, pb.P);
    tn_res_alloc(&st.cr, pb.P);
    st.mode = o.placement;
    st.pol0 = pol0; /* mixed clusters too: tn_mixed_stage_times adds each type's recompute */
    /* the refining search (memory reserve, quotas, partial recompute) on every cluster: its
     * memory rules read each device's own limit (tn_dev_lim), and on mixed clusters it runs
     * beside their own restart (tn_mixed_heavy_kick) */
    st.refine = st.pol0 >= 0 && nseeds > 0 ? level & ~TN_REFINE_WFREE : 0;
    pb.wfree = st.refine > 0 && (level & TN_REFINE_WFREE);
    st.heavy_pol = heavy_pol;
    st.o = &o;
    st.t0 = op_now_s();
    st.run0 = st.last_progress = o.started_s > 0 && o.started_s <= st.t0 ? o.started_s : st.t0;
    o.started_s = st.run0; /* the budget (tn_late) counts from the whole run's start */
    st.deadline = tn_deadline(&o);
    st.s_ref = pb.L; /* an explicit max_evals counts simulations */
    /* an explicit budget beyond any run (LONG_MAX for "stop by the time budget") is taken as
     * TN_EVALS_MAX: the round shares below and the mixed-cluster restarts multiply it, and
     * LONG_MAX * 6 overflowed */
    st.max_evals = o.max_evals > 0 ? (o.max_evals < TN_EVALS_MAX ? o.max_evals : TN_EVALS_MAX)
                                   : auto_evals(&pb, &st.s_ref) * (o.effort > 1 ? o.effort : 1);
    tn_run_search();
    st.best_score = 1e300;
    st.min_peak = INT64_MAX;
    st.phase = "seeds";
    op_rng_seed(&st.rng, o.seed);
    tn_cand_alloc(&st.best, &pb);
    tn_pool pl;
    memset(&pl, 0, sizeof pl);
    for (int i = 0; i < TN_POOL; i++) tn_cand_alloc(&pl.c[i], &pb);

    op_plan bl;
    int have_bl = 0;
    char bl_name[32] = "";
    int64_t bl_min_peak = INT64_MAX;
    st.phase = "baselines";
    if (!affinity) /* the affinity trial: its layouts alone (tune_mixed_affinity.c) */
        run_baselines(&st, &pl, pr, &bl, &have_bl, bl_name, sizeof bl_name, &bl_min_peak);
    st.phase = "seeds";
    /* level 3: the given seeds alone (with the baselines' layouts), so that the whole budget
     * goes where they lead; the standard placements again if none of them could seed */
    int alone = st.refine >= 3;
    if (!alone && !affinity) seed_all(&st, &pl);
    if (!affinity) /* mixed clusters: speed- and node-aware seeds */
        tn_mixed_seeds(&st, seed_offer, &pl);
    int n_std = pl.n;
    for (int i = 0; i < nseeds && st.pol0 >= 0; i++) seed_plan(&st, &pl, seeds[i], cuts[i]);
    if (alone && pl.n == n_std) seed_all(&st, &pl);

    /* Restarts: each round refines the distinct seeds, then polishes the overall best until
     * three restarts in a row find nothing, with its own random stream (the local search
     * breaks ties and kicks by it).  One round's result swings with the seed by a few percent;
     * the best of several does not.  The first round gets TN_FIRST_SHARE of the budget and
     * the others split the rest: equal shares stopped every round short where memory binds
     * (a rugged landscape: nemotron-h-8b P=4 M=8 at 42 GiB, seeds 1..5, mean 1155.7 ms with
     * equal halves, 1129.7 with 70/30; the seed spread on nemotron-h-8b-profile P=4 M=8
     * stays under 1%).  A round that stops early leaves its budget to the next.
     * Deterministic: round r's stream depends only on (seed, r). */
    tn_cand cur, round_start;
    tn_cand_alloc(&cur, &pb);
    tn_cand_alloc(&round_start, &pb);
    int rounds = (int)(st.max_evals / TN_ROUND_EVALS);
    rounds = affinity ? 0 : rounds < 1 ? 1 : rounds > TN_ROUNDS ? TN_ROUNDS : rounds;
    for (int round = 0; round < rounds && !tn_out_of_budget(&st); round++) {
        if (round) op_rng_seed(&st.rng, o.seed * 0x9E3779B97F4A7C15ull + (uint64_t)round);
        long left = (st.max_evals - st.evals) / (rounds - round);
        if (round == 0 && rounds > 1) left = (long)((double)(st.max_evals - st.evals) * TN_FIRST_SHARE);
        long round_end = st.evals + left;
        int k = pl.n < 4 ? pl.n : 4;
        for (int i = 0; i < k && !tn_out_of_budget(&st) && st.evals < round_end; i++) {
            tn_cand_copy(&round_start, &pl.c[i], &pb);
            tn_local_search(&st, &round_start, left * 6 / 10 / k);
            if (getenv("OCTOPIPE_TUNE_DEBUG"))
                fprintf(stderr, "round %d refined seed %d (%s): best so far %.3f, %ld sims\n", round,
                        i, pl.shape[i], st.best_score, st.evals);
        }
        for (int miss = 0; miss < 3 && !tn_out_of_budget(&st) && st.evals < round_end;) {
            double before = st.best_score;
            tn_cand_copy(&cur, &st.best, &pb);
            tn_local_search(&st, &cur, round_end - st.evals);
            miss = st.best_score < before * (1 - 1e-12) ? 0 : miss + 1;
        }
    }
    tn_mixed_heavy_kick(&st); /* mixed clusters, layers two of which fill a device */
    tn_mixed_cap_kick(&st);   /* and devices whose own limit holds two of them */
    if (shift) tn_mixed_shift_kick(&st); /* the keep search: a layer onto the least busy device */
    if (affinity == 1) tn_mixed_affinity(&st); /* its own trial: the search from its layouts alone */
    if (affinity == 2) tn_mixed_affinity_roomy(&st);
    tn_cand_free(&cur);
    tn_cand_free(&round_start);

    int rc = OP_OK;
    const char *source = "search";
    if (st.best_score >= TN_NOFIT) {
        if (have_bl) {
            op_plan_copy(out, &bl);
            source = "baseline";
        } else if (tn_late(&o)) {
            rc = tn_err_late(pr, &o, err);
        } else {
            int64_t need = st.min_peak < bl_min_peak ? st.min_peak : bl_min_peak;
            char lim_text[96];
            op_problem_limit_text(pr, lim_text, sizeof lim_text);
            rc = op_errf(err, OP_ENOMEM,
                         "no plan fits %s; the smallest peak found needs %.2f GiB "
                         "(--mem-limit %.2f would fit)",
                         lim_text, need / 1073741824.0, ceil(need / 1073741824.0 * 100) / 100);
        }
    } else {
        rc = tn_cand_plan(st.e, st.pb, &st.best, &st.r, "octopipe", out, err);
        /* tiny problems (as auto_evals counts ops): knobs judged after the polish; not in the
         * policy searches, which tune many times.  Elsewhere the polish runs once, on the
         * plan op_tune returns: polishing every trial's plan would change which trial wins
         * and what the seeded trials start from, and a case could end slower than without
         * it (qwen2-vl-7b P=8 M=16 under 72 GiB: 819.12 -> 825.18 ms) */
        double s2 = 2.0 * pb.P < pb.L ? 2.0 * pb.P : pb.L;
        if (rc == OP_OK && st.pol0 < 0 && 3.0 * s2 * pb.M <= 400 && !tn_stopped(&o)) {
            tn_polish_plan(out);
            tn_polish_knobs(&st, &st.best, out);
        }
        /* the simulator has the last word on memory (the engine models the same timeline) */
        int over = rc == OP_OK && !op_plan_fits(out);
        if (over && !have_bl) {
            rc = op_errf(err, OP_ENOMEM, "tuned plan needs %.2f GiB per device, over the %.2f GiB limit",
                         out->pred.peak_bytes_max / 1073741824.0, pr->mem_limit_bytes / 1073741824.0);
            op_plan_free(out);
        } else if (rc == OP_OK && have_bl &&
                   (over || bl.pred.makespan_ms < out->pred.makespan_ms * (1 - 1e-9))) {
            op_plan_free(out);
            op_plan_copy(out, &bl);
            source = "baseline";
        }
    }
    if (rc == OP_OK) snprintf(out->name, sizeof out->name, "octopipe");
    if (o.stats) {
        op_tune_stats *s = o.stats;
        memset(s, 0, sizeof *s);
        s->evals = st.sims;
        s->seconds = op_now_s() - st.t0;
        if (have_bl) {
            s->best_baseline_ms = bl.pred.makespan_ms;
            snprintf(s->best_baseline, sizeof s->best_baseline, "%s", bl_name);
        }
        if (!strcmp(source, "baseline")) snprintf(s->source, sizeof s->source, "baseline:%s", bl_name);
        else snprintf(s->source, sizeof s->source, "search");
        if (rc == OP_OK) {
            s->S = out->S;
            tn_cand tmp;
            tn_cand_alloc(&tmp, &pb);
            tmp.S = out->S;
            memcpy(tmp.dev, out->stage_dev, sizeof(int) * (size_t)out->S);
            snprintf(s->shape, sizeof s->shape, "%s", tn_shape(&tmp, pb.P));
            tn_cand_free(&tmp);
        }
    }
    if (have_bl) op_plan_free(&bl);
    for (int i = 0; i < TN_POOL; i++) tn_cand_free(&pl.c[i]);
    tn_cand_free(&st.best);
    tn_res_free(&st.r);
    tn_res_free(&st.cr);
    tn_eng_free(st.e);
    tn_prob_free(&pb);
    return rc;
}

int tn_tune_core_refine(const op_problem *pr, const op_tune_opts *oin, int pol0,
                        const op_plan *const *seeds, const int *cuts, int nseeds, int level,
                        op_plan *out, op_err *err) {
    return core(pr, oin, pol0, seeds, cuts, nseeds, level, 0, 0, 0, out, err);
}

int tn_tune_core_heavy_pol(const op_problem *pr, const op_tune_opts *oin, op_plan *out, op_err *err) {
    return core(pr, oin, OP_ACT_KEEP, NULL, NULL, 0, 1, 1, 0, 0, out, err);
}

int tn_tune_core_keep(const op_problem *pr, const op_tune_opts *oin, op_plan *out, op_err *err) {
    return core(pr, oin, -1, NULL, NULL, 0, 1, 0, 1, 0, out, err);
}

int tn_tune_core_affinity(const op_problem *pr, const op_tune_opts *oin, int roomy, int pol_moves,
                          op_plan *out, op_err *err) {
    return core(pr, oin, pol_moves ? OP_ACT_KEEP : -1, NULL, NULL, 0, 1, 0, 0, roomy ? 2 : 1, out,
                err);
}
