/* bound_joint.c: the joint warm-up x balance x drain lower bound (op_lower_bound_joint).
 *
 * Claim: for ANY plan of these layers on P devices with M microbatches (any partition into
 * stages, any placement including several non-contiguous stages per device, any op order
 * including zero-bubble ones that defer W, any policy, overhead or communication),
 *     T >= J := min over assignments of layers to devices of max over used devices d of
 *               g_r(d)(S_d),   g_r(S) = head(r) + M * FI(S) + max(M * W(S), tail(r)),
 * where S_d is the set of layers of device d, FI(S) and W(S) the sums of f + i and of w over S
 * (one microbatch), r(d) the rank of d among the used devices ordered by lowest layer
 * (0-based), and, over layers 0..L-1 in model order,
 *     head(a) = f_0 + ... + f_(a-1)                (the F chain below layer a),
 *     tail(0) = 0,  tail(a+1) = i_a + max(w_a, tail(a))
 *              = max over j < a of (i_j + ... + i_(a-1) + w_j)   (an I chain below a, then a W).
 *
 * Proof.  Fix a plan and a used device d; let a = a_d be its lowest layer.
 *  (start) Every op of d is an F, I or W of a layer l >= a for some microbatch m and needs
 *    F(l, m) first (I(l, m) needs F(l, m); W needs I).  F(l, m) cannot start before F(0, m),
 *    ..., F(l-1, m) ran one after another, so nothing of d starts before head(l) >= head(a).
 *  (end) For each m, all of d's F and I ops of microbatch m precede I(a, m): F(l, m) ->
 *    F(l+1, m) -> ... -> F(L-1, m) -> I(L-1, m) -> ... -> I(a, m) for l >= a.  So d's last F or
 *    I op is some I(a, m), ending at e say; after it I(a-1, m), ..., I(j, m) and then W(j, m)
 *    run one after another for any j < a, so T >= e + tail(a).  Before e, d ran all its
 *    M * FI(S_d) of F and I and the part X of its W it did not defer; the rest, M * W(S_d) - X,
 *    runs after e.  Hence T >= head(a) + M * FI + X + max(M * W - X, tail(a))
 *    >= head(a) + M * FI + max(M * W, tail(a)).  (A stage using fused B only adds order.)
 *  (ranks) Lowest layers of distinct devices are distinct, so the r-th smallest is >= r, and
 *    head and tail are nondecreasing (f, i, w >= 0): g at a_d is >= g_r(d).
 * So T >= max_d g_r(d)(S_d) >= J.  Longer ops (recomputation, overhead) and communication
 * delays only lengthen the chains and the busy time, so they keep it valid.  J is never below
 * the warm-up term (op_lower_bound_warmup): summing the k used devices' inequalities gives
 * k T >= M * work + H_k.
 *
 * Computing J.  J is itself a relaxation (devices are ranks 0..k-1, k <= min(P, L), with
 * ready time head(r); the only link to the model order left is through head and tail), and is
 * computed as the least T for which the layers pack into k bins, bin r holding S with
 *     M * (FI(S) + W(S)) <= T - head(r)   and   M * FI(S) <= T - head(r) - tail(r)
 * (g_r(S) <= T unfolded; an empty bin is free).  Layers with equal (f + i, w) are one kind,
 * so a state is the vector of counts left per kind.  Feasibility of a T is a depth-first
 * search over bins in rank order (capacities shrink with r) that tries for each bin only the
 * maximal sub-multisets that fit (moving a layer from a later bin into an earlier one that
 * still has room keeps both within their caps, so some packing, if any exists, has only
 * maximal bins), drops a choice when the bins left cannot hold what is left in either
 * dimension, and remembers the states that failed.  Binary search on T runs between the
 * fractional bound below (J is at least it) and a greedy packing's value (J is at most it); the
 * result is the largest T proven infeasible, so it stays a valid bound even when the search
 * budget (JB_BUDGET nodes) runs out before it is exact.  Problems with more than JB_MAXK kinds
 * or too many states get the fractional bound alone, which is op_lower_bound_warmup with the
 * drain added.
 * The fractional bound: summing bin constraints over k used ranks,
 *     k T >= M * work + sum_(r<k) head(r)  and  k T >= M * FI_total + sum_(r<k) (head + tail)(r).
 */
#include "octopipe/plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* JB_BUDGET search nodes (about 5 ms here) per problem; the last problem's answer is kept
 * per thread (JB_CACHE_L layers at most), since every simulation asks again for its plan. */
enum { JB_MAXK = 12, JB_BUDGET = 60000, JB_HASH_BITS = 17, JB_CACHE_L = 256 };

typedef struct {
    int K, k, M;
    int cnt[JB_MAXK];
    double fi[JB_MAXK], w[JB_MAXK]; /* per layer of the kind, one microbatch */
    uint64_t radix[JB_MAXK];        /* mixed-radix code of a count vector */
    const double *head, *tail;      /* [k] */
    double *capw, *capfi;           /* [k] per microbatch: (T - head) / M, (T - head - tail) / M */
    double *sumw, *sumfi;           /* [k + 1] capacities of bins r.. */
    uint64_t *memo;                 /* failed (bin, state) keys + 1 ... */
    uint32_t *gen, cur;             /* ... valid where gen == cur (this T or a larger one) */
    double memo_T;                  /* the smallest T they were found at */
    long nodes, memo_n;
    int aborted;
} jb_ctx;

static const double JB_EPS = 1e-9;

static void memo_put(jb_ctx *c, uint64_t key) {
    if (c->memo_n * 2 >= (1L << JB_HASH_BITS)) return; /* full enough: search on without */
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - JB_HASH_BITS);
    while (c->gen[h] == c->cur) {
        if (c->memo[h] == key) return;
        h = (h + 1) & ((1u << JB_HASH_BITS) - 1);
    }
    c->memo[h] = key;
    c->gen[h] = c->cur;
    c->memo_n++;
}

static int memo_has(const jb_ctx *c, uint64_t key) {
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - JB_HASH_BITS);
    while (c->gen[h] == c->cur) {
        if (c->memo[h] == key) return 1;
        h = (h + 1) & ((1u << JB_HASH_BITS) - 1);
    }
    return 0;
}

static int pack(jb_ctx *c, int r, int *rem, double remw, double remfi);

/* Enumerates the maximal sub-multisets s of rem for bin r (kinds j.. still open), then packs
 * the rest into bins r+1..  Returns 1 when a packing was found (or the budget ran out). */
static int choose(jb_ctx *c, int r, int j, int *rem, int *s, double lw, double lfi,
                  double remw, double remfi) {
    if (++c->nodes > JB_BUDGET) {
        c->aborted = 1;
        return 1;
    }
    double tol = JB_EPS * (1 + c->capw[0]);
    if (j == c->K) {
        for (int q = 0; q < c->K; q++) /* maximal: no layer left fits on top */
            if (s[q] < rem[q] && lw + c->fi[q] + c->w[q] <= c->capw[r] + tol &&
                lfi + c->fi[q] <= c->capfi[r] + tol)
                return 0;
        /* what is left must fit the bins after r */
        if (remw - lw > c->sumw[r + 1] + tol || remfi - lfi > c->sumfi[r + 1] + tol) return 0;
        for (int q = 0; q < c->K; q++) rem[q] -= s[q];
        int ok = pack(c, r + 1, rem, remw - lw, remfi - lfi);
        for (int q = 0; q < c->K; q++) rem[q] += s[q];
        return ok;
    }
    int hi = rem[j];
    double sz = c->fi[j] + c->w[j];
    if (sz > 0) hi = (int)fmin(hi, floor((c->capw[r] - lw + tol) / sz));
    if (c->fi[j] > 0) hi = (int)fmin(hi, floor((c->capfi[r] - lfi + tol) / c->fi[j]));
    for (int n = hi; n >= 0; n--) {
        s[j] = n;
        if (choose(c, r, j + 1, rem, s, lw + n * sz, lfi + n * c->fi[j], remw, remfi)) {
            s[j] = 0;
            return 1;
        }
    }
    s[j] = 0;
    return 0;
}

static int pack(jb_ctx *c, int r, int *rem, double remw, double remfi) {
    int left = 0;
    for (int q = 0; q < c->K; q++) left += rem[q];
    if (!left) return 1;
    if (r == c->k) return 0;
    double tol = JB_EPS * (1 + c->capw[0]);
    if (c->capfi[r] < -tol) return 0; /* this bin and all after it must stay empty */
    if (remw > c->sumw[r] + tol || remfi > c->sumfi[r] + tol) return 0;
    if (r == c->k - 1) return remw <= c->capw[r] + tol && remfi <= c->capfi[r] + tol;
    uint64_t code = 0;
    for (int q = 0; q < c->K; q++) code += (uint64_t)rem[q] * c->radix[q];
    uint64_t key = code * (uint64_t)c->k + (uint64_t)r;
    if (memo_has(c, key)) return 0;
    int s[JB_MAXK] = {0};
    int ok = choose(c, r, 0, rem, s, 0, 0, remw, remfi);
    if (!ok) memo_put(c, key);
    return ok;
}

/* 1: the layers pack at makespan T (or the budget ran out: not proven infeasible). */
static int feasible(jb_ctx *c, double T) {
    c->sumw[c->k] = c->sumfi[c->k] = 0;
    for (int r = c->k - 1; r >= 0; r--) {
        c->capw[r] = (T - c->head[r]) / c->M;
        c->capfi[r] = (T - c->head[r] - c->tail[r]) / c->M;
        int use = c->capfi[r] >= 0;
        c->sumw[r] = c->sumw[r + 1] + (use ? c->capw[r] : 0);
        c->sumfi[r] = c->sumfi[r + 1] + (use ? c->capfi[r] : 0);
    }
    if (!(T <= c->memo_T)) { /* none at T' >= T means none at T: kept while T goes down */
        c->cur++;
        c->memo_n = 0;
    }
    c->memo_T = T;
    int rem[JB_MAXK];
    double remw = 0, remfi = 0;
    for (int q = 0; q < c->K; q++) {
        rem[q] = c->cnt[q];
        remw += c->cnt[q] * (c->fi[q] + c->w[q]);
        remfi += c->cnt[q] * c->fi[q];
    }
    return pack(c, 0, rem, remw, remfi);
}

/* A packing's value, greedily (heaviest kind first, each layer to the bin it raises least):
 * an upper end for the search. */
static double greedy(const jb_ctx *c, double *fi, double *w) {
    int order[JB_MAXK];
    for (int q = 0; q < c->K; q++) order[q] = q;
    for (int a = 1; a < c->K; a++)
        for (int b = a; b > 0 && c->fi[order[b]] + c->w[order[b]] >
                                     c->fi[order[b - 1]] + c->w[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int r = 0; r < c->k; r++) fi[r] = w[r] = 0;
    for (int a = 0; a < c->K; a++) {
        int q = order[a];
        for (int n = 0; n < c->cnt[q]; n++) {
            int best = 0;
            double bv = INFINITY;
            for (int r = 0; r < c->k; r++) {
                double v = c->head[r] + c->M * (fi[r] + c->fi[q]) +
                           fmax(c->M * (w[r] + c->w[q]), c->tail[r]);
                if (v < bv) bv = v, best = r;
            }
            fi[best] += c->fi[q];
            w[best] += c->w[q];
        }
    }
    double T = 0;
    for (int r = 0; r < c->k; r++)
        if (fi[r] + w[r] > 0) T = fmax(T, c->head[r] + c->M * fi[r] + fmax(c->M * w[r], c->tail[r]));
    return T;
}

double op_lower_bound_joint_frac(const op_layer_cost *layers, int n_layers, int P, int M) {
    double work = 0, fit = 0, head = 0, tail = 0, H = 0, HT = 0, best = INFINITY;
    for (int l = 0; l < n_layers; l++) {
        work += layers[l].f_ms + layers[l].i_ms + layers[l].w_ms;
        fit += layers[l].f_ms + layers[l].i_ms;
    }
    for (int k = 1; k <= P && k <= n_layers; k++) {
        H += head; /* sums over ranks 0..k-1 */
        HT += head + tail;
        const op_layer_cost *c = &layers[k - 1];
        head += c->f_ms;
        tail = c->i_ms + fmax(c->w_ms, tail);
        best = fmin(best, fmax(M * work + H, M * fit + HT) / k);
    }
    return best;
}

static double joint_search(const op_layer_cost *layers, int n_layers, int P, int M) {
    double lo = op_lower_bound_joint_frac(layers, n_layers, P, M);
    for (int l = 0; l < n_layers; l++) /* the search needs finite, nonnegative costs */
        if (!(layers[l].f_ms >= 0 && layers[l].i_ms >= 0 && layers[l].w_ms >= 0 &&
              isfinite(layers[l].f_ms + layers[l].i_ms + layers[l].w_ms)))
            return lo;
    if (!isfinite(lo)) return lo;
    int k = P < n_layers ? P : n_layers;
    jb_ctx c = {.k = k, .M = M};
    /* kinds: equal (f + i, w) pack alike */
    for (int l = 0; l < n_layers; l++) {
        double fi = layers[l].f_ms + layers[l].i_ms, w = layers[l].w_ms;
        int q = 0;
        while (q < c.K && !(c.fi[q] == fi && c.w[q] == w)) q++;
        if (q == c.K) {
            if (c.K == JB_MAXK) return lo; /* too many kinds for the exact search */
            c.fi[q] = fi, c.w[q] = w, c.K++;
        }
        c.cnt[q]++;
    }
    double states = 1;
    for (int q = 0; q < c.K; q++) states *= c.cnt[q] + 1.0;
    if (states * k > 4e6) return lo; /* the search would not finish: not cheap here */
    uint64_t rad = 1;
    for (int q = 0; q < c.K; q++) c.radix[q] = rad, rad *= (uint64_t)c.cnt[q] + 1;

    op_arena a = {0};
    double *head = OP_ARENA_NEW(&a, double, k), *tail = OP_ARENA_NEW(&a, double, k);
    double h = 0, t = 0;
    for (int r = 0; r < k; r++) {
        head[r] = h, tail[r] = t;
        h += layers[r].f_ms;
        t = layers[r].i_ms + fmax(layers[r].w_ms, t);
    }
    c.head = head, c.tail = tail;
    c.capw = OP_ARENA_NEW(&a, double, k);
    c.capfi = OP_ARENA_NEW(&a, double, k);
    c.sumw = OP_ARENA_NEW(&a, double, k + 1);
    c.sumfi = OP_ARENA_NEW(&a, double, k + 1);
    c.memo = OP_ARENA_NEW(&a, uint64_t, (size_t)1 << JB_HASH_BITS);
    c.gen = OP_ARENA_NEW(&a, uint32_t, (size_t)1 << JB_HASH_BITS); /* 0: cur starts at 1 */
    double hi = greedy(&c, c.capw, c.capfi); /* scratch: overwritten by feasible() */
    /* lo is below J or equal to it; hi is a packing's value, so J <= hi */
    for (int it = 0; it < 60 && hi - lo > 1e-7 * hi && !c.aborted; it++) {
        double mid = 0.5 * (lo + hi);
        if (feasible(&c, mid)) hi = mid;
        else lo = mid; /* proven: no packing at mid, so J > mid */
    }
    op_arena_free(&a);
    return lo;
}

static _Thread_local struct {
    int L, P, M;
    double fiw[3 * JB_CACHE_L], value;
} jb_cache;

double op_lower_bound_joint(const op_layer_cost *layers, int n_layers, int P, int M) {
    if (n_layers <= 0 || P <= 0 || M <= 0) return 0;
    int hit = n_layers <= JB_CACHE_L && jb_cache.L == n_layers && jb_cache.P == P &&
              jb_cache.M == M;
    for (int l = 0; hit && l < n_layers; l++)
        hit = jb_cache.fiw[3 * l] == layers[l].f_ms && jb_cache.fiw[3 * l + 1] == layers[l].i_ms &&
              jb_cache.fiw[3 * l + 2] == layers[l].w_ms;
    if (hit) return jb_cache.value;
    double v = joint_search(layers, n_layers, P, M);
    if (n_layers <= JB_CACHE_L) {
        jb_cache.L = n_layers, jb_cache.P = P, jb_cache.M = M, jb_cache.value = v;
        for (int l = 0; l < n_layers; l++) {
            jb_cache.fiw[3 * l] = layers[l].f_ms;
            jb_cache.fiw[3 * l + 1] = layers[l].i_ms;
            jb_cache.fiw[3 * l + 2] = layers[l].w_ms;
        }
    }
    return v;
}
