/* bound_count.c: the whole-layer counting bound (part 4 of bound_mixed.c's proof), on groups
 * of devices that share a type and a memory limit.
 *
 * Take any set S of layers (here: the n heaviest by their least work over the types present,
 * and separately the n largest by static bytes, for every n).  A device d of type t holding j
 * layers of S runs all M microbatches of F, I and W of each at type t, so it is busy at least
 * M p[t][j], p[t][j] the sum of the j smallest work times on t over S; and it keeps their
 * weights, gradients and optimizer state resident the whole step (no policy moves static
 * bytes), so its limit is at least q[t][j], the sum of the j smallest static_bytes over S.
 * Both are necessary, so with makespan T device d holds at most
 *     cap_d(T) = max { j : M p[t][j] <= T and q[t][j] <= lim_d }
 * layers of S, and as each layer of S sits on exactly one device a plan within the limits
 * needs sum_d cap_d(T) >= |S|.  cap_d only grows with T, so the least T that meets it (one of
 * the M p[t][j]) is a lower bound for every S.  Layers outside S only add time and bytes to
 * a device, so leaving them out keeps the bound valid.  Without limits this is exactly part 4;
 * with them it sees that a layer whose static bytes fill most of a device (a Jamba or Mixtral
 * MoE block at tp 1: 50.7 GB of a 72 GiB limit) leaves one such layer per device, so the slow
 * devices must take their share of the heaviest layers.  If the limits leave no room for S
 * at any T, no plan fits at all; that S then says nothing here (the tuner reports it). */
#include <math.h>
#include <stdlib.h>

#include "plan/bound_int.h"

/* Per group: the most j <= n with M p[j] <= x and j <= jm (its memory cap). */
static long room_at(const double *p, const int *jm, const int *gt, const int *gc, int G, int L,
                    int M, int n, double x) {
    long room = 0;
    for (int g = 0; g < G && room < n; g++) {
        const double *pt = p + (size_t)gt[g] * (L + 1);
        int a = 0, b = jm[g] < n ? jm[g] : n;
        while (a < b) {
            int m = (a + b + 1) / 2;
            if ((double)M * pt[m] <= x) a = m;
            else b = m - 1;
        }
        room += (long)gc[g] * a;
    }
    return room;
}

/* Inserts x into the sorted v[0..n-2] (ascending) and refreshes the prefix sums p[0..n]. */
static void insert_sorted(double *v, double *p, int n, double x) {
    int j = n - 1;
    for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
    v[j] = x;
    p[0] = 0;
    for (int i = 0; i < n; i++) p[i + 1] = p[i] + v[i];
}

static double count_order(const double *w, const double *st, const double *key, int T, int L,
                          int M, const op_bound_groups *gr) {
    const int G = gr->n;
    int *ord = op_xmalloc(sizeof(int) * (size_t)L), *jm = op_xmalloc(sizeof(int) * (size_t)G);
    double *v = op_xmalloc(sizeof(double) * (size_t)T * L), *p = op_xmalloc(sizeof(double) * (size_t)T * (L + 1));
    double *sv = op_xmalloc(sizeof(double) * (size_t)T * L), *q = op_xmalloc(sizeof(double) * (size_t)T * (L + 1));
    for (int l = 0; l < L; l++) ord[l] = l;
    for (int i = 1; i < L; i++) /* largest key first (insertion sort: L is a few hundred at most) */
        for (int j = i; j > 0 && key[ord[j]] > key[ord[j - 1]]; j--) {
            int x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
    double best = 0;
    for (int n = 1; n <= L; n++) {
        for (int t = 0; t < T; t++) {
            insert_sorted(v + (size_t)t * L, p + (size_t)t * (L + 1), n, w[(size_t)t * L + ord[n - 1]]);
            if (st) insert_sorted(sv + (size_t)t * L, q + (size_t)t * (L + 1), n, st[(size_t)t * L + ord[n - 1]]);
        }
        long most = 0;
        for (int g = 0; g < G; g++) { /* memory cap: the most j whose j smallest statics fit */
            const double *qt = q + (size_t)gr->type[g] * (L + 1);
            int j = 0;
            if (st && gr->lim && gr->lim[g] > 0)
                while (j < n && qt[j + 1] <= gr->lim[g]) j++;
            else
                j = n;
            jm[g] = j;
            most += (long)gr->cnt[g] * j;
        }
        if (most < n) continue; /* no plan keeps S's static bytes within the limits */
        double least = INFINITY;
        for (int g = 0; g < G; g++) {
            if (jm[g] < 1) continue;
            const double *pt = p + (size_t)gr->type[g] * (L + 1);
            int a = 1, b = jm[g] < n ? jm[g] : n; /* the least j whose M p[j] has room */
            if (room_at(p, jm, gr->type, gr->cnt, G, L, M, n, (double)M * pt[b]) < n) continue;
            while (a < b) {
                int m = (a + b) / 2;
                if (room_at(p, jm, gr->type, gr->cnt, G, L, M, n, (double)M * pt[m]) >= n) b = m;
                else a = m + 1;
            }
            least = fmin(least, (double)M * pt[a]);
        }
        if (least < INFINITY) best = fmax(best, least);
    }
    free(ord), free(jm), free(v), free(p), free(sv), free(q);
    return best;
}

double op_bound_count(const double *w, const double *st, int T, int L, int M,
                      const op_bound_groups *gr) {
    if (L < 1 || gr->n < 1) return 0;
    double *key = op_xmalloc(sizeof(double) * (size_t)L);
    for (int l = 0; l < L; l++) { /* heaviest by the least work over the types present */
        key[l] = INFINITY;
        for (int g = 0; g < gr->n; g++) key[l] = fmin(key[l], w[(size_t)gr->type[g] * L + l]);
    }
    double best = count_order(w, st, key, T, L, M, gr);
    int limited = 0;
    for (int g = 0; g < gr->n && gr->lim; g++) limited |= gr->lim[g] > 0;
    if (limited && st) { /* and largest static bytes first, where limits can bind */
        for (int l = 0; l < L; l++) {
            key[l] = INFINITY;
            for (int g = 0; g < gr->n; g++) key[l] = fmin(key[l], st[(size_t)gr->type[g] * L + l]);
        }
        best = fmax(best, count_order(w, st, key, T, L, M, gr));
    }
    free(key);
    return best;
}

double op_lower_bound_count_mem(const op_layer_cost *type_layers, int n_types, int n_layers,
                                const int *dev_type, const double *dev_lim, double lim_all, int P,
                                int M) {
    const int T = n_types > 1 && dev_type ? n_types : 1, L = n_layers;
    if (L < 1 || P < 1) return 0;
    double *w = op_xmalloc(sizeof(double) * (size_t)T * L), *st = op_xmalloc(sizeof(double) * (size_t)T * L);
    for (int t = 0; t < T; t++)
        for (int l = 0; l < L; l++) {
            const op_layer_cost *c = &type_layers[(size_t)t * L + l];
            w[(size_t)t * L + l] = c->f_ms + c->i_ms + c->w_ms;
            st[(size_t)t * L + l] = (double)c->static_bytes;
        }
    /* groups: devices of one type and one limit (P is small: a quadratic scan is fine) */
    op_bound_groups gr = {0, op_xcalloc((size_t)P, sizeof(int)), op_xcalloc((size_t)P, sizeof(int)),
                          op_xcalloc((size_t)P, sizeof(double))};
    int *gt = (int *)gr.type, *gc = (int *)gr.cnt;
    double *gl = (double *)gr.lim;
    for (int d = 0; d < P; d++) {
        int t = T > 1 ? dev_type[d] : 0;
        double lim = dev_lim ? dev_lim[d] : lim_all;
        if (t < 0 || t >= T) t = 0;
        int g = 0;
        while (g < gr.n && !(gt[g] == t && gl[g] == lim)) g++;
        if (g == gr.n) gt[g] = t, gl[g] = lim, gc[g] = 0, gr.n++;
        gc[g]++;
    }
    double b = op_bound_count(w, st, T, L, M, &gr);
    free(gt), free(gc), free(gl), free(w), free(st);
    return b;
}
