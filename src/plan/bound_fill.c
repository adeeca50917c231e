/* bound_fill.c: the pipeline-fill lower bound (op_lower_bound_fill).
 *
 * Claim: for ANY plan of these layers on P devices with M microbatches (any partition, any
 * placement, any op order, W deferred or not, fused B or not, any policy, overhead or
 * communication), and every job j below with release r_j and length d_j,
 *     T >= t + R(t) / P   for every t <= max_j (r_j + d_j),
 *     R(t) = sum_j max(0, d_j - max(0, t - r_j))   (the work that cannot be done before t).
 *
 * Jobs.  Split every op into the layers it covers: an F of layers [a, b) runs F_a, then F_(a+1),
 * ...; an I (or the I part of a B) runs I_(b-1) down to I_a; a W (or the rest of a B) comes
 * after that.  Each piece is a job: (F, l, m), (I, l, m), (W, l, m), one per layer, microbatch
 * and kind, of length f_l, i_l, w_l.  A layer sits in one stage on one device, so the M pieces
 * of one (kind, layer) run one after another; call the k-th of them in time order (k = 0..M-1)
 * its rank-k piece.  Releases by rank, over layers 0..L-1 in model order:
 *     RF(l, k) = max(RF(l-1, k) + f_(l-1), RF(l, k-1) + f_l),     RF(0, 0) = 0,
 *     RI(l, k) = max(RI(l+1, k) + i_(l+1), RI(l, k-1) + i_l),
 *     RI(L-1, k) = max(RF(L-1, k) + f_(L-1), RI(L-1, k-1) + i_(L-1)),
 *     RW(l, k) = max(RI(l, k) + i_l, RW(l, k-1) + w_l)           (terms with k-1 < 0 dropped).
 * Proof that the rank-k piece of (F, l) starts no earlier than RF(l, k), by induction:
 *  - it starts after the rank-(k-1) piece of its layer ended (same device, one op at a time);
 *  - the pieces of ranks 0..k of (F, l) belong to k+1 distinct microbatches, each of which had
 *    its (F, l-1) piece done before its own (F, l) started (the chain inside an op or the data
 *    dependency between stages), and the rank-k piece starts after the other k started.  Of
 *    k+1 distinct microbatches one has rank >= k in layer l-1's order, and those pieces end in
 *    rank order, so the rank-k piece starts after RF(l-1, k) + f_(l-1).
 * The same argument gives RI (an I of layer l needs the I of l+1 of its microbatch, and the
 * last layer's I its F) and RW (a W needs the I of its layer and microbatch).
 *
 * Proof of the claim.  A job does at most max(0, t - r_j) of its work before t (it cannot
 * start earlier), so at least R(t) of the work is left at t; P devices do at most P (T - t) in
 * [t, T], and every job ends by T, so t <= max (r_j + d_j) <= T.  Longer ops (recomputation
 * runs before the I pieces, per-op overhead) and communication delays only push releases
 * later and add work, and R grows with both, so the bound holds for them too, and on clusters
 * of unequal devices over the fastest layers (op_lower_bound_mixed).
 *
 * It sees what the warm-up terms average away: a microbatch reaches layer l only after the
 * ones before it went through the heavy layers below it, so early on only a few jobs are
 * ready and most devices wait.  On nemotron-h-8b-profile at P = 4, M = 8 the best t is 7.81 ms
 * (four embeddings and the first Mamba/MLP layers of three microbatches are all that can run
 * by then), where 13.89 ms of the devices' time is provably idle: 370.55 ms against the joint
 * bound's 369.76.
 *
 * Computing it: R is piecewise linear in t, its slope minus the number of jobs running at t in
 * this relaxation, so t + R(t) / P is largest at a release or an end; one sweep over the 2N
 * sorted events (N = 3 L M) finds it.  The last few problems' values are kept per thread, as
 * the joint bound keeps its last, since every simulation asks again for its plan. */
#include "octopipe/plan.h"

#include <math.h>
#include <stdlib.h>

/* Problems with more layers than FB_CACHE_L or more jobs than FB_MAX_JOBS get no fill term (0):
 * the sweep costs ~30 ms at FB_MAX_JOBS (200 layers, M = 256), and where M is that large the
 * fill is a small part of the makespan anyway. */
enum { FB_CACHE_L = 1024 };
#define FB_MAX_JOBS 2e5

typedef struct {
    double t;  /* ms */
    int delta; /* +1: a job starts running in the relaxation, -1: it ends */
} fb_ev;

static int ev_cmp(const void *a, const void *b) {
    double x = ((const fb_ev *)a)->t, y = ((const fb_ev *)b)->t;
    return x < y ? -1 : x > y ? 1 : 0;
}

static void add_job(fb_ev *ev, long *n, double r, double d, double *work) {
    if (!(d > 0)) return; /* a zero-length piece still passes its release on, but holds no work */
    ev[(*n)++] = (fb_ev){r, +1};
    ev[(*n)++] = (fb_ev){r + d, -1};
    *work += d;
}

static double fill_bound(const op_layer_cost *ly, int L, int P, int M) {
    for (int l = 0; l < L; l++)
        if (!(ly[l].f_ms >= 0 && ly[l].i_ms >= 0 && ly[l].w_ms >= 0 &&
              isfinite(ly[l].f_ms + ly[l].i_ms + ly[l].w_ms)))
            return 0;
    size_t LM = (size_t)L * (size_t)M;
    /* rf, ri, rw [L * M]: releases by layer and rank; ev [2 * 3 L M] */
    double *rf = op_xmalloc(sizeof(double) * LM), *ri = op_xmalloc(sizeof(double) * LM);
    fb_ev *ev = op_xmalloc(sizeof(fb_ev) * 6 * LM);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < M; k++) {
            double r = l ? rf[(size_t)(l - 1) * M + k] + ly[l - 1].f_ms : 0;
            if (k) r = fmax(r, rf[(size_t)l * M + k - 1] + ly[l].f_ms);
            rf[(size_t)l * M + k] = r;
        }
    for (int l = L - 1; l >= 0; l--)
        for (int k = 0; k < M; k++) {
            double r = l < L - 1 ? ri[(size_t)(l + 1) * M + k] + ly[l + 1].i_ms
                                 : rf[(size_t)l * M + k] + ly[l].f_ms;
            if (k) r = fmax(r, ri[(size_t)l * M + k - 1] + ly[l].i_ms);
            ri[(size_t)l * M + k] = r;
        }
    long n = 0;
    double work = 0;
    for (int l = 0; l < L; l++) {
        double rw = 0;
        for (int k = 0; k < M; k++) {
            double f = rf[(size_t)l * M + k], i = ri[(size_t)l * M + k];
            rw = fmax(i + ly[l].i_ms, k ? rw + ly[l].w_ms : 0);
            add_job(ev, &n, f, ly[l].f_ms, &work);
            add_job(ev, &n, i, ly[l].i_ms, &work);
            add_job(ev, &n, rw, ly[l].w_ms, &work);
        }
    }
    free(rf);
    free(ri);
    qsort(ev, (size_t)n, sizeof(fb_ev), ev_cmp);
    /* sweep: R(t) falls by the number of running jobs per ms; every event time is at most the
     * latest end, so each is a t the claim allows */
    double R = work, t0 = 0, best = 0;
    int running = 0;
    for (long e = 0; e < n; e++) {
        R -= running * (ev[e].t - t0);
        t0 = ev[e].t;
        best = fmax(best, t0 + fmax(R, 0) / P);
        running += ev[e].delta;
    }
    free(ev);
    return best;
}

/* The last FB_CACHE_N problems' values per thread, replaced round robin: a search that
 * alternates between a few layer views (recomputation policies) does not recompute. */
enum { FB_CACHE_N = 4 };
static _Thread_local struct {
    int L, P, M;
    double fiw[3 * FB_CACHE_L], value;
} fb_cache[FB_CACHE_N];
static _Thread_local int fb_next;

double op_lower_bound_fill(const op_layer_cost *layers, int n_layers, int P, int M) {
    if (n_layers <= 0 || P <= 0 || M <= 0 || n_layers > FB_CACHE_L ||
        3.0 * n_layers * M > FB_MAX_JOBS)
        return 0;
    for (int c = 0; c < FB_CACHE_N; c++) {
        int hit = fb_cache[c].L == n_layers && fb_cache[c].P == P && fb_cache[c].M == M;
        for (int l = 0; hit && l < n_layers; l++)
            hit = fb_cache[c].fiw[3 * l] == layers[l].f_ms &&
                  fb_cache[c].fiw[3 * l + 1] == layers[l].i_ms &&
                  fb_cache[c].fiw[3 * l + 2] == layers[l].w_ms;
        if (hit) return fb_cache[c].value;
    }
    double v = fill_bound(layers, n_layers, P, M);
    int c = fb_next;
    fb_next = (fb_next + 1) % FB_CACHE_N;
    fb_cache[c].L = n_layers, fb_cache[c].P = P, fb_cache[c].M = M, fb_cache[c].value = v;
    for (int l = 0; l < n_layers; l++) {
        fb_cache[c].fiw[3 * l] = layers[l].f_ms;
        fb_cache[c].fiw[3 * l + 1] = layers[l].i_ms;
        fb_cache[c].fiw[3 * l + 2] = layers[l].w_ms;
    }
    return v;
}
