/* tune_mixed_heavy.h: seeds for mixed clusters whose layers are heavy in static memory
 * (tune_mixed_heavy.c), and the per-device costs they need from tune_mixed.c.  Include it
 * after tune/tune_int.h (whose search state lies outside that header's include guard, so it
 * is included once, by the .c file). */
#ifndef OCTOPIPE_TUNE_MIXED_HEAVY_H
#define OCTOPIPE_TUNE_MIXED_HEAVY_H

/* F+I+W ms of layers [a, b) on device d's own type (tune_mixed.c; pb->mx must be set). */
double tn_mixed_work(const tn_prob *pb, int d, int a, int b);
/* F ms of layers [a, b) on device d's own type: what full recomputation adds. */
double tn_mixed_fwd(const tn_prob *pb, int d, int a, int b);

/* Whether layer l is heavy: two of it do not fit minlim, the smallest device limit. */
static inline int tn_heavy(const op_problem *pr, int l, double minlim) {
    return 2.0 * (double)pr->layers[l].static_bytes > minlim;
}
/* The smallest device limit, tn_heavy's minlim; 0 where some device has no limit (then
 * nothing forces a device to hold at most one heavy layer). */
static inline double tn_min_dev_lim(const tn_prob *pb) {
    double minlim = 0;
    for (int d = 0; d < pb->P; d++) {
        double lim = tn_dev_lim(pb, d);
        if (lim <= 0) return 0;
        if (d == 0 || lim < minlim) minlim = lim;
    }
    return minlim;
}

/* Seeds that give every device at most one heavy layer (two of them would not fit the
 * smallest device limit), the slowest devices the heavy layers alone and the light runs
 * between them to the fast devices; handed to offer like tn_mixed_seeds'.  No-op when no layer
 * is heavy or more layers are heavy than there are devices. */
void tn_mixed_heavy_seeds(tn_search *st, void (*offer)(tn_search *, void *, tn_cand *, const char *),
                          void *ctx);
/* After the search: the best plan with each slow device's lone heavy layer also taking the
 * light layer before it, refined by one more local search (two thirds more simulations); a move
 * of two boundaries' worth the local search does not make by itself.  No-op where the seeds
 * do not apply. */
void tn_mixed_heavy_kick(tn_search *st);
/* tune_mixed_cap.c.  cap[d] [P]: how many heavy layers device d's own limit holds (97% of it
 * over the largest heavy layer's static bytes, at least 1).  Returns the most, 0 where
 * nothing is heavy or a device has no limit (cap then unset). */
int tn_heavy_caps(const tn_prob *pb, int *cap);
/* After the search (and tn_mixed_heavy_kick), where some device holds two or more heavy
 * layers: up to two restarts, the second where the first improved, from the best plan with
 * one stage of heavy layers moved to a device that holds one already and has the capacity
 * (alone or swapped for a light stage of that device), the fastest such move, refined by one
 * more local search (two thirds more simulations each).  No-op elsewhere. */
void tn_mixed_cap_kick(tn_search *st);
/* Whether the seeds' second set, with policies per device (tn_search.heavy_pol), applies to
 * pr under placement mode: the seeds do, and some devices are fast (within 5% of the
 * fastest) and some slow. */
int tn_mixed_heavy_pol_applies(const op_problem *pr, op_tune_placement mode);
/* tune_mixed_shift.c.  c = x with one layer moved from stage `from` to stage `to`, every
 * boundary between them moved by one (the stages between keep their layer counts).  Returns
 * 0 (c unset) where from == to or stage from holds one layer. */
int tn_shift_layer(const tn_cand *x, int from, int to, tn_cand *c, const tn_prob *pb);
/* After the keep search on a mixed cluster (tn_tune_core_keep): one restart from the best
 * plan's fastest shift of a layer onto a stage of the least busy device (tn_shift_layer, from
 * any other stage), refined by one more local search (a fifth more simulations).  No-op on
 * uniform clusters. */
void tn_mixed_shift_kick(tn_search *st);
/* tune_mixed_affinity.c.  On a two-type cluster, the search of op_tune's affinity trial
 * (tn_tune_core_affinity): six layouts that give the slow devices the layers of the kinds they
 * are least slow at (up to their balanced share) and the fast devices the rest in stages of
 * 1, 2 or 3 layers, each under the schedule knobs and then one local search of st's budget,
 * and one more from the best of them.  No-op on other clusters, under --placement loop|v,
 * and where those kinds are not cheaper on the slow type than the layers on average. */
void tn_mixed_affinity(tn_search *st);
/* The same search from the roomy layouts: on a mixed cluster where some devices' own limit
 * holds two or more heavy layers (tn_heavy_caps) and others' one, those devices take the heavy
 * layers alone, up to their capacity and balanced share, and the others the rest in stages of
 * 1, 2 or 3 layers.  No-op elsewhere and under --placement loop|v. */
void tn_mixed_affinity_roomy(tn_search *st);

#endif
