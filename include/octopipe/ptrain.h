/* ptrain.h: pipelined training of the reference model (nn.h) through the executor (exec.h).
 *
 * The pieces:
 *  - costs: a profile of the model (op_train_profile, per layer kind) becomes one op_layer_cost
 *    per layer, and a problem (P, M, link model, per-op executor overhead) the planners read;
 *  - a plan: a classic schedule (op_sched_build), the tuner (op_tune, "auto") or a plan file;
 *  - the compute: an op_compute whose F/I/W/B calls run op_nn_stage_forward / backward_input /
 *    backward_weight on the stages the plan places on this rank (boundary messages are (N, d)
 *    floats); the stage holding E reads batch op_train_data_batch(step, mb);
 *  - the loop: per step, the executor runs one iteration of the plan; then every rank runs
 *    AdamW on its stages, and the per-(stage, mb) loss terms reach rank 0, which sums them in
 *    (mb, stage) order.  Everything a step computes is a pure function of (seed, step, mb) and
 *    gradients fold in microbatch order (nn.h), so any plan gives bitwise the weights of the
 *    single-process loop (op_train_single).
 *
 * Reported loss: per microbatch the sum of every layer's loss term (the head's cross-entropy
 * plus the MoE load-balancing terms), averaged over microbatches: the objective the gradients
 * are of.  op_train_single reports the last stage's terms, which is the same number when it runs
 * one stage (its default).  The sum groups the terms per stage, so with MoE layers on several
 * stages it may differ from the one-stage sum in the last bit (weights never do). */
#ifndef OCTOPIPE_PTRAIN_H
#define OCTOPIPE_PTRAIN_H
#include "octopipe/exec.h"
#include "octopipe/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- costs and plans ---- */

/* One op_layer_cost per layer of m from per-kind times (op_train_profile or
 * op_ptrain_profile_cpu) and activation bytes probed from the stage arenas: act_bytes = held
 * after F, act_w_bytes = held after I (until W; may exceed act_bytes), act_i_bytes = I's peak
 * minus what F held (the simulator then reproduces op_ptrain_pred_act_peak exactly);
 * static = params + grads + AdamW m, v (FP32).  OP_EINVAL if a kind of m was not profiled. */
int op_ptrain_layer_costs(const op_nn_model *m, const op_layer_prof *prof, int n_prof,
                          op_layer_cost *out, op_err *err);

/* Peak activation bytes per device [P] predicted for plan p from the stage arenas' rule, walking
 * each device's op order: F holds what its layers keep (after_f), I peaks at after_f + its
 * temporaries and stash, then keeps after_i until W; B peaks like I and frees everything.  The
 * simulator's rule (plan.h) counts no I transient; this adds it.  Offload stages count their
 * copies as taking no time (stash gone at F's end, back at I's start): a lower bound on what
 * the copy engine (pipe_copy.c) holds; the simulator's timed engine rule is the prediction
 * then.  OP_EINVAL if m is not p's. */
int op_ptrain_pred_act_peak(const op_nn_model *m, const op_plan *p, int64_t *peak);

/* op_train_profile measured in thread CPU time instead of wall time (same loop: each kind
 * alone in a one-layer stage, F, I, W, median of repeats).  On a machine shared with other
 * jobs the wall-clock profile counts the time other processes held the core; CPU time does
 * not, so predictions stay those of dedicated cores.  Returns the number of kinds (<= 8). */
int op_ptrain_profile_cpu(const op_nn_model *m, int repeats, op_layer_prof *out);

/* The profile the way a run computes: `ranks` profilers at once, one thread each (as the P
 * ranks of a run on P cores, sharing caches and memory bandwidth), per-kind times averaged
 * over them; thread CPU time (op_ptrain_profile_cpu) or wall time (op_train_profile).  Returns
 * the number of kinds, or OP_EIO when a profiler's thread cannot start (the process is out of
 * threads; out untouched). */
int op_ptrain_profile_ranks(const op_nn_model *m, int repeats, int ranks, int cpu_clock,
                            op_layer_prof *out, op_err *err);

/* Link model of this machine for boundary messages: the thread transport copies (memcpy),
 * MPI shared memory is a copy plus a few microseconds. */
void op_ptrain_default_comm(op_comm *c);

/* Builds a plan for (m, layers, P, M): spec = "auto" (op_tune), a schedule name of sched.h, or
 * a plan file (its layers must be m's: same count and kinds).  overhead_ms is the executor's
 * per-op cost the prediction adds.  The plan is simulated (pred filled).  Errors name the spec. */
int op_ptrain_make_plan(const op_nn_model *m, const op_layer_cost *layers, int P, int M,
                        const op_comm *comm, double overhead_ms, const char *spec, op_plan *out,
                        op_err *err);
/* Whether spec names something op_ptrain_make_plan knows (the tuner, a plan file, a schedule
 * of sched.h), checked before any work: OP_OK, or OP_EINVAL listing the schedules. */
int op_ptrain_plan_spec_check(const char *spec, op_err *err);
/* Where spec is a plan file: that it reads and fits (m, P, M) as op_ptrain_make_plan will
 * check it, before the profiling and calibration that come first there; OP_OK for a tuner or
 * schedule spec. */
int op_ptrain_plan_file_check(const op_nn_model *m, int P, int M, const char *spec, op_err *err);

/* ---- the compute ---- */

typedef struct op_ptrain op_ptrain; /* the stages of one rank (or all ranks: threads) */

/* Builds the stages the plan places on `rank` (rank < 0: every stage, for in-process ranks;
 * each thread then only touches its own stages).  m, d and p must outlive it.  NULL when p's
 * layer count is not m's (the runs below say so in their error). */
op_ptrain *op_ptrain_new(const op_nn_model *m, const op_train_data *d, const op_plan *p, int rank);
void op_ptrain_free(op_ptrain *t);
op_compute op_ptrain_compute(op_ptrain *t);
/* Before a step: zero gradients, remember the step for the data. */
void op_ptrain_begin_step(op_ptrain *t, int64_t step);
/* After a step: AdamW (step t) on the stages held. */
void op_ptrain_end_step(op_ptrain *t, const op_adamw *o);
/* Loss terms of the held stages of the last step: lt[s * M + mb] (0 for stages not held). */
const double *op_ptrain_loss_terms(const op_ptrain *t);
/* Mean over mb of the sum over stages of lt (S stages, M microbatches): the step loss. */
double op_ptrain_step_loss(const double *lt, int S, int M);
/* Peak activation bytes a rank held at once (all its stages together, I's stash included). */
int64_t op_ptrain_peak_act(const op_ptrain *t, int rank);
void op_ptrain_reset_peak(op_ptrain *t);
/* Offload stages: transfers a rank's copy engine did so far and the ms they lasted (each at
 * least the plan's op_stage_copy_ms: the modelled host link). */
void op_ptrain_copy_stats(const op_ptrain *t, int rank, int *n_xfers, double *busy_ms);
/* Share of the wall time inside this rank's compute calls that its thread was on a CPU (1 =
 * never preempted): below ~0.97, other processes took the core and times are not comparable
 * with a prediction made for dedicated cores. */
double op_ptrain_cpu_share(const op_ptrain *t, int rank);
/* Thread CPU seconds / wall seconds this rank spent in compute calls so far. */
double op_ptrain_cpu_s(const op_ptrain *t, int rank);
double op_ptrain_wall_s(const op_ptrain *t, int rank);
/* Per (stage, op kind) totals over the calls so far: thread CPU ms, wall ms, page faults
 * (minor + major, of the calling thread) and the number of calls. */
typedef struct op_ptrain_opstat {
    double cpu_ms, wall_ms;
    long faults;
    int64_t n;
} op_ptrain_opstat;
op_ptrain_opstat op_ptrain_op_stat(const op_ptrain *t, int stage, op_kind kind);
/* Zeroes the per-op stats (e.g. after a warm-up step); the per-rank totals keep counting. */
void op_ptrain_reset_op_stats(op_ptrain *t);
/* 1: each rank's thread binds itself to core rank % (online cores) when a step starts (keeps
 * a rank's caches on one core; for dedicated machines, not for a box shared with other jobs). */
void op_ptrain_set_pin(op_ptrain *t, int pin);
/* Stages held, in stage order (for checkpoints): fills st[] and returns the count. */
int op_ptrain_stages(op_ptrain *t, op_nn_stage **st, int cap);

/* ---- mixed clusters on one machine (pipe_slow.c) ---- */

/* "1,1,2,2": P factors in [1, 1000], one per rank.  OP_EINVAL naming the flag otherwise. */
int op_ptrain_slowdown_parse(const char *spec, int P, double *k, op_err *err);
/* Each device's slow-down on a mixed plan: its type's F+I+W time over all layers divided by
 * the fastest device's (all 1 on a uniform plan, or when the fastest type has no work).
 * Returns 1 when some k > 1, 0 when none, -1 (k all 1) when some k > 1000 (--slowdown's
 * bound). */
int op_ptrain_plan_slowdown(const op_plan *p, double *k);
/* Makes p the plan a slowed-down run follows: every device type's costs become `machine`
 * (this machine's, [n_layers]), then device d's are scaled by k[d] (op_exec_slow_plan), and p
 * is re-simulated.  OP_EINVAL, p unchanged, when some k[d] is outside (0, 1e6]. */
int op_ptrain_slowdown_plan(op_plan *p, const op_layer_cost *machine, const double *k,
                            op_err *err);
/* The same with each device's own costs on this machine: device d's become dev_costs[d]
 * ([P] pointers to [n_layers]), then x k[d].  For costs calibrated per device kind, as one
 * profiles each GPU type: a rank slowed x2 computes a little slower than in a uniform run
 * (its compute alternates with spins), so the x2 kind's costs come from runs with every rank
 * slowed x2 (the compute inside their ops) and the x1 kind's from uniform x1 runs.  Devices
 * of one old type with the same costs pointer share a type (names kept). */
int op_ptrain_slowdown_plan_kinds(op_plan *p, const op_layer_cost *const *dev_costs,
                                  const double *k, op_err *err);
/* The tuner's plan for P ranks of which rank d computes k[d] times slower than `machine` says
 * (a mixed problem: one device type per distinct k, named "x<k>"); what `--plan auto` with
 * --slowdown plans, so partition and placement see each rank's speed. */
int op_ptrain_tune_slow(const op_nn_model *m, const op_layer_cost *machine, int P, int M,
                        const op_comm *comm, double overhead_ms, const double *k, op_plan *out,
                        op_err *err);
/* A compute that runs `inner` and then, on rank d, waits (k[d] - 1) x the op's wall time,
 * progressing messages.  s (inner, the plan, k) must outlive the compute. */
typedef struct op_ptrain_slow {
    op_compute inner;
    const op_plan *p;
    const double *k; /* [P] */
    double late[64]; /* per rank (< 64): summed lateness of its naps (s), and their count; */
    int n[64];       /* zero-initialise (each rank's thread touches only its own entry) */
    double spin_cpu[64], spin_wall[64]; /* per rank: thread CPU and wall seconds of its spins
                                         * (a step's quiet share counts them, pipe_session.c) */
    int cores;       /* online CPUs (set by op_ptrain_slow_compute): spin while P <= cores */
} op_ptrain_slow;
op_compute op_ptrain_slow_compute(op_ptrain_slow *s);

/* ---- training runs ---- */

typedef struct op_ptrain_opts {
    const char *data;     /* op_train_data_open spec (default "text") */
    int steps;            /* train until this global step */
    uint64_t seed;        /* init and data (default 1) */
    op_adamw opt;         /* lr 0 = defaults */
    const char *ckpt_dir; /* NULL = none; DIR/model.ckpt, written by rank 0 */
    int ckpt_every;       /* steps between checkpoints (0 = only at the end) */
    int resume;           /* continue from DIR/model.ckpt */
    int log_every;        /* progress line every N steps on rank 0 (0 = quiet) */
    FILE *log;            /* default stdout */
    double *losses;       /* optional out [steps]: step loss by global step (rank 0) */
    op_exec_opts eo;      /* executor options (zero = defaults) */
    int progress_thread;  /* 1: the executor's progress thread runs while kernels compute
                           * (default 0: its 50 us wake-ups cost the ranks' cores ~20% CPU
                           * time and more wall time on a machine whose cores all compute) */
    int keep_result;      /* 1: keep the last step's op_exec_result (rank 0) */
    double quiet_share;   /* step_cpu threshold for meas_ms_quiet (0 = 0.97) */
    int pin_cores;        /* op_ptrain_set_pin for the run */
    double pred_ms;       /* the prediction the progress lines and report compare with (0 = the
                           * plan's makespan; e.g. op_ptrain_expected_ms after calibration) */
    const double *slowdown; /* [P] per-rank slow-down factors >= 1 (pipe_slow.c), or NULL */
} op_ptrain_opts;
void op_ptrain_opts_default(op_ptrain_opts *o);

/* What a run measured (rank 0). */
#define OP_PTRAIN_MAX_STEPS 256
typedef struct op_ptrain_report {
    int64_t first_step, steps_run;
    double first_loss, last_loss;
    double meas_ms_median;   /* median measured iteration makespan over the timed steps */
    double meas_ms_mean;
    double meas_ms_min;      /* best step: the one least disturbed by other processes */
    double meas_ms_trimmed;  /* mean of the middle 60% of the timed steps (what op_ptrain_expected_ms
                              * predicts) */
    double pred_ms;          /* the plan's predicted makespan */
    double op_excess_ms;     /* mean over steps of op_exec_result.overhead_ms: measured op
                              * duration - the plan's (its op_overhead_ms included) */
    double tokens_per_s;     /* over the whole run (optimizer and loss gathering included) */
    int64_t peak_act[64];    /* per rank, measured */
    double cpu_share[64];    /* per rank, op_ptrain_cpu_share over the run */
    double cpu_ms_step[64];  /* per rank, CPU time in compute calls per step (mean) */
    int copy_xfers[64];      /* per rank, offload/reload transfers of its copy engine (in-process
                              * runs; 0 elsewhere) */
    double copy_busy_ms[64]; /* per rank, ms those transfers lasted */
    double copy_cpu_ms[64];  /* per rank, CPU ms its engine's thread spent in the copies (memcpy
                              * and page faults, taken from the cores the ranks compute on) */
    double wall_s;
    /* per step (the first OP_PTRAIN_MAX_STEPS run): makespan and the lowest share over ranks of
     * that step's compute wall time spent on a CPU (op_ptrain_cpu_share for one step) */
    double step_ms[OP_PTRAIN_MAX_STEPS], step_cpu[OP_PTRAIN_MAX_STEPS];
    int n_step;
    /* mean of the middle 60% of the makespans of the timed steps (not the first) whose
     * step_cpu >= quiet_share (0.97 by default: ranks had their cores), and how many there
     * were (0: none, the mean is 0) */
    double meas_ms_quiet;
    int n_quiet;
    /* per (stage, kind) op stats, stage < 64, [s * 4 + kind] (op_ptrain_op_stat), in-process
     * runs only: over all timed steps (the first left out), and over the quiet ones only */
    op_ptrain_opstat ops[64 * 4], ops_quiet[64 * 4];
    /* executor cost inside an op's record but outside the compute call, ms per op, mean over
     * the timed steps (records' busy time - wall time in the compute calls and in a slowed
     * rank's spins; in-process runs) */
    double op_record_excess_ms;
    op_exec_result last;     /* keep_result: the last step's records */
    int have_last;
} op_ptrain_report;
void op_ptrain_report_free(op_ptrain_report *r);

/* Trains model m under plan p with P in-process ranks (thread transport). */
int op_ptrain_run_threads(const op_nn_model *m, const op_plan *p, const op_ptrain_opts *o,
                          op_ptrain_report *rep, op_err *err);
/* The same one step at a time, with the stages (weights, AdamW state, activation pools) kept
 * between calls: several plans can then alternate step by step in one process, so a drift of
 * the machine's speed touches them alike (bench_model_accuracy).  A session starts at step 0
 * (or o->resume's checkpoint), honours o->steps only for checkpoints and the log's last line,
 * and reports like op_ptrain_run_threads over the steps run so far. */
typedef struct op_ptrain_session op_ptrain_session;
int op_ptrain_session_new(const op_nn_model *m, const op_plan *p, const op_ptrain_opts *o,
                          op_ptrain_session **out, op_err *err);
/* Runs the next step (executor iteration, AdamW, loss, checkpoint when due). */
int op_ptrain_session_step(op_ptrain_session *s, op_err *err);
/* The last step's executor result (records, per-rank busy time) when o->keep_result, else NULL;
 * valid until the next step or op_ptrain_session_report. */
const op_exec_result *op_ptrain_session_last(const op_ptrain_session *s);
/* The report over the steps so far (rep: caller frees with op_ptrain_report_free). */
void op_ptrain_session_report(op_ptrain_session *s, op_ptrain_report *rep);
void op_ptrain_session_free(op_ptrain_session *s);

/* This rank's part of the same over x (MPI): rank 0 fills rep and logs. */
int op_ptrain_run_rank(const op_nn_model *m, const op_plan *p, op_xport *x,
                       const op_ptrain_opts *o, op_ptrain_report *rep, op_err *err);

/* Calibration, the way the paper's layer_time_solver does it: per-kind F/I/W times fitted by
 * least squares to the per-(stage, kind) op times measured in real pipelined runs (wall time
 * inside the compute call over the quiet steps, ops_quiet; thread CPU time over all timed
 * steps, ops, for a report without quiet steps)
 * (reps[i] of plans[i], i < n; rows: mean op time = sum over the stage's layers + a per-call
 * constant; B rows = I + W; I|B rows of a full stage add its F, of a selective stage the
 * attention core's share of F; relative error weighting).  A ridge term pulls every time toward
 * prior (the isolated profile) with weight `ridge` (0.05 is a good default): with few stages the
 * data only decide what they see, the rest keeps the profile's shape.  Fills out[] (same kinds
 * as prior, times replaced, f_sel_ms scaled with f_ms, memory kept), *call_ms (the per-call constant, >= 0) and returns
 * the rms relative residual of the fit (%), or -1 if no row was usable. */
double op_ptrain_fit_costs(const op_nn_model *m, const op_plan *const *plans,
                           const op_ptrain_report *const *reps, int n, const op_layer_prof *prior,
                           int n_prior, double ridge, op_layer_prof *out, double *call_ms);

/* Calibration: the per-op executor overhead (ms) that makes the simulated makespan of p equal
 * measured_ms (bisection over op_overhead_ms on a copy; p is not changed).  Clamped to
 * [0, 10 ms]; what it absorbs is described in docs/training.md. */
double op_ptrain_fit_overhead(const op_plan *p, double measured_ms);

/* ---- calibration runs (pipe_calib.c) ---- */

/* Plans taking turns step by step: a session each (op_ptrain_session), one untimed warm-up
 * step each, then `rounds` rounds of one step per plan, the order rotated and reversed from
 * round to round, so that a drift of the machine's speed touches every plan alike.  All plans
 * need the same P; o's steps, checkpoints and losses are ignored.  OP_EINVAL when n or rounds
 * is below 1. */
typedef struct op_ptrain_turns {
    int n, rounds, P;
    double quiet;          /* o->quiet_share: a step counts for speed samples from this CPU share */
    op_ptrain_report *rep; /* [n] each plan's report (step 0 = warm-up) */
    double *busy;          /* [n][rounds][P] each rank's busy ms in each timed step */
} op_ptrain_turns;
int op_ptrain_run_turns(const op_nn_model *m, const op_plan *const *plans, int n,
                        const op_ptrain_opts *o, int rounds, op_ptrain_turns *out, op_err *err);
void op_ptrain_turns_free(op_ptrain_turns *t);

/* dst = src with every layer's costs replaced by costs[] and the per-op overhead, simulated. */
int op_ptrain_repredict(const op_plan *src, const op_layer_cost *costs, double overhead_ms,
                        op_plan *dst, op_err *err);

/* The devices' speed in plan i's quiet timed steps (CPU share >= t->quiet): per step and rank,
 * measured busy time / the busy time `pred` (plan i re-predicted with the costs in use)
 * gives.  Writes [count * P] to out (room for t->rounds * P) and returns the count (0 when i
 * is not one of t's plans, or pred has other devices than t, or more than 64). */
int op_ptrain_speed_samples(const op_ptrain_turns *t, int i, const op_plan *pred, double *out);

/* Calibration from the turns t of plans[t->n], leaving plan `skip` out (-1: none): per-kind
 * times fitted to the other plans' op times (op_ptrain_fit_costs, ridge 0.05 toward prior) into
 * fit[n_prior] and, per layer, costs[]; *overhead_ms = the fit's per-call constant + the
 * executor's own cost in the records; when speed is non-NULL, the other plans' speed samples
 * (room for t->n * t->rounds * P) and their count in *ns.  Returns the fit's rms residual (%),
 * or -1 when nothing could be fitted. */
double op_ptrain_calibrate(const op_nn_model *m, const op_plan *const *plans,
                           const op_ptrain_turns *t, int skip, const op_layer_prof *prior,
                           int n_prior, op_layer_prof *fit, op_layer_cost *costs,
                           double *overhead_ms, double *speed, int *ns);

/* p's expected iteration time under the speed samples [n * P]: the 20%-trimmed mean of its
 * makespans replayed under each (op_sim_speed_samples); p's makespan when n = 0. */
double op_ptrain_expected_ms(const op_plan *p, const double *speed, int n);
/* Mean of the middle 60% of v[n] (sorted in place); 0 when n = 0. */
double op_ptrain_trimmed_mean(double *v, int n);

#ifdef __cplusplus
}
#endif
#endif
