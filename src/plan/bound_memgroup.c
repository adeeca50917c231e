/* bound_memgroup.c: the memory x time relaxation per group of like devices (same type, limit
 * and host link), where bound_mem.c pools all devices into one.
 *
 * Why: on a mixed cluster the pooled relaxation lets the slow devices' free memory hold the
 * fast devices' stashes.  But the work bound already pushes most layers onto the fast devices,
 * and a layer's stash lives on the device that runs it: the fast group must then hold both
 * the static bytes and the stashes of most layers in its own memory, or recompute (more work
 * on the busy group) or offload (its own copy engines).
 *
 * The relaxation.  Take any plan within every device's limit with makespan T.  Layer l sits
 * on one device, of group g; its stage has one policy j (keep, selective, full, offload).  Let
 * x[l][g][j] be 1 for that pair, else 0 (a fractional x is a relaxation).  Every device d of
 * group g (cnt_g devices, type t_g, limit lim_g, host link B_g) with layers A_d satisfies:
 *   time    M sum_{l in A_d} (w_gl + rec_glj) <= T   (busy within [0, T]; all its ops and the
 *           recompute inside its I run at its own type's times: w = F + I + W, rec = F or the
 *           selective share of F of type t_g);
 *   memory  T static(A_d) + M sum_{l in A_d} mem_glj <= T lim_g: at every moment its static
 *           bytes and the stashes it holds fit its limit; integrate over [0, T].  mem is the
 *           least device memory x time one microbatch's stash of l takes under j (as in
 *           bound_mem.c): keep a c_gl, selective s c_gl, full 0, offload a (F_gl + I_gl + 2a/B_g),
 *           with c_gl = F_gl + I_gl + sum_{k > l} (least F_k + least I_k over the types present):
 *           the stash is held from its stage's F start to its stage's I end, which spans l's own
 *           F and I on d and the F chain up and the I chain back through every later layer;
 *   copy    M sum_{l in A_d} copy_glj <= T, copy = 2 a / B_g for offload (each copy of a stage's
 *           stash moves at least a of l's bytes over d's link), else 0.
 * Summing over the devices of g gives the same with capacities cnt_g T, cnt_g T lim_g and
 * cnt_g T.  For any weights alpha_g, beta_g, mu_g >= 0, weighting each group's three sums and
 * adding (weak duality: each layer pays at least its cheapest (g, j)):
 *   N(T) = sum_l min_{g, j} [alpha_g M (w + rec) + beta_g (M mem + T st_gl) + mu_g M copy]
 *       <= K(T) = sum_g cnt_g T (alpha_g + beta_g lim_g + mu_g).
 * So N(T) > K(T) for some weights proves that no plan has makespan <= T.  Feasibility only
 * grows with T, and a T proven impossible is a lower bound whatever weights proved it, so a
 * heuristic search over the weights (a coordinate search on N / K, which is quasi-concave in
 * each weight: a concave piecewise-linear numerator over a positive affine denominator) gives
 * a valid bound; a better search only makes it tighter.  A group without a limit has no memory
 * row (beta_g = 0); one without a host link has no offload.  Dropping the chain, warm-up and
 * host-budget constraints only loosens it.  With one group it is weaker than bound_mem.c (no
 * warm-up, no chain), which the callers take beside it.
 *
 * Whole layers (cut rows).  A fractional x lets a group hold half of a layer whose static
 * bytes fill most of a device.  For any set S of layers, a device of g holds at most J_g(S)
 * of them, the most whose smallest static bytes (on type t_g) fit lim_g (weights, gradients
 * and optimizer state stay resident whatever the policy), so every plan has
 *   sum_{l in S} sum_j x[l][g][j] <= cnt_g J_g(S),
 * one more row of the same duality.  S runs over the n layers of largest static bytes; for
 * each group and each J <= 4 the largest such n with J_g = J (the strongest of them) is a
 * row.  Jamba at tp 1 on 8 H100 + 8 A100: 16 MoE blocks of 47 GiB, one per 72 GiB device,
 * so each group runs exactly 8 of them, as bound_count.c counts. */
#include <math.h>
#include <stdlib.h>

#include "plan/bound_int.h"

#define NOPT 4 /* keep, selective, full, offload */

/* Rows 0 .. 3G-1: per group g its time (3g), memory (3g+1) and copy (3g+2) rows; then one row
 * per cut: a set S_n (the n layers of largest static bytes) of which group g's devices hold at
 * most cnt_g J (each holds at most the J whose smallest statics fit its limit). */
typedef struct {
    int L, G, M, nc;
    const int *cnt;
    const double *lim;   /* [G] bytes, +inf: none */
    const double *t;     /* [L][G][NOPT] ms of the group's device per microbatch (work + rec) */
    const double *m;     /* [L][G][NOPT] byte ms of device memory (+inf: option impossible) */
    const double *cp;    /* [L][G][NOPT] copy-engine ms */
    const double *st;    /* [L][G] static bytes */
    const int *rank;     /* [L] position in the static order */
    const int *cg, *cn;  /* [nc] cut: group, set size */
    const double *ccap;  /* [nc] cnt_g J */
    double *cw;          /* [L][G] scratch */
} mg_ctx;

static int mg_rows(const mg_ctx *c) { return 3 * c->G + c->nc; }
static int mg_off(const mg_ctx *c, int k) { return k < 3 * c->G && k % 3 == 1 && !isfinite(c->lim[k / 3]); }

/* N(T) with each row's weight given as its share v_k of K(T) = 1 (v on the simplex: weight
 * v_k / cap_k, cap = cnt_g T, cnt_g T lim_g, cnt_g T, cnt_g J); also, in load, each row's use
 * by the cheapest choices over its capacity (a supergradient of N in v). */
static double mg_N(const mg_ctx *c, double T, const double *v, double *load) {
    double N = 0;
    const int R = mg_rows(c);
    for (int k = 0; k < R; k++) load[k] = 0;
    double *cw = c->cw; /* [L][G]: the cut rows' weights each (layer, group) pays */
    for (size_t i = 0; i < (size_t)c->L * c->G; i++) cw[i] = 0;
    for (int q = 0; q < c->nc; q++)
        for (int l = 0; l < c->L; l++)
            if (c->rank[l] < c->cn[q]) cw[(size_t)l * c->G + c->cg[q]] += v[3 * c->G + q] / c->ccap[q];
    for (int l = 0; l < c->L; l++) {
        double best = INFINITY;
        int bg = 0, bj = 0;
        for (int g = 0; g < c->G; g++) {
            const double cap = c->cnt[g] * T, a = v[3 * g] / cap, u = v[3 * g + 2] / cap;
            const double b = isfinite(c->lim[g]) ? v[3 * g + 1] / (cap * c->lim[g]) : 0;
            const size_t i = ((size_t)l * c->G + g) * NOPT;
            const double s = b * T * c->st[(size_t)l * c->G + g] + cw[(size_t)l * c->G + g];
            for (int j = 0; j < NOPT; j++) {
                if (!isfinite(c->m[i + j])) continue;
                double x = c->M * (a * c->t[i + j] + (b > 0 ? b * c->m[i + j] : 0) + (u > 0 ? u * c->cp[i + j] : 0)) + s;
                if (x < best) best = x, bg = g, bj = j;
            }
        }
        N += best;
        const size_t i = ((size_t)l * c->G + bg) * NOPT + bj;
        const double cap = c->cnt[bg] * T;
        load[3 * bg] += c->M * c->t[i] / cap;
        if (isfinite(c->lim[bg]))
            load[3 * bg + 1] += (c->M * c->m[i] + T * c->st[(size_t)l * c->G + bg]) / (cap * c->lim[bg]);
        load[3 * bg + 2] += c->M * c->cp[i] / cap;
        for (int q = 0; q < c->nc; q++)
            if (c->cg[q] == bg && c->rank[l] < c->cn[q]) load[3 * c->G + q] += 1 / c->ccap[q];
    }
    return N;
}

/* 1 when some weights prove T impossible (max over v of N > 1).  N is concave in v (a sum of
 * minima of linear functions); multiplicative-weights ascent on the simplex (each row's weight
 * grows with its load), from v (which keeps the best point found, for the next T). */
static int mg_impossible(const mg_ctx *c, double T, double *v, double *vb, double *load, int iters) {
    const int K = mg_rows(c);
    double best = mg_N(c, T, v, load);
    for (int k = 0; k < K; k++) vb[k] = v[k];
    for (int it = 0; it < iters && best <= 1 + 1e-9; it++) {
        double gmax = 0, Z = 0;
        for (int k = 0; k < K; k++) gmax = fmax(gmax, load[k]);
        if (!(gmax > 0)) break;
        const double eta = 1.0 / sqrt(1.0 + it) / gmax;
        for (int k = 0; k < K; k++) {
            if (mg_off(c, k)) continue;
            v[k] = fmax(v[k], 1e-12) * exp(eta * load[k]);
            Z += v[k];
        }
        for (int k = 0; k < K; k++) v[k] = mg_off(c, k) ? 0 : v[k] / Z;
        double N = mg_N(c, T, v, load);
        if (N > best) {
            best = N;
            for (int k = 0; k < K; k++) vb[k] = v[k];
        }
    }
    for (int k = 0; k < K; k++) v[k] = vb[k];
    return best > 1 + 1e-9;
}

typedef struct { double key; int l; } keyed;
static int cmp_keyed_desc(const void *x, const void *y) {
    double a = ((const keyed *)x)->key, b = ((const keyed *)y)->key;
    return a < b ? 1 : a > b ? -1 : 0;
}
static int cmp_dbl(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b ? 1 : 0;
}

double op_lower_bound_mem_groups(const op_layer_cost *type_layers, int n_types, int n_layers,
                                 const int *dev_type, const double *dev_lim, double lim_all, int P,
                                 int M, const op_comm *comm, double lo) {
    const int T = n_types > 1 && dev_type ? n_types : 1, L = n_layers;
    if (L < 1 || P < 1 || M < 1) return lo;
    /* groups: type, limit and host link */
    int *gt = op_xmalloc(sizeof(int) * (size_t)P), *gc = op_xcalloc((size_t)P, sizeof(int)), G = 0, limited = 0;
    double *gl = op_xmalloc(sizeof(double) * (size_t)P), *gb = op_xmalloc(sizeof(double) * (size_t)P);
    for (int d = 0; d < P; d++) {
        int t = T > 1 && dev_type[d] >= 0 && dev_type[d] < T ? dev_type[d] : 0;
        double lim = dev_lim ? dev_lim[d] : lim_all, b = comm ? op_comm_host_bw(comm, d) : 0;
        if (!(lim > 0)) lim = INFINITY;
        else limited = 1;
        if (!(b > 0)) b = 0;
        int g = 0;
        while (g < G && !(gt[g] == t && gl[g] == lim && gb[g] == b)) g++;
        if (g == G) gt[g] = t, gl[g] = lim, gb[g] = b, G++;
        gc[g]++;
    }
    if (!limited) {
        free(gt), free(gc), free(gl), free(gb);
        return lo;
    }
    /* least F + I over the types present, for the chains above each layer */
    double *up = op_xmalloc(sizeof(double) * (size_t)(L + 1));
    up[L] = 0;
    for (int l = L - 1; l >= 0; l--) {
        double fi = INFINITY;
        for (int g = 0; g < G; g++) {
            const op_layer_cost *y = &type_layers[(size_t)gt[g] * L + l];
            fi = fmin(fi, y->f_ms + y->i_ms);
        }
        up[l] = up[l + 1] + fi;
    }
    size_t n = (size_t)L * G * NOPT;
    double *tt = op_xmalloc(sizeof(double) * n), *mm = op_xmalloc(sizeof(double) * n);
    double *cp = op_xmalloc(sizeof(double) * n), *st = op_xmalloc(sizeof(double) * (size_t)L * G);
    for (int l = 0; l < L; l++)
        for (int g = 0; g < G; g++) {
            const op_layer_cost *y = &type_layers[(size_t)gt[g] * L + l];
            const size_t i = ((size_t)l * G + g) * NOPT;
            const double a = (double)y->act_bytes, s = (double)op_layer_sel_bytes(y);
            const double w = y->f_ms + y->i_ms + y->w_ms, cg = y->f_ms + y->i_ms + up[l + 1];
            const double B = gb[g] * 1e6; /* bytes/ms */
            st[(size_t)l * G + g] = (double)y->static_bytes;
            tt[i + 0] = w, mm[i + 0] = a * cg, cp[i + 0] = 0;
            tt[i + 1] = w + fmax(y->f_sel_ms, 0), mm[i + 1] = s * cg, cp[i + 1] = 0;
            tt[i + 2] = w + fmax(y->f_ms, 0), mm[i + 2] = 0, cp[i + 2] = 0;
            tt[i + 3] = w, mm[i + 3] = INFINITY, cp[i + 3] = 0;
            if (B > 0) mm[i + 3] = a * (y->f_ms + y->i_ms + 2 * a / B), cp[i + 3] = 2 * a / B;
        }
    /* cuts: layers by static bytes (least over the groups), largest first; for each group
     * and each J <= 4, the largest n whose S_n lets a device of the group hold at most J */
    int *ord = op_xmalloc(sizeof(int) * (size_t)L), *rank = op_xmalloc(sizeof(int) * (size_t)L);
    keyed *key = op_xmalloc(sizeof(keyed) * (size_t)L);
    double *sv = op_xmalloc(sizeof(double) * (size_t)L);
    for (int l = 0; l < L; l++) {
        key[l] = (keyed){INFINITY, l};
        for (int g = 0; g < G; g++) key[l].key = fmin(key[l].key, st[(size_t)l * G + g]);
    }
    qsort(key, (size_t)L, sizeof(keyed), cmp_keyed_desc);
    for (int r = 0; r < L; r++) ord[r] = key[r].l, rank[ord[r]] = r;
    enum { JMAX = 4 };
    /* a group makes one cut per J it passes, 0 (a layer too large for its limit) to JMAX:
     * JMAX + 1 of them */
    const size_t ncap = (size_t)G * (JMAX + 1);
    int *cg = op_xmalloc(sizeof(int) * ncap), *cn = op_xmalloc(sizeof(int) * ncap), nc = 0;
    double *ccap = op_xmalloc(sizeof(double) * ncap);
    for (int g = 0; g < G; g++) {
        if (!isfinite(gl[g])) continue;
        int lastJ = -1, lastn = 0;
        for (int sn = 1; sn <= L + 1; sn++) {
            int J = JMAX + 1;
            if (sn <= L) { /* the most of S_n whose smallest statics fit lim_g */
                for (int r = 0; r < sn; r++) sv[r] = st[(size_t)ord[r] * G + g];
                qsort(sv, (size_t)sn, sizeof(double), cmp_dbl);
                double sum = 0;
                J = 0;
                while (J < sn && sum + sv[J] <= gl[g]) sum += sv[J++];
            }
            if (J != lastJ && lastJ >= 0 && lastJ <= JMAX && (double)gc[g] * lastJ < lastn)
                cg[nc] = g, cn[nc] = lastn, ccap[nc] = (double)gc[g] * lastJ, nc++; /* binds below |S| */
            if (J > JMAX) break;
            lastJ = J, lastn = sn;
        }
    }
    free(sv), free(key), free(ord);
    double *cw = op_xmalloc(sizeof(double) * (size_t)L * G);
    mg_ctx c = {L, G, M, nc, gc, gl, tt, mm, cp, st, rank, cg, cn, ccap, cw};
    const int K = mg_rows(&c);
    double *v = op_xmalloc(sizeof(double) * 3 * (size_t)K), *vb = v + K, *load = v + 2 * K, nz = 0;
    for (int k = 0; k < K; k++) nz += v[k] = mg_off(&c, k) ? 0 : 1;
    for (int k = 0; k < K; k++) v[k] /= nz;
    /* the largest T this proves impossible: from lo / 16 (far below, where a certificate is
     * easy), double while it proves, then bisect; the weights carry over from each T to the
     * next, which is what makes the ascent converge.  A T not proven impossible is never
     * returned; lo is returned when nothing above it is proven. */
    double T0 = lo > 0 ? lo / 16 : 1e-3, got = 0, hi = T0;
    for (int it = 0; it < 60 && mg_impossible(&c, hi, v, vb, load, 250); it++) got = hi, hi *= 2;
    if (got > 0)
        for (int it = 0; it < 25 && hi > got * (1 + 1e-3); it++) {
            double mid = 0.5 * (got + hi);
            if (mg_impossible(&c, mid, v, vb, load, 250)) got = mid;
            else hi = mid;
        }
    lo = fmax(lo, got);
    free(v);
    free(rank), free(cg), free(cn), free(ccap), free(cw);
    free(tt), free(mm), free(cp), free(st), free(up);
    free(gt), free(gc), free(gl), free(gb);
    return lo;
}
