/* bound_int.h: what the lower-bound files of plan/ share. */
#ifndef OP_PLAN_BOUND_INT_H
#define OP_PLAN_BOUND_INT_H

#include "octopipe/plan.h"

/* Devices grouped by (type, memory limit): n groups, type[g] a row of the per-type arrays,
 * cnt[g] devices, lim[g] their limit in bytes (<= 0: none; lim may be NULL: no limits). */
typedef struct {
    int n;
    const int *type, *cnt;
    const double *lim;
} op_bound_groups;

/* The whole-layer counting bound (bound_count.c says why it holds): w [T * L] per-type work
 * (F + I + W of one microbatch), st [T * L] per-type static bytes (may be NULL when no group
 * has a limit). */
double op_bound_count(const double *w, const double *st, int T, int L, int M,
                      const op_bound_groups *gr);

#endif
