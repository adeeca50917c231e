/* check_int.h: the rules that op_problem_validate (problem_check.c) and op_plan_validate
 * (plan.c) share, so that a plan is held to what the problem it came from was. */
#ifndef OP_PLAN_CHECK_INT_H
#define OP_PLAN_CHECK_INT_H

#include "octopipe/plan.h"

/* The tokens of one microbatch: in [0, 2^53], or OP_EINVAL saying so. */
int pc_tokens_validate(double tokens_per_mb, op_err *err);
/* The time added to every op: in [0, OP_MAX_MS], or OP_EINVAL saying so.  (A problem also
 * refuses one under 1 ns; a plan may hold one, scaled down by run --time-scale.) */
int pc_overhead_validate(double op_overhead_ms, op_err *err);

#endif
