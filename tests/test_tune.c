/* test_tune.c: the tuner.  Tuned plans are valid, re-simulate to their prediction, respect
 * memory limits, beat or tie every baseline, are deterministic for a seed, keep torchtitan's
 * loop / v layouts when asked, and on tiny problems land within 2% of the exhaustive optimum
 * (all partitions x all placements x all active schedules, by branch and bound). */
#include <float.h>
#include <limits.h>

#include "check.h"
#include "exhaustive.h"
#include "octopipe/cost.h"
#include "octopipe/model.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

/* ---- synthetic per-layer costs (ms per microbatch), shaped like the authors' profiles ---- */
typedef struct { char sym; double f, i, w; int64_t act, stat; } sym_cost;

static const sym_cost NEMO[] = { /* Nemotron-H-like: head ~9x a layer */
    {'E', 2.3, 0.4, 0.3, 1 << 20, 6 << 20},  {'M', 1.1, 2.15, 0.5, 8 << 20, 4 << 20},
    {'-', 0.97, 0.9, 0.87, 6 << 20, 5 << 20}, {'*', 1.0, 0.91, 0.2, 9 << 20, 3 << 20},
    {'L', 9.5, 7.3, 0.6, 40 << 20, 6 << 20}};
static const sym_cost DSEEK[] = { /* DeepSeek-like: dense layers then MoE ~2.3x */
    {'E', 1.0, 0.3, 0.2, 1 << 20, 8 << 20}, {'T', 1.0, 1.1, 0.9, 8 << 20, 4 << 20},
    {'#', 2.3, 2.5, 2.2, 14 << 20, 20 << 20}, {'L', 3.0, 2.5, 0.5, 20 << 20, 8 << 20}};
static const sym_cost GEMMA[] = { /* Gemma-like: 256k vocabulary head */
    {'E', 0.8, 0.2, 0.2, 1 << 20, 9 << 20}, {'T', 1.0, 1.0, 0.8, 8 << 20, 4 << 20},
    {'L', 7.0, 6.0, 1.0, 60 << 20, 9 << 20}};

static op_layer_cost *make_layers(const char *pattern, const sym_cost *tab, int ntab) {
    int n = (int)strlen(pattern);
    op_layer_cost *l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < n; i++) {
        const sym_cost *c = NULL;
        for (int k = 0; k < ntab; k++)
            if (tab[k].sym == pattern[i]) c = &tab[k];
        if (!c) abort();
        snprintf(l[i].name, sizeof l[i].name, "l%d", i);
        l[i].sym = c->sym;
        l[i].f_ms = c->f, l[i].i_ms = c->i, l[i].w_ms = c->w;
        l[i].out_bytes = 32 << 20;
        l[i].act_bytes = c->act;
        l[i].act_w_bytes = c->act / 3;
        l[i].param_bytes = c->stat / 9;
        l[i].static_bytes = c->stat;
    }
    return l;
}

static op_problem problem(const char *name, op_layer_cost *layers, int n, int P, int M, int comm) {
    op_problem pr = {0};
    pr.model = name;
    pr.layers = layers;
    pr.n_layers = n;
    pr.P = P;
    pr.M = M;
    pr.tokens_per_mb = 4096;
    if (comm) {
        pr.comm.nodes_of = 4;
        pr.comm.intra_lat_ms = 0.01, pr.comm.intra_bw_GBps = 300;
        pr.comm.inter_lat_ms = 0.02, pr.comm.inter_bw_GBps = 40;
    } else {
        pr.comm.none = 1;
    }
    return pr;
}

static const char *NEMO_PAT = "EM-M-M*-M-M-M*-M-M-M*-M-M-M*-L";
static const char *DSEEK_PAT = "ETT######################L";
static const char *GEMMA_PAT = "ETTTTTTTTTTTTTTTTTTTTTTTTTL";

static int tune_ok(const op_problem *pr, uint64_t seed, op_plan *out, op_tune_stats *st) {
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.seed = seed;
    o.stats = st;
    op_err e = {0};
    int rc = op_tune(pr, &o, out, &e);
    if (rc != OP_OK) fprintf(stderr, "op_tune: %s\n", e.msg);
    return rc;
}

TEST(resimulates_to_prediction_and_validates) {
    const char *pats[] = {NEMO_PAT, DSEEK_PAT, GEMMA_PAT};
    const sym_cost *tabs[] = {NEMO, DSEEK, GEMMA};
    int ntabs[] = {5, 4, 3};
    for (int k = 0; k < 3; k++) {
        op_layer_cost *l = make_layers(pats[k], tabs[k], ntabs[k]);
        op_problem pr = problem("t", l, (int)strlen(pats[k]), 4, 8, 1);
        op_plan p;
        op_tune_stats st;
        CHECK(tune_ok(&pr, 1, &p, &st) == OP_OK);
        op_err e = {0};
        CHECK(op_plan_validate(&p, &e) == OP_OK);
        CHECK(!strcmp(p.name, "octopipe"));
        double pred = p.pred.makespan_ms;
        CHECK(pred > 0);
        CHECK_NEAR(p.pred.lower_bound_ms, op_plan_lower_bound(&p), 1e-12);
        CHECK(pred >= p.pred.lower_bound_ms * (1 - 1e-9));
        op_plan q;
        op_plan_copy(&q, &p);
        for (int d = 0; d < q.P; d++)
            for (int i = 0; i < q.n_ops[d]; i++) q.ops[d][i].start = q.ops[d][i].end = 0;
        CHECK(op_sim_replay(&q, NULL, &e) == OP_OK);
        CHECK_NEAR(q.pred.makespan_ms, pred, 1e-9);
        CHECK(q.pred.peak_bytes_max == p.pred.peak_bytes_max);
        for (int d = 0; d < q.P; d++)
            for (int i = 0; i < q.n_ops[d]; i++)
                CHECK_NEAR(q.ops[d][i].end, p.ops[d][i].end, 1e-9);
        op_plan_free(&q);
        op_plan_free(&p);
        free(l);
    }
}

TEST(respects_memory_limit_and_reports_enomem) {
    op_layer_cost *l = make_layers(NEMO_PAT, NEMO, 5);
    op_problem pr = problem("nemo", l, (int)strlen(NEMO_PAT), 4, 16, 1);
    op_plan free_p;
    CHECK(tune_ok(&pr, 1, &free_p, NULL) == OP_OK);
    int64_t peak = free_p.pred.peak_bytes_max;
    /* a limit well under the unconstrained plan's peak: the tuned plan must obey it */
    pr.mem_limit_bytes = (double)peak * 0.7;
    op_plan lim;
    CHECK(tune_ok(&pr, 1, &lim, NULL) == OP_OK);
    CHECK((double)lim.pred.peak_bytes_max <= pr.mem_limit_bytes);
    for (int d = 0; d < lim.P; d++) CHECK((double)lim.pred.peak_bytes[d] <= pr.mem_limit_bytes);
    CHECK(lim.pred.makespan_ms >= free_p.pred.makespan_ms * (1 - 1e-9));
    /* impossible: static memory fits (just), the stashes do not; the search drives the peak
     * down and names the smallest it found */
    double floor = op_problem_static_floor(pr.layers, pr.n_layers, pr.P);
    CHECK(floor > 0);
    pr.mem_limit_bytes = floor * 1.000001;
    op_plan none;
    op_tune_opts o;
    op_tune_opts_default(&o);
    op_err e = {0};
    CHECK(op_tune(&pr, &o, &none, &e) == OP_ENOMEM);
    CHECK_STR_CONTAINS(e.msg, "smallest peak found needs");
    CHECK_STR_CONTAINS(e.msg, "GiB");
    /* less than the static memory of one layer's share: said at once, as that */
    pr.mem_limit_bytes = floor * 0.99;
    e = (op_err){0};
    CHECK(op_tune(&pr, &o, &none, &e) == OP_ENOMEM);
    CHECK_STR_CONTAINS(e.msg, "static memory (weights, gradients, optimizer state) alone does not");
    op_plan_free(&free_p);
    op_plan_free(&lim);
    free(l);
}

TEST(beats_or_ties_every_baseline) {
    const char *pats[] = {NEMO_PAT, DSEEK_PAT, GEMMA_PAT, "ETTTTTTTTTTTTTTTL"};
    const sym_cost *tabs[] = {NEMO, DSEEK, GEMMA, GEMMA};
    int ntabs[] = {5, 4, 3, 3};
    int Ps[] = {2, 4, 4, 4}, Ms[] = {4, 8, 16, 12};
    double gain_i1f1b = 0;
    for (int k = 0; k < 4; k++) {
        op_layer_cost *l = make_layers(pats[k], tabs[k], ntabs[k]);
        op_problem pr = problem("t", l, (int)strlen(pats[k]), Ps[k], Ms[k], 1);
        op_plan p;
        CHECK(tune_ok(&pr, 7, &p, NULL) == OP_OK);
        for (const char *const *n = op_sched_names(); *n; n++) {
            op_plan b;
            op_err e = {0};
            if (op_sched_build(*n, &pr, &b, &e) != OP_OK) continue;
            CHECK_MSG(p.pred.makespan_ms <= b.pred.makespan_ms * (1 + 1e-9),
                      "case %d: tuned %.4f > %s %.4f", k, p.pred.makespan_ms, *n,
                      b.pred.makespan_ms);
            if (!strcmp(*n, "i1f1b") && k == 0) gain_i1f1b = b.pred.makespan_ms / p.pred.makespan_ms;
            op_plan_free(&b);
        }
        op_plan_free(&p);
        free(l);
    }
    /* the heterogeneous Nemotron-like case must gain, not just tie */
    CHECK_MSG(gain_i1f1b > 1.05, "speedup over i1f1b only %.3f", gain_i1f1b);
}

TEST(deterministic_for_a_seed) {
    op_layer_cost *l = make_layers(DSEEK_PAT, DSEEK, 4);
    op_problem pr = problem("ds", l, (int)strlen(DSEEK_PAT), 4, 8, 1);
    op_plan a, b;
    CHECK(tune_ok(&pr, 42, &a, NULL) == OP_OK);
    CHECK(tune_ok(&pr, 42, &b, NULL) == OP_OK);
    CHECK(a.S == b.S);
    CHECK(a.pred.makespan_ms == b.pred.makespan_ms);
    if (a.S == b.S) {
        CHECK(!memcmp(a.stage_first, b.stage_first, sizeof(int) * (size_t)(a.S + 1)));
        CHECK(!memcmp(a.stage_dev, b.stage_dev, sizeof(int) * (size_t)a.S));
        for (int d = 0; d < a.P; d++) {
            CHECK(a.n_ops[d] == b.n_ops[d]);
            for (int i = 0; i < a.n_ops[d] && i < b.n_ops[d]; i++)
                CHECK(a.ops[d][i].kind == b.ops[d][i].kind && a.ops[d][i].stage == b.ops[d][i].stage &&
                      a.ops[d][i].mb == b.ops[d][i].mb);
        }
    }
    op_plan_free(&a);
    op_plan_free(&b);
    free(l);
}

/* effort N: the default search, then one N times as long, and the faster plan: never slower
 * than effort 1, the same plan for the same seed, and the simulations of both searches. */
TEST(effort_never_slower_and_deterministic) {
    op_layer_cost *l = make_layers(NEMO_PAT, NEMO, 5);
    op_problem pr = problem("nemo", l, (int)strlen(NEMO_PAT), 4, 8, 1);
    op_plan p1, p3, q3;
    op_tune_stats s1, s3;
    op_err e = {0};
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.stats = &s1;
    CHECK(op_tune(&pr, &o, &p1, &e) == OP_OK);
    o.effort = 3, o.stats = &s3;
    CHECK(op_tune(&pr, &o, &p3, &e) == OP_OK);
    o.stats = NULL;
    CHECK(op_tune(&pr, &o, &q3, &e) == OP_OK);
    CHECK(p3.pred.makespan_ms <= p1.pred.makespan_ms);
    CHECK(p3.pred.makespan_ms == q3.pred.makespan_ms && p3.S == q3.S);
    CHECK_MSG(s3.evals >= 3 * s1.evals, "effort 3: %ld simulations, effort 1: %ld", s3.evals, s1.evals);
    printf("  effort 1: %.3f ms (%ld sims), effort 3: %.3f ms (%ld sims)\n", p1.pred.makespan_ms,
           s1.evals, p3.pred.makespan_ms, s3.evals);
    op_plan_free(&p1);
    op_plan_free(&p3);
    op_plan_free(&q3);
    free(l);
}

TEST(placement_modes_keep_torchtitan_layouts) {
    op_layer_cost *l = make_layers(NEMO_PAT, NEMO, 5);
    op_problem pr = problem("nemo", l, (int)strlen(NEMO_PAT), 4, 8, 1);
    for (int mode = 1; mode <= 2; mode++) {
        op_tune_opts o;
        op_tune_opts_default(&o);
        o.placement = mode == 1 ? OP_TUNE_PLACE_LOOP : OP_TUNE_PLACE_V;
        op_plan p;
        op_err e = {0};
        CHECK(op_tune(&pr, &o, &p, &e) == OP_OK);
        CHECK(p.S % p.P == 0);
        for (int s = 0; s < p.S; s++) {
            int r = s / p.P, pos = s % p.P;
            int want = mode == 1 ? pos : (r % 2 == 0 ? pos : p.P - 1 - pos);
            CHECK_MSG(p.stage_dev[s] == want, "mode %d stage %d on %d", mode, s, p.stage_dev[s]);
        }
        if (mode == 2) CHECK(p.S == 2 * p.P);
        op_plan_free(&p);
    }
    op_tune_placement pl;
    CHECK(op_tune_placement_parse("v", &pl) == 0 && pl == OP_TUNE_PLACE_V);
    CHECK(op_tune_placement_parse("zigzag", &pl) == -1);
    free(l);
}

TEST(rejects_bad_problems) {
    op_layer_cost *l = make_layers("ETL", GEMMA, 3);
    op_problem pr = problem("tiny", l, 3, 4, 4, 0);
    op_plan p;
    op_err e = {0};
    CHECK(op_tune(&pr, NULL, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "3 layers cannot fill 4 devices");
    free(l);
}

/* The options are the caller's input too: an enum value outside its list and a negative
 * budget are OP_EINVAL; a budget of LONG_MAX ("stop by the time budget") once overflowed a
 * signed multiply in the round shares (UBSan: 9223372036854775709 * 6). */
TEST(rejects_bad_options) {
    op_layer_cost *l = make_layers("ETTTTL", GEMMA, 3);
    op_problem pr = problem("opts", l, 6, 2, 4, 0);
    op_plan p;
    op_err e = {0};
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.placement = (op_tune_placement)7;
    CHECK(op_tune(&pr, &o, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "placement 7");
    op_tune_opts_default(&o);
    o.recompute = (op_tune_recompute)-1;
    CHECK(op_tune(&pr, &o, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "recompute -1");
    op_tune_opts_default(&o);
    o.max_evals = -3;
    CHECK(op_tune(&pr, &o, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "max_evals -3");
    for (int k = 0; k < 2; k++) {
        op_tune_opts_default(&o);
        o.effort = k ? 1001 : -1;
        CHECK(op_tune(&pr, &o, &p, &e) == OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, k ? "effort 1001 is not in [1, 1000]" : "effort -1 is not in");
    }
    op_tune_opts_default(&o);
    o.max_evals = LONG_MAX;
    o.time_budget_s = 0.5;
    int rc = op_tune(&pr, &o, &p, &e);
    CHECK_MSG(rc == OP_OK, "max_evals LONG_MAX: %s", e.msg);
    if (rc == OP_OK) {
        CHECK(p.pred.makespan_ms > 0);
        op_plan_free(&p);
    }
    free(l);
}

TEST(within_two_percent_of_exhaustive_optimum) {
    struct { const char *pat; const sym_cost *tab; int ntab, P, M; } cases[] = {
        {"ETTL", GEMMA, 3, 2, 2}, {"EM*L", NEMO, 5, 2, 2}, {"ET#L", DSEEK, 4, 2, 3},
        {"ETTTL", GEMMA, 3, 2, 2}, {"ET#L", DSEEK, 4, 3, 2}, {"EM*L", NEMO, 5, 2, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int L = (int)strlen(cases[k].pat);
        op_layer_cost *l = make_layers(cases[k].pat, cases[k].tab, cases[k].ntab);
        op_problem pr = problem("ex", l, L, cases[k].P, cases[k].M, 0);
        op_tune_opts o;
        op_tune_opts_default(&o);
        o.no_baselines = 1; /* the search alone */
        op_plan p;
        op_err e = {0};
        CHECK(op_tune(&pr, &o, &p, &e) == OP_OK);
        long nodes = 0;
        double opt = exhaustive(l, L, cases[k].P, cases[k].M, p.pred.makespan_ms + 1e-9, &nodes);
        CHECK(opt <= p.pred.makespan_ms + 1e-9);
        CHECK(opt >= op_plan_lower_bound(&p) - 1e-9);
        CHECK_MSG(p.pred.makespan_ms <= opt * 1.02, "case %s P=%d M=%d: tuned %.4f, optimum %.4f",
                  cases[k].pat, cases[k].P, cases[k].M, p.pred.makespan_ms, opt);
        fflush(stdout);
        printf("exhaustive %-6s P=%d M=%d: tuned %.3f optimum %.3f (%.2f%%, %ld nodes)\n",
               cases[k].pat, cases[k].P, cases[k].M, p.pred.makespan_ms, opt,
               100 * (p.pred.makespan_ms / opt - 1), nodes);
        fflush(stdout);
        op_plan_free(&p);
        free(l);
    }
}

/* The warm-up term by hand: F = (2, 1, 1, 1), I = 1, W = 0, M = 4: work = 9 per microbatch.
 * P = 2: k = 1 gives 36; k = 2 gives (36 + head(0) + head(1)) / 2 = (36 + 0 + 2) / 2 = 19,
 * above work / P = 18, the chain 9, the per-layer bounds (at most 4 * 3 + 3 = 15) and the
 * pigeonhole bound 2 * 4 * 2 = 16: the warm-up term is 19.  P = 8 (only 4 layers, so at most
 * 4 devices used): min over k of (36 + H_k) / k = (36 + 0 + 2 + 3 + 4) / 4 = 11.25. */
TEST(warmup_bound_by_hand) {
    op_layer_cost l[4];
    memset(l, 0, sizeof l);
    for (int i = 0; i < 4; i++) l[i].f_ms = i ? 1 : 2, l[i].i_ms = 1;
    CHECK_NEAR(op_lower_bound_warmup(l, 4, 2, 4), 19, 1e-12);
    /* the whole bound is 20 by the joint bound: layers are indivisible (4 x 3 for layer 0,
     * 4 x 2 for the others), so the best split is {0, 1} (20) | {2, 3} (2 + 16 + I0 = 19) */
    CHECK_NEAR(op_lower_bound(l, 4, 2, 4), 20, 1e-6);
    CHECK_NEAR(op_lower_bound_warmup(l, 4, 8, 4), 11.25, 1e-12);
    CHECK_NEAR(op_lower_bound_warmup(l, 4, 1, 4), 36, 1e-12); /* one device: work alone */
    /* it is reached: P = 2, stages [0,1) [1,4): device 1 waits 2 ms, then runs 4 x (3 F + 3 I)
     * = 24 ms back to back only if it never waits again; any plan takes >= 20 */
    op_problem pr = problem("wu", l, 4, 2, 4, 0);
    for (const char *const *n = op_sched_names(); *n; n++) {
        op_plan b;
        op_err e = {0};
        if (op_sched_build(*n, &pr, &b, &e) != OP_OK) continue;
        CHECK_MSG(b.pred.makespan_ms >= 20 - 1e-6, "%s: %.4f", *n, b.pred.makespan_ms);
        op_plan_free(&b);
    }
}

/* The bound must hold for every plan any scheduler makes: random presets, P, M, with and
 * without communication, every baseline and a short tuning run. */
TEST(lower_bound_below_every_plan_on_presets) {
    const char *const *models = op_model_preset_names();
    int nm = 0;
    while (models[nm]) nm++;
    op_rng rng;
    op_rng_seed(&rng, 2026);
    int checked = 0;
    for (int it = 0; it < 12; it++) {
        op_model m;
        op_err e = {0};
        const char *name = models[op_rng_int(&rng, nm)];
        if (op_model_preset(name, &m, &e) != OP_OK) continue;
        op_train_cfg t;
        op_train_cfg_default(&t);
        t.seq = 1024;
        op_device dev;
        op_device_preset("h100-80gb", &dev, &e);
        op_layer_cost *costs = calloc((size_t)m.n_layers, sizeof *costs);
        if (op_cost_layers(&m, &t, &dev, costs, &e) == OP_OK) {
            int P = 2 + op_rng_int(&rng, 7), M = 1 + op_rng_int(&rng, 3 * P);
            if (P > m.n_layers) P = m.n_layers;
            op_problem pr = problem(name, costs, m.n_layers, P, M, it % 2);
            double lb = op_lower_bound(costs, m.n_layers, P, M);
            CHECK(lb >= op_lower_bound_warmup(costs, m.n_layers, P, M) - 1e-12);
            for (const char *const *n = op_sched_names(); *n; n++) {
                op_plan b;
                if (op_sched_build(*n, &pr, &b, &e) != OP_OK) continue;
                CHECK_MSG(b.pred.makespan_ms >= lb * (1 - 1e-12), "%s %s P=%d M=%d: %.4f < bound %.4f",
                          name, *n, P, M, b.pred.makespan_ms, lb);
                checked++;
                op_plan_free(&b);
            }
            op_tune_opts o;
            op_tune_opts_default(&o);
            o.max_evals = 300;
            op_plan p;
            if (op_tune(&pr, &o, &p, &e) == OP_OK) {
                CHECK_MSG(p.pred.makespan_ms >= lb * (1 - 1e-12), "%s tuned P=%d M=%d: %.4f < %.4f",
                          name, P, M, p.pred.makespan_ms, lb);
                checked++;
                op_plan_free(&p);
            }
        }
        free(costs);
        op_model_free(&m);
    }
    CHECK_MSG(checked >= 50, "only %d plans checked", checked);
}

/* Restarts keep the spread over seeds small on the profile-shaped Nemotron case. */
TEST(seeds_agree_within_two_percent) {
    op_layer_cost *l = make_layers(NEMO_PAT, NEMO, 5);
    int L = (int)strlen(NEMO_PAT);
    op_problem pr = problem("nemo", l, L, 4, 8, 0);
    double lo = DBL_MAX, hi = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        op_plan p;
        CHECK(tune_ok(&pr, seed, &p, NULL) == OP_OK);
        lo = fmin(lo, p.pred.makespan_ms);
        hi = fmax(hi, p.pred.makespan_ms);
        op_plan_free(&p);
    }
    CHECK_MSG(hi <= lo * 1.02, "seeds 1..4: %.3f .. %.3f", lo, hi);
    free(l);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(resimulates_to_prediction_and_validates);
    RUN(respects_memory_limit_and_reports_enomem);
    RUN(beats_or_ties_every_baseline);
    RUN(deterministic_for_a_seed);
    RUN(effort_never_slower_and_deterministic);
    RUN(placement_modes_keep_torchtitan_layouts);
    RUN(rejects_bad_problems);
    RUN(rejects_bad_options);
    RUN(within_two_percent_of_exhaustive_optimum);
    RUN(warmup_bound_by_hand);
    RUN(lower_bound_below_every_plan_on_presets);
    RUN(seeds_agree_within_two_percent);
    return check_report("tune");
}
