/* bound_mem.c: the lower bound that knows memory (op_lower_bound_mem on one device type and
 * one limit, op_lower_bound_mem_mixed on any cluster), and the plan's and problem's
 * memory-aware bound that takes the largest of it, the memory-free bound, the counting bound
 * with limits (bound_count.c), the per-group relaxation (bound_memgroup.c) and the per-device
 * joint bound with memory (bound_memjoint.c).
 *
 * Mixed clusters (devices of several types, or limits per device) reduce to the uniform
 * argument below by lower-bounding every per-device quantity by what the best device could do:
 *  - times: each layer's f, i, w and f_sel are replaced by the least over the types present
 *    (a "fast" layer), so the chain c_l, the recompute costs and the F chains H_i of the
 *    warm-up are at most what any plan's devices take;
 *  - memory: every device d stays within its own limit lim_d at every moment, so the free
 *    memory of all devices together over [0, T] is at most T (sum_d lim_d - static), static
 *    the sum over layers of the least static bytes over the types (each layer sits on one
 *    device and keeps its static bytes there the whole step); the snapshot term likewise
 *    uses sum_d lim_d;
 *  - busy time: a device d of type t runs every op at least as long as the fast layer's, and
 *    at most 1 / sig_t times longer, sig_t = the largest ratio fast / type-t time over every
 *    layer and every op kind (F, I, W and selective's recompute share of F); so the fast
 *    time of all the work d does within [s_d, T] is at most sig_t (T - s_d).  With s_d the
 *    F chain below d's first layer (H_i for the device with the i-th lowest first layer, as
 *    in the uniform case), the fast work of all devices is at most
 *        C(T) = max over which device waits H_i of sum sig_d (T - H_i)^+
 *             = sum_i sig_(i) (T - H_i)^+,  sig_(0) >= sig_(1) >= ... (rearrangement: the
 *    H_i ascend, so the largest weights go with the smallest waits), i < min(P, L);
 *  - copies: a copy of a bytes takes at least a / B_d on device d's engine, B_d its host
 *    link, so with B the fastest link the copy time counted at B is at most
 *    sum_d (B_d / B) T = Pc T over the makespan, Pc = sum_d B_d / B; offloaded memory x time
 *    counts its copies at B.
 * With one type and one limit sig = 1, Pc = P and every term is the uniform one. */
#include <math.h>
#include <stdlib.h>

#include "plan/bound_int.h"

typedef struct { double ratio, bytes; } save_item;

static int cmp_ratio(const void *a, const void *b) {
    double x = ((const save_item *)a)->ratio, y = ((const save_item *)b)->ratio;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Snapshot term.  Take any plan under the limit and any microbatch m.  When the I (or B) of
 * the last layer for m starts, every F of m has ended and no other I of m has started, so
 * every layer's stash for m is held: keep act_bytes, selective act_sel_bytes, full at least 0
 * (the stage input), offload act_bytes on the device or on the host.  Adding static bytes,
 *   static + sum_l stash_l <= P * limit + (host bytes offloaded at that moment).
 * So the recompute policies must save need = static + act - P * limit - host capacity bytes
 * for m.  Saving x_l bytes of layer l costs at least r_l * x_l ms of extra compute, with r_l
 * the cheaper rate of selective (f_sel / (act - sel)) and full (f / act); the fractional
 * greedy by rate gives the least total R over all assignments (a relaxation, so a bound).
 * Every microbatch pays R, all of it inside I ops: total work grows by M * R (spread over P
 * devices at best) and microbatch m's own F-I chain by R.  Returns the bound from R (0 when
 * nothing must be saved, +inf when recomputing everything is not enough). */
static double lbm_snapshot(const op_layer_cost *layers, int n_layers, double P, int M, double cap,
                           double stat, double work, double chain) {
    double act = 0;
    save_item *it = op_xmalloc(sizeof *it * (size_t)n_layers);
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        const op_layer_cost *c = &layers[l];
        act += (double)c->act_bytes;
        if (c->act_bytes <= 0) continue;
        double r = c->f_ms / (double)c->act_bytes;
        int64_t sel = op_layer_sel_bytes(c);
        if (sel < c->act_bytes && c->f_sel_ms >= 0) {
            double rs = c->f_sel_ms / (double)(c->act_bytes - sel);
            if (rs < r) r = rs;
        }
        it[n++] = (save_item){r, (double)c->act_bytes};
    }
    double need = stat + act - cap, R = 0;
    qsort(it, (size_t)n, sizeof *it, cmp_ratio);
    for (int i = 0; i < n && need > 0; i++) {
        double x = it[i].bytes < need ? it[i].bytes : need;
        R += it[i].ratio * x;
        need -= x;
    }
    free(it);
    if (need > 0) return INFINITY; /* even recomputing everything leaves too much */
    return fmax((work + R) * M / P, chain + R);
}

/* Memory-time term: what each policy costs one microbatch's stash of one layer l, in device
 * memory x time (byte ms), recompute (ms on a compute timeline) and copy-engine time (ms).
 * c_l = sum_{k >= l} (F_k + I_k) is the least time from F of l's stage starting to I of it
 * ending (the F chain down from l, the I chain back: dependencies of plan.h), over which
 * the simulator holds the stash (F start allocates, I end releases; larger stages, comm and
 * recompute only stretch it).  Per (layer, microbatch), a = act, s = selective stash, B the
 * host link in bytes/ms:
 *   keep       mem a c_l                      rec 0        copy 0
 *   selective  mem s c_l                      rec f_sel    copy 0
 *   full       mem 0 (the stage input)        rec f        copy 0
 *   offload    mem a (F_l + I_l + 2 a / B)    rec 0        copy 2 a / B
 * offload's device time: held through its F and the copy to host (a stage's copy moves all
 * its stash, >= a / B), again from the reload (>= a / B) through its I.  With a host budget H,
 * device + host time of an offloaded stash covers F start .. I end (>= a c_l) and host
 * memory x time is at most T P H; a stash the budget refused is a keep.  host_mem holds that
 * combined time per option (= mem for the others). */
typedef struct lbm_opt { double mem, rec, copy, both; } lbm_opt;

/* The relaxation at a makespan T.  Any fitting plan with makespan T gives per-microbatch
 * fractions x_lj (stashes of layer l under option j, averaged over microbatches;
 * sum_j x_lj = 1) with
 *   M sum x mem <= T Cap                 Cap = P limit - static (every device within limit)
 *   M sum x both <= T (Cap + P H)        (only with a host budget H)
 *   sum x rec <= R = min(C(T) / M - W0, T - chain)  (work over the devices, W0 the work of a
 *                                         microbatch; and every microbatch's chain carries its
 *                                         own recompute, the average too)
 *   C(T) = sum_{i < min(P, L)} max(0, T - H_i), H_i the F chain of layers 0..i-1: the device
 *   with the i-th lowest first layer starts no earlier than H_i (op_lower_bound_warmup's
 *   argument; recomputation runs inside I, so it moves no F), so the busy time of all
 *   devices together is at most C(T) <= P T.
 *   M sum x copy <= P T                  (P copy engines, every copy inside the makespan)
 * Weighting them by (1, beta, lam, mu) >= 0 and taking each layer's cheapest option:
 *   D = sum_l min_j (mem + beta both + lam rec + mu copy) - lam R - mu P T / M
 *       - T ((1 + beta) Cap + beta P H) / M  <=  0.
 * So D > 0 for any multipliers proves no plan fits with makespan T (weak duality).  lbm_lam
 * returns max over lam of D for the others fixed (D is concave piecewise linear in lam; its
 * maximum is where the slope, the rec of the chosen options less R, changes sign). */
typedef struct lbm_ctx {
    const lbm_opt *o;
    int n;
    double M, Pc, cap, hcap, W0, chain, beta; /* Pc: copy engines, in engines of the fastest link */
    const double *H;   /* [nH] F chains below each device's first layer, ascending */
    const double *sig; /* [nH] the devices' speed ratios, descending (all 1 on one type) */
    int nH;
} lbm_ctx;

/* C(T): the most busy time all devices together can have within T (see above). */
static double lbm_capacity(const lbm_ctx *c, double T) {
    double C = 0;
    for (int i = 0; i < c->nH && c->H[i] < T; i++) C += c->sig[i] * (T - c->H[i]);
    return C;
}

static double lbm_D(const lbm_ctx *c, double T, double lam, double mu, double *slope) {
    double S = 0, rsum = 0;
    for (int l = 0; l < c->n; l++) {
        const lbm_opt *x = &c->o[l * 4];
        double best = INFINITY, r = 0;
        for (int j = 0; j < 4; j++) {
            if (!isfinite(x[j].mem)) continue;
            double v = x[j].mem + c->beta * x[j].both + lam * x[j].rec + mu * x[j].copy;
            if (v < best || (v == best && x[j].rec < r)) best = v, r = x[j].rec;
        }
        S += best;
        rsum += r;
    }
    double R = fmin(lbm_capacity(c, T) / c->M - c->W0, T - c->chain);
    if (slope) *slope = rsum - R;
    return S - lam * R - mu * c->Pc * T / c->M -
           T * ((1 + c->beta) * c->cap + c->beta * c->hcap) / c->M;
}

static double lbm_lam(const lbm_ctx *c, double T, double mu, double lam_hi) {
    double lo = 0, hi = lam_hi, sl;
    double best = lbm_D(c, T, 0, mu, &sl);
    if (sl <= 0) return best; /* already decreasing at 0 */
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        if (lbm_D(c, T, mid, mu, &sl), sl > 0) lo = mid;
        else hi = mid;
    }
    return fmax(best, fmax(lbm_D(c, T, lo, mu, NULL), lbm_D(c, T, hi, mu, NULL)));
}

/* max over mu of max over lam of D at T (concave in mu: a partial maximum of a jointly
 * concave function); golden-section search, every point tried being a valid certificate. */
static double lbm_Dmax(const lbm_ctx *c, double T, double lam_hi, double mu_hi) {
    double best = lbm_lam(c, T, 0, lam_hi);
    if (!(mu_hi > 0)) return best;
    const double g = 0.6180339887498949;
    double a = 0, b = mu_hi, x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = lbm_lam(c, T, x1, lam_hi), f2 = lbm_lam(c, T, x2, lam_hi);
    for (int it = 0; it < 50; it++) {
        if (f1 < f2) a = x1, x1 = x2, f1 = f2, x2 = a + g * (b - a), f2 = lbm_lam(c, T, x2, lam_hi);
        else b = x2, x2 = x1, f2 = f1, x1 = b - g * (b - a), f1 = lbm_lam(c, T, x1, lam_hi);
    }
    return fmax(best, fmax(f1, f2));
}


/* The relaxation and the snapshot on "fast" layers (the least times and bytes over the types
 * present): cap_all = sum of the devices' limits, sig [P] the devices' speed ratios (above),
 * B the fastest host link in bytes/ms (0: no offload), Pc the copy engines in units of it, Hh
 * the host budget per device, base a memory-free bound. */
static double lbm_solve(const op_layer_cost *layers, int n_layers, int P, int M, double cap_all,
                        const double *sig, double B, double Pc, double Hh, double base) {
    double stat = 0, work = 0, chain = 0, act = 0, sigsum = 0;
    for (int d = 0; d < P; d++) sigsum += sig[d];
    for (int l = 0; l < n_layers; l++) {
        const op_layer_cost *c = &layers[l];
        stat += (double)c->static_bytes;
        act += (double)c->act_bytes;
        work += c->f_ms + c->i_ms + c->w_ms;
        chain += c->f_ms + c->i_ms;
    }
    double cap = cap_all - stat;
    if (cap < 0) return INFINITY; /* static memory alone exceeds the limits */
    if (!(act > 0)) return base;
    double H = B > 0 && Hh > 0 ? Hh : 0;
    double snap_cap = cap_all + (double)P * H;
    double best = base;
    if (!(B > 0) || H > 0)
        best = fmax(best, lbm_snapshot(layers, n_layers, sigsum, M, snap_cap, stat, work, chain));
    if (!isfinite(best)) return best;
    /* options per layer, c_l from the back */
    lbm_opt *o = op_xmalloc(sizeof *o * (size_t)n_layers * 4);
    double c = 0;
    for (int l = n_layers - 1; l >= 0; l--) {
        const op_layer_cost *y = &layers[l];
        double a = (double)y->act_bytes, s = (double)op_layer_sel_bytes(y);
        c += y->f_ms + y->i_ms;
        lbm_opt *x = &o[l * 4];
        x[0] = (lbm_opt){a * c, 0, 0, a * c};
        x[1] = (lbm_opt){s * c, fmax(y->f_sel_ms, 0), 0, s * c};
        x[2] = (lbm_opt){0, fmax(y->f_ms, 0), 0, 0};
        x[3] = (lbm_opt){INFINITY, 0, 0, 0};
        if (B > 0) {
            double dev = a * (y->f_ms + y->i_ms + 2 * a / B);
            x[3] = (lbm_opt){dev, 0, 2 * a / B, fmax(dev, a * c)};
        }
    }
    /* the least T the relaxation allows, by bisection: every T with some multipliers giving
     * D > 0 is impossible, and D only falls as T grows.  hi: all-full is feasible there (no
     * stash, recompute within both budgets), and so is all-keep when it fits at all. */
    double recall = 0, keepmem = 0, lam_hi = 1, mu_hi = 0;
    for (int l = 0; l < n_layers; l++) {
        const lbm_opt *x = &o[l * 4];
        recall += x[2].rec;
        keepmem += x[0].mem;
        for (int j = 0; j < 4; j++)
            if (x[j].rec > 0) lam_hi = fmax(lam_hi, 2 * x[0].mem / x[j].rec); /* keep is never beaten by more */
        if (B > 0 && x[3].copy > 0) mu_hi = fmax(mu_hi, 2 * x[0].mem / x[3].copy);
    }
    int nH = n_layers < P ? n_layers : P;
    double *Hs = op_xmalloc(sizeof *Hs * (size_t)nH), Hsum = 0, sigk = 0;
    for (int i = 0; i < nH; i++) {
        Hs[i] = i ? Hs[i - 1] + fmax(layers[i - 1].f_ms, 0) : 0;
        Hsum += sig[i] * Hs[i];
        sigk += sig[i];
    }
    /* hi: C(hi) >= (work + recall) M (all full fits the work) and hi >= the longest chain */
    double hi = fmax(best, fmax(((work + recall) * M + Hsum) / sigk, chain + recall));
    if (cap > 0) hi = fmin(hi, fmax(best, M * keepmem / cap));
    double lo = best;
    int nb = H > 0 ? 5 : 1;
    const double betas[5] = {0, 0.25, 1, 4, 16};
    for (int it = 0; it < 80 && hi > lo * (1 + 1e-10); it++) {
        double T = lo > 0 && hi > 4 * lo ? sqrt(lo * hi) : 0.5 * (lo + hi); /* far apart: halve the ratio */
        int imp = 0;
        for (int ib = 0; ib < nb && !imp; ib++) {
            lbm_ctx cx = {o, n_layers, M, Pc, cap, (double)P * H, work, chain, betas[ib], Hs, sig, nH};
            double D = lbm_Dmax(&cx, T, lam_hi * (1 + betas[ib]), mu_hi * (1 + betas[ib]));
            imp = D > 1e-9 * T * ((1 + betas[ib]) * cap + betas[ib] * P * H) / M; /* rounding */
        }
        if (imp) lo = T;
        else hi = T;
    }
    free(o);
    free(Hs);
    return lo;
}

double op_lower_bound_mem(const op_layer_cost *layers, int n_layers, int P, int M,
                          double mem_limit_bytes, const op_comm *comm) {
    double base = op_lower_bound(layers, n_layers, P, M);
    if (!(mem_limit_bytes > 0)) return base;
    double B = comm && comm->host_bw_GBps > 0 ? comm->host_bw_GBps * 1e6 : 0; /* bytes/ms */
    double Hh = comm ? comm->host_mem_bytes : 0;
    double *sig = op_xmalloc(sizeof *sig * (size_t)P);
    for (int d = 0; d < P; d++) sig[d] = 1;
    double r = lbm_solve(layers, n_layers, P, M, (double)P * mem_limit_bytes, sig, B, P, Hh, base);
    free(sig);
    return r;
}

static int cmp_desc_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* fast / slow (fast <= slow: fast is the least over the types); 0 when both are 0 */
static double speed_ratio(double fast, double slow) { return slow > 0 ? fast / slow : 0; }

double op_lower_bound_mem_mixed(const op_layer_cost *type_layers, int n_types, int n_layers,
                                const int *dev_type, const double *dev_lim, double lim_all, int P,
                                int M, const op_comm *comm) {
    const int T = n_types > 1 && dev_type ? n_types : 1, L = n_layers;
    double base = T > 1 ? op_lower_bound_mixed(type_layers, n_types, L, dev_type, P, M)
                        : op_lower_bound(type_layers, L, P, M);
    double cap_all = 0;
    for (int d = 0; d < P; d++) {
        double lim = dev_lim ? dev_lim[d] : lim_all;
        if (!(lim > 0)) return base; /* a device without a limit: memory never binds it */
        cap_all += lim;
    }
    int *cnt = op_xcalloc((size_t)T, sizeof *cnt);
    for (int d = 0; d < P; d++) cnt[T > 1 && dev_type[d] >= 0 && dev_type[d] < T ? dev_type[d] : 0]++;
    /* the fast layers: least times and bytes over the types present */
    op_layer_cost *fast = op_xmalloc(sizeof *fast * (size_t)L);
    for (int l = 0; l < L; l++) {
        int first = 1;
        for (int t = 0; t < T; t++) {
            if (!cnt[t]) continue;
            const op_layer_cost *c = &type_layers[(size_t)t * L + l];
            if (first) {
                fast[l] = *c;
                fast[l].act_sel_bytes = op_layer_sel_bytes(c);
                first = 0;
                continue;
            }
            op_layer_cost *x = &fast[l];
            x->f_ms = fmin(x->f_ms, c->f_ms);
            x->i_ms = fmin(x->i_ms, c->i_ms);
            x->w_ms = fmin(x->w_ms, c->w_ms);
            x->f_sel_ms = fmin(x->f_sel_ms, c->f_sel_ms);
            x->act_bytes = x->act_bytes < c->act_bytes ? x->act_bytes : c->act_bytes;
            int64_t s = op_layer_sel_bytes(c);
            x->act_sel_bytes = x->act_sel_bytes < s ? x->act_sel_bytes : s;
            x->static_bytes = x->static_bytes < c->static_bytes ? x->static_bytes : c->static_bytes;
        }
    }
    /* each type's speed ratio sig_t, per device, descending */
    double *sigt = op_xmalloc(sizeof *sigt * (size_t)T), *sig = op_xmalloc(sizeof *sig * (size_t)P);
    for (int t = 0; t < T; t++) {
        double s = 0;
        for (int l = 0; l < L && cnt[t]; l++) {
            const op_layer_cost *c = &type_layers[(size_t)t * L + l], *x = &fast[l];
            s = fmax(s, fmax(fmax(speed_ratio(x->f_ms, c->f_ms), speed_ratio(x->i_ms, c->i_ms)),
                             fmax(speed_ratio(x->w_ms, c->w_ms), speed_ratio(x->f_sel_ms, c->f_sel_ms))));
        }
        sigt[t] = s > 0 ? fmin(s, 1) : 1; /* all fast times 0: nothing to scale */
    }
    double Bmax = 0, Bsum = 0;
    for (int d = 0; d < P; d++) {
        sig[d] = sigt[T > 1 && dev_type[d] >= 0 && dev_type[d] < T ? dev_type[d] : 0];
        double b = comm ? op_comm_host_bw(comm, d) : 0;
        if (b > 0) Bmax = fmax(Bmax, b), Bsum += b;
    }
    qsort(sig, (size_t)P, sizeof *sig, cmp_desc_d);
    double B = Bmax * 1e6; /* bytes/ms */
    double r = lbm_solve(fast, L, P, M, cap_all, sig, B, Bmax > 0 ? Bsum / Bmax : 0,
                         comm ? comm->host_mem_bytes : 0, base);
    free(sig), free(sigt), free(fast), free(cnt);
    return r;
}

/* The memory-aware bound from a plan's or a problem's fields: the counting bound with each
 * device's limit, the memory x time relaxation pooled, where devices differ (types or limits)
 * per group of like devices, and per device its warm-up, whole layers and forced recompute. */
static double lb_mem_of(const op_layer_cost *layers, const op_layer_cost *type_layers, int n_types,
                        const int *dev_type, int n_layers, const double *dev_lim, double lim, int P,
                        int M, const op_comm *comm) {
    const int mixed = n_types > 1 && type_layers && dev_type;
    const op_layer_cost *rows = mixed ? type_layers : layers;
    const int nt = mixed ? n_types : 1;
    const int *dt = mixed ? dev_type : NULL;
    double c = op_lower_bound_count_mem(rows, nt, n_layers, dt, dev_lim, lim, P, M);
    double m = op_lower_bound_mem_mixed(rows, nt, n_layers, dt, dev_lim, lim, P, M, comm);
    if (mixed || dev_lim) /* groups of unlike devices: each carries its own layers */
        m = op_lower_bound_mem_groups(rows, nt, n_layers, dt, dev_lim, lim, P, M, comm, fmax(m, c));
    /* per device: its warm-up, whole layers within its limit, the recompute its own stashes force */
    return op_bound_mem_joint(rows, nt, n_layers, dt, dev_lim, lim, P, M, comm, fmax(m, c));
}

double op_plan_lower_bound_mem(const op_plan *p) {
    return lb_mem_of(p->layers, p->type_layers, p->n_types, p->dev_type, p->n_layers,
                     p->dev_mem_limit, p->mem_limit_bytes, p->P, p->M, &p->comm);
}

double op_problem_lower_bound_mem(const op_problem *pr) {
    return lb_mem_of(pr->layers, pr->type_layers, pr->n_types, pr->dev_type, pr->n_layers,
                     pr->dev_mem_limit, pr->mem_limit_bytes, pr->P, pr->M, &pr->comm);
}
