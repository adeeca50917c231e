/* test_bound_mem.c: the memory-aware bound on mixed clusters (plan/bound_mem.c pooled over all
 * devices, plan/bound_memgroup.c per group of like devices): hand cases pinning the speed
 * ratio and the per-group rows, the uniform case unchanged, and never above any plan that
 * fits on random small problems, uniform and mixed, with tight per-device limits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

static op_layer_cost lay(double f, double i, double w, int64_t act, int64_t stat) {
    op_layer_cost c = {0};
    snprintf(c.name, sizeof c.name, "x");
    c.sym = '-';
    c.f_ms = f, c.i_ms = i, c.w_ms = w;
    c.act_bytes = act, c.static_bytes = stat, c.out_bytes = 10;
    return c;
}

/* One type (or two alike) and one limit: the mixed form is the uniform relaxation. */
TEST(uniform_unchanged) {
    uint64_t seed = 7;
    for (int trial = 0; trial < 40; trial++) {
        op_layer_cost L[16];
        int n = 4 + trial % 9, P = 2 + trial % 3, M = P + trial % 5;
        for (int l = 0; l < n; l++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            double f = 0.5 + (double)(seed >> 44) / (1 << 20);
            L[l] = lay(f, 1.5 * f, 0.5 * f, 100 + (int64_t)(seed >> 54), 10 + (int64_t)(seed >> 58));
            L[l].act_sel_bytes = trial % 2 ? L[l].act_bytes / 2 : 0, L[l].f_sel_ms = f / 5;
        }
        op_comm c;
        op_comm_default(&c, 0);
        c.host_bw_GBps = trial % 3 ? 1e-4 * (1 + trial % 4) : 0;
        double lim = 75.0 * n / P + 60 * (trial % 7); /* statics are at most 73 a layer */
        double u = op_lower_bound_mem(L, n, P, M, lim, &c);
        CHECK(isfinite(u));
        CHECK_NEAR(op_lower_bound_mem_mixed(L, 1, n, NULL, NULL, lim, P, M, &c), u, 1e-12);
        op_layer_cost rows[32];
        int dt[4];
        for (int l = 0; l < n; l++) rows[l] = rows[n + l] = L[l];
        for (int d = 0; d < P; d++) dt[d] = d % 2;
        double m = op_lower_bound_mem_mixed(rows, 2, n, dt, NULL, lim, P, M, &c);
        CHECK_MSG(m >= u * (1 - 1e-9), "trial %d: %.9g < %.9g", trial, m, u); /* alike types: the same relaxation */
        CHECK(m >= op_lower_bound_mixed(rows, 2, n, dt, P, M) * (1 - 1e-12));
    }
}

/* Speed ratio, by hand.  Eight layers f = i = 1, w 0, act 100, on a fast device and one
 * twice as slow (every op 2x: sig = 1, 1/2), M = 8, limit 200 each, no host link.  When the
 * last I of a microbatch starts all 800 bytes of its stashes are held, in 400 bytes of
 * memory: 400 bytes must be recomputed, at 0.01 ms/B the cheapest (full), R = 4 ms per
 * microbatch, all inside I.  In fast-device time the work is 8 (16 + 4) = 160 ms, and the
 * two devices do at most T + T / 2 of it: T >= 320 / 3 = 106.67.  The memory-free bound
 * (whole layers: 5 on the fast device and 3 on the slow, 96) is below it. */
TEST(speed_ratio_by_hand) {
    op_layer_cost rows[16];
    for (int l = 0; l < 8; l++) rows[l] = lay(1, 1, 0, 100, 0), rows[8 + l] = lay(2, 2, 0, 100, 0);
    int dt[2] = {0, 1};
    double lim[2] = {200, 200};
    double free_b = op_lower_bound_mixed(rows, 2, 8, dt, 2, 8);
    CHECK(free_b < 320.0 / 3 - 1);
    CHECK_NEAR(op_lower_bound_mem_mixed(rows, 2, 8, dt, lim, 0, 2, 8, NULL), 320.0 / 3, 1e-9);
    /* uniform fast devices would do it in 160 / 2 */
    CHECK_NEAR(op_lower_bound_mem(rows, 8, 2, 8, 200, NULL), 80, 1e-9);
    /* a device without a limit: nothing binds */
    double nolim[2] = {200, 0};
    CHECK_NEAR(op_lower_bound_mem_mixed(rows, 2, 8, dt, nolim, 0, 2, 8, NULL), free_b, 1e-12);
}

/* Per group, by hand.  Four layers f = i = 1, w 0, act 100, M = 4; a fast device (limit
 * 100) and one 3x slower with memory to spare.  The pooled relaxation sees 100 + plenty of
 * free memory and says 24 (work: the fast device takes 3 layers, 24 ms, the slow one 1, 24).
 * But what the fast device runs it must stash in its own 100 bytes: layer l on it lives at
 * least c = 8, 6, 4, 2 (l = 0..3), so with x_l of layer l on it (r_l of that recomputed)
 *   slow 24 (4 - sum x) <= T,  fast 4 sum (2 x + r) <= T,  memory 400 sum (x - r) c <= 100 T.
 * Its optimum: layers 2, 3 and 0.9 of layer 1 on the fast device, 0.8 of layer 1 recomputed:
 * T = 26.4 (slow 24 * 1.1; fast 4 (2 * 2.9 + 0.8); memory 400 (0.1 * 6 + 4 + 2) = 2640). */
TEST(group_memory_by_hand) {
    op_layer_cost rows[8];
    for (int l = 0; l < 4; l++) rows[l] = lay(1, 1, 0, 100, 0), rows[4 + l] = lay(3, 3, 0, 100, 0);
    int dt[2] = {0, 1};
    double lim[2] = {100, 1e9};
    /* Without memory, whole layers per device at its own speed (bound_mixed.c part 5): the
     * fast device with 3 layers runs 4 x 6 = 24, the slow one's layer 4 x 6 = 24 plus head 1
     * and tail 1 at rank 1 (or the other way round): 26; 4 layers on one device 32, 2 and 2
     * 48 on the slow one. */
    CHECK_NEAR(op_lower_bound_mixed(rows, 2, 4, dt, 2, 4), 26, 1e-6);
    double pooled = op_lower_bound_mem_mixed(rows, 2, 4, dt, lim, 0, 2, 4, NULL);
    CHECK(pooled < 26.4 - 0.1); /* pooled memory adds nothing to it */
    double g = op_lower_bound_mem_groups(rows, 2, 4, dt, lim, 0, 2, 4, NULL, 0);
    CHECK(g <= 26.4 * (1 + 1e-9)); /* never above the relaxation's optimum */
    CHECK(g >= 26.4 * (1 - 0.01)); /* the weight search gets within 1% of it */
    /* The plan's and problem's bound also take whole layers per device (bound_memjoint.c):
     * the fast device holding 3 layers holds 300 bytes of one microbatch's stashes when its
     * deepest I starts, in 100: 200 bytes recomputed, 2 ms a microbatch, so 4 (6 + 2) = 32;
     * with 2 layers the slow device runs 2 (4 x 12 = 48), with 4 the fast one 4 (8 + 3) = 44.
     * The slow device at rank 1 (its lowest layer above the fast one's) waits head 1 and
     * drains tail 1: 1 + 24 + 1 = 26 < 32.  So 32, above the fractional 26.4. */
    op_problem pr = {0};
    pr.model = "g";
    pr.layers = rows, pr.n_layers = 4, pr.P = 2, pr.M = 4;
    pr.n_types = 2, pr.type_layers = rows, pr.dev_type = dt, pr.dev_mem_limit = lim;
    op_comm_default(&pr.comm, 0);
    pr.comm.host_bw_GBps = 0;
    CHECK_NEAR(op_problem_lower_bound_mem(&pr), 32, 1e-6);
    /* with room for every stash on the fast device only the time rows are left: 24 */
    lim[0] = 1e9;
    double t = op_lower_bound_mem_groups(rows, 2, 4, dt, lim, 0, 2, 4, NULL, 0);
    CHECK(t <= 24 * (1 + 1e-9) && t >= 24 * (1 - 0.01));
}

/* Whole layers per group: two layers of 60 static bytes, limit 100 on each of two devices
 * (fast, 3x slow): the slow device must hold one (bound_count.c's case), which the fractional
 * rows alone would spread; the cut rows see it: 12 = M x 3. */
TEST(group_cuts_by_hand) {
    op_layer_cost rows[4];
    rows[0] = lay(1.0 / 3, 1.0 / 3, 1.0 / 3, 1, 60), rows[1] = rows[0];
    rows[2] = lay(1, 1, 1, 1, 60), rows[3] = rows[2];
    int dt[2] = {0, 1};
    double lim[2] = {100, 100};
    double g = op_lower_bound_mem_groups(rows, 2, 2, dt, lim, 0, 2, 4, NULL, 0);
    CHECK(g <= 12 * (1 + 1e-9));
    CHECK(g >= 12 * (1 - 0.01));
}

/* A layer whose static bytes alone exceed the limit (a profile's param_bytes, a small GPU) makes
 * a cut of capacity 0 before the cuts for 1 to 4 layers: five cuts for one group, all kept. */
TEST(group_cuts_with_a_layer_no_device_holds) {
    op_layer_cost rows[6];
    rows[0] = lay(1, 1, 1, 1, 1000);
    for (int l = 1; l < 6; l++) rows[l] = lay(1, 1, 1, 1, 10);
    double lim[1] = {500};
    double g = op_lower_bound_mem_groups(rows, 1, 6, NULL, lim, 0, 1, 4, NULL, 0);
    CHECK(g >= 0 && !isnan(g));
}

/* Per device, by hand, on one type and one limit.  Three layers f = i = w = 1, act 50,
 * static 100, M = 4, two devices of 270 bytes, no host link.  Two layers' statics (200) fit a
 * device and three (300) do not, so one device holds two layers and 70 bytes for stashes;
 * when its deepest layer's I of a microbatch starts, both its stashes of that microbatch are
 * held (100 kept): at least 30 bytes recomputed, at 1 ms per 50 bytes (full: f / act), 0.6 ms
 * every microbatch.  That device's F, I and W: 4 (2 x 3 + 0.6) = 26.4 from rank 0 (it holds
 * layer 0 or waits head(1) = 1 at rank 1: 27.4); the other runs 12, from head(1) = 1, with
 * 4 of W after its last I: 13.  Bound 26.4.  Without memory the same split gives 24, and the
 * pooled terms see 540 bytes of limits for 300 static and 150 of stashes: nothing forced.
 * Every plan that fits (brute force below) takes at least it. */
TEST(device_recompute_by_hand) {
    op_layer_cost L[3];
    for (int l = 0; l < 3; l++) L[l] = lay(1, 1, 1, 50, 100);
    op_problem pr = {0};
    pr.model = "d";
    pr.layers = L, pr.n_layers = 3, pr.P = 2, pr.M = 4, pr.tokens_per_mb = 1;
    pr.mem_limit_bytes = 270;
    op_comm_default(&pr.comm, 0);
    pr.comm.none = 1, pr.comm.host_bw_GBps = 0;
    double free_b = op_problem_lower_bound(&pr), lb = op_problem_lower_bound_mem(&pr);
    CHECK_NEAR(free_b, 24, 1e-12);
    CHECK(op_lower_bound_mem(L, 3, 2, 4, 270, &pr.comm) < 26.4 - 1);
    CHECK(op_lower_bound_count_mem(L, 1, 3, NULL, NULL, 270, 2, 4) < 26.4 - 1);
    CHECK_NEAR(lb, 26.4, 1e-6); /* the search bisects to 1e-7 */
    /* every plan: each cut into stages, placement, policy (keep, selective, full) and B or
     * I + W per stage, ordered by list scheduling under the limit, with each in-flight cap */
    int fit = 0, tried = 0;
    double best = INFINITY;
    for (int S = 1; S <= 3; S++)
        for (int cut = 0; cut < (S == 2 ? 2 : 1); cut++)
            for (int code = 0; code < (1 << S) * 27 * (1 << S); code++) {
                int place = code % (1 << S), pol = code / (1 << S) % 27, split = code / (1 << S) / 27;
                for (int cap = 0; cap <= 4; cap++) {
                    op_plan p;
                    op_plan_init_problem(&p, "brute", &pr, S);
                    for (int s = 0; s <= S; s++) p.stage_first[s] = S == 2 ? (s == 1 ? 1 + cut : s ? 3 : 0) : s * 3 / S;
                    for (int s = 0, q = pol; s < S; s++, q /= 3) {
                        p.stage_dev[s] = place >> s & 1;
                        p.stage_split[s] = (uint8_t)(split >> s & 1);
                        p.stage_act[s] = (uint8_t)(q % 3 == 0 ? OP_ACT_KEEP : q % 3 == 1 ? OP_ACT_SELECTIVE : OP_ACT_FULL);
                    }
                    int caps[2] = {cap, cap};
                    op_sim_policy sp = {0};
                    sp.mem_limit_bytes = pr.mem_limit_bytes;
                    sp.max_inflight = caps;
                    op_err e = {0};
                    tried++;
                    if (op_sim_dynamic(&p, &sp, NULL, &e) == OP_OK && p.pred.valid && op_plan_fits(&p)) {
                        CHECK_MSG(p.pred.makespan_ms >= lb * (1 - 1e-9), "S %d code %d cap %d: %.6f", S, code, cap,
                                  p.pred.makespan_ms);
                        best = fmin(best, p.pred.makespan_ms);
                        fit++;
                    }
                    op_plan_free(&p);
                }
            }
    CHECK(fit > 0);
    printf("  %d of %d plans fit, the fastest %.3f ms; bound %.3f (memory-free %.3f)\n", fit, tried, best,
           lb, free_b);
}

/* Random small problems, uniform and mixed (2 types, the second 1.5-3x slower, its own host
 * link), per-device limits between the static floor and a comfortable keep: every plan that
 * fits (each classic schedule with uniform and random per-stage policies, and the tuner's
 * plan) is never faster than the memory-aware bound, and where nothing binds the bound is
 * the memory-free one. */
TEST(never_above_a_fitting_plan) {
    unsigned seed = 4242;
#define RND() ((seed = seed * 1103515245u + 12345u) >> 8 & 0xffff)
    int checked = 0, bites = 0, checked_biting = 0;
    for (int trial = 0; trial < 60; trial++) {
        const int mixed = trial % 2;
        int n = 5 + RND() % 4, P = 2 + RND() % 2, M = P + RND() % 6;
        op_layer_cost rows[16];
        int64_t stat = 0, act = 0;
        double slow = 1.5 + RND() % 100 / 66.0;
        for (int l = 0; l < n; l++) {
            op_layer_cost *c = &rows[l];
            double f = 0.5 + RND() % 100 / 50.0; /* one RND() per statement: order matters */
            int64_t a = 1000 + RND() % 4000, st = 1000 + RND() % 3000;
            *c = lay(f, 0, 0, a, st);
            c->i_ms = c->f_ms * (1 + RND() % 100 / 100.0);
            c->w_ms = c->f_ms * (RND() % 100 / 100.0);
            c->act_sel_bytes = RND() % 2 ? c->act_bytes / 2 : 0;
            c->f_sel_ms = c->act_sel_bytes ? c->f_ms / 4 : 0;
            c->act_w_bytes = c->act_bytes / 3;
            rows[n + l] = *c;
            rows[n + l].f_ms *= slow, rows[n + l].i_ms *= slow, rows[n + l].w_ms *= slow;
            rows[n + l].f_sel_ms *= slow;
            stat += c->static_bytes, act += c->act_bytes;
        }
        int dt[3];
        double lim[3], host[3];
        for (int d = 0; d < P; d++) {
            dt[d] = mixed ? d % 2 : 0;
            lim[d] = (double)stat / P + (double)act * (0.05 + RND() % 100 / 150.0);
            host[d] = (200 + RND() % 5000) * 1e-6; /* 200..5200 B/ms */
        }
        op_problem pr = {0};
        pr.model = "r";
        pr.layers = rows, pr.n_layers = n, pr.P = P, pr.M = M, pr.tokens_per_mb = 1;
        if (mixed) pr.n_types = 2, pr.type_layers = rows, pr.dev_type = dt;
        pr.dev_mem_limit = lim;
        pr.mem_limit_bytes = lim[0];
        for (int d = 1; d < P; d++) pr.mem_limit_bytes = fmin(pr.mem_limit_bytes, lim[d]);
        op_comm_default(&pr.comm, 0);
        pr.comm.none = 1;
        if (trial % 4 < 2) pr.comm.host_bw_GBps = 0; /* half the problems cannot offload */
        else pr.comm.host_n = P, pr.comm.host_bw_dev_GBps = host, pr.comm.host_bw_GBps = host[0];
        double lb = op_problem_lower_bound_mem(&pr), free_b = op_problem_lower_bound(&pr);
        int b = lb > free_b * (1 + 1e-9);
        bites += b;
        /* half the schedules on each problem, by turns (each replay also computes the plan's
         * memory-free bound, which is most of this test's time), with keep, full, offload and
         * a random mix of policies */
        int si = 0;
        for (const char *const *nm = op_sched_names(); *nm; nm++) {
            op_plan p;
            op_err e = {0};
            if ((si++ + trial) % 2 || op_sched_build(*nm, &pr, &p, &e) != OP_OK) continue;
            for (int k = 0; k < 4; k++) {
                for (int s = 0; s < p.S; s++)
                    p.stage_act[s] = (uint8_t)(k == 0 ? OP_ACT_KEEP : k == 1 ? OP_ACT_FULL : k == 2 ? OP_ACT_OFFLOAD
                                                                                               : RND() % OP_ACT_N);
                for (int s = 0; s < p.S && !(pr.comm.host_bw_GBps > 0); s++)
                    if (p.stage_act[s] == OP_ACT_OFFLOAD) p.stage_act[s] = OP_ACT_FULL;
                if (op_sim_replay(&p, NULL, &e) != OP_OK || !op_plan_fits(&p)) continue;
                CHECK_MSG(p.pred.makespan_ms >= lb * (1 - 1e-9), "trial %d %s k %d: %.6f < bound %.6f",
                          trial, *nm, k, p.pred.makespan_ms, lb);
                if (k == 3) CHECK(p.pred.makespan_ms >= op_plan_lower_bound_mem(&p) * (1 - 1e-9));
                checked++;
                checked_biting += b;
            }
            op_plan_free(&p);
        }
        op_tune_opts o;
        op_tune_opts_default(&o);
        o.max_evals = 200;
        op_plan t;
        op_err e = {0};
        /* the tuner's plan on every third problem (the test's time is mostly tuning) */
        if (trial % 3 == 0 && op_tune(&pr, &o, &t, &e) == OP_OK && op_plan_fits(&t)) {
            CHECK_MSG(t.pred.makespan_ms >= lb * (1 - 1e-9), "trial %d tuned: %.6f < bound %.6f",
                      trial, t.pred.makespan_ms, lb);
            checked++;
            checked_biting += b;
            op_plan_free(&t);
        }
        /* generous limits: nothing binds, the memory-free bound stands */
        double big[3] = {1e15, 1e15, 1e15};
        pr.dev_mem_limit = big, pr.mem_limit_bytes = 1e15;
        double nb = op_problem_lower_bound_mem(&pr);
        CHECK_NEAR(nb, fmax(free_b, op_lower_bound_count_mem(rows, mixed ? 2 : 1, n, mixed ? dt : NULL,
                                                             NULL, 1e15, P, M)),
                   1e-9);
    }
#undef RND
    printf("  %d fitting plans checked, %d in the %d of 60 problems where the bound is above the "
           "memory-free one\n", checked, checked_biting, bites);
    CHECK(checked >= 100);
    CHECK(bites >= 5); /* the terms must bite somewhere, or the test checks nothing new */
    CHECK(checked_biting >= 3); /* 10 before the fill term raised the memory-free bound */
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(uniform_unchanged);
    RUN(speed_ratio_by_hand);
    RUN(group_memory_by_hand);
    RUN(group_cuts_by_hand);
    RUN(group_cuts_with_a_layer_no_device_holds);
    RUN(device_recompute_by_hand);
    RUN(never_above_a_fitting_plan);
    return check_report("bound_mem");
}
