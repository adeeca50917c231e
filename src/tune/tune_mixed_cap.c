/* tune_mixed_cap.c: the restart after the search that moves heavy layers onto the devices
 * whose own limit holds more than one (tn_mixed_cap_kick).
 *
 * Why: tune_mixed_heavy.c calls a layer heavy when two of it do not fit the smallest device
 * limit, and its seeds give every device at most one.  A device with a larger limit may hold
 * two or more (Jamba's MoE layers, 47.25 GiB of static bytes each: two within 97% of an H200's
 * 118.18 GiB, one in an H100's 72 GiB).  On 8 H200 + 8 H100 the best plans leave the H100s at
 * their limit (one MoE layer and the stashes of its light neighbours) and the H200s with 30 to
 * 60 GiB to spare; handing one H100's heavy stage to an H200 that already holds one (alone, or
 * swapped for one of that H200's light stages) is a move of 47 GiB that first makes the plan
 * slower (with seed 1, in 10 of its 13 restarts the best such move is 1.5 to 1.7x slower than
 * the search's best, 2733.8 against 1603.8 ms in the first; in the others within 2%), which a
 * local search that accepts only improvements never makes, and from which it then finds
 * faster plans.
 * Those need not keep the move: with seed 1 the result (1557.6 ms, from 1576.0) is a chain of
 * 16 stages with one heavy layer per device again, a basin the searches before had not
 * reached; the restart works as a large perturbation that the capacities make legal.
 *
 * Seeds built the same way (each device up to its capacity of heavy layers, the light runs
 * placed as tn_mixed_heavy_seeds places them) did not help: with every H200 taking two, the
 * pipeline crosses the two nodes at every stage and the H200s keep 23.7 GiB for stashes, and
 * the seeds scored 1700 to 2030 ms against the standard seeds' 1637; added to the pool they
 * moved the result by chance (1557.2 to 1585.0 ms by which devices took two, and which of
 * their heavy layers).  As a trial of their own, searched with policy moves, they do help
 * (tune_mixed_affinity.c: 1499.5 ms there). */
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

/* Heavy layers per device: room x its own limit over the largest heavy layer's static bytes. */
#define TN_CAP_ROOM 0.97
/* Restarts: at most this many, each from the best plan the one before reached (Jamba on
 * 8 H200 + 8 H100, seeds 1, 2, 3: one 1557.6, 1565.9, 1575.0 ms; two 1557.6, 1548.0, 1551.0;
 * up to six the same as two). */
#define TN_CAP_KICKS 2

/* cap[d]: how many of the largest heavy layer's static bytes fit within room x device d's
 * limit, at least 1 (each device may hold one: the heavy seeds' premise).  Returns the most. */
static int caps(const tn_prob *pb, double minlim, double room, int *cap) {
    double hmax = 0;
    for (int l = 0; l < pb->L; l++)
        if (tn_heavy(pb->pr, l, minlim) && (double)pb->pr->layers[l].static_bytes > hmax)
            hmax = (double)pb->pr->layers[l].static_bytes;
    int most = 0;
    for (int d = 0; d < pb->P; d++) {
        double n = hmax > 0 ? room * tn_dev_lim(pb, d) / hmax : 1;
        cap[d] = n >= 2 ? (n < pb->L ? (int)n : pb->L) : 1;
        if (cap[d] > most) most = cap[d];
    }
    return most;
}

int tn_heavy_caps(const tn_prob *pb, int *cap) {
    double minlim = pb->mx ? tn_min_dev_lim(pb) : 0;
    if (minlim <= 0) return 0; /* a device without a limit: nothing is heavy */
    int K = 0;
    for (int l = 0; l < pb->L; l++) K += tn_heavy(pb->pr, l, minlim);
    return K ? caps(pb, minlim, TN_CAP_ROOM, cap) : 0;
}

/* Heavy layers in stage s of c. */
static int stage_heavy(const tn_prob *pb, const tn_cand *c, int s, double minlim) {
    int h = 0;
    for (int l = c->first[s]; l < c->first[s + 1]; l++) h += tn_heavy(pb->pr, l, minlim);
    return h;
}

/* One restart: the fastest of the best plan's cap moves (each stage with heavy layers moved to
 * another device that already holds one and has the capacity for them, alone or swapped for
 * one of that device's light stages), refined by one more local search (two thirds more
 * simulations, as tn_mixed_heavy_kick).  Returns 0 when there was no move. */
static int cap_kick(tn_search *st, const int *cap, double minlim, long extra) {
    const tn_prob *pb = st->pb;
    int P = pb->P;
    int *nh = op_xcalloc((size_t)P, sizeof(int));
    tn_cand x, c, b;
    tn_cand_alloc(&x, pb);
    tn_cand_alloc(&c, pb);
    tn_cand_alloc(&b, pb);
    tn_cand_copy(&x, &st->best, pb); /* scoring a move may replace st->best */
    for (int s = 0; s < x.S; s++) nh[x.dev[s]] += stage_heavy(pb, &x, s, minlim);
    double bs = 1e300;
    for (int s = 0; s < x.S && !tn_stopped(st->o); s++) {
        int h = stage_heavy(pb, &x, s, minlim), d = x.dev[s];
        if (!h) continue;
        for (int e = 0; e < P; e++) {
            if (e == d || cap[e] < 2 || nh[e] < 1 || nh[e] + h > cap[e]) continue;
            for (int t = -1; t < x.S; t++) { /* t >= 0: e's light stage t goes to d */
                if (t >= 0 && (x.dev[t] != e || stage_heavy(pb, &x, t, minlim))) continue;
                tn_cand_copy(&c, &x, pb);
                c.dev[s] = e;
                if (t >= 0) c.dev[t] = d;
                double sc = tn_score(st, &c);
                if (sc < bs) bs = sc, tn_cand_copy(&b, &c, pb);
            }
        }
    }
    int moved = bs < TN_NOFIT;
    if (moved) {
        st->max_evals += extra;
        tn_local_search(st, &b, extra);
    }
    tn_cand_free(&x);
    tn_cand_free(&c);
    tn_cand_free(&b);
    free(nh);
    return moved;
}

void tn_mixed_cap_kick(tn_search *st) {
    const tn_prob *pb = st->pb;
    if (!pb->mx || st->best_score >= TN_NOFIT || st->mode != OP_TUNE_PLACE_ANY) return;
    int *cap = op_xcalloc((size_t)pb->P, sizeof(int));
    if (tn_heavy_caps(pb, cap) >= 2) {
        double minlim = tn_min_dev_lim(pb);
        long extra = st->max_evals * 2 / 3 > 1 ? st->max_evals * 2 / 3 : 1;
        for (int k = 0; k < TN_CAP_KICKS; k++) {
            double before = st->best_score;
            if (!cap_kick(st, cap, minlim, extra) || !(st->best_score < before * (1 - 1e-12))) break;
        }
    }
    free(cap);
}
