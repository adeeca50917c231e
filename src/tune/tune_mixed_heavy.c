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
#include <string.h>

#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

/* Slow set of heavy order `kind`: is heavy layer i (of K, ns of them slow) on a slow device?
 * 0: spread evenly, 1: the first ns, 2: the last ns. */
static int heavy_slow(int kind, int i, int K, int ns) {
    if (kind == 1) return i < ns;
    if (kind == 2) return i >= K - ns;
    return (long)(i + 1) * ns / K > (long)i * ns / K;
}

/* The policies of the second set of seeds (the policy search that asks for them,
 * tn_search.heavy_pol): full recomputation on the fast devices' stages that start before layer
 * cut, keep everywhere else.  Why: the slow devices hold one heavy layer and room for its
 * stashes, while a fast device's heavy layer and light runs leave it almost none, and a fast
 * device has time to spare for the recompute (a Jamba H100 runs its F about 2.8x faster than
 * an A100).  The first two thirds of the pipeline because there a stage holds the most
 * microbatches in flight (S - s in a 1F1B-like steady state); the last third's stashes fit.
 * On 8 H100 + 8 A100 (Jamba M=32) op_tune with that search reaches 2801.3 ms with seeds 1, 2
 * and 3 (3061.3, 3133.1 and 3168.9 without it); with the cut at a half 3061.3, 3025.9,
 * 3061.4, at three fifths or three quarters, or full on every fast stage, nothing gained;
 * seeds with two or three of those cuts at once end slower than the two thirds alone. */
typedef struct {
    const char *fast; /* [P] */
    int cut;
} heavy_pol;

static int stage_pol(const heavy_pol *hp, int d, int a) {
    return hp->fast[d] && a < hp->cut ? OP_ACT_FULL : OP_ACT_KEEP;
}

/* Time of layers [a, b) on device d as the seeds will run them: with full recomputation (its
 * F once more before I) when the search starts from full everywhere; with hp's rule, on every
 * fast device's stage, also the last third's: the fast devices then take fewer light layers
 * and keep time to spare for the policies the search moves (Jamba on 8 H100 + 8 A100, seeds
 * 1, 2, 3: 2801.3 ms each; charged only where the rule recomputes 2826.5, 2824.6, 2765.8). */
static double cost(const tn_search *st, const heavy_pol *hp, int d, int a, int b) {
    double t = tn_mixed_work(st->pb, d, a, b);
    int full = hp ? hp->fast[d] : st->pol0 == OP_ACT_FULL;
    return full ? t + tn_mixed_fwd(st->pb, d, a, b) : t;
}

/* Offers c: without hp as an irregular layout that the search gives its starting policy;
 * with hp, with hp's policies stage by stage (the "policies" family keeps them, tune.c). */
static void put(tn_search *st, void (*offer)(tn_search *, void *, tn_cand *, const char *),
                void *ctx, tn_cand *c, const heavy_pol *hp) {
    if (!hp) {
        offer(st, ctx, c, "irregular");
        return;
    }
    for (int s = 0; s < c->S; s++) c->pol[s] = (uint8_t)stage_pol(hp, c->dev[s], c->first[s]);
    offer(st, ctx, c, "policies");
}

/* Devices by speed, slowest first (stable: rank order among equals). */
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
    if (!pb->mx || st->mode != OP_TUNE_PLACE_ANY || (*minlim = tn_min_dev_lim(pb)) <= 0) return 0;
    for (int l = 0; l < pb->L; l++) K += tn_heavy(pb->pr, l, *minlim);
    if (K < 1 || K > P) return 0;
    by_speed(pb, ord, t);
    *ns = 0; /* slow: more than 5% slower than the fastest of the K heavy devices */
    for (int i = 0; i < K; i++) *ns += slow[ord[i]] = t[ord[i]] > 1.05 * t[ord[K - 1]];
    return K;
}

/* fast[d]: device d within 5% of the fastest (t and ord from setup).  Returns how many. */
static int fast_devices(int P, const int *ord, const double *t, char *fast) {
    int n = 0;
    for (int d = 0; d < P; d++) n += fast[d] = t[d] <= 1.05 * t[ord[P - 1]];
    return n;
}

int tn_mixed_heavy_pol_applies(const op_problem *pr, op_tune_placement mode) {
    tn_prob pb;
    tn_prob_init(&pb, pr);
    tn_search st;
    memset(&st, 0, sizeof st);
    st.pb = &pb;
    st.mode = mode;
    int P = pb.P, ns = 0, nfast = 0;
    double minlim = 0, *t = op_xcalloc((size_t)P, sizeof(double));
    int *ord = op_xcalloc((size_t)P, sizeof(int));
    char *slow = op_xcalloc((size_t)P, 1), *fast = op_xcalloc((size_t)P, 1);
    if (setup(&st, &minlim, ord, t, slow, &ns)) nfast = fast_devices(P, ord, t, fast);
    free(t);
    free(ord);
    free(slow);
    free(fast);
    tn_prob_free(&pb);
    return nfast > 0 && nfast < P;
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
            a - c->first[s - 1] < 2 || !tn_heavy(pb->pr, a, minlim) || tn_heavy(pb->pr, a - 1, minlim))
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
    /* v 6..11: the same seeds again with heavy_pol's policies, in the policy search that asks
     * for them (tn_search.heavy_pol) where some devices are fast (within 5% of the fastest)
     * and some slow */
    char *fast = op_xcalloc((size_t)P, 1);
    int nfast = K ? fast_devices(P, ord, t, fast) : 0;
    const heavy_pol rule = {fast, (2 * L + 2) / 3};
    int nv = st->heavy_pol && st->pol0 >= 0 && nfast > 0 && nfast < P ? 12 : 6;
    for (int v = 0; v < nv && K && !tn_out_of_budget(st); v++) {
        /* room: the share of a device's limit the weights may take (the rest for stashes;
         * under full recomputation a stash is one boundary's bytes, so nearly all of it) */
        int kind = v % 6 / 2;
        double room = v % 2 ? 0.97 : 0.85;
        const heavy_pol *hp = v >= 6 ? &rule : NULL;
        if (kind > 0 && (ns == 0 || ns == K)) continue; /* every order is the same */
        /* stages: each heavy layer alone; each light run cut in pieces of at most `piece` */
        int S = 0, hi = 0, si = 0, fj = ns; /* slow: ord[0, ns), fast: ord[ns, K) */
        for (int l = 0; l < L;) {
            c.first[S] = l;
            if (tn_heavy(pr, l, minlim)) {
                int to_slow = heavy_slow(kind, hi++, K, ns);
                c.dev[S++] = to_slow ? ord[si++] : ord[fj++];
                l++;
                continue;
            }
            int e = l + 1;
            while (e < L && !tn_heavy(pr, e, minlim) &&
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
                load[c.dev[s]] += cost(st, hp, c.dev[s], c.first[s], c.first[s + 1]);
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
                    double end = load[d] + cost(st, hp, d, a, b);
                    if (best < 0 || end < bend - 1e-9) best = d, bend = end;
                }
            /* a neighbour's device within 5% of the best: one transfer less, and the two
             * stages merge into one (shorter chain, fewer bubbles) */
            for (int k = -1; k <= 1; k += 2) {
                int nb = s + k >= 0 && s + k < S ? c.dev[s + k] : -1;
                if (nb < 0 || nb == best || stat[nb] + sb > room * tn_dev_lim(pb, nb)) continue;
                double end = load[nb] + cost(st, hp, nb, a, b);
                if (end <= 1.05 * bend) best = nb, bend = end;
            }
            c.dev[s] = best;
            load[best] = bend;
            stat[best] += sb;
        }
        put(st, offer, ctx, &c, hp);
        /* the same with neighbouring stages on one device merged */
        int m = 0;
        for (int s = 0; s < S; s++)
            if (m == 0 || c.dev[s] != c.dev[m - 1]) c.first[m] = c.first[s], c.dev[m++] = c.dev[s];
        c.first[m] = L;
        c.S = m;
        if (m < S) put(st, offer, ctx, &c, hp);
        /* and with each slow device's lone heavy layer taking the light layer before it */
        if (grow(pb, &c, slow, minlim)) put(st, offer, ctx, &c, hp);
    }
    free(fast);
    tn_cand_free(&c);
    free(ord);
    free(t);
    free(load);
    free(stat);
    free(pc);
    free(slow);
}
