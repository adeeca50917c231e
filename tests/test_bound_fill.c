/* test_bound_fill.c: the pipeline-fill lower bound (op_lower_bound_fill, plan/bound_fill.c)
 * by hand, never above the exact optimum of tiny problems (exhaustive.h), above the other
 * terms on some of them, and its value on the profile preset. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "exhaustive.h"
#include "octopipe/plan.h"
#include "octopipe/problem.h"

/* op_lower_bound without the fill term: the other terms, as plan.c takes them */
static double other_terms(const op_layer_cost *l, int n, int P, int M) {
    double work = 0, chain = 0, best = 0, head = 0, tail = 0;
    for (int i = 0; i < n; i++) {
        double fi = l[i].f_ms + l[i].i_ms;
        work += fi + l[i].w_ms;
        chain += fi;
        best = fmax(best, fmax(head + M * fi + tail, head + M * (fi + l[i].w_ms)));
        head += l[i].f_ms;
        tail += l[i].i_ms;
    }
    best = fmax(best, fmax(chain, work * M / P));
    best = fmax(best, op_lower_bound_joint(l, n, P, M)); /* >= the warm-up term */
    for (int k = 1; k * P < n; k++) { /* pigeonhole over the heaviest layers */
        double w[8];
        for (int i = 0; i < n; i++) w[i] = l[i].f_ms + l[i].i_ms + l[i].w_ms;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (w[j] > w[i]) {
                    double t = w[i];
                    w[i] = w[j];
                    w[j] = t;
                }
        best = fmax(best, (k + 1) * M * w[k * P]);
    }
    return best;
}

/* Two layers, P = 2, M = 2: layer 0 (F 1, W 1), layer 1 (F 2), no I time.  Layer 1's two F
 * run one after the other on one device, the first from 1 ms (after layer 0's F), so the second
 * microbatch's F of layer 1 ends at 5 at the earliest, and its W of layer 0 follows: 6.  The
 * per-layer term stops at 1 + 2 x 2 = 5 (it does not see the W), work / P is 4, the chain 3.
 * 6 is the optimum: layer 0 on one device, layer 1 on the other. */
TEST(flow_shop_by_hand) {
    op_layer_cost l[2];
    memset(l, 0, sizeof l);
    l[0].f_ms = 1, l[0].w_ms = 1;
    l[1].f_ms = 2;
    CHECK_NEAR(op_lower_bound_fill(l, 2, 2, 2), 6, 1e-12);
    CHECK_NEAR(other_terms(l, 2, 2, 2), 5, 1e-6);
    CHECK_NEAR(op_lower_bound(l, 2, 2, 2), 6, 1e-12);
    long nodes = 0;
    CHECK_NEAR(exhaustive(l, 2, 2, 2, 100, &nodes), 6, 1e-12);
    /* one device: the fill term is the chain-and-work argument of that device, 8 = work */
    CHECK_NEAR(op_lower_bound_fill(l, 2, 1, 2), 8, 1e-12);
    /* no work, or nothing to schedule: 0 */
    op_layer_cost z[1];
    memset(z, 0, sizeof z);
    CHECK_NEAR(op_lower_bound_fill(z, 1, 2, 3), 0, 0);
    CHECK_NEAR(op_lower_bound_fill(l, 2, 0, 2), 0, 0);
}

/* Random tiny problems (400: 2-4 layers, 2-3 devices, 2-3 microbatches): the exact optimum over
 * every partition, placement and active schedule is never below the fill term, which is above
 * every other term on some of them (it is not implied by them) and reached on some. */
TEST(never_above_the_exhaustive_optimum) {
    op_rng r;
    op_rng_seed(&r, 3);
    int bites = 0, tight = 0, n_checked = 0;
    for (int it = 0; it < 400; it++) {
        int n = 2 + op_rng_int(&r, 3), P = 2 + op_rng_int(&r, 2), M = 2 + op_rng_int(&r, 2);
        if (n == 4 && M == 3) M = 2; /* keeps the branch and bound short */
        op_layer_cost l[4];
        memset(l, 0, sizeof l);
        double work = 0;
        for (int i = 0; i < n; i++) {
            l[i].f_ms = 0.5 * (1 + op_rng_int(&r, 6));
            l[i].i_ms = 0.5 * op_rng_int(&r, 5);
            l[i].w_ms = 0.5 * op_rng_int(&r, 3);
            work += l[i].f_ms + l[i].i_ms + l[i].w_ms;
        }
        double fill = op_lower_bound_fill(l, n, P, M), rest = other_terms(l, n, P, M);
        long nodes = 0;
        double opt = exhaustive(l, n, P, M, M * work + 1e-9, &nodes); /* one device: M work */
        CHECK_MSG(opt >= fill - 1e-9, "n=%d P=%d M=%d: optimum %.6f < fill %.6f", n, P, M, opt,
                  fill);
        CHECK(op_lower_bound(l, n, P, M) >= fill);
        bites += fill > rest + 1e-9;
        tight += fabs(opt - fill) < 1e-9 && fill > rest + 1e-9;
        n_checked++;
    }
    printf("  %d tiny problems: the fill term above the others on %d, equal to the optimum on %d "
           "of those\n", n_checked, bites, tight);
    CHECK(bites >= 40);
    CHECK(tight >= 10);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(flow_shop_by_hand);
    RUN(never_above_the_exhaustive_optimum);
    return check_report("bound_fill");
}
