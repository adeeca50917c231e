/* polish.c: hill climbing on a heuristic order, the "squeeze and reorder" step the Zero Bubble
 * schedulers run after their greedy pass: move one op of a device up to 4 places (the nearest
 * first), re-simulate, keep the move when the makespan drops (or stays and the I chain ends
 * earlier) and the peak memory does not grow.  An order that
 * would deadlock fails to simulate and is undone.  Bounded by a number of simulations, so the
 * cost stays within a baseline's budget; deterministic (devices and positions in order). */
#include <stdlib.h>
#include <string.h>

#include "octopipe/sim.h"
#include "sched/sched_int.h"

/* Tie-break among equal makespans: the sum of every I's end (the backward chain, which the
 * last microbatches wait on, earlier everywhere), so plateaus of the makespan can be crossed. */
static double second(const op_plan *p) {
    double t = 0;
    for (int d = 0; d < p->P; d++)
        for (int i = 0; i < p->n_ops[d]; i++)
            if (p->ops[d][i].kind != OP_W) t += p->ops[d][i].end;
    return t;
}

/* o[i] to position j, the ops between shifted by one (no check). */
static void shift(op_op *o, int i, int j) {
    op_op mv = o[i];
    if (j > i) memmove(&o[i], &o[i + 1], sizeof(op_op) * (size_t)(j - i));
    else memmove(&o[j + 1], &o[j], sizeof(op_op) * (size_t)(i - j));
    o[j] = mv;
}

int op_sched_move(op_op *o, int n, int i, int j) {
    if (i < 0 || j < 0 || i >= n || j >= n || i == j) return 0;
    int lo = i < j ? i : j, hi = i < j ? j : i;
    for (int x = lo; x <= hi; x++) /* same stage and mb, or same stage and kind */
        if (x != i && o[x].stage == o[i].stage && (o[x].mb == o[i].mb || o[x].kind == o[i].kind))
            return 0;
    shift(o, i, j);
    return 1;
}

void op_sched_unmove(op_op *o, int i, int j) { shift(o, j, i); }

int sched_polish(op_plan *p, long max_sims, double deadline, op_sim_ws *ws) {
    op_err e = {0};
    OP_ASSERT(p->pred.valid, "polish wants a simulated plan");
    double best = p->pred.makespan_ms, best2 = second(p);
    int64_t peak0 = p->pred.peak_bytes_max;
    long sims = 0;
    int kept = 0;
    /* validity does not depend on the order (a move keeps each op on its device): checked
     * once here, not per move; an invalid plan keeps no move, as every simulation would fail */
    if (op_plan_validate(p, &e) != OP_OK) max_sims = 0;
    /* Incremental re-timing (op_sim_retime_from): p->ops holds the times of the kept order
     * (base: a copy of them), a move re-times only what starts from the moved ops on, and a
     * rejected move puts back the times it rewrote.  inc = 0 (the order as given does not
     * replay): every move re-times the whole order. */
    long nall = 0;
    for (int d = 0; d < p->P; d++) nall += p->n_ops[d];
    op_op *base = op_xmalloc(sizeof(op_op) * (size_t)(nall > 0 ? nall : 1));
    long *boff = op_xmalloc(sizeof(long) * (size_t)p->P);
    int *from = op_xmalloc(sizeof(int) * (size_t)p->P);
    int inc = max_sims > 0 && op_sim_retime(p, ws) >= 0;
    for (int d = 0, k = 0; d < p->P; k += p->n_ops[d], d++) {
        boff[d] = k;
        memcpy(base + k, p->ops[d], sizeof(op_op) * (size_t)p->n_ops[d]);
    }
    /* moves: op i to position i + k (|k| <= 4; k = 1 is the neighbour swap), nearest first */
    static const int ks[] = {1, 2, -2, 3, -3, 4, -4};
    for (int improved = 1; improved && sims < max_sims;) {
        improved = 0;
        for (int kk = 0; kk < (int)(sizeof ks / sizeof *ks) && sims < max_sims; kk++)
            for (int d = 0; d < p->P && sims < max_sims; d++)
                for (int i = 0; i < p->n_ops[d] && sims < max_sims; i++) {
                    int j = i + ks[kk];
                    if (j < 0 || j >= p->n_ops[d]) continue;
                    op_op *o = p->ops[d];
                    int lo = i < j ? i : j, hi = i < j ? j : i;
                    if (!op_sched_move(o, p->n_ops[d], i, j)) continue;
                    sims++;
                    /* The times decide most moves (a longer makespan, or a plateau whose I
                     * chain ends no earlier); only a move that would be kept pays for the
                     * memory walk.  The same decisions as op_sim_replay (validate, this
                     * replay, op_sim_fill_pred) per move. */
                    double m = inc ? op_sim_retime_from(p, ws, d, lo, hi, from)
                                   : op_sim_retime(p, ws);
                    double m2 = m >= 0 ? second(p) : 0;
                    int ok = m >= 0 &&
                             (m < best * (1 - 1e-12) ||
                              (m <= best * (1 + 1e-12) && m2 < best2 * (1 - 1e-12)));
                    if (ok) ok = op_sim_peak_max(p) <= peak0;
                    if (ok) {
                        best = m;
                        best2 = m2;
                        improved = 1;
                        kept++;
                        for (int x = 0; inc && x < p->P; x++)
                            memcpy(base + boff[x] + from[x], p->ops[x] + from[x],
                                   sizeof(op_op) * (size_t)(p->n_ops[x] - from[x]));
                    } else { /* undo */
                        op_sched_unmove(o, i, j);
                        for (int x = 0; inc && x < p->P; x++)
                            memcpy(p->ops[x] + from[x], base + boff[x] + from[x],
                                   sizeof(op_op) * (size_t)(p->n_ops[x] - from[x]));
                    }
                    if (op_past(deadline)) max_sims = sims; /* out of time: ends every loop */
                }
    }
    free(base);
    free(boff);
    free(from);
    int rc = op_sim_replay(p, ws, &e);
    OP_ASSERT(rc == OP_OK, "polished order does not simulate: %s", e.msg);
    return kept;
}

int op_sched_polish(op_plan *p, long max_sims) { return op_sched_polish_until(p, max_sims, 0); }

int op_sched_polish_until(op_plan *p, long max_sims, double deadline) {
    op_sim_ws *ws = op_sim_ws_new();
    /* the caller's plan may be unsimulated, or its order changed since (a deadlock): either
     * reached sched_polish's assertions; a plan that does not simulate is refused as it is */
    op_err e = {0};
    if (op_sim_replay(p, ws, &e) != OP_OK) {
        op_sim_ws_free(ws);
        return OP_EINVAL;
    }
    int kept = sched_polish(p, max_sims, deadline, ws);
    op_sim_ws_free(ws);
    return kept;
}
