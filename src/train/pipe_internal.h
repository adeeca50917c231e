/* pipe_internal.h: what the in-process (pipe_session.c) and MPI (pipe_run.c) training loops
 * share: rank 0's per-step record, the progress line, the report, checkpoint naming. */
#ifndef OCTOPIPE_TRAIN_PIPE_INTERNAL_H
#define OCTOPIPE_TRAIN_PIPE_INTERNAL_H
#include "octopipe/ptrain.h"

/* What rank 0 keeps across steps (arrays grow as steps are noted). */
typedef struct op_pstats {
    double *ms;  /* [n] measured makespans */
    double *cpu; /* [n] lowest per-rank CPU share of the step's compute */
    int n, cap;
    double quiet;  /* CPU share from which a step counts as quiet */
    double excess; /* sum of op_exec_result.overhead_ms over the timed steps */
    double t0;     /* when the run started (tokens/s) */
    int64_t first; /* first global step of this run */
    double pred;   /* o->pred_ms: what to compare with (0 = the plan's makespan) */
} op_pstats;

void op_pstats_init(op_pstats *st, const op_ptrain_opts *o, int64_t first_step);
void op_pstats_free(op_pstats *st);
/* Records one step's makespan and CPU share. */
void op_pstats_note(op_pstats *st, const op_exec_result *res, double share);
/* The progress line of o->log_every. */
void op_pstats_log(const op_pstats *st, const op_nn_model *m, const op_plan *p,
                   const op_ptrain_opts *o, int64_t step, double loss, double ms);
/* Fills rep's timing fields (medians over the timed steps: all but the first). */
void op_pstats_finish(const op_pstats *st, op_ptrain_report *rep, const op_nn_model *m,
                      const op_plan *p);

/* OP_EINVAL naming both when p was not made for m (its layer count differs). */
int op_ptrain_check_plan(const op_nn_model *m, const op_plan *p, op_err *err);

/* DIR/model.ckpt for o->ckpt_dir ("" when none; --resume without a directory is an error). */
int op_ptrain_ckpt_path(const op_ptrain_opts *o, char *path, size_t cap, op_err *err);
/* 1: a checkpoint is due after `step` (the last step, or every o->ckpt_every). */
int op_ptrain_want_ckpt(const op_ptrain_opts *o, int64_t step);

/* The copy engine of one rank's offload stages (pipe_copy.c); NULL when the rank has none, and
 * every function takes NULL as "nothing to do".  st[S] are the stages (the rank's own used).
 * op_pcopy_new sets *out (NULL: none needed); OP_EIO when its thread cannot start. */
typedef struct op_pcopy op_pcopy;
int op_pcopy_new(const op_plan *p, op_nn_stage **st, int rank, op_pcopy **out, op_err *err);
void op_pcopy_free(op_pcopy *c);
/* Before a step (waits out any copy a failed step left). */
void op_pcopy_begin_step(op_pcopy *c);
/* Before the rank's op number op_index (its position in the rank's order): queues the next
 * op's reload; an I|B of an offload stage then waits for its own reload to end. */
void op_pcopy_before(op_pcopy *c, int op_index, const op_compute_call *call);
/* After an op: F of an offload stage queues its stash's offload. */
void op_pcopy_after(op_pcopy *c, const op_compute_call *call);
/* Transfers done, ms spent on them so far, and (cpu_ms non-NULL) the engine thread's CPU ms
 * in the copies themselves: what it took from the cores the ranks compute on. */
void op_pcopy_stats(const op_pcopy *c, int *n_xfers, double *busy_ms, double *cpu_ms);
/* That CPU time of rank's copy engine (0 when it has none). */
double op_ptrain_copy_cpu_ms(const op_ptrain *t, int rank);

#endif
