/* balanced.c: the partition a partition-only tuner (Mist, AdaPipe, SimPipe's BAPAR) gives: a
 * contiguous split of all layers, embedding and head included, minimizing the busiest stage's
 * F+I+W time.  Exact, by dynamic programming over prefix sums (O(S * L^2)); among the splits
 * with the optimal bottleneck, the one with the smallest sum of squared stage times (the most
 * even) wins, so the result is unique and deterministic. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sched.h"

int op_sched_balanced_split(const op_layer_cost *layers, int n, int S, int *first, op_err *err) {
    if (S < 1 || n < S)
        return op_errf(err, OP_EINVAL, "cannot split %d layers into %d non-empty stages", n, S);
    double *pre = op_xcalloc((size_t)n + 1, sizeof *pre);
    for (int l = 0; l < n; l++)
        pre[l + 1] = pre[l] + layers[l].f_ms + layers[l].i_ms + layers[l].w_ms;
    size_t cells = (size_t)(S + 1) * (size_t)(n + 1);
    double *mx = op_xmalloc(cells * sizeof *mx); /* mx[k][i]: best bottleneck, i layers, k stages */
    double *sq = op_xmalloc(cells * sizeof *sq); /* sq[k][i]: min sum of squares under the cap */
    int *cut = op_xmalloc(cells * sizeof *cut);
#define AT(a, k, i) (a)[(size_t)(k) * (size_t)(n + 1) + (size_t)(i)]
    for (size_t c = 0; c < cells; c++) mx[c] = sq[c] = DBL_MAX;
    AT(mx, 0, 0) = 0;
    for (int k = 1; k <= S; k++)
        for (int i = k; i <= n - (S - k); i++)
            for (int j = k - 1; j < i; j++) {
                if (AT(mx, k - 1, j) == DBL_MAX) continue;
                double t = pre[i] - pre[j], m = AT(mx, k - 1, j) > t ? AT(mx, k - 1, j) : t;
                if (m < AT(mx, k, i)) AT(mx, k, i) = m;
            }
    /* cap with a relative slack so that float sums in another order still pass */
    double cap = AT(mx, S, n) * (1 + 1e-12) + 1e-15;
    AT(sq, 0, 0) = 0;
    for (int k = 1; k <= S; k++)
        for (int i = k; i <= n - (S - k); i++)
            for (int j = k - 1; j < i; j++) {
                double t = pre[i] - pre[j];
                if (AT(sq, k - 1, j) == DBL_MAX || t > cap) continue;
                double q = AT(sq, k - 1, j) + t * t;
                if (q < AT(sq, k, i)) {
                    AT(sq, k, i) = q;
                    AT(cut, k, i) = j;
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
    free(mx);
    free(sq);
    free(cut);
    return OP_OK;
}
