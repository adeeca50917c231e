/* bound_mixed.c: lower bound on the makespan of any plan on a cluster of unequal devices
 * (device d of type dev_type[d], layer costs row dev_type[d] of type_layers).
 *
 * Five parts, each valid for every partition, placement, policy and op order:
 *
 * 1. The uniform bound (op_lower_bound) over the "fastest" layers: layer l with f, i and w each
 *    the least over the types present.  Every term of op_lower_bound (chains, per-layer terms,
 *    pigeonhole over the heaviest layers) only needs each layer's times to be at most what they
 *    are on whatever device the plan put it, which taking the least over types guarantees.  Its
 *    work / P term is weak here (it pretends every device is the fastest); part 2 replaces it.
 *
 * 2. The work bound over unequal speeds, by LP duality.  A plan puts each layer l on one device,
 *    so on one type: x[l][t] = 1 for that type, 0 else.  Type t has c[t] devices, and each runs
 *    M * w[t][l] (w = f + i + w, all microbatches) for each layer it holds, so
 *        c[t] * T >= load[t] = M * sum_l x[l][t] * w[t][l]      for every type t.
 *    For any weights y[t] >= 0, not all 0, summing the rows weighted by y:
 *        T * sum_t y[t] c[t] >= M * sum_l sum_t x[l][t] y[t] w[t][l] >= M * sum_l min_t y[t] w[t][l]
 *    (the x of a layer sum to 1), so
 *        T >= M * sum_l min_t (y[t] w[t][l]) / sum_t y[t] c[t].                  (*)
 *    (*) holds for EVERY y, so the bound stays valid however y is chosen; choosing well only
 *    makes it tighter.  The best y is the dual of the fractional assignment LP.  With one type,
 *    (*) is M * work / P.  With two types, fix y[0] = 1: the right side of (*) is a piecewise
 *    linear concave numerator over a positive linear denominator in y[1], whose maximum lies at
 *    a breakpoint y[1] = w[0][l] / w[1][l] (or at an end, where (*) gives no more than at the
 *    last breakpoint), so trying every breakpoint gives the LP optimum exactly.  With more types
 *    the same search runs per coordinate for a few rounds (still valid, maybe not the optimum).
 *
 * 3. The warm-up over unequal speeds: devices cannot all start at 0.  Take any plan, let U be
 *    the devices it gives at least one layer (k = |U| <= min(P, L)) and a_d the lowest layer of
 *    device d.  Every op of d is an F, I or W of some layer l >= a_d, and each needs F(l, m)
 *    of its microbatch m first, which needs F(0..l-1, m) one after another, each at least the
 *    layer's least F over the types present; so d is idle until s_d >= head(a_d), head(a) the
 *    sum of those F over layers 0..a-1 (nondecreasing in a).  A layer sits on one device, so
 *    the a_d are distinct, and the device with the i-th smallest a_d (from 0) has a_d >= i:
 *    the waits are at least head(0), ..., head(k-1), one to a device of U.  d runs all its ops
 *    inside [s_d, T], so for every y >= 0 (weights per type, y_d = y[type of d]), as in 2:
 *        T sum_{d in U} y_d >= sum_{d in U} y_d s_d + M * num(y),
 *        num(y) = sum_l min_t y[t] w[t][l]
 *    (the min over all types present only makes num smaller).  The plan picks U and which
 *    device gets which wait; the bound must hold for its best pick, so for weights y
 *        T >= min over U, and over waits, of (M num(y) + sum_U y_d s_d) / sum_U y_d.
 *    For a given U the sum of y_d s_d is least when the largest y gets the smallest head
 *    (rearrangement).  Some minimising U is the k devices of largest y: let U be minimising
 *    with value R and d in U with the smallest y (the largest head, head(k-1)).  If k >= 2,
 *    dropping d leaves the others' heads as they were and a value >= R, which gives
 *    head(k-1) <= R, so every head in U is <= R (also when k = 1: head(0) = 0).  Swapping d in U
 *    for d' outside with y_d' > y_d, d' taking d's head h <= R, moves the numerator by
 *    (y_d' - y_d) h and the denominator by (y_d' - y_d), so the value stays <= R (a mean with
 *    a term <= R); repeat until U is the top k.  Hence, with devices sorted by y descending,
 *        T >= min_{1 <= k <= min(P, L)} (M num(y) + sum_{i<k} y_(i) head(i)) / sum_{i<k} y_(i) (**)
 *    for every y > 0.  Any y gives a valid bound; it starts at part 2's y and a coordinate
 *    search over the points where num or the order changes (coord_warm) picks a better one.
 *    With one type (or all types alike) y = 1 gives min_k (M work + H_k) / k, H_k = head(0) +
 *    ... + head(k-1): the uniform bound's warm-up term.  A matching cool-down (the I chain
 *    below a_d after d's last I) does not hold for the whole work: W ops have no successor and
 *    may fill the drain, so it is left out.
 *
 * 4. Counting the heaviest layers per device type.  Order the layers by their least work over
 *    the types present, heaviest first, and let S be the first n (any n <= L).  A device d of
 *    type t holding j layers of S runs all M microbatches of F, I and W of each at type t, so
 *    its busy time is at least M p[t][j], p[t][j] the sum of the j smallest w[t][l] over S.
 *    With makespan T it holds at most cap[t](T) = max { j : M p[t][j] <= T } of them, and as
 *    each layer of S sits on one device, a plan needs sum_t c[t] cap[t](T) >= n.  cap only
 *    grows with T, so the least T that meets this (one of the M p[t][j], tried in order) is a
 *    bound for every n.  On one type it is the pigeonhole M p[ceil(n / P)] (op_lower_bound
 *    takes k + 1 times the (kP+1)-th heaviest instead, never more); over types it sees that
 *    a slow device has room for fewer layers: Llama-7B on 8 H100 + 8 A100 at M = 32, where
 *    an A100 runs one block in 949 ms and two in 1898, leaves 24 blocks and the head to the
 *    8 H100s, one of which takes three blocks and the head (1234 ms), whatever the memory-free
 *    LP over fractional layers says (1055 ms).
 *
 *    bound_count.c has the computation (shared with the memory-aware form, which also caps what a
 *    device holds by its limit).
 *
 * 5. The joint warm-up x balance x drain bound per device (bound_joint.c) with each device's
 *    layers at its own type's times: for any plan, every used device d of type t holding the
 *    layer set S_d, at rank r among the used devices by lowest layer, has
 *        head(r) + M (F + I of S_d at type t) + max(M (W of S_d at type t), tail(r)) <= T
 *    (bound_joint.c's proof, with d's ops at d's own speed: nothing of d starts before the F
 *    chain below its lowest layer, at least head(r) over the least times; all its F and I
 *    precede the last I of its lowest layer, after which the I chain below and one W run), so
 *    the layers pack into such bins.  Part 1's joint term is this with every device as fast
 *    as the fastest type; here an A100 bin holds less.  bound_memjoint.c's search proves it
 *    (op_bound_joint_types: its memory-aware form with no limits); a T counts as impossible
 *    only when that search ran to its end, so it errs low.  Gemma2-9B on 4 H100 + 4 A100 at
 *    M = 16: 1462.7 -> 1526.7 ms (the bench's tuned plan: 1686.4).
 *
 * Communication, overheads and memory are ignored: they only add time, so leaving them out
 * keeps the bound valid (the same choice as op_lower_bound). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/bound_int.h"

static double layer_work(const op_layer_cost *c) { return c->f_ms + c->i_ms + c->w_ms; }

/* (*) for weights y: w[t * L + l] the per-type work, cnt[t] the devices of type t. */
static double dual_bound(const double *w, const int *cnt, const double *y, int T, int L, int M) {
    double den = 0, num = 0;
    for (int t = 0; t < T; t++) den += y[t] * cnt[t];
    if (!(den > 0)) return 0;
    for (int l = 0; l < L; l++) {
        double best = INFINITY;
        for (int t = 0; t < T; t++)
            if (cnt[t] > 0) best = fmin(best, y[t] * w[(size_t)t * L + l]);
        num += best;
    }
    return (double)M * num / den;
}

typedef struct { double b, o, w; } brk; /* breakpoint y = o / w of one layer */

static int cmp_brk(const void *x, const void *y) {
    double a = ((const brk *)x)->b, b = ((const brk *)y)->b;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* The best y[t] for (*) with the other weights fixed, in O(L log L).  With o_l the least
 * weighted time of layer l on the other types, layer l adds min(o_l, y w[t][l]): o_l once
 * y >= b_l = o_l / w[t][l], else y w[t][l].  Sorted by b, the numerator at y = b_k is the o of
 * the breakpoints up to k plus b_k times the w of those after; the maximum of (*) over y is at
 * one of them (see the top).  Sets y[t] when that beats `cur`; returns the new best. */
static double coord_best(const double *w, const int *cnt, double *y, int T, int L, int M, int t,
                         double cur, brk *buf) {
    double den = 0, w_after = 0;
    int n = 0;
    for (int u = 0; u < T; u++)
        if (u != t) den += y[u] * cnt[u];
    for (int l = 0; l < L; l++) {
        double o = INFINITY, wt = w[(size_t)t * L + l];
        for (int u = 0; u < T; u++)
            if (u != t && cnt[u]) o = fmin(o, y[u] * w[(size_t)u * L + l]);
        if (!isfinite(o)) return cur; /* no other type: (*) does not depend on y[t] */
        buf[n++] = (brk){wt > 0 ? o / wt : INFINITY, o, wt};
        w_after += wt;
    }
    qsort(buf, (size_t)n, sizeof *buf, cmp_brk);
    double o_before = 0;
    for (int k = 0; k < n && isfinite(buf[k].b); k++) {
        o_before += buf[k].o;
        w_after -= buf[k].w;
        double yt = buf[k].b, d = den + yt * cnt[t];
        if (!(yt > 0) || !(d > 0)) continue;
        double v = (double)M * (o_before + yt * fmax(w_after, 0)) / d;
        if (v > cur) {
            cur = v;
            y[t] = yt;
        }
    }
    return cur;
}

/* Part 4 (bound_count.c): the device types as groups, without limits. */
static double count_bound(const double *w, const int *cnt, int T, int L, int M) {
    int *gt = op_xmalloc(sizeof(int) * (size_t)T), *gc = op_xmalloc(sizeof(int) * (size_t)T), n = 0;
    for (int t = 0; t < T; t++)
        if (cnt[t]) gt[n] = t, gc[n++] = cnt[t];
    op_bound_groups gr = {n, gt, gc, NULL};
    double b = op_bound_count(w, NULL, T, L, M, &gr);
    free(gt), free(gc);
    return b;
}

/* Part 3's data: per-type work w [T * L], device counts, head[i] = F chain of layers 0..i-1 at
 * the fastest type (i < K = min(P, L)). */
typedef struct {
    const double *w;
    const int *cnt;
    const double *head;
    int T, L, K, M;
} wctx;

/* sum_l min_t y[t] w[t][l] over the types present: the numerator of (*) without M. */
static double numer(const wctx *c, const double *y) {
    double num = 0;
    for (int l = 0; l < c->L; l++) {
        double b = INFINITY;
        for (int t = 0; t < c->T; t++)
            if (c->cnt[t] > 0) b = fmin(b, y[t] * c->w[(size_t)t * c->L + l]);
        num += b;
    }
    return num;
}

/* (**) for weights y with numerator num = numer(y): devices in order of y descending (types
 * whole, ties in index order), the i-th given head[i]; the least over prefixes k <= K of
 * (M num + sum_{i<k} y_i head[i]) / sum_{i<k} y_i. */
static double warm_eval(const wctx *c, const double *y, double num) {
    int ord[16], n = 0, *o = c->T <= 16 ? ord : op_xmalloc(sizeof(int) * (size_t)c->T);
    for (int t = 0; t < c->T; t++) {
        if (!c->cnt[t]) continue;
        int j = n++;
        for (; j > 0 && y[o[j - 1]] < y[t]; j--) o[j] = o[j - 1];
        o[j] = t;
    }
    double best = INFINITY, Y = 0, W = 0, A = (double)c->M * num;
    for (int j = 0, i = 0; j < n && i < c->K; j++)
        for (int d = 0; d < c->cnt[o[j]] && i < c->K; d++, i++) {
            Y += y[o[j]];
            W += y[o[j]] * c->head[i];
            if (Y > 0) best = fmin(best, (A + W) / Y);
        }
    if (o != ord) free(o);
    return isfinite(best) ? best : 0;
}

static double warm_bound(const wctx *c, const double *y) { return warm_eval(c, y, numer(c, y)); }

/* (**) at y with y[t] = v. */
static double warm_at(const wctx *c, double *y, int t, double v) {
    double keep = y[t];
    y[t] = v;
    double r = warm_bound(c, y);
    y[t] = keep;
    return r;
}

/* A good y[t] for (**) with the other weights fixed: every breakpoint of num (as in coord_best)
 * and every point where y[t] passes another weight (the order changes) is tried.  Between two
 * such points (**) is the least over k of functions each monotone in y[t], so its top there
 * can lie inside an interval when the binding k changes; any y gives a valid bound, so
 * missing it only loosens the bound (a golden-section search inside the two intervals beside
 * the best point found nothing more on the bench presets, at 4x the time).  Sets y[t] when
 * that beats `cur`; returns the new best. */
static double coord_warm(const wctx *c, double *y, int t, double cur, brk *buf) {
    const int T = c->T, L = c->L;
    int n = 0;
    double w_after = 0;
    for (int l = 0; l < L; l++) {
        double o = INFINITY, wt = c->w[(size_t)t * L + l];
        for (int u = 0; u < T; u++)
            if (u != t && c->cnt[u]) o = fmin(o, y[u] * c->w[(size_t)u * L + l]);
        if (!isfinite(o)) return cur;
        buf[n++] = (brk){wt > 0 ? o / wt : INFINITY, o, wt};
        w_after += wt;
    }
    qsort(buf, (size_t)n, sizeof *buf, cmp_brk);
    double keep = y[t], best_v = keep, best = cur, o_before = 0;
    for (int k = 0; k < n && isfinite(buf[k].b); k++) {
        o_before += buf[k].o;
        w_after -= buf[k].w;
        double v = buf[k].b;
        if (!(v > 0)) continue;
        y[t] = v;
        double r = warm_eval(c, y, o_before + v * fmax(w_after, 0));
        if (r > best) best = r, best_v = v;
    }
    for (int u = 0; u < T; u++)
        if (u != t && c->cnt[u] && y[u] > 0) {
            double r = warm_at(c, y, t, y[u]);
            if (r > best) best = r, best_v = y[u];
        }
    y[t] = keep;
    if (best > cur) y[t] = best_v;
    return best > cur ? best : cur;
}

/* Part 5 with the last JT_CACHE_N problems' values per thread (the simulator asks for the bound
 * of every plan it times; a search over policies alternates between a few layer views).
 * Problems larger than the cache skip part 5 (a weaker bound, still valid). */
enum { JT_CACHE_N = 4, JT_MAXV = 3 * 1024, JT_MAXP = 512 };
static _Thread_local struct {
    int T, L, P, M, dt[JT_MAXP];
    double fiw[JT_MAXV], lo, value;
} jt_cache[JT_CACHE_N];
static _Thread_local int jt_next;

static double joint_types_cached(const op_layer_cost *rows, int T, int L, const int *dev_type,
                                 int P, int M, double lo) {
    if ((size_t)3 * T * L > JT_MAXV || P > JT_MAXP) return lo;
    for (int c = 0; c < JT_CACHE_N; c++) {
        int hit = jt_cache[c].T == T && jt_cache[c].L == L && jt_cache[c].P == P &&
                  jt_cache[c].M == M && jt_cache[c].lo == lo;
        for (int d = 0; hit && d < P; d++) hit = jt_cache[c].dt[d] == dev_type[d];
        for (int j = 0; hit && j < T * L; j++)
            hit = jt_cache[c].fiw[3 * j] == rows[j].f_ms && jt_cache[c].fiw[3 * j + 1] == rows[j].i_ms &&
                  jt_cache[c].fiw[3 * j + 2] == rows[j].w_ms;
        if (hit) return jt_cache[c].value;
    }
    double v = op_bound_joint_types(rows, T, L, dev_type, P, M, lo);
    int c = jt_next;
    jt_next = (jt_next + 1) % JT_CACHE_N;
    jt_cache[c].T = T, jt_cache[c].L = L, jt_cache[c].P = P, jt_cache[c].M = M;
    jt_cache[c].lo = lo, jt_cache[c].value = v;
    for (int d = 0; d < P; d++) jt_cache[c].dt[d] = dev_type[d];
    for (int j = 0; j < T * L; j++) {
        jt_cache[c].fiw[3 * j] = rows[j].f_ms;
        jt_cache[c].fiw[3 * j + 1] = rows[j].i_ms;
        jt_cache[c].fiw[3 * j + 2] = rows[j].w_ms;
    }
    return v;
}

/* Parts 1-4, and part 5 when `joint`. */
static double mixed_bound(const op_layer_cost *type_layers, int n_types, int n_layers,
                          const int *dev_type, int P, int M, int joint) {
    if (n_types <= 1 || !dev_type) return op_lower_bound(type_layers, n_layers, P, M);
    const int T = n_types, L = n_layers;
    int *cnt = op_xcalloc((size_t)T, sizeof *cnt);
    for (int d = 0; d < P; d++)
        if (dev_type[d] >= 0 && dev_type[d] < T) cnt[dev_type[d]]++;
    /* part 1: the fastest layer of each kind */
    op_layer_cost *fast = op_xmalloc(sizeof *fast * (size_t)L);
    double *w = op_xmalloc(sizeof(double) * (size_t)T * (size_t)L);
    for (int l = 0; l < L; l++) {
        int first = 1;
        for (int t = 0; t < T; t++) {
            const op_layer_cost *c = &type_layers[(size_t)t * L + l];
            w[(size_t)t * L + l] = layer_work(c);
            if (!cnt[t]) continue;
            if (first) {
                fast[l] = *c;
                first = 0;
            } else {
                fast[l].f_ms = fmin(fast[l].f_ms, c->f_ms);
                fast[l].i_ms = fmin(fast[l].i_ms, c->i_ms);
                fast[l].w_ms = fmin(fast[l].w_ms, c->w_ms);
            }
        }
        OP_ASSERT(!first, "no device of any type");
    }
    double best = op_lower_bound(fast, L, P, M);
    /* part 2: coordinate search over y from y = 1 (the fastest-everywhere work / P); y[0] stays
     * 1 ((*) is homogeneous in y), so with two types one pass over y[1] is the LP optimum */
    double *y = op_xmalloc(sizeof(double) * (size_t)T);
    brk *buf = op_xmalloc(sizeof *buf * (size_t)L);
    for (int t = 0; t < T; t++) y[t] = 1;
    double cur = dual_bound(w, cnt, y, T, L, M);
    for (int round = 0; round < (T > 2 ? 8 : 1); round++) {
        double before = cur;
        for (int t = 1; t < T; t++)
            if (cnt[t]) cur = coord_best(w, cnt, y, T, L, M, t, cur, buf);
        if (!(cur > before * (1 + 1e-12))) break;
    }
    best = fmax(best, cur);
    /* part 3: the warm-up, from the work bound's y, then its own coordinate search */
    const int K = P < L ? P : L;
    double *head = op_xmalloc(sizeof(double) * (size_t)K);
    for (int i = 0; i < K; i++) head[i] = i ? head[i - 1] + fast[i - 1].f_ms : 0;
    wctx c = {w, cnt, head, T, L, K, M};
    double wb = warm_bound(&c, y);
    for (int round = 0; round < (T > 2 ? 8 : 1); round++) {
        double before = wb;
        for (int t = 1; t < T; t++)
            if (cnt[t]) wb = coord_warm(&c, y, t, wb, buf);
        if (!(wb > before * (1 + 1e-12))) break;
    }
    best = fmax(best, wb);
    best = fmax(best, count_bound(w, cnt, T, L, M));
    /* part 5: the joint bound with each device's layers at its own type's times */
    if (joint) best = joint_types_cached(type_layers, T, L, dev_type, P, M, best);
    free(head);
    free(buf);
    free(y);
    free(w);
    free(fast);
    free(cnt);
    return best;
}

double op_lower_bound_mixed(const op_layer_cost *type_layers, int n_types, int n_layers,
                            const int *dev_type, int P, int M) {
    return mixed_bound(type_layers, n_types, n_layers, dev_type, P, M, 1);
}

double op_lower_bound_mixed_quick(const op_layer_cost *type_layers, int n_types, int n_layers,
                                  const int *dev_type, int P, int M) {
    return mixed_bound(type_layers, n_types, n_layers, dev_type, P, M, 0);
}

double op_plan_lower_bound_quick(const op_plan *p) {
    if (p->n_types > 1)
        return op_lower_bound_mixed_quick(p->type_layers, p->n_types, p->n_layers, p->dev_type, p->P, p->M);
    return op_plan_lower_bound(p);
}

double op_problem_lower_bound(const op_problem *pr) {
    if (pr->n_types > 1 && pr->type_layers && pr->dev_type)
        return op_lower_bound_mixed(pr->type_layers, pr->n_types, pr->n_layers, pr->dev_type, pr->P,
                                    pr->M);
    return op_lower_bound(pr->layers, pr->n_layers, pr->P, pr->M);
}

double op_plan_lower_bound_mixed(const op_plan *p) {
    return op_lower_bound_mixed(p->type_layers, p->n_types, p->n_layers, p->dev_type, p->P, p->M);
}
