/* tune_mixed_heavy.c: seeds for mixed clusters where some layers are heavy in static memory.
 *
 * Why: when two of a model's layers do not fit one device together (Jamba's MoE layers at tp 1:
 * 47 GiB of weights and optimizer state each against a 72 GiB limit), every device holds at
 * most one, and with as many heavy layers as devices, exactly one.  The slow devices then
 * cannot shed their heavy layer's time; the balance comes from the light layers between the
 * heavy ones: a slow device should run its heavy layer alone and the fast devices the light
 * runs (a Jamba MoE layer takes 48 ms per microbatch on an A100, 20 ms on an H100; the three
 * light layers between two MoE layers 19 ms on an H100).  No contiguous split reaches that:
 * each stage of such a split holds a heavy layer with its neighbours.  So these seeds cut the
 * model at every heavy layer (a heavy layer is a stage of its own, light runs are stages,
 * long runs cut in pieces), give the heavy stages to devices one each (slowest devices first;
 * which heavy layers the slow devices take: spread evenly, the first ones, the last ones),
 * then the light pieces, heaviest first, to the device that ends least loaded on its own speed
 * among those whose weights still fit within 85% or 97% of its limit (LPT), a neighbouring
 * stage's device when it ends within 5% of that; each seed also with neighbouring stages on one
 * device merged.  Memory of the stashes is left to the schedule
 * search and the per-stage policies (seeds start from keep and from full). */
#include <stdlib.h>

#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

/* Two of layer l do not fit the smallest limit. */
static int heavy(const op_problem *pr, int l, double minlim) {
    return 2.0 * (double)pr->layers[l].static_bytes > minlim;
}

/* Slow set of heavy order `kind`: is heavy layer i (of K, ns of them slow) on a slow device?
 * 0: spread evenly, 1: the first ns, 2: the last ns. */
static int heavy_slow(int kind, int i, int K, int ns) {
    if (kind == 1) return i < ns;
    if (kind == 2) return i >= K - ns;
    return (long)(i + 1) * ns / K > (long)i * ns / K;
}

/* Devices by speed, slowest first (stable: rank order among equals). */
/* Time of layers [a, b) on device d as the seeds will run them: with full recomputation when
 * the search starts from full everywhere (its F once more before I). */
static double cost(const tn_search *st, int d, int a, int b) {
    double t = tn_mixed_work(st->pb, d, a, b);
    return st->pol0 == OP_ACT_FULL ? t + tn_mixed_fwd(st->pb, d, a, b) : t;
}

static void by_speed(const tn_prob *pb, int *ord, double *t) {
    int P = pb->P;
    for (int d = 0; d < P; d++) {
        ord[d] = d;
        t[d] = tn_mixed_work(pb, d, 0, pb->L);
    }
    for (int i = 1; i < P; i++)
        for (int j = i; j > 0 && t[ord[j]] > t[ord[j - 1]]; j--) {
            int x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
}

/* The heavy layers' setting: minlim (the smallest device limit), ord (devices slowest first),
 * t (each device's whole-model time), slow[d] (device d is one of the ns slow ones among the K
 * that take a heavy layer).  Returns K, or 0 when the seeds do not apply. */
static int setup(const tn_search *st, double *minlim, int *ord, double *t, char *slow, int *ns) {
    const tn_prob *pb = st->pb;
    int P = pb->P, K = 0;
    if (!pb->mx || st->mode != OP_TUNE_PLACE_ANY) return 0;
    for (int d = 0; d < P; d++) {
        double lim = tn_dev_lim(pb, d);
        if (lim <= 0) return 0; /* a device without a limit: nothing forces one heavy layer each */
        if (d == 0 || lim < *minlim) *minlim = lim;
    }
    for (int l = 0; l < pb->L; l++) K += heavy(pb->pr, l, *minlim);
    if (K < 1 || K > P) return 0;
    by_speed(pb, ord, t);
    *ns = 0; /* slow: more than 5% slower than the fastest of the K heavy devices */
    for (int i = 0; i < K; i++) *ns += slow[ord[i]] = t[ord[i]] > 1.05 * t[ord[K - 1]];
    return K;
}

/* Each slow device's lone heavy layer takes the light layer before it, from a fast device's
 * stage of two or more layers: the fast devices then run full recomputation on fewer layers
 * where their weights leave no room for stashes, while a slow device has room.  Returns how
 * many stages grew. */
static int grow(const tn_prob *pb, tn_cand *c, const char *slow, double minlim) {
    int grown = 0;
    for (int s = 1; s < c->S; s++) {
        int a = c->first[s];
        if (!slow[c->dev[s]] || slow[c->dev[s - 1]] || c->first[s + 1] - a != 1 ||
            a - c->first[s - 1] < 2 || !heavy(pb->pr, a, minlim) || heavy(pb->pr, a - 1, minlim))
            continue;
        c->first[s]--;
        grown++;
    }
    return grown;
}

void tn_mixed_heavy_kick(tn_search *st) {
    const tn_prob *pb = st->pb;
    int P = pb->P, ns = 0;
    if (!pb->mx || st->best_score >= TN_NOFIT) return;
    double minlim = 0, *t = op_xcalloc((size_t)P, sizeof(double));
    int *ord = op_xcalloc((size_t)P, sizeof(int));
    char *slow = op_xcalloc((size_t)P, 1);
    if (setup(st, &minlim, ord, t, slow, &ns) && ns > 0) {
        tn_cand c;
        tn_cand_alloc(&c, pb);
        tn_cand_copy(&c, &st->best, pb);
        if (grow(pb, &c, slow, minlim)) {
            /* a slow device has the room: its stages keep their activations */
            for (int s = 0; s < c.S && st->pol0 >= 0; s++)
                if (slow[c.dev[s]]) c.pol[s] = OP_ACT_KEEP;
            long extra = st->max_evals * 2 / 3 > 1 ? st->max_evals * 2 / 3 : 1;
            st->max_evals += extra;
            tn_local_search(st, &c, extra);
        }
        tn_cand_free(&c);
    }
    free(t);
    free(ord);
    free(slow);
}

void tn_mixed_heavy_seeds(tn_search *st, void (*offer)(tn_search *, void *, tn_cand *, const char *),
                          void *ctx) {
    const tn_prob *pb = st->pb;
    const op_problem *pr = pb->pr;
    int P = pb->P, L = pb->L, ns = 0;
    double minlim = 0;
    int *ord = op_xcalloc((size_t)P, sizeof(int));
    double *t = op_xcalloc((size_t)P, sizeof(double)), *load = op_xcalloc((size_t)P, sizeof(double));
    double *stat = op_xcalloc((size_t)P, sizeof(double));
    int *pc = op_xcalloc((size_t)L, sizeof(int)); /* light pieces, heaviest first */
    char *slow = op_xcalloc((size_t)P, 1);
    int K = setup(st, &minlim, ord, t, slow, &ns);
    tn_cand c;
    tn_cand_alloc(&c, pb);
    /* light pieces: at most half a device's mean share each (on the fastest type), so the
     * LPT has pieces to balance with */
    double piece = K ? 0.5 * tn_mixed_work(pb, ord[P - 1], 0, L) / P : 0;
    for (int v = 0; v < 6 && K && !tn_out_of_budget(st); v++) {
        /* room: the share of a device's limit the weights may take (the rest for stashes;
         * under full recomputation a stash is one boundary's bytes, so nearly all of it) */
        int kind = v / 2;
        double room = v % 2 ? 0.97 : 0.85;
        if (kind > 0 && (ns == 0 || ns == K)) break; /* every order is the same */
        /* stages: each heavy layer alone; each light run cut in pieces of at most `piece` */
        int S = 0, hi = 0, si = 0, fj = ns; /* slow: ord[0, ns), fast: ord[ns, K) */
        for (int l = 0; l < L;) {
            c.first[S] = l;
            if (heavy(pr, l, minlim)) {
                int to_slow = heavy_slow(kind, hi++, K, ns);
                c.dev[S++] = to_slow ? ord[si++] : ord[fj++];
                l++;
                continue;
            }
            int e = l + 1;
            while (e < L && !heavy(pr, e, minlim) &&
                   tn_mixed_work(pb, ord[P - 1], l, e + 1) <= piece)
                e++;
            c.dev[S++] = -1; /* placed below */
            l = e;
        }
        c.first[S] = L;
        c.S = S;
        for (int d = 0; d < P; d++) load[d] = stat[d] = 0;
        for (int s = 0; s < S; s++)
            if (c.dev[s] >= 0) {
                load[c.dev[s]] += cost(st, c.dev[s], c.first[s], c.first[s + 1]);
                stat[c.dev[s]] += (double)(pb->pstat[c.first[s + 1]] - pb->pstat[c.first[s]]);
            }
        int n = 0;
        for (int s = 0; s < S; s++)
            if (c.dev[s] < 0) pc[n++] = s;
        for (int i = 1; i < n; i++) /* heaviest first (on the fastest type) */
            for (int j = i; j > 0; j--) {
                int a = pc[j], b = pc[j - 1];
                if (tn_work(pb, c.first[a], c.first[a + 1]) <= tn_work(pb, c.first[b], c.first[b + 1])) break;
                pc[j] = b;
                pc[j - 1] = a;
            }
        for (int i = 0; i < n; i++) {
            int s = pc[i], a = c.first[s], b = c.first[s + 1], best = -1;
            double sb = (double)(pb->pstat[b] - pb->pstat[a]), bend = 0;
            for (int pass = 0; pass < 2 && best < 0; pass++) /* pass 1: weights over the limit */
                for (int d = 0; d < P; d++) {
                    if (!pass && stat[d] + sb > room * tn_dev_lim(pb, d)) continue;
                    double end = load[d] + cost(st, d, a, b);
                    if (best < 0 || end < bend - 1e-9) best = d, bend = end;
                }
            /* a neighbour's device within 5% of the best: one transfer less, and the two
             * stages merge into one (shorter chain, fewer bubbles) */
            for (int k = -1; k <= 1; k += 2) {
                int nb = s + k >= 0 && s + k < S ? c.dev[s + k] : -1;
                if (nb < 0 || nb == best || stat[nb] + sb > room * tn_dev_lim(pb, nb)) continue;
                double end = load[nb] + cost(st, nb, a, b);
                if (end <= 1.05 * bend) best = nb, bend = end;
            }
            c.dev[s] = best;
            load[best] = bend;
            stat[best] += sb;
        }
        offer(st, ctx, &c, "irregular");
        /* the same with neighbouring stages on one device merged */
        int m = 0;
        for (int s = 0; s < S; s++)
            if (m == 0 || c.dev[s] != c.dev[m - 1]) c.first[m] = c.first[s], c.dev[m++] = c.dev[s];
        c.first[m] = L;
        c.S = m;
        if (m < S) offer(st, ctx, &c, "irregular");
        /* and with each slow device's lone heavy layer taking the light layer before it */
        if (grow(pb, &c, slow, minlim)) offer(st, ctx, &c, "irregular");
    }
    tn_cand_free(&c);
    free(ord);
    free(t);
    free(load);
    free(stat);
    free(pc);
    free(slow);
}
