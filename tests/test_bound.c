/* test_bound.c: the joint warm-up x balance x drain bound (op_lower_bound_joint): hand cases,
 * its exact search against brute force, validity against every baseline, random and tuned
 * plans the simulator gives, and the nemotron-h-8b-profile case of the tuner's target. */
#include "check.h"
#include "octopipe/problem.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

static op_layer_cost L[16];

static void layer(int l, double f, double i, double w) {
    memset(&L[l], 0, sizeof L[l]);
    snprintf(L[l].name, sizeof L[l].name, "l%d", l);
    L[l].sym = 'T';
    L[l].f_ms = f, L[l].i_ms = i, L[l].w_ms = w;
    L[l].out_bytes = 1000;
    L[l].act_bytes = 100;
    L[l].static_bytes = 1000;
}

/* Two layers (F = I = W = 1), two devices, one microbatch.  The old terms give 4 (the F-I
 * chain; per layer 1 + 2 + 1).  Joint: the device without layer 0 starts at 1 (F0), runs F1
 * and I1 (2), and then I0 and W0 (2) follow while it has only W1 (1) to fill: 5.  Putting both
 * layers on one device gives 6.  5 is reached: F0 F1 I1 I0 W0 with W1 beside I0. */
TEST(two_layers_one_microbatch_5_not_4) {
    layer(0, 1, 1, 1);
    layer(1, 1, 1, 1);
    CHECK_NEAR(op_lower_bound_warmup(L, 2, 2, 1), 3.5, 1e-12);
    CHECK_NEAR(op_lower_bound_joint(L, 2, 2, 1), 5, 1e-6);
    CHECK_NEAR(op_lower_bound(L, 2, 2, 1), 5, 1e-6);
    op_problem pr = {.model = "t", .layers = L, .n_layers = 2, .P = 2, .M = 1};
    pr.comm.none = 1;
    pr.tokens_per_mb = 1;
    op_plan p;
    op_err e = {0};
    CHECK(op_sched_build("1f1b", &pr, &p, &e) == OP_OK);
    CHECK(p.pred.makespan_ms >= 5 - 1e-9);
    CHECK_NEAR(p.pred.lower_bound_ms, 5, 1e-6);
    op_plan_free(&p);
}

/* Four layers of work 3 (F = I = W = 1), two devices, M = 4 (12 per layer).  Warm-up averages
 * to (48 + 1) / 2 = 24.5; layers are indivisible, so the device that waits 1 for F0 still
 * takes two layers: 1 + 24 = 25 (three on the first device: 36). */
TEST(four_layers_indivisible_25_not_24_5) {
    for (int l = 0; l < 4; l++) layer(l, 1, 1, 1);
    CHECK_NEAR(op_lower_bound_warmup(L, 4, 2, 4), 24.5, 1e-12);
    CHECK_NEAR(op_lower_bound_joint_frac(L, 4, 2, 4), 24.5, 1e-12);
    CHECK_NEAR(op_lower_bound_joint(L, 4, 2, 4), 25, 1e-6);
    CHECK_NEAR(op_lower_bound(L, 4, 2, 4), 25, 1e-6);
}

/* The drain in the fractional term: W = 0, so nothing fills the I chain below.  Layers F = 1,
 * I = 2, W = 0, P = 2, M = 1: rank 1 waits head 1, and tail(1) = I0 = 2 follows its last I:
 * k = 2: max((2*3 + 1) / 2, (6 + 0 + 1 + 2) / 2) = 4.5 (the old warm-up term: 3.5). */
TEST(drain_without_w_in_the_fraction) {
    layer(0, 1, 2, 0);
    layer(1, 1, 2, 0);
    CHECK_NEAR(op_lower_bound_warmup(L, 2, 2, 1), 3.5, 1e-12);
    CHECK_NEAR(op_lower_bound_joint_frac(L, 2, 2, 1), 4.5, 1e-12);
    /* exact: {0}{1}: max(3, 1 + 3 + 2) = 6 = the chain F0 F1 I1 I0; {0,1}: 6 */
    CHECK_NEAR(op_lower_bound_joint(L, 2, 2, 1), 6, 1e-6);
}

/* Edges: free layers, more devices than layers (extra devices stay empty), and more kinds than
 * the exact search takes (the fractional form stands in). */
TEST(edges) {
    layer(0, 0, 0, 0);
    layer(1, 0, 0, 0);
    CHECK(op_lower_bound_joint(L, 2, 2, 3) == 0);
    CHECK(op_lower_bound(L, 2, 2, 3) == 0);
    layer(0, 1, 1, 1);
    layer(1, 1, 1, 1);
    CHECK_NEAR(op_lower_bound_joint(L, 2, 5, 1), op_lower_bound_joint(L, 2, 2, 1), 1e-12);
    CHECK_NEAR(op_lower_bound_joint(L, 2, 5, 1), 5, 1e-6);
    for (int l = 0; l < 13; l++) layer(l, 1 + 0.01 * l, 1, 1); /* 13 kinds */
    CHECK_NEAR(op_lower_bound_joint(L, 13, 2, 4), op_lower_bound_joint_frac(L, 13, 2, 4), 0);
    CHECK(op_lower_bound_joint(L, 13, 2, 4) >= op_lower_bound_warmup(L, 13, 2, 4));
    /* a caller's empty problem is no bound (0), not a hang: P = 0 looped forever on the
     * indivisible-jobs term (k * P < n_layers) */
    CHECK(op_lower_bound(L, 13, 0, 4) == 0);
    CHECK(op_lower_bound(L, 13, -2, 4) == 0);
    CHECK(op_lower_bound(L, 13, 2, 0) == 0);
    CHECK(op_lower_bound(L, 0, 2, 4) == 0);
    CHECK(op_lower_bound(NULL, 3, 2, 4) == 0);
}

/* Brute force over every assignment of layers to ranks (ranks by index; head/tail at the
 * rank): the least over assignments of the largest g.  Slow, for L <= 7, P <= 3. */
static double brute_joint(const op_layer_cost *ly, int n, int P, int M) {
    int k = P < n ? P : n;
    double head[8], tail[8], h = 0, t = 0;
    for (int r = 0; r < k; r++) {
        head[r] = h, tail[r] = t;
        h += ly[r].f_ms;
        t = ly[r].i_ms + fmax(ly[r].w_ms, t);
    }
    int total = 1;
    for (int l = 0; l < n; l++) total *= k;
    double best = INFINITY;
    for (int code = 0; code < total; code++) {
        double fi[8] = {0}, w[8] = {0};
        int used[8] = {0}, c = code;
        for (int l = 0; l < n; l++, c /= k) {
            fi[c % k] += ly[l].f_ms + ly[l].i_ms;
            w[c % k] += ly[l].w_ms;
            used[c % k] = 1;
        }
        double mx = 0;
        for (int r = 0; r < k; r++)
            if (used[r]) mx = fmax(mx, head[r] + M * fi[r] + fmax(M * w[r], tail[r]));
        best = fmin(best, mx);
    }
    return best;
}

static void random_layers(op_rng *r, int n) {
    for (int l = 0; l < n; l++) {
        /* few values, so kinds repeat (the search groups them) */
        layer(l, 0.5 * (1 + op_rng_int(r, 4)), 0.5 * op_rng_int(r, 5), 0.5 * op_rng_int(r, 4));
        L[l].out_bytes = 1000 * op_rng_int(r, 1000);
        L[l].act_w_bytes = op_rng_int(r, 100);
    }
}

TEST(search_equals_brute_force) {
    op_rng r;
    op_rng_seed(&r, 11);
    int n_above_warmup = 0;
    for (int it = 0; it < 400; it++) {
        int n = 1 + op_rng_int(&r, 7), P = 1 + op_rng_int(&r, 3), M = 1 + op_rng_int(&r, 6);
        random_layers(&r, n);
        double want = brute_joint(L, n, P, M), got = op_lower_bound_joint(L, n, P, M);
        /* never above J; below it by at most the search's 1e-7 relative resolution */
        CHECK_MSG(got <= want * (1 + 1e-12) && got >= want * (1 - 2e-7),
                  "n=%d P=%d M=%d: %.9g vs %.9g", n, P, M, got, want);
        double warm = op_lower_bound_warmup(L, n, P, M);
        CHECK(got >= warm - 1e-9 * warm);
        CHECK(got >= op_lower_bound_joint_frac(L, n, P, M) - 1e-12);
        CHECK(op_lower_bound(L, n, P, M) >= got);
        n_above_warmup += got > warm * (1 + 1e-6);
    }
    CHECK(n_above_warmup > 100); /* it does bind, not only tie */
}

static double rnd_prio(void *ctx, int d, op_kind kind, int stage, int mb, double now) {
    return op_rng_uniform(ctx);
}

/* A random plan of pr: random cuts, stages on random devices (several, non-contiguous, per
 * device), B or I+W per stage, orders by list scheduling under random priorities. */
static double random_plan_ms(const op_problem *pr, op_rng *r, op_sim_ws *ws) {
    int n = pr->n_layers, S = 1 + op_rng_int(r, n);
    op_plan p;
    op_plan_init_problem(&p, "rnd", pr, S);
    p.stage_first[0] = 0;
    int left = n - S;
    for (int s = 1; s < S; s++) {
        int extra = left ? op_rng_int(r, left + 1) : 0;
        left -= extra;
        p.stage_first[s] = p.stage_first[s - 1] + 1 + extra;
    }
    p.stage_first[S] = n;
    for (int s = 0; s < S; s++) {
        p.stage_dev[s] = op_rng_int(r, pr->P);
        p.stage_split[s] = (uint8_t)op_rng_int(r, 2);
    }
    op_sim_policy pol = {0};
    pol.prio = rnd_prio;
    pol.ctx = r;
    op_err e = {0};
    double ms = -1;
    CHECK_MSG(op_sim_dynamic(&p, &pol, ws, &e) == OP_OK, "%s", e.msg);
    if (p.pred.valid) ms = p.pred.makespan_ms;
    op_plan_free(&p);
    return ms;
}

/* Never above what any plan the simulator gives takes: every baseline, random plans (any
 * placement, fused or split backward, with or without communication) and the tuner's. */
TEST(never_above_any_simulated_plan) {
    op_rng r;
    op_rng_seed(&r, 5);
    op_sim_ws *ws = op_sim_ws_new();
    const char *const *names = op_sched_names();
    int checked = 0, tight = 0;
    for (int it = 0; it < 200; it++) {
        int P = 1 + op_rng_int(&r, 4), n = P + op_rng_int(&r, 6), M = 1 + op_rng_int(&r, 8);
        random_layers(&r, n);
        op_problem pr = {.model = "rnd", .layers = L, .n_layers = n, .P = P, .M = M};
        pr.tokens_per_mb = 1;
        if (op_rng_int(&r, 2)) op_comm_default(&pr.comm, 2);
        else pr.comm.none = 1;
        double lb = op_lower_bound(L, n, P, M), best = INFINITY;
        for (int i = 0; it % 2 == 0 && names[i]; i++) { /* baselines search: every other */
            op_plan p;
            op_err e = {0};
            if (op_sched_build(names[i], &pr, &p, &e) != OP_OK) continue; /* not applicable */
            CHECK_MSG(p.pred.makespan_ms >= lb * (1 - 1e-9), "%s P=%d M=%d n=%d: %.9g < %.9g",
                      names[i], P, M, n, p.pred.makespan_ms, lb);
            best = fmin(best, p.pred.makespan_ms);
            checked++;
            op_plan_free(&p);
        }
        for (int k = 0; k < 4; k++) {
            double ms = random_plan_ms(&pr, &r, ws);
            CHECK_MSG(ms >= lb * (1 - 1e-9), "random P=%d M=%d n=%d: %.9g < %.9g", P, M, n, ms,
                      lb);
            checked++;
        }
        if (it % 20 == 0) {
            op_tune_opts o;
            op_tune_opts_default(&o);
            o.max_evals = 300;
            op_plan p;
            op_err e = {0};
            CHECK_MSG(op_tune(&pr, &o, &p, &e) == OP_OK, "%s", e.msg);
            CHECK(p.pred.makespan_ms >= lb * (1 - 1e-9));
            best = fmin(best, p.pred.makespan_ms);
            checked++;
            op_plan_free(&p);
        }
        tight += best <= lb * (1 + 1e-9);
    }
    op_sim_ws_free(ws);
    CHECK(checked > 1200);
    CHECK(tight > 5); /* reached exactly on some: it is not loose everywhere */
}

/* The tuner's target case (issue: tuned <= 1.02x the bound).  The joint bound is above the
 * old warm-up term (369.60) and the plain exact balance (369.76 without head), and the fill
 * term (test_bound_fill.c) above both (370.55); it is a bound: the tuned plan is not below it. */
TEST(nemotron_h_8b_profile_p4_m8) {
    op_problem_built b;
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.comm_none = 1;
    op_err e = {0};
    if (op_problem_build(&b, "nemotron-h-8b-profile", NULL, 4, 8, &o, &e) != OP_OK) {
        CHECK_MSG(0, "%s", e.msg);
        return;
    }
    double warm = op_lower_bound_warmup(b.pr.layers, b.pr.n_layers, 4, 8);
    double j = op_lower_bound_joint(b.pr.layers, b.pr.n_layers, 4, 8);
    double lb = op_lower_bound(b.pr.layers, b.pr.n_layers, 4, 8);
    CHECK_NEAR(warm, 369.6047, 1e-6);
    CHECK(j >= 369.756 && j <= 369.758);
    CHECK(lb >= j);
    /* the fill term: 13.89 ms of the devices' time is idle by 7.81 ms whatever the plan
     * (op_lower_bound_fill's comment), so the bound is (1468.296 + 13.89) / 4 */
    double fill = op_lower_bound_fill(b.pr.layers, b.pr.n_layers, 4, 8);
    CHECK(fill >= 370.546 && fill <= 370.547);
    CHECK(fill > j + 0.7);
    CHECK_NEAR(lb, fill, 1e-12);
    op_tune_opts to;
    op_tune_opts_default(&to);
    op_plan p;
    CHECK(op_tune(&b.pr, &to, &p, &e) == OP_OK);
    CHECK(p.pred.makespan_ms >= lb);
    /* the polish of the engine's orders (tn_polish_plan; 379.78 ms without it) and of
     * the best candidate's knob neighbours (tune_polish.c; 377.95 without it): the issue's
     * target, within 2% of the bound */
    CHECK(p.pred.makespan_ms <= 377.8);
    CHECK(p.pred.makespan_ms <= 1.02 * lb);
    CHECK_NEAR(p.pred.lower_bound_ms, lb, 1e-12);
    printf("nemotron-h-8b-profile P=4 M=8 comm none: tuned %.2f ms, bound %.3f ms (warm-up term "
           "%.3f), tuned / bound %.4f\n",
           p.pred.makespan_ms, lb, warm, p.pred.makespan_ms / lb);
    op_plan_free(&p);
    op_problem_built_free(&b);
}

/* How many devices the bound can use (op_problem_bound_devices).  Three light layers (F = I = W
 * = 1) and a heavy last one (F = I = W = 10), M = 4: the heavy layer runs whole on one device,
 * 4 x 30 = 120 ms after the F chain below it (3), so two devices (the heavy one and one for the
 * rest, 36 ms) have the bound of four, and one device does not (all 156 ms).  Four equal
 * layers: the work / P term sets the bound, so every device counts.  A limit that lets a device
 * hold one layer's static bytes only: fewer than four devices cannot hold the model. */
TEST(bound_devices) {
    for (int l = 0; l < 3; l++) layer(l, 1, 1, 1);
    layer(3, 10, 10, 10);
    op_problem pr = {.model = "t", .layers = L, .n_layers = 4, .P = 4, .M = 4};
    pr.comm.none = 1;
    pr.tokens_per_mb = 1;
    double lp = 0, lk = 0;
    CHECK(op_problem_bound_devices(&pr, 1e-3, &lp, &lk) == 2);
    CHECK_NEAR(lp, op_lower_bound(L, 4, 4, 4), 1e-9);
    CHECK(lp >= 123 - 1e-9);
    CHECK_NEAR(lk, op_lower_bound(L, 4, 2, 4), 1e-9);
    CHECK(lk <= lp * (1 + 1e-3));
    CHECK(op_lower_bound(L, 4, 1, 4) > lp * (1 + 1e-3));
    /* the same limit-free problem on 1 device: nothing fewer to offer */
    pr.P = 1;
    CHECK(op_problem_bound_devices(&pr, 1e-3, NULL, NULL) == 1);
    /* a limit of 1.5 layers' static bytes: each device holds one layer, so four are needed */
    pr.P = 4;
    pr.mem_limit_bytes = 1500;
    CHECK(op_problem_bound_devices(&pr, 1e-3, &lp, &lk) == 4);
    CHECK_NEAR(lk, lp, 0);
    pr.mem_limit_bytes = 0;
    /* equal layers: work / P binds, so each device shortens the bound */
    for (int l = 0; l < 4; l++) layer(l, 1, 1, 1);
    pr.M = 8;
    CHECK(op_problem_bound_devices(&pr, 1e-3, &lp, &lk) == 4);
    CHECK_NEAR(lk, lp, 0);
    /* a mixed cluster is left as it is */
    int types[4] = {0, 0, 1, 1};
    op_layer_cost tl[8];
    for (int l = 0; l < 4; l++) tl[l] = L[l], tl[4 + l] = L[l];
    layer(3, 10, 10, 10);
    for (int l = 0; l < 4; l++) tl[l] = L[l], tl[4 + l] = L[l];
    pr.n_types = 2, pr.type_layers = tl, pr.dev_type = types, pr.M = 4;
    CHECK(op_problem_bound_devices(&pr, 1e-3, NULL, NULL) == 4);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(two_layers_one_microbatch_5_not_4);
    RUN(four_layers_indivisible_25_not_24_5);
    RUN(drain_without_w_in_the_fraction);
    RUN(edges);
    RUN(search_equals_brute_force);
    RUN(never_above_any_simulated_plan);
    RUN(nemotron_h_8b_profile_p4_m8);
    RUN(bound_devices);
    return check_report("bound");
}
