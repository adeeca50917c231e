/* tune_int.h: the tuner's internals: a candidate (partition + placement + schedule knobs), the
 * problem precomputed for fast stage sums, and the list-scheduling engine that turns a candidate
 * into per-device orders and a makespan.  The engine implements the simulator semantics of
 * sim.h (data dependencies, one op at a time per device, op_comm_ms delays on cross-device
 * edges, activation memory timeline); the final plan is re-simulated by the simulator. */
#ifndef OCTOPIPE_TUNE_INT_H
#define OCTOPIPE_TUNE_INT_H
#include "octopipe/tune.h"

typedef struct tn_mixed tn_mixed; /* mixed clusters: per-type costs (tune_mixed.c) */

/* Problem with prefix sums over layers so a stage's cost is O(1). */
typedef struct tn_prob {
    const op_problem *pr;
    int L, P, M;
    double *pf, *pi, *pw;           /* [L+1] prefix sums of F, I, W ms */
    int64_t *pact, *pactw, *pstat;  /* [L+1] prefix sums of act, act_w, static bytes */
    int64_t *pacti;                 /* [L+1] prefix sums of act_i (transient during I/B) */
    int64_t *psel;                  /* [L+1] prefix sums of the selective stash (sel bytes) */
    double *pfsel;                  /* [L+1] prefix sums of f_sel_ms (selective's recompute) */
    int64_t in0;                    /* what full keeps of stage 0's input (op_stage_in_bytes) */
    double ovh;                     /* per-op overhead ms */
    double lb;                      /* lower bound ms */
    double mem_limit;               /* bytes, 0 = none */
    double t_layer;                 /* smallest layer F+I+W: the partition-imbalance threshold */
    tn_mixed *mx;                   /* NULL: every device alike (pf/pi/pw are every device's) */
    double *dev_lim;                /* [P] per-device memory limit, or NULL: mem_limit */
    int wfree;                      /* 1: where knob memres is set and an F is held back by
                                     * memory, the engine runs the W that frees the most bytes
                                     * per ms (TN_REFINE_WFREE; tune_engine.c) */
} tn_prob;

/* Memory limit of device d (0 = none). */
static inline double tn_dev_lim(const tn_prob *pb, int d) {
    return pb->dev_lim ? pb->dev_lim[d] : pb->mem_limit;
}

void tn_prob_init(tn_prob *pb, const op_problem *pr);
void tn_prob_free(tn_prob *pb);
static inline double tn_work(const tn_prob *pb, int a, int b) { /* layers [a,b) F+I+W */
    return (pb->pf[b] - pb->pf[a]) + (pb->pi[b] - pb->pi[a]) + (pb->pw[b] - pb->pw[a]);
}

/* A candidate plan.  Arrays have room for Smax = L stages. */
typedef struct tn_cand {
    int S;
    int split;  /* 1: I+W on every stage, 0: fused B */
    int fmode;  /* F tie-break: 0 smallest mb first, 1 latest stage first, 2 earliest stage */
    int ffirst; /* 1: a ready F (under the cap) goes before a ready I */
    int imode;  /* I tie-break: 0 latest stage first, 1 oldest microbatch first */
    int look;   /* bit 1: no W that would delay a known F/I; bit 2: no F that would delay an I */
    int memres; /* memory-aware admission (tune_engine.c; refining searches only), bits:
                 * TN_MEMRES_ONE: an F leaves room under the limit for one microbatch of each
                 * later stage on its device; TN_MEMRES_QUOTA: each stage keeps at most its
                 * quota in flight; TN_MEMRES_OWED: an F leaves room for what the later local
                 * stages' quotas still owe.  Quotas: the device's free memory shared by need */
    int *first; /* [L+1] stage s = layers [first[s], first[s+1]) */
    int *dev;   /* [L] */
    int *cap;   /* [P] in-flight F-without-I cap per device, 0 = none */
    int *wlim;  /* [P] pending-W count that forces a W ahead of F, 0 = none */
    uint8_t *pol; /* [L] per-stage activation policy: keep, selective or full (op_act_policy;
                   * set only by searches with policy moves, tn_search.pol0 >= 0) */
} tn_cand;

enum { TN_MEMRES_ONE = 1, TN_MEMRES_QUOTA = 2, TN_MEMRES_OWED = 4 };

void tn_cand_alloc(tn_cand *c, const tn_prob *pb);
void tn_cand_free(tn_cand *c);
void tn_cand_copy(tn_cand *dst, const tn_cand *src, const tn_prob *pb);

/* What one evaluation reports. */
typedef struct tn_res {
    double makespan; /* < 0: deadlock (cannot happen with FIFO stages; checked) */
    int fits;        /* every device's peak <= mem limit */
    int64_t peak_max;
    double *busy, *first_start, *last_end; /* [P] */
    int64_t *peak;                         /* [P] static + activations */
    int *max_inflight;                     /* [P] */
} tn_res;

typedef struct tn_eng tn_eng;
tn_eng *tn_eng_new(const tn_prob *pb);
void tn_eng_free(tn_eng *e);
void tn_res_alloc(tn_res *r, int P);
void tn_res_free(tn_res *r);
void tn_res_copy(tn_res *dst, const tn_res *src, int P);

/* Simulates c by list scheduling.  When ops != NULL, ops[d] (room for 3*S*M) receives device
 * d's order with start/end and n_ops[d] its length.  cutoff > 0: returns -2 as soon as the
 * makespan is sure to exceed cutoff (r is then incomplete). */
double tn_eval(tn_eng *e, const tn_prob *pb, const tn_cand *c, tn_res *r, op_op **ops,
               int *n_ops, double cutoff);
/* Candidate c as a plan named `name`: the engine's order (r receives its result), validated
 * and replayed by the simulator, which fills the prediction.  Error: out is freed. */
int tn_cand_plan(tn_eng *e, const tn_prob *pb, const tn_cand *c, tn_res *r, const char *name,
                 op_plan *out, op_err *err);

/* Per-stage in-flight quotas (tune_quota.c) for knob memres QUOTA / OWED: scap[s] from the
 * engine's per-stage durations (ms) and bytes [S], each device's static bytes [P] and the CSR
 * of its local stages in stage order (dst[dstart[d] .. dstart[d + 1])).  0 where the device
 * has no limit.  work [P] and need [S] are scratch. */
typedef struct tn_quota_in {
    const double *tf, *ti, *tw, *cf, *cb;
    const int64_t *act, *actw, *fneed, *stat;
    const int *dstart, *dst;
} tn_quota_in;
void tn_quota(const tn_prob *pb, const tn_cand *c, const tn_quota_in *in, double *work,
              double *need, int *scap);

/* Mixed clusters (tune_mixed.c).  tn_mixed_init: per-type prefix sums and per-device limits
 * when pr is mixed (called by tn_prob_init); tn_mixed_free undoes it.  tn_mixed_stage_times
 * overwrites the engine's per-stage durations tf/ti/tw [S] with the costs on each stage's own
 * device (the engine calls it after its uniform setup). */
void tn_mixed_init(tn_prob *pb);
void tn_mixed_free(tn_prob *pb);
void tn_mixed_stage_times(const tn_prob *pb, const tn_cand *c, double *tf, double *ti, double *tw);

/* Seeds (tune_seed.c). */
void tn_place_loop(tn_cand *c, int P, int S);
void tn_place_v(tn_cand *c, int P, int S);
/* Contiguous partition balancing per-device work for the placement already in c->dev.
 * front > 0: each device's first stage gets that share of the device's work. */
void tn_partition_balanced(const tn_prob *pb, tn_cand *c, double front);
/* Contiguous partition giving device d about want[d] ms of work per microbatch; front < 0:
 * each device's first stage keeps its current layer count. */
void tn_partition_targets(const tn_prob *pb, tn_cand *c, const double *want, double front);
/* Placement family name of c (of stage_dev dev [S] on P devices): "seq", "loop", "v" or
 * "irregular"; whether a --placement mode admits it (loop: seq or loop; v: v; any: all). */
const char *tn_shape(const tn_cand *c, int P);
const char *tn_shape_of(const int *dev, int S, int P);
int tn_shape_allowed(const char *shape, op_tune_placement mode);

#endif

/* Search state shared by the seeds (tune.c) and the local search (tune_search.c). */
typedef struct tn_search {
    const tn_prob *pb;
    tn_eng *e;
    tn_res r;                 /* result of the last evaluation */
    tn_res cr;                /* result of the local search's current plan */
    op_tune_placement mode;
    long evals, max_evals;    /* budget spent / allowed, in simulations of s_ref stages */
    long sims;                /* simulations run */
    int s_ref;                /* a simulation of S stages costs ceil(S / s_ref) of the budget */
    double t0, deadline;      /* op_now_s(); deadline 0 = none */
    double last_progress;
    double run0; /* when the whole run began (op_tune_opts.started_s): progress and budget */
    const op_tune_opts *o;
    op_rng rng;
    const char *phase;
    tn_cand best;             /* best candidate seen anywhere */
    double best_score;
    int64_t min_peak;         /* smallest peak over all evaluations (for OP_ENOMEM) */
    int pol0;                 /* -1: every stage keeps (no policy moves); else the policy
                               * seeds start with, and the local search moves policies */
    int refine;               /* 1 (seeded policy searches): candidates reserve memory for
                               * later stages (tn_cand.memres) and the local search also splits
                               * a recomputing stage on its device and flips memres; 2: also
                               * seeds with quotas, and moves between every memres mode;
                               * 3: as 2, with no standard seeds (tn_tune_core_refine) */
    int heavy_pol;            /* 1 (tn_tune_core_heavy_pol): the heavy-layer seeds also come
                               * with policies per device (tune_mixed_heavy.c) */
} tn_search;

/* The classic schedules of one problem, built by its first search and taken from here by the
 * next ones of one tn_tune_mem (tune_blmemo.c).  begin/end bracket tn_tune_mem on its thread;
 * tn_blmemo_for gives the memo when pr is the problem begun with (else NULL); a search fills
 * it with put (taking the plan; i = the schedule's index in op_sched_names) and done (all = 1:
 * every schedule was tried), after which complete is 1 and plan(i) is the plan of schedule i
 * (NULL: it does not apply to pr). */
typedef struct tn_blmemo tn_blmemo;
void tn_blmemo_begin(const op_problem *pr);
void tn_blmemo_end(void);
tn_blmemo *tn_blmemo_for(const op_problem *pr);
int tn_blmemo_complete(const tn_blmemo *m);
const op_plan *tn_blmemo_plan(const tn_blmemo *m, int i);
void tn_blmemo_put(tn_blmemo *m, int i, op_plan *p);
void tn_blmemo_done(tn_blmemo *m, int all);

/* Progress of a whole op_tune run over all its searches (tune_progress.c): op_tune begins and
 * ends it; the searches report fitting makespans and simulations, and tick once per 64
 * simulations (a line at most once a second when the options ask for progress). */
typedef struct tn_run {
    const op_tune_opts *o; /* verbose, label, progress hook, time budget */
    const op_problem *pr;  /* the problem op_tune was given */
    double lb;             /* its lower bound (0 when nobody reads the lines; < 0: not yet) */
    double best;           /* fastest fitting makespan any search has seen; 0: none yet */
    long sims;             /* simulations of every search */
    int searches;          /* searches begun */
    double t0, last;       /* the run's start; the last line */
    struct tn_run *outer;  /* the run this one is nested in (advice inside a tune) */
} tn_run;
void tn_run_begin(tn_run *r, const op_problem *pr, const op_tune_opts *o, double t0);
void tn_run_end(tn_run *r);
void tn_run_fit(double makespan_ms);
void tn_run_sim(void);
void tn_run_search(void); /* a search begins */
/* done / budget: the search's simulations; 0 when there is no run (a search on its own) */
int tn_run_tick(const char *phase, long done, long budget);

/* Fitting candidates score their makespan; others 1e15 + peak bytes, so that when nothing
 * fits the search drives peak memory down. */
#define TN_NOFIT 1e15
/* The most simulations one search takes (op_tune_opts.max_evals above it counts as this):
 * far beyond any run, and low enough that the budget's shares and extensions stay in a long. */
#define TN_EVALS_MAX (1L << 50)
double tn_score(tn_search *st, const tn_cand *c);
/* Same, but gives up (returns 1e300) once the makespan must exceed cutoff (> 0). */
double tn_score_cut(tn_search *st, const tn_cand *c, double cutoff);
int tn_out_of_budget(const tn_search *st);
/* Ctrl-C (op_tune_opts.cancel): every phase after the first plan is skipped, so the best plan
 * so far comes back within a fraction of a second. */
static inline int tn_cancelled(const op_tune_opts *o) { return o && o->cancel && *o->cancel; }
/* The end of the wall-time budget (op_tune_opts.time_budget_s from started_s, which op_tune
 * and each search set), 0: none.  Once past it every phase stops at its next simulation, with
 * or without a plan that fits (then tn_err_late); without a budget nothing checks the time. */
static inline double tn_deadline(const op_tune_opts *o) {
    return o && o->time_budget_s > 0 ? o->started_s + o->time_budget_s : 0;
}
static inline int tn_late(const op_tune_opts *o) { return op_past(tn_deadline(o)); }
/* Ctrl-C or the time budget spent: the phases that would follow are skipped. */
static inline int tn_stopped(const op_tune_opts *o) { return tn_cancelled(o) || tn_late(o); }
/* OP_ETIMEOUT: the time budget ran out before any plan that fits pr was found. */
int tn_err_late(const op_problem *pr, const op_tune_opts *o, op_err *err);
/* Bubble-guided first-improvement local search from *cur (updated in place) for at most
 * `budget` evaluations, with seeded perturbations when it stalls. */
void tn_local_search(tn_search *st, tn_cand *cur, long budget);
/* Mixed clusters: seeds whose placements order devices by speed and node (heavy stages on
 * fast devices, large boundaries inside a node) and whose partitions balance each stage's
 * time on its own device; each is handed to offer(st, ctx, c, shape).  No-op when uniform. */
void tn_mixed_seeds(tn_search *st, void (*offer)(tn_search *, void *, tn_cand *, const char *),
                    void *ctx);
/* Up to iters rounds of idle-aware re-partitioning of c (placement kept); *score updated. */
void tn_rebalance(tn_search *st, tn_cand *c, double *score, int iters);
/* tune_polish.c: the plan's orders polished by op_sched_polish within a fixed budget of
 * simulated ops; a polish that would leave a device over its own limit is undone. */
void tn_polish_plan(op_plan *p);
/* tune_polish.c: the schedule-knob neighbours of `from` that the engine puts near it, each
 * polished; *best (a simulated plan) is replaced by any that polishes faster.  For problems
 * of a few hundred ops per simulation. */
void tn_polish_knobs(tn_search *st, const tn_cand *from, op_plan *best);
