/* plan_sweep.h: `octopipe plan --mem-sweep` (plan_sweep.c). */
#ifndef OCTOPIPE_CLI_PLAN_SWEEP_H
#define OCTOPIPE_CLI_PLAN_SWEEP_H
#include "cli/cli_common.h"
#include "octopipe/tune.h"

/* Tunes s->pr at a range of per-device memory limits and prints one row each.  Returns 0. */
int op_cli_mem_sweep(const op_cli_setup *s, const op_tune_opts *o);
#endif
