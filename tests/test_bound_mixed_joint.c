/* test_bound_mixed_joint.c: the joint bound with each device's layers at its own type's times
 * (op_bound_joint_types, part 5 of plan/bound_mixed.c): the search against brute force over
 * every assignment of layers to devices and of the used devices to ranks on small two-type
 * clusters, and its place in op_lower_bound_mixed (never below the other parts, the same as
 * the uniform bound when the types are alike). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "octopipe/plan.h"
#include "plan/bound_int.h"

enum { MAXL = 6, MAXP = 3 };

static void layer(op_layer_cost *c, double f, double i, double w) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "x");
    c->sym = '-';
    c->f_ms = f, c->i_ms = i, c->w_ms = w;
    c->act_bytes = 1;
}

/* The claim's packing by brute force: every layer on one of P devices (device d of type
 * dt[d], rows [2 * n]), the used devices in every order of ranks; a device at rank r needs
 * head(r) + M (F + I at its type) + max(M W at its type, tail(r)), head and tail over each
 * layer's least times over the types present.  The least over all of the largest need. */
static double brute(const op_layer_cost *rows, int n, const int *dt, int P, int M) {
    int present[2] = {0, 0};
    for (int d = 0; d < P; d++) present[dt[d]] = 1;
    double head[MAXL + 1], tail[MAXL + 1], h = 0, t = 0;
    for (int l = 0; l < n; l++) {
        head[l] = h, tail[l] = t;
        double f = INFINITY, i = INFINITY, w = INFINITY;
        for (int ty = 0; ty < 2; ty++)
            if (present[ty]) {
                const op_layer_cost *y = &rows[ty * n + l];
                f = fmin(f, y->f_ms), i = fmin(i, y->i_ms), w = fmin(w, y->w_ms);
            }
        h += f;
        t = i + fmax(w, t);
    }
    int total = 1;
    for (int l = 0; l < n; l++) total *= P;
    double best = INFINITY;
    for (int code = 0; code < total; code++) {
        double fi[MAXP] = {0}, w[MAXP] = {0};
        int used[MAXP] = {0}, u[MAXP], k = 0;
        for (int l = 0, c = code; l < n; l++, c /= P) {
            const op_layer_cost *y = &rows[dt[c % P] * n + l];
            fi[c % P] += y->f_ms + y->i_ms, w[c % P] += y->w_ms, used[c % P] = 1;
        }
        for (int d = 0; d < P; d++)
            if (used[d]) u[k++] = d;
        /* every order of the k <= 3 used devices over ranks 0..k-1 */
        static const int perm3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        static const int perm2[2][3] = {{0, 1, 0}, {1, 0, 0}};
        int np = k == 3 ? 6 : k == 2 ? 2 : 1;
        for (int q = 0; q < np; q++) {
            double mx = 0;
            for (int r = 0; r < k; r++) {
                int d = u[k == 3 ? perm3[q][r] : k == 2 ? perm2[q][r] : 0];
                mx = fmax(mx, head[r] + M * fi[d] + fmax(M * w[d], tail[r]));
            }
            best = fmin(best, mx);
        }
    }
    return best;
}

TEST(search_equals_brute_force) {
    op_rng r;
    op_rng_seed(&r, 5);
    int above = 0;
    for (int it = 0; it < 300; it++) {
        int n = 1 + op_rng_int(&r, MAXL), P = 2 + op_rng_int(&r, MAXP - 1), M = 1 + op_rng_int(&r, 5);
        op_layer_cost rows[2 * MAXL];
        for (int l = 0; l < n; l++) { /* few values, so kinds repeat; type 1 up to 3x slower */
            double f = 0.5 * (1 + op_rng_int(&r, 4)), i = 0.5 * op_rng_int(&r, 5), w = 0.5 * op_rng_int(&r, 4);
            double s = 1 + 0.5 * op_rng_int(&r, 5);
            layer(&rows[l], f, i, w);
            layer(&rows[n + l], s * f, s * i, s * w);
        }
        int dt[MAXP];
        for (int d = 0; d < P; d++) dt[d] = op_rng_int(&r, 2);
        double want = brute(rows, n, dt, P, M);
        double got = op_bound_joint_types(rows, 2, n, dt, P, M, 0);
        /* never above the packing's optimum; below it by at most the bisection's 1e-7 */
        CHECK_MSG(got <= want * (1 + 1e-12) && got >= want * (1 - 2e-7),
                  "it %d n=%d P=%d M=%d: %.9g vs %.9g", it, n, P, M, got, want);
        double quick = op_lower_bound_mixed_quick(rows, 2, n, dt, P, M);
        double full = op_lower_bound_mixed(rows, 2, n, dt, P, M);
        CHECK(full >= quick && full >= got * (1 - 1e-12));
        CHECK(full <= fmax(quick, want) * (1 + 1e-12));
        above += got > quick * (1 + 1e-6);
    }
    printf("  above the other parts in %d of 300 cases\n", above);
    CHECK(above > 30); /* the part adds something on unequal devices */
}

/* With lo at or above the answer nothing is searched for: lo comes back. */
TEST(lo_kept) {
    op_layer_cost rows[4];
    layer(&rows[0], 1, 1, 0), layer(&rows[1], 1, 1, 0);
    layer(&rows[2], 2, 2, 0), layer(&rows[3], 2, 2, 0);
    int dt[2] = {0, 1};
    /* fast device with both layers 4 x 4 = 16; one each: the slow one 4 x 4 = 16 at rank 0 or
     * 1 + 16 + 1 = 18 at rank 1 while the fast one runs 8: 16 */
    CHECK_NEAR(op_bound_joint_types(rows, 2, 2, dt, 2, 4, 0), 16, 1e-5);
    CHECK_NEAR(op_bound_joint_types(rows, 2, 2, dt, 2, 4, 20), 20, 0);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(search_equals_brute_force);
    RUN(lo_kept);
    return check_report("bound_mixed_joint");
}
