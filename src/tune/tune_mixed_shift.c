/* tune_mixed_shift.c: the restart after the keep search that moves one layer along the chain
 * onto the least busy device (tn_mixed_shift_kick).
 *
 * Why: on mixed clusters a slow device often ends with one layer less than its share, because
 * handing it one is a move of many boundaries.  gemma2-9b on 4 H100 + 4 A100 in one node,
 * M=16, seed 1: the search ends at 1684.7 ms with 12 of the 44 layers on the A100s (A100
 * device 7 holds two, busy 953 ms against the others' 1430) and the H100s busy 1527 ms, the
 * bound; the same problem with the device order given the other way round ends at 1620.0 with
 * 13 (three on each A100 beside the embedding).  Layers cost three times as much on an A100
 * as on an H100 there, so a layer moved between neighbouring stages overloads one side until
 * the boundaries after it move too, which the local search (one boundary at a time, only
 * improvements) never gets to.
 * The restart tries every shift that gives a stage of the least busy device one more layer
 * from another stage, every boundary between them moving by one (each stage between keeps its
 * layer count), takes the fastest even where it is slower than the best plan, and refines it
 * with one more local search (seed 1: 1684.7 -> 1604.6 ms, the A100s holding 13 layers;
 * seeds 2, 3, 4: 1626.1, 1668.3, 1640.9 -> 1626.1, 1668.3, 1645.6).  Run in every trial of
 * op_tune it slowed cases through the trials that the layer views' plans seed (nemotron-h-8b
 * on 8 H100 + 8 A100 as two nodes, M=32: 1364.9 -> 1368.2 ms), so it runs in the keep search
 * alone (tn_tune_core_keep).  Shifts onto the least busy device of each type instead lost
 * gemma2-9b's gain (1684.7) and found nothing for nemotron-h-8b either. */
#include <stdlib.h>
#include <string.h>

#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

/* The restart's search: this share of the budget more (run in every trial, 0.34 gave
 * gemma2-9b seed 1 1608.9 ms against 1603.4 with 0.2, and cost twice the tuner time). */
#define TN_SHIFT_SHARE 0.2

/* c = x with one layer moved from stage `from` to stage `to` (from keeps at least one), every
 * boundary between them moved by one.  Returns 0 where from has a single layer. */
int tn_shift_layer(const tn_cand *x, int from, int to, tn_cand *c, const tn_prob *pb) {
    if (from == to || x->first[from + 1] - x->first[from] < 2) return 0;
    tn_cand_copy(c, x, pb);
    if (from > to)
        for (int b = to + 1; b <= from; b++) c->first[b]++;
    else
        for (int b = from + 1; b <= to; b++) c->first[b]--;
    return 1;
}

void tn_mixed_shift_kick(tn_search *st) {
    const tn_prob *pb = st->pb;
    if (!pb->mx || st->best_score >= TN_NOFIT) return;
    tn_cand x, c, b;
    tn_cand_alloc(&x, pb);
    tn_cand_alloc(&c, pb);
    tn_cand_alloc(&b, pb);
    tn_cand_copy(&x, &st->best, pb); /* scoring a shift may replace st->best */
    tn_score(st, &x);                /* st->r: the best plan's busy time per device */
    int lo = -1;
    for (int s = 0; s < x.S; s++)
        if (lo < 0 || st->r.busy[x.dev[s]] < st->r.busy[lo]) lo = x.dev[s];
    double bs = 1e300;
    for (int s = 0; s < x.S && !tn_stopped(st->o); s++) {
        if (x.dev[s] != lo) continue;
        for (int t = 0; t < x.S; t++) {
            if (!tn_shift_layer(&x, t, s, &c, pb)) continue;
            double sc = tn_score(st, &c);
            if (sc < bs) bs = sc, tn_cand_copy(&b, &c, pb);
        }
    }
    if (getenv("OCTOPIPE_TUNE_DEBUG"))
        fprintf(stderr, "shift kick from %.3f: device %d, best shift %.3f\n", st->best_score, lo,
                bs < 1e300 ? bs : 0.0);
    if (bs < TN_NOFIT) {
        long extra = (long)(st->max_evals * TN_SHIFT_SHARE);
        if (extra < 1) extra = 1;
        st->max_evals += extra;
        tn_local_search(st, &b, extra);
    }
    tn_cand_free(&x);
    tn_cand_free(&c);
    tn_cand_free(&b);
}
