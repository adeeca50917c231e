/* exec.h: the executor.  Lowers a plan to one instruction list per rank and runs the lists over
 * a comm transport (Open MPI, or in-process threads), with emulated or real compute.
 *
 * Lowering (exec/lower.c).  Each rank's list holds its compute ops in plan order with:
 *  - RECV b   post a nonblocking receive into buffer b (posted early: up to `recv_window` compute
 *             ops ahead and `recv_budget_bytes` of posted-but-unconsumed receive buffers; a
 *             receive needed by the next op is always posted);
 *  - WAIT b   wait (politely) for receive b, right before the op that consumes it;
 *  - COMP     one compute op, reading input buffer `in` and writing output buffer `out` (-1 none);
 *  - SEND b   nonblocking send of b right after the op that produced it; b is freed by the
 *             runtime when the send completes;
 *  - FREE b   release a consumed buffer (a received one, or a local hand-over).
 * Adjacent stages on the same rank hand over in memory: the producer's `out` is the consumer's
 * `in`, no message.  Message tags are (mb << 12) | (stage << 1) | dir, where stage is the
 * consuming stage and dir 0 = activation (F), 1 = gradient (I/B); so stage < 2048, mb < 65536,
 * tags < 2^28, and MPI matching never depends on issue order (every (src, tag) pair is unique).
 *
 * Runtime (exec/runtime.c).  A rank walks its list.  Sends and receives never block; WAIT polls
 * the request (test + ~20 us sleep) so that 16 ranks share 2 cores.  Communication progresses
 * while compute runs:
 *  - emulated compute sleeps in slices of `slice_ms` and tests every outstanding request between
 *    slices (single thread, no MPI thread support needed);
 *  - real compute (a callback) runs while a progress thread tests outstanding requests every
 *    ~50 us (the runtime serialises the rank's transport calls with a mutex, so
 *    MPI_THREAD_SERIALIZED suffices); kernels may also call op_exec_progress() between tiles.
 * So a transfer starts when its producer ends and both sides progress it within a slice: the
 * simulator's model (arrival = producer end + lat + bytes / bw, full overlap with compute).
 *
 * Watchdog: a rank that waits longer than `watchdog_s` on one receive tells every rank; each
 * prints what it is doing or waiting for, and all exit non-zero (OP_ETIMEOUT).  A crashed rank
 * is reported by mpirun ("process rank N ... exited on signal"), which `octopipe run` relays. */
#ifndef OCTOPIPE_EXEC_H
#define OCTOPIPE_EXEC_H
#include "octopipe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- lowering */

typedef enum op_icode { OP_I_RECV, OP_I_WAIT, OP_I_COMP, OP_I_SEND, OP_I_FREE } op_icode;

typedef struct op_instr {
    uint8_t code;        /* op_icode */
    uint8_t kind;        /* COMP: op_kind; RECV/WAIT/SEND: kind of the consuming op (F or I/B) */
    int32_t stage, mb;   /* COMP: the op; messages: the consuming stage and mb */
    int32_t buf;         /* RECV/WAIT/SEND/FREE: buffer id; COMP: input buffer or -1 */
    int32_t out;         /* COMP: output buffer or -1 */
    int32_t peer;        /* RECV/SEND: the other rank */
    int32_t tag;         /* RECV/SEND */
    int32_t op_index;    /* COMP: index into plan->ops[rank] */
    int64_t bytes;       /* RECV/SEND: message size; COMP: input size */
    int64_t out_bytes;   /* COMP: output size */
} op_instr;

typedef struct op_prog {
    int rank;
    int n;        /* instructions */
    op_instr *ins;
    int n_bufs;   /* buffer ids used: 0..n_bufs-1 */
    int n_comp;
    int max_posted; /* most receives outstanding at once */
} op_prog;

typedef struct op_lower_opts {
    double bytes_scale;        /* message size = out_bytes * bytes_scale (>= 1 byte); 0 = 1.0 */
    int recv_window;           /* post receives up to this many compute ops ahead; 0 = 8 */
    int64_t recv_budget_bytes; /* cap on posted, unconsumed receive bytes; 0 = 1 GiB */
    /* optional per-boundary size override (real compute): bytes from stage s to s+1 */
    int64_t (*boundary_bytes)(void *ctx, int stage);
    void *ctx;
} op_lower_opts;

typedef struct op_lowered {
    int P;
    op_prog *progs; /* [P] */
    op_arena arena;
} op_lowered;

#define OP_EXEC_MAX_STAGES 2048
/* ranks: the planner's device limit (OP_CLUSTER_MAX_DEVICES); a plan file may name up to 2^16
 * devices, and each rank is a process under mpirun or a thread of `run --threads` */
#define OP_EXEC_MAX_RANKS 4096
#define OP_EXEC_MAX_MB 65535 /* keeps data tags below the control tags 2^28-1, 2^28-2 */
static inline int op_exec_tag(int stage, int mb, int grad) {
    return (mb << 12) | (stage << 1) | (grad ? 1 : 0);
}

/* Lowers a structurally valid plan (op_plan_validate).  Refuses plans whose per-device orders
 * deadlock, naming the cycle ("F(s1,mb0)@d1 waits for F(s0,mb0)@d0 ... "), and shapes beyond the
 * tag range.  o may be NULL. */
int op_exec_lower(const op_plan *p, const op_lower_opts *o, op_lowered *out, op_err *err);
void op_lowered_free(op_lowered *l);
/* Human/golden form: one line per instruction, "rank 1:" headers. */
void op_lowered_print(const op_lowered *l, op_buf *out);

/* Dry run of the per-device orders under the plan's dependencies (no durations), after
 * op_plan_validate: returns OP_OK, the validation's error, or OP_EDEADLOCK with a cycle of ops
 * named in err. */
int op_exec_check_deadlock(const op_plan *p, op_err *err);

/* ---------------------------------------------------------------- transport */

typedef struct op_xport op_xport;
typedef struct op_xreq {
    void *h;  /* backend handle */
    int done;
} op_xreq;

/* A point-to-point transport as the runtime needs it.  Every call is from the rank's own
 * threads; calls may come from the progress thread too (the runtime serialises them). */
struct op_xport {
    int rank, size;
    double start_lead_s; /* how far ahead rank 0 sets the common start (covers the broadcast) */
    void *impl;
    int (*isend)(op_xport *x, const void *buf, int64_t n, int peer, int tag, op_xreq *r);
    int (*irecv)(op_xport *x, void *buf, int64_t n, int peer, int tag, op_xreq *r);
    int (*test)(op_xport *x, op_xreq *r); /* sets r->done; returns < 0 on transport error */
    /* tests n requests at once (one progress pass: MPI_Testsome), setting each one's done */
    int (*test_all)(op_xport *x, op_xreq *const *rs, int n);
    /* withdraws an incomplete request before its buffer is freed (failure path); may be NULL */
    void (*cancel)(op_xport *x, op_xreq *r);
    /* watchdog channel: tell every rank to stop; poll returns the first reason seen or 0 */
    void (*raise_abort)(op_xport *x, int reason);
    int (*poll_abort)(op_xport *x);
    /* collectives used outside the timed region (polite: they must not busy-wait) */
    int (*barrier)(op_xport *x);
    /* rank 0's n bytes to every rank (n must match on all ranks) */
    int (*bcast)(op_xport *x, void *buf, int64_t n);
    /* rank 0 receives every rank's bytes (out[r], len[r], malloc'd); other ranks get NULL */
    int (*gather)(op_xport *x, const void *buf, int64_t n, void **out, int64_t *lens);
    /* clock offset of this rank against rank 0 (seconds to add to op_now_s to get rank 0's) */
    double (*clock_offset)(op_xport *x);
    void (*hard_abort)(op_xport *x, int code); /* bring the whole job down now */
};

/* MPI over MPI_COMM_WORLD (exec/xport_mpi.c).  Calls MPI_Init_thread when needed. */
int op_xport_mpi_init(op_xport *x, int *argc, char ***argv, op_err *err);
void op_xport_mpi_finalize(op_xport *x);
/* P in-process ranks (exec/xport_threads.c); xs[P] share one world; freed together. */
void op_xport_threads_new(op_xport *xs, int P);
void op_xport_threads_free(op_xport *xs, int P);

/* ---------------------------------------------------------------- compute */

typedef struct op_exec_rank op_exec_rank; /* runtime state of one rank (opaque) */

/* One compute op as the callback sees it.  Buffers belong to the runtime: `in` is valid only
 * during the call; `out` is written by the call and sent (or handed over) after it returns.
 *  F(s,m):  in = activation from stage s-1 (NULL on stage 0: the model loads its own batch);
 *           out = activation for stage s+1 (NULL on the last stage: the loss stays local).
 *  I|B(s,m): in = gradient from stage s+1 (NULL on the last stage); out = gradient for stage
 *           s-1 (NULL on stage 0).  B = I then W.
 *  W(s,m):  in = out = NULL; uses what F and I stashed.
 * Sizes are the plan's boundary bytes (op_stage_out_bytes(plan, s) for the s -> s+1 boundary)
 * unless the compute sets boundary_bytes. */
typedef struct op_compute_call {
    op_kind kind;
    int stage, mb;
    const void *in;
    int64_t in_bytes;
    void *out;
    int64_t out_bytes;
    op_exec_rank *rt; /* for op_exec_progress */
} op_compute_call;

/* The pluggable compute: emulation (op_compute_emulate), the reference model (src/train), or an
 * embedding framework's own stage callbacks.  Calls happen on the rank's main thread, in order. */
typedef struct op_compute {
    void *ctx;
    /* once per rank before the first op: rank and the plan (stages held: plan->stage_dev) */
    int (*setup)(void *ctx, const op_plan *p, int rank, op_err *err);
    int (*run)(void *ctx, const op_compute_call *c, op_err *err);
    void (*teardown)(void *ctx);
    /* optional: exact message bytes from stage s to s+1 (overrides the plan) */
    int64_t (*boundary_bytes)(void *ctx, int stage);
    /* 1: the runtime starts a progress thread while run() computes (its transport calls and
     * the rank's are serialised by the runtime: MPI_THREAD_SERIALIZED, or threads); 0: run()
     * is expected to call op_exec_progress or to be short (emulation does its own slicing). */
    int progress_thread;
    /* emulation hook: sleep slices call this; NULL for real compute */
    int emulated;
} op_compute;

/* Progresses every outstanding request of this rank (cheap; call between kernel tiles). */
void op_exec_progress(op_exec_rank *rt);
/* Sleeps until op_now_s() >= deadline, progressing requests every slice_ms.  Returns < 0 when
 * the watchdog asked to stop. */
int op_exec_sleep_until(op_exec_rank *rt, double deadline_s);

/* Emulation: each op sleeps for op_stage_ms(plan, s, kind) of the plan given to setup (so
 * give it a plan already scaled by op_exec_emulated_plan).  It aims early by the running mean of
 * how late its sleeps wake up, so ops last their modelled time on average. */
op_compute op_compute_emulate(void);

/* ---------------------------------------------------------------- running */

/* Fault injection for tests; zero-initialised = none. */
enum { OP_FAULT_NONE = 0, OP_FAULT_CRASH = 1, OP_FAULT_HANG = 2 };
typedef struct op_exec_fault {
    int kind;      /* OP_FAULT_*: CRASH kills the rank (SIGKILL), HANG never finishes the op */
    int rank;      /* which rank */
    int op_index;  /* at which of its compute ops (index into plan->ops[rank]) */
} op_exec_fault;

typedef struct op_exec_opts {
    op_lower_opts lower;
    double slice_ms;   /* emulation sleep slice; 0 = 0.5 */
    double poll_us;    /* first wait poll sleep; 0 = 20 */
    double poll_growth;/* later polls sleep this fraction of the time waited so far (at most
                        * poll_max_us): a late reaction costs that fraction of a wait; 0 = 0.003 */
    double poll_max_us;/* 0 = 300 */
    double watchdog_s; /* 0 = 30 */
    double timeout_s;  /* each rank stops the job this many s after it started, even where no
                        * rank waits on the stuck one (the watchdog's blind spot); 0 = none */
    op_exec_fault fault;
    int quiet;         /* no watchdog report on stderr (tests) */
    /* emulated offload (stages whose stage_act is offload): the host link of each device's
     * copy engine; read by op_compute_emulate_opts.  0 = 25 GB/s, 0 ms; host_mem_bytes: host
     * memory per rank for stashes (0 = no limit; a stash that does not fit stays) */
    double host_bw_GBps, host_lat_ms, host_mem_bytes;
    struct op_exec_copy_stats *copy_stats; /* optional out [P]: each rank's copy engine */
} op_exec_opts;

/* What a rank's copy engine did in a run: transfers and ms spent copying. */
typedef struct op_exec_copy_stats {
    int n_xfers;
    double busy_ms;
} op_exec_copy_stats;

/* The same with the copy engine's link from o (which must outlive the runs): stages whose
 * stage_act is offload copy op_stage_act_bytes to the host after F, on a thread per rank (FIFO,
 * host_lat_ms + bytes / host_bw_GBps each, overlapping compute); the reload is queued when the
 * rank starts the op before the stage's I|B (after the offload), and I|B waits for it. */
op_compute op_compute_emulate_opts(const op_exec_opts *o);

/* One executed op, in rank 0's clock, ms from the common start. */
typedef struct op_exec_rec {
    uint8_t kind;
    int32_t stage, mb;
    double start, end;
} op_exec_rec;

typedef struct op_exec_result {
    int P;
    int *n_recs;           /* [P] */
    op_exec_rec **recs;    /* [P][n_recs] in executed order */
    double makespan_ms;    /* last end - common start */
    double *busy_ms;       /* [P] */
    double bubble_ratio;   /* 1 - sum busy / (P * makespan) */
    double overhead_ms;    /* mean (measured - modelled) op duration; emulation only */
    int watchdog_rank;     /* watchdog: the rank that raised it, else -1 */
    char wait_report[4096];/* watchdog: one line per rank (thread backend) */
    op_arena arena;
} op_exec_result;

/* Runs this rank's part of plan p (already validated and lowered into l) over x.  Rank 0 gets
 * the merged result in res (other ranks: res may be NULL).  Returns OP_OK, OP_ETIMEOUT
 * (watchdog), OP_EPEER, or a compute error. */
int op_exec_rank_run(const op_plan *p, const op_lowered *l, op_xport *x, const op_compute *c,
                     const op_exec_opts *o, op_exec_result *res, op_err *err);

/* All P ranks as threads in this process (thread transport); fills res (every rank's records). */
int op_exec_run_threads(const op_plan *p, const op_compute *c, const op_exec_opts *o,
                        op_exec_result *res, op_err *err);
void op_exec_result_free(op_exec_result *r);

/* The plan emulation runs: layer times x time_scale, out_bytes x bytes_scale, comm replaced by
 * *measured when non-NULL (its per-pair links copied into dst), op_overhead_ms x time_scale +
 * extra_overhead_ms.  dst is a new plan. */
void op_exec_emulated_plan(op_plan *dst, const op_plan *src, double time_scale,
                           double bytes_scale, const op_comm *measured, double extra_overhead_ms);

/* Mixed emulation: device d of p computes k[d] times slower (k in (0, 1e6]) than p costs it.
 * p becomes a mixed plan (op_plan_set_types) with one type per distinct (type, k): that type's
 * layer times x k, named "<type> x<k>" ("x<k>" when unnamed; k = 1 keeps a name).  Placement,
 * orders and memory limits stay; the prediction must be re-simulated (op_sim_replay).
 * OP_EINVAL, p unchanged, when some k is outside that range. */
int op_exec_slow_plan(op_plan *p, const double *k);

/* Report: --json object (measured vs predicted) and a merged Chrome trace (measured ranks and
 * the predicted timeline of `pred`, which must have been simulated). */
void op_exec_report_json(const op_exec_result *r, const op_plan *pred, double time_scale,
                         op_buf *out);
void op_exec_chrome_trace(const op_exec_result *r, const op_plan *pred, op_buf *out);
/* Bubble ratio of a simulated plan measured the same way as a run's (1 - sum of op durations /
 * (P * makespan)); fills busy[P] when non-NULL. */
double op_exec_pred_bubble(const op_plan *p, double *busy);
/* Executed order equals the plan: OP_OK or OP_EINVAL naming the first difference. */
int op_exec_check_order(const op_exec_result *r, const op_plan *p, op_err *err);

/* ---------------------------------------------------------------- launching and profiling */

/* Runs `mpirun ... -np P <this binary> ARGS...` (root, oversubscribe, bind-to none, yield when
 * idle, a timeout) and waits.  Ranks' stdout goes to ours; their stderr is appended to *log when
 * log is non-NULL, else relayed to our stderr, and scanned for a dead rank, which is named in
 * err.  Returns the job's exit code (0 ok; 3 watchdog; 124 our time limit).  The ranks see
 * OP_EXEC_LAUNCHED_ENV set: the time limit is this launcher's, not theirs to keep. */
#define OP_EXEC_LAUNCHED_ENV "OCTOPIPE_LAUNCHED"
int op_exec_launch(int P, char *const *args, int nargs, double timeout_s, op_buf *log,
                   op_err *err);

/* Ping-pong between ranks 0 and 1 of x over sizes 8 B, 32 B, ... (x4) .. max_bytes (at least 32:
 * two sizes); fits one-way time t = lat + bytes / bw by least squares (rank 0 fills lat_ms,
 * bw_GBps).  A fit the sizes do not determine comes back as NaN, and a bandwidth the sizes
 * could not resolve (larger messages no slower) as 0: the caller checks before using them. */
int op_exec_pingpong(op_xport *x, int64_t max_bytes, int iters, double *lat_ms, double *bw_GBps,
                     op_buf *table, op_err *err);
/* Ping-pong between every pair of ranks a < b of x, one pair at a time (the others wait at a
 * barrier): iters round trips of 8 B and of `large` bytes each, the median one-way time of
 * each, and t = lat + bytes / bw through those two points.  Rank 0 fills lat_ms and bw_GBps,
 * [size * size] row-major (a -> b; the same both ways; diagonal lat 0, bw 1, unused). */
int op_exec_pingpong_pairs(op_xport *x, int64_t large, int iters, double *lat_ms, double *bw_GBps,
                           op_err *err);

#ifdef __cplusplus
}
#endif
#endif
