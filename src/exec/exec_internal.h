/* exec_internal.h: shared between the executor's files (not installed). */
#ifndef OCTOPIPE_EXEC_INTERNAL_H
#define OCTOPIPE_EXEC_INTERNAL_H
#include "octopipe/exec.h"

/* op_exec_rank_run with the watchdog line ("rank 2: waiting 10.0 s for ...") written to `line`
 * instead of stderr when line is non-NULL. */
int op_exec_rank_run_line(const op_plan *p, const op_lowered *l, op_xport *x, const op_compute *c,
                          const op_exec_opts *o, op_exec_result *res, char *line, size_t cap,
                          op_err *err);

/* Builds rank 0's result from every rank's records (recs[r], n[r]). */
void op_exec_result_build(op_exec_result *res, const op_plan *p, op_exec_rec **recs,
                          const int *n);

/* Abort reasons on the watchdog channel: 1..P name the rank that raised it, this one the time
 * limit (op_exec_opts.timeout_s), which no rank in particular raised. */
static inline int op_exec_limit_reason(const op_plan *p) { return p->P + 1; }

/* Polite sleep helpers (exec/runtime.c). */
void op_exec_nap_us(double us);
void op_exec_timer_slack_fine(void);
#endif
