/* plan_sweep.h: `octopipe plan --mem-sweep` (plan_sweep.c) and --device-sweep (plan_devsweep.c). */
#ifndef OCTOPIPE_CLI_PLAN_SWEEP_H
#define OCTOPIPE_CLI_PLAN_SWEEP_H
#include "cli/cli_common.h"
#include "octopipe/tune.h"

/* When a sweep's --time-budget runs out (0: none): from o->started_s, else now. */
double op_cli_sweep_deadline(const op_tune_opts *o);
/* The options of one row: o's, with an equal share of what is left until deadline over the
 * rows_left rows still to tune, and the search's stats into *st (cleared first). */
op_tune_opts op_cli_sweep_row(const op_tune_opts *o, double deadline, int rows_left, op_tune_stats *st);

/* Tunes s->pr at a range of per-device memory limits and prints one row each to f; the limit the
 * problem has (uniform clusters) is one of them.  at_set != NULL: receives the fastest plan
 * found at or below that limit, recorded and simulated at it (the plan of its row), and
 * *at_set_st its search's stats; returns 1 then, 0 when there is none (mixed clusters, no
 * limit, or nothing fits; *at_set is then untouched). */
int op_cli_mem_sweep(const op_cli_setup *s, const op_tune_opts *o, FILE *f, op_plan *at_set,
                     op_tune_stats *at_set_st);
/* Tunes s->pr on fewer devices (plan_devsweep.c: P, its halves while static memory fits, and
 * where the lower bound stops falling) and prints one row each to f.  at_p != NULL: receives
 * the plan on all P devices (the last row) and *at_p_st its stats; returns 1 then, 0 when none
 * was found.  On a mixed cluster the rows are each kind of device alone and all of them. */
int op_cli_device_sweep(const op_cli_setup *s, const op_tune_opts *o, FILE *f, op_plan *at_p,
                        op_tune_stats *at_p_st);
#endif
