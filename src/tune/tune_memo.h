/* tune_memo.h: the tune engine's memo of evaluated candidates (tune_memo.c).  The local
 * search meets the same candidate again and again (a move undone by a later one, the same
 * move list regenerated after a stalled phase, seeds repeated across restarts): about 30% of
 * the simulations of a tune at P=8, M=32.  The engine is deterministic, so a stored result is
 * the result; lookups change how fast a tune runs, never what it finds.  Private to
 * tune_engine.c. */
#ifndef OCTOPIPE_TUNE_MEMO_H
#define OCTOPIPE_TUNE_MEMO_H
/* tune_int.h (not included here: its second half has no include guard) */
struct tn_prob;
struct tn_cand;
struct tn_res;

typedef struct tn_memo tn_memo;

/* A memo for candidates of pb (its L, P and costs are fixed for the memo's life; a change of
 * pb's memory limit, overhead or limits array empties it). */
tn_memo *tn_memo_new(const struct tn_prob *pb);
void tn_memo_free(tn_memo *m);

/* Looks c up for an evaluation with this cutoff (0 = none).  Returns 1 when the memo knows
 * the answer: *mk = the makespan with r filled as tn_eval fills it, or -2 (r->makespan only)
 * when the run would give up at this cutoff.  Returns 0 otherwise, keeping c's key for
 * tn_memo_put. */
int tn_memo_get(tn_memo *m, const struct tn_prob *pb, const struct tn_cand *c, double cutoff,
                struct tn_res *r, double *mk);

/* Stores the evaluation of the candidate last missed by tn_memo_get: complete (r holds the
 * result) or given up (complete = 0; r is not read).  xmax: the largest lower bound
 * (op end + the device's remaining work) the run compared with its cutoff: a cutoff c makes
 * the run give up iff xmax > c * (1 + 1e-12), which is what lets one stored run answer
 * other cutoffs. */
void tn_memo_put(tn_memo *m, const struct tn_res *r, int complete, double xmax);

#endif
