/* test_bound_count.c: the whole-layer counting bound with memory (op_lower_bound_count_mem,
 * plan/bound_count.c): hand cases, and never above the best assignment of layers to devices
 * that keeps every device's static bytes within its limit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "octopipe/plan.h"

static void layer(op_layer_cost *c, double work, int64_t stat) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "x");
    c->sym = '-';
    c->f_ms = c->i_ms = c->w_ms = work / 3;
    c->act_bytes = 1;
    c->static_bytes = stat;
}

/* Two layers of 60 static bytes, limit 100 per device: one each, so the slow device (work 3
 * per layer, against 1 on the fast one) must run one: 3 M, where without the limit both go
 * on the fast device (2 M). */
TEST(limit_forces_slow_device) {
    op_layer_cost rows[4];
    layer(&rows[0], 1, 60), layer(&rows[1], 1, 60); /* type 0: fast */
    layer(&rows[2], 3, 60), layer(&rows[3], 3, 60); /* type 1: slow */
    int dt[2] = {0, 1};
    double lim[2] = {100, 100};
    CHECK_NEAR(op_lower_bound_count_mem(rows, 2, 2, dt, lim, 0, 2, 4), 12, 1e-9);
    CHECK_NEAR(op_lower_bound_count_mem(rows, 2, 2, dt, NULL, 0, 2, 4), 8, 1e-9); /* no limit */
    CHECK_NEAR(op_lower_bound_count_mem(rows, 2, 2, dt, NULL, 120, 2, 4), 8, 1e-9); /* both fit */
    /* the memory-free mixed bound cannot see it */
    CHECK(op_lower_bound_mixed(rows, 2, 2, dt, 2, 4) < 12 - 1e-9);
}

/* Uniform devices: three layers of 50 bytes under a limit of 60 need three devices, one each:
 * M x the heaviest.  With two devices nothing fits; the bound stays finite (the sets S that
 * still fit say what they say) and the tuner is the one that reports no plan. */
TEST(uniform_and_infeasible) {
    op_layer_cost rows[3];
    layer(&rows[0], 6, 50), layer(&rows[1], 3, 50), layer(&rows[2], 3, 50);
    CHECK_NEAR(op_lower_bound_count_mem(rows, 1, 3, NULL, NULL, 60, 3, 2), 12, 1e-9); /* M x 6 */
    /* the same layers at 110 bytes a device: two fit, and then the 6 alone bounds (M x 6) */
    CHECK_NEAR(op_lower_bound_count_mem(rows, 1, 3, NULL, NULL, 110, 2, 2), 12, 1e-9);
    double v = op_lower_bound_count_mem(rows, 1, 3, NULL, NULL, 60, 2, 2);
    CHECK(v >= 0 && isfinite(v));
}

/* Random: 2 types, 2-3 devices, 6 layers, random works, statics and per-device limits; the
 * bound never exceeds the best assignment (each layer on one device, every device's statics
 * within its limit, makespan >= M x the busiest device's work), and equals it sometimes. */
TEST(below_best_feasible_assignment) {
    uint64_t seed = 5;
    int tight = 0, cases = 0;
    for (int trial = 0; trial < 200; trial++) {
        enum { L = 6 };
        int P = 2 + trial % 2, M = 1 + trial % 4, dt[3];
        for (int d = 0; d < P; d++) dt[d] = (d + trial) % 2;
        op_layer_cost rows[2 * L];
        double lim[3];
        for (int l = 0; l < L; l++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t st = 10 + (int64_t)((seed >> 40) % 50);
            for (int t = 0; t < 2; t++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                layer(&rows[t * L + l], 0.2 + (double)(seed >> 44) / (1 << 18), st);
            }
        }
        for (int d = 0; d < P; d++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            lim[d] = 60 + (double)((seed >> 40) % 120);
        }
        double opt = INFINITY;
        int n = 1;
        for (int l = 0; l < L; l++) n *= P;
        for (int a = 0; a < n; a++) {
            double load[3] = {0, 0, 0}, mem[3] = {0, 0, 0};
            for (int l = 0, x = a; l < L; l++, x /= P) {
                load[x % P] += rows[dt[x % P] * L + l].f_ms * 3;
                mem[x % P] += (double)rows[l].static_bytes;
            }
            int ok = 1;
            for (int d = 0; d < P; d++) ok &= mem[d] <= lim[d];
            if (ok) opt = fmin(opt, M * fmax(load[0], fmax(load[1], load[2])));
        }
        double b = op_lower_bound_count_mem(rows, 2, L, dt, lim, 0, P, M);
        if (opt == INFINITY) continue; /* nothing fits: any value is vacuous */
        cases++;
        CHECK_MSG(b <= opt * (1 + 1e-9), "trial %d: bound %.9g > best feasible assignment %.9g", trial, b, opt);
        CHECK(b >= op_lower_bound_count_mem(rows, 2, L, dt, NULL, 0, P, M) - 1e-9); /* limits only add */
        tight += b >= opt * (1 - 1e-9);
    }
    printf("  %d feasible cases; the bound equals the best feasible assignment in %d\n", cases, tight);
    CHECK(cases > 50);
    CHECK(tight > 0);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(limit_forces_slow_device);
    RUN(uniform_and_infeasible);
    RUN(below_best_feasible_assignment);
    return check_report("bound_count");
}
