/* bound_memjoint.c: the joint warm-up x balance x drain bound (bound_joint.c) with each
 * device's memory: whole layers' static bytes against its own limit, and the recomputation
 * that holding one microbatch's stashes at once forces on it.
 *
 * Claim: for ANY plan within every device's limit (any partition, placement, order, policy
 * per stage, offload over the device's host link), with makespan T, every used device d of
 * type t, limit lim_d and host link B_d (bytes/ms), holding the set S_d of layers, satisfies
 *   (a) static_t(S_d) <= lim_d;
 *   (b) head(r) + M (FI_t(S_d) + R_d) + max(M W_t(S_d), tail(r)) <= T,
 * r its rank among the used devices by lowest layer, head and tail as in bound_joint.c over
 * each layer's least times over the types present, FI_t and W_t the sums of f + i and of w at
 * type t, and R_d the least recompute ms per microbatch that the snapshot below forces:
 *   R_d >= min { sum_l rate_l y_l : sum_l (y_l + z_l) >= need_d, y_l + z_l <= act_l,
 *                sum_l z_l <= X_d },
 *   need_d = sum_{l in S_d} act_l - (lim_d - static(S_d)),  X_d = min(T B_d / (2 M), host budget),
 * rate_l the least ms per byte saved over selective (f_sel / (act - act_sel)) and full
 * (f / act): the cheapest (need_d - X_d) bytes by rate, the rest offloaded.
 *
 * Proof.  (a): weights, gradients and optimizer state stay resident the whole step whatever
 * the policy.  (b) is bound_joint.c's per-device inequality (its proof: nothing of d starts
 * before the F chain below its lowest layer; its F and I of every microbatch precede the last
 * I of its lowest layer, after which the I chain below and one W still run) with d's F and I
 * ops longer by the recomputation they carry (a stage's recompute runs inside its I, on d).
 * The snapshot: let lam be d's deepest layer and m any microbatch.  When I(lam, m) starts,
 * every F(l, m) of d has ended (F(l, m) precedes F(lam, m), which precedes I(lam, m)) and no
 * I(l, m) of d has started (I(l, m) for l < lam waits for I(lam, m)), so every stash of m on d
 * is allocated: keep holds act, selective act_sel, full at least 0 (the stage input),
 * offload act on the device or on the host.  With static bytes that is within lim_d:
 * per microbatch, the bytes saved (recomputed y or offloaded z) are at least need_d.  Saving
 * y_l bytes of layer l costs at least rate_l y_l ms of recompute (each policy's cost is at
 * least the least rate times what it saves), every microbatch of d; offload copies a stash
 * out and back over d's link, 2 z / B_d ms of its copy engine, within [0, T] over the M
 * microbatches, and what is on the host at that moment fits the host budget.  The recompute
 * over d's microbatches is sum_m R(need - z_m) >= M R(need - mean z) (R is convex: cheapest
 * bytes first), mean z <= X_d.  So M R_d is at most the recompute d's I ops carry.
 * Hence the devices' layer sets pack into bins, one per used device, bin r satisfying (a) and
 * (b) at its rank; if no packing exists at T, every plan takes longer than T.
 *
 * Computing it.  Layers equal on every type present (times, bytes) are one kind; a bin is a
 * vector of counts per kind and a device group (type, limit, link).  (a) and (b) only get
 * harder as a bin grows (every sum grows; need grows by at least the new layer's stash, so
 * the cheapest bytes to save cost no less), so, as in bound_joint.c, a packing exists iff one
 * exists whose bins, in rank order, are each maximal within what is left: a depth-first search
 * over maximal bins (a bin that misses stays missing as it grows, so each kind's count is
 * tried from the most down and a miss is skipped), that drops a state when what is left
 * cannot fit the devices left (fast work against each device's time, the fastest groups on
 * the earliest ranks; static bytes against their limits; each kind against how many of it
 * one device holds by static bytes and time), remembering failed (counts left, devices
 * left) states.  A T is proven impossible only by a search that ran to
 * its end; a search past its node budget says nothing, so the bound is the largest T proven
 * impossible by bisection, never more than the truth.
 *
 * Without memory (op_bound_joint_types, part 5 of bound_mixed.c): every group unlimited and
 * no host link, (a) holds for every set and R_d = 0, so (b) alone, with each device's layers
 * at its own type's times, is bound_joint.c's inequality per device; the same search proves
 * it for any plan, whatever its memory.  Kinds are then layers equal in times only (the bytes
 * no longer enter). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/bound_int.h"

enum { MJ_MAXK = 12, MJ_MAXG = 6, MJ_HASH_BITS = 16 };
/* search nodes per T, and per bound (about 15 ns a node: 0.9 s at most); a fifth of that
 * without memory (op_bound_joint_types): the simulator asks for it with every layer view the
 * tuner and the baselines try, and the last nodes add little (Nemotron-H 8B on 8 H100 + 8 A100:
 * 1192.1 ms against 1194.0 with the larger budget, at half the time) */
static const long MJ_BUDGET = 12000000, MJ_TOTAL = 60000000;
static const long MJ_FREE_BUDGET = 3000000, MJ_FREE_TOTAL = 12000000;

typedef struct {
    int K, G, M, nr; /* kinds, groups, microbatches, ranks (min(P, L)) */
    int cnt[MJ_MAXK], gc[MJ_MAXG];
    double lim[MJ_MAXG], B[MJ_MAXG], Hh, X[MJ_MAXG]; /* X: offload bytes per microbatch at T */
    /* per group and kind, one layer: f + i, w, static, act bytes, least recompute ms per byte */
    double fi[MJ_MAXG][MJ_MAXK], w[MJ_MAXG][MJ_MAXK], st[MJ_MAXG][MJ_MAXK];
    double a[MJ_MAXG][MJ_MAXK], rate[MJ_MAXG][MJ_MAXK];
    int ord[MJ_MAXG][MJ_MAXK];     /* kinds by rate, cheapest first */
    double fw[MJ_MAXK], fst[MJ_MAXK]; /* least work and static over the groups */
    double sig[MJ_MAXG];           /* the most fw / (group's work) over the kinds (<= 1) */
    int most[MJ_MAXG][MJ_MAXK];    /* the most layers of one kind a device of g holds at c->T */
    double *head, *tail;           /* [nr] */
    double T;
    uint64_t radix[MJ_MAXK + MJ_MAXG];
    int memo_on;
    uint64_t *memo; /* failed keys + 1, open addressing */
    long memo_n, nodes, total, budget, total_max; /* nodes per T, per bound */
    int aborted;
} mj_ctx;

/* Bin x (counts per kind) on a device of group g at rank r: (a) and (b) at c->T. */
static int mj_fits(const mj_ctx *c, int g, const int *x, int r) {
    double st = 0, fi = 0, w = 0, a = 0;
    for (int k = 0; k < c->K; k++) {
        st += x[k] * c->st[g][k];
        fi += x[k] * c->fi[g][k];
        w += x[k] * c->w[g][k];
        a += x[k] * c->a[g][k];
    }
    if (st > c->lim[g]) return 0;
    double need = a - (c->lim[g] - st) - c->X[g], R = 0; /* an unlimited group: -inf */
    for (int j = 0; j < c->K && need > 0; j++) {
        int k = c->ord[g][j];
        double b = x[k] * c->a[g][k], y = b < need ? b : need;
        R += y * c->rate[g][k];
        need -= y;
    }
    double t = c->head[r] + c->M * (fi + R) + fmax(c->M * w, c->tail[r]);
    return t <= c->T * (1 + 1e-12); /* rounding counts as fitting: only a clear miss refutes */
}

static uint64_t mj_key(const mj_ctx *c, const int *s, const int *left) {
    uint64_t key = 0;
    for (int k = 0; k < c->K; k++) key += (uint64_t)s[k] * c->radix[k];
    for (int g = 0; g < c->G; g++) key += (uint64_t)left[g] * c->radix[c->K + g];
    return key + 1;
}

static int mj_memo_has(const mj_ctx *c, uint64_t key) {
    const uint64_t mask = ((uint64_t)1 << MJ_HASH_BITS) - 1;
    for (uint64_t h = (key * 0x9E3779B97F4A7C15ULL) >> (64 - MJ_HASH_BITS);; h = (h + 1) & mask) {
        if (!c->memo[h]) return 0;
        if (c->memo[h] == key) return 1;
    }
}

static void mj_memo_put(mj_ctx *c, uint64_t key) {
    const uint64_t mask = ((uint64_t)1 << MJ_HASH_BITS) - 1;
    if (c->memo_n * 4 > (long)mask * 3) return; /* full enough: stop remembering */
    uint64_t h = (key * 0x9E3779B97F4A7C15ULL) >> (64 - MJ_HASH_BITS);
    while (c->memo[h] && c->memo[h] != key) h = (h + 1) & mask;
    if (!c->memo[h]) c->memo[h] = key, c->memo_n++;
}

static int mj_search(mj_ctx *c, int r, int *s, int *left);

/* Tries every maximal bin of group g at rank r within s, kind k onwards (x[0..k-1] chosen,
 * x[k..] zero), and the search below each; 1 when some packing completes (or the budget ran
 * out: unknown counts as possible). */
static int mj_enum(mj_ctx *c, int g, int r, int k, int *x, int *s, int *left) {
    if (k == c->K) {
        int any = 0;
        for (int j = 0; j < c->K; j++) any |= x[j] > 0;
        if (!any) return 0;
        for (int j = 0; j < c->K; j++) { /* maximal: no one more layer of any kind fits */
            if (x[j] >= s[j]) continue;
            x[j]++;
            int f = mj_fits(c, g, x, r);
            x[j]--;
            if (f) return 0;
        }
        for (int j = 0; j < c->K; j++) s[j] -= x[j];
        left[g]--;
        int ok = mj_search(c, r + 1, s, left);
        left[g]++;
        for (int j = 0; j < c->K; j++) s[j] += x[j];
        return ok;
    }
    for (int v = s[k]; v >= 0; v--) {
        if (++c->nodes > c->budget) c->aborted = 1;
        if (c->aborted) break;
        x[k] = v;
        if (v > 0 && !mj_fits(c, g, x, r)) continue; /* a bin that misses stays missing as it grows */
        if (mj_enum(c, g, r, k + 1, x, s, left)) {
            x[k] = 0;
            return 1;
        }
    }
    x[k] = 0;
    return c->aborted;
}

static int mj_search(mj_ctx *c, int r, int *s, int *left) {
    double wrem = 0, strem = 0;
    int any = 0, nleft = 0;
    for (int k = 0; k < c->K; k++) {
        any |= s[k] > 0;
        wrem += s[k] * c->fw[k];
        strem += s[k] * c->fst[k];
    }
    if (!any) return 1;
    if (r >= c->nr) return 0;
    double stcap = 0, cap = 0, sg[MJ_MAXG];
    int gs[MJ_MAXG], ng = 0;
    for (int g = 0; g < c->G; g++) {
        nleft += left[g];
        if (left[g] > 0) stcap += left[g] * c->lim[g]; /* (not 0 x inf, a NaN that never refutes) */
        if (left[g] > 0) gs[ng++] = g;
    }
    for (int k = 0; k < c->K; k++) { /* every layer of a kind on some device left */
        long room = 0;
        for (int g = 0; g < c->G; g++) room += (long)left[g] * c->most[g][k];
        if (room < s[k]) return 0;
    }
    /* the bin at rank r' of group g holds M x fast work <= sig_g (T - head(r')) (its own work
     * is at most T - head(r') by (b)); the most over which group takes which rank pairs the
     * fastest with the earliest (rearrangement: heads ascend) */
    for (int i = 0; i < ng; i++) sg[i] = c->sig[gs[i]];
    for (int i = 1; i < ng; i++)
        for (int j = i; j > 0 && sg[j] > sg[j - 1]; j--) {
            double x = sg[j];
            int y = gs[j];
            sg[j] = sg[j - 1], sg[j - 1] = x, gs[j] = gs[j - 1], gs[j - 1] = y;
        }
    for (int j = 0, i = 0, used = 0; j < nleft && r + j < c->nr; j++) {
        while (used == left[gs[i]]) i++, used = 0;
        cap += sg[i] * fmax(0, c->T - c->head[r + j]);
        used++;
    }
    if (c->M * wrem > cap * (1 + 1e-12) || strem > stcap) return 0;
    uint64_t key = c->memo_on ? mj_key(c, s, left) : 0;
    if (key && mj_memo_has(c, key)) return 0;
    int x[MJ_MAXK] = {0};
    for (int g = 0; g < c->G; g++)
        if (left[g] > 0 && mj_enum(c, g, r, 0, x, s, left)) return 1;
    if (key) mj_memo_put(c, key);
    return 0;
}

/* 1 when T is possible or not refuted within the budget, 0 when proven impossible. */
static int mj_possible(mj_ctx *c, double T) {
    if (c->total > c->total_max) return 1;
    c->T = T, c->nodes = 0, c->aborted = 0, c->memo_n = 0;
    memset(c->memo, 0, sizeof(uint64_t) << MJ_HASH_BITS);
    for (int g = 0; g < c->G; g++) {
        double x = c->B[g] > 0 ? T * c->B[g] / (2.0 * c->M) : 0;
        c->X[g] = c->Hh > 0 ? fmin(x, c->Hh) : x;
        for (int k = 0; k < c->K; k++) { /* by static bytes and by time, on its own */
            double n = c->cnt[k];
            if (c->st[g][k] > 0) n = fmin(n, floor(c->lim[g] / c->st[g][k]));
            double wk = c->fi[g][k] + c->w[g][k];
            if (wk > 0) n = fmin(n, floor(T * (1 + 1e-12) / (c->M * wk)));
            c->most[g][k] = (int)n;
        }
    }
    int s[MJ_MAXK], left[MJ_MAXG];
    memcpy(s, c->cnt, sizeof s);
    memcpy(left, c->gc, sizeof left);
    int ok = mj_search(c, 0, s, left);
    c->total += c->nodes;
    return ok || c->aborted;
}

/* Same numbers on every type present: one kind (without limits only the times count). */
static int same_layer(const op_layer_cost *x, const op_layer_cost *y, int times_only) {
    if (x->f_ms != y->f_ms || x->i_ms != y->i_ms || x->w_ms != y->w_ms) return 0;
    return times_only ||
           (x->f_sel_ms == y->f_sel_ms && x->act_bytes == y->act_bytes &&
            op_layer_sel_bytes(x) == op_layer_sel_bytes(y) && x->static_bytes == y->static_bytes);
}

/* free_of_mem: the memory-free form (no limits, no host link; every group unlimited). */
static double mj_bound(const op_layer_cost *type_layers, int n_types, int n_layers,
                       const int *dev_type, const double *dev_lim, double lim_all, int P, int M,
                       const op_comm *comm, double lo, int free_of_mem) {
    const int NT = n_types > 1 && dev_type ? n_types : 1, L = n_layers;
    if (L < 1 || P < 1 || M < 1 || !(lo < INFINITY)) return lo;
    mj_ctx *c = op_xcalloc(1, sizeof *c);
    c->M = M;
    c->nr = P < L ? P : L;
    c->budget = free_of_mem ? MJ_FREE_BUDGET : MJ_BUDGET;
    c->total_max = free_of_mem ? MJ_FREE_TOTAL : MJ_TOTAL;
    int *present = op_xcalloc((size_t)NT, sizeof(int));
    int gt[MJ_MAXG], rep[MJ_MAXK], limited = 0, ok = 1;
    /* groups: type, limit, host link */
    for (int d = 0; d < P && ok; d++) {
        int t = NT > 1 && dev_type[d] >= 0 && dev_type[d] < NT ? dev_type[d] : 0;
        double lim = dev_lim ? dev_lim[d] : lim_all, b = comm ? op_comm_host_bw(comm, d) * 1e6 : 0;
        if (!(lim > 0) || free_of_mem) lim = INFINITY;
        else limited = 1;
        if (!(b > 0)) b = 0;
        int g = 0;
        while (g < c->G && !(gt[g] == t && c->lim[g] == lim && c->B[g] == b)) g++;
        if (g == MJ_MAXG) ok = 0;
        else if (g == c->G) gt[g] = t, c->lim[g] = lim, c->B[g] = b, c->G++;
        if (ok) c->gc[g]++, present[t] = 1;
    }
    c->Hh = comm && comm->host_mem_bytes > 0 ? comm->host_mem_bytes : 0;
    /* kinds: layers equal on every type present */
    for (int l = 0; l < L && ok; l++) {
        int k = 0;
        for (; k < c->K; k++) {
            int same = 1;
            for (int t = 0; t < NT && same; t++)
                if (present[t])
                    same = same_layer(&type_layers[(size_t)t * L + l], &type_layers[(size_t)t * L + rep[k]],
                                      free_of_mem);
            if (same) break;
        }
        if (k == MJ_MAXK) ok = 0;
        else {
            if (k == c->K) rep[c->K++] = l;
            c->cnt[k]++;
        }
    }
    /* a limit that holds every layer's static bytes and stashes at once never binds: nothing
     * here for memory to add (the memory-free bounds are the other files') */
    for (int g = 0; g < c->G && limited && ok; g++) {
        double all = 0;
        for (int l = 0; l < L; l++) {
            const op_layer_cost *y = &type_layers[(size_t)gt[g] * L + l];
            all += (double)y->static_bytes + (double)(y->act_bytes > 0 ? y->act_bytes : 0);
        }
        if (c->lim[g] >= all) c->lim[g] = INFINITY;
    }
    limited = 0;
    for (int g = 0; g < c->G; g++) limited |= c->lim[g] < INFINITY;
    if (!ok || (!limited && !free_of_mem)) {
        free(present), free(c);
        return lo;
    }
    /* head and tail over each layer's least times over the types present */
    c->head = op_xmalloc(sizeof(double) * (size_t)c->nr);
    c->tail = op_xmalloc(sizeof(double) * (size_t)c->nr);
    double hd = 0, tl = 0;
    for (int l = 0; l < c->nr; l++) {
        c->head[l] = hd, c->tail[l] = tl;
        double f = INFINITY, i = INFINITY, w = INFINITY;
        for (int t = 0; t < NT; t++) {
            if (!present[t]) continue;
            const op_layer_cost *y = &type_layers[(size_t)t * L + l];
            f = fmin(f, y->f_ms), i = fmin(i, y->i_ms), w = fmin(w, y->w_ms);
        }
        hd += f;
        tl = i + fmax(w, tl);
    }
    for (int k = 0; k < c->K; k++) {
        c->fw[k] = c->fst[k] = INFINITY;
        for (int g = 0; g < c->G; g++) {
            const op_layer_cost *y = &type_layers[(size_t)gt[g] * L + rep[k]];
            double a = (double)y->act_bytes, sel = (double)op_layer_sel_bytes(y);
            c->fi[g][k] = y->f_ms + y->i_ms, c->w[g][k] = y->w_ms;
            c->st[g][k] = (double)y->static_bytes, c->a[g][k] = a > 0 ? a : 0;
            double r = a > 0 ? fmax(y->f_ms, 0) / a : 0;
            if (a > 0 && sel < a && y->f_sel_ms >= 0) r = fmin(r, y->f_sel_ms / (a - sel));
            c->rate[g][k] = r;
            c->fw[k] = fmin(c->fw[k], c->fi[g][k] + c->w[g][k]);
            c->fst[k] = fmin(c->fst[k], c->st[g][k]);
        }
    }
    for (int g = 0; g < c->G; g++) {
        c->sig[g] = 0;
        for (int k = 0; k < c->K; k++)
            if (c->fi[g][k] + c->w[g][k] > 0) c->sig[g] = fmax(c->sig[g], c->fw[k] / (c->fi[g][k] + c->w[g][k]));
        if (!(c->sig[g] > 0)) c->sig[g] = 1;
    }
    for (int g = 0; g < c->G; g++) { /* kinds by rate (insertion sort: K <= 12) */
        for (int k = 0; k < c->K; k++) c->ord[g][k] = k;
        for (int i = 1; i < c->K; i++)
            for (int j = i; j > 0 && c->rate[g][c->ord[g][j]] < c->rate[g][c->ord[g][j - 1]]; j--) {
                int x = c->ord[g][j];
                c->ord[g][j] = c->ord[g][j - 1], c->ord[g][j - 1] = x;
            }
    }
    /* memo keys: counts left per kind and devices left per group, mixed radix */
    double span = 1;
    for (int k = 0; k < c->K; k++) c->radix[k] = (uint64_t)span, span *= c->cnt[k] + 1;
    for (int g = 0; g < c->G; g++) c->radix[c->K + g] = (uint64_t)span, span *= c->gc[g] + 1;
    c->memo_on = span < 9e18;
    c->memo = op_xmalloc(sizeof(uint64_t) << MJ_HASH_BITS);
    /* the largest T proven impossible: nothing above lo when lo itself is possible; else
     * grow to a possible T, then bisect (to 1e-7: every T tried near the answer is a search) */
    double got = 0, hi = lo > 0 ? lo * 1.25 : 1;
    if (lo > 0 && mj_possible(c, lo * (1 + 1e-9))) hi = 0;
    else {
        got = lo;
        for (int it = 0; it < 40 && !mj_possible(c, hi); it++) got = hi, hi *= 2;
        for (int it = 0; it < 60 && hi > got * (1 + 1e-7); it++) {
            double mid = 0.5 * (got + hi);
            if (mj_possible(c, mid)) hi = mid;
            else got = mid;
        }
    }
    free(c->memo), free(c->head), free(c->tail);
    free(present), free(c);
    return fmax(lo, got);
}

double op_bound_mem_joint(const op_layer_cost *type_layers, int n_types, int n_layers,
                          const int *dev_type, const double *dev_lim, double lim_all, int P, int M,
                          const op_comm *comm, double lo) {
    return mj_bound(type_layers, n_types, n_layers, dev_type, dev_lim, lim_all, P, M, comm, lo, 0);
}

double op_bound_joint_types(const op_layer_cost *type_layers, int n_types, int n_layers,
                            const int *dev_type, int P, int M, double lo) {
    return mj_bound(type_layers, n_types, n_layers, dev_type, NULL, 0, P, M, NULL, lo, 1);
}
