/* check_int.h: the rules that op_problem_validate (problem_check.c) and op_plan_validate
 * (plan.c) share, so that a plan is held to what the problem it came from was. */
#ifndef OP_PLAN_CHECK_INT_H
#define OP_PLAN_CHECK_INT_H

#include "octopipe/plan.h"

/* The tokens of one microbatch: in [0, 2^53], or OP_EINVAL saying so. */
int pc_tokens_validate(double tokens_per_mb, op_err *err);

#endif
