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
/* Whether the seeds' second set, with policies per device (tn_search.heavy_pol), applies to
 * pr under placement mode: the seeds do, and some devices are fast (within 5% of the
 * fastest) and some slow. */
int tn_mixed_heavy_pol_applies(const op_problem *pr, op_tune_placement mode);

#endif
