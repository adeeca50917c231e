/* balanced.c: the partition a partition-only tuner (Mist, AdaPipe, SimPipe's BAPAR) gives: a
 * contiguous split of all layers, embedding and head included, minimizing the busiest stage's
 * F+I+W time.  Exact: the bottleneck by bisection with greedy packing, then among the splits
 * with the optimal bottleneck, the one with the smallest sum of squared stage times (the most
 * even) wins, so the result is unique and deterministic. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sched.h"

/* Fewest stages of consecutive layers, each at most cap, that cover every layer (greedy
 * packing is optimal for this); n + 1 when a single layer exceeds cap. */
static int stages_needed(const double *pre, int n, double cap) {
    int k = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && pre[j + 1] - pre[i] <= cap) j++;
        if (j == i) return n + 1;
        k++;
        i = j;
    }
    return k;
}

int op_sched_balanced_split(const op_layer_cost *layers, int n, int S, int *first, op_err *err) {
    if (S < 1 || n < S)
        return op_errf(err, OP_EINVAL, "cannot split %d layers into %d non-empty stages", n, S);
    double *pre = op_xcalloc((size_t)n + 1, sizeof *pre);
    for (int l = 0; l < n; l++) {
        pre[l + 1] = pre[l] + layers[l].f_ms + layers[l].i_ms + layers[l].w_ms;
        /* a NaN cost never let the packing advance (a hang), an infinite sum reached no cap */
        if (!(layers[l].f_ms >= 0 && layers[l].i_ms >= 0 && layers[l].w_ms >= 0 && isfinite(pre[l + 1]))) {
            free(pre);
            return op_errf(err, OP_EINVAL, "layers[%d]: F, I and W must be finite and >= 0, and "
                           "their sum over the layers finite", l);
        }
    }
    /* The optimal bottleneck: bisection on the cap (feasible iff greedy packing needs at most
     * S stages; more stages never raise the max), then the bottleneck the packing actually
     * reaches, which is a stage sum between the optimum and the cap.  O(n log) instead of the
     * O(S n^2) dynamic program, so thousands of layers stay fast. */
    double lo = 0, hi = pre[n];
    for (int l = 0; l < n; l++) {
        double t = pre[l + 1] - pre[l];
        lo = t > lo ? t : lo;
    }
    if (pre[n] / S > lo) lo = pre[n] / S;
    if (stages_needed(pre, n, lo) <= S) hi = lo;
    for (int it = 0; it < 200 && hi - lo > 1e-13 * (hi > 1 ? hi : 1); it++) {
        double mid = 0.5 * (lo + hi);
        if (stages_needed(pre, n, mid) <= S) hi = mid;
        else lo = mid;
    }
    double reach = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && pre[j + 1] - pre[i] <= hi) j++;
        reach = pre[j] - pre[i] > reach ? pre[j] - pre[i] : reach;
        i = j;
    }
    /* cap with a relative slack so that float sums in another order still pass */
    double cap = reach * (1 + 1e-12) + 1e-15;
    /* Among splits under the cap, the smallest sum of squared stage times.  Stage [j, i) is
     * allowed when its time is within the cap: j from lo_j(i) on, which only moves forward. */
    size_t cells = (size_t)(S + 1) * (size_t)(n + 1);
    double *sq = op_xmalloc(cells * sizeof *sq); /* sq[k][i]: min sum of squares, i layers, k stages */
    int *cut = op_xmalloc(cells * sizeof *cut);
#define AT(a, k, i) (a)[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
    for (size_t c = 0; c < cells; c++) sq[c] = DBL_MAX;
    AT(sq, 0, 0) = 0;
    for (int k = 1; k <= S; k++) {
        int jlo = 0;
        for (int i = k; i <= n - (S - k); i++) {
            while (jlo < i && pre[i] - pre[jlo] > cap) jlo++;
            for (int j = jlo > k - 1 ? jlo : k - 1; j < i; j++) {
                if (AT(sq, k - 1, j) == DBL_MAX) continue;
                double t = pre[i] - pre[j], q = AT(sq, k - 1, j) + t * t;
                if (q < AT(sq, k, i)) {
                    AT(sq, k, i) = q;
                    AT(cut, k, i) = j;
                }
            }
        }
    }
    OP_ASSERT(AT(sq, S, n) < DBL_MAX, "balanced split found no partition under its own cap");
    first[S] = n;
    for (int k = S, i = n; k >= 1; k--) {
        i = AT(cut, k, i);
        first[k - 1] = i;
    }
#undef AT
    free(pre);
    free(sq);
    free(cut);
    return OP_OK;
}
