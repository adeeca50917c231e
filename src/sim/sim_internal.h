/* sim_internal.h: what the simulator's files share: the reusable workspace and the per-stage
 * table (durations, device, transfer delays) every mode reads in its inner loop.
 *
 * Op ids are flat: id = (slot * S + stage) * M + mb, slot 0 = F, 1 = I or B, 2 = W: three
 * planes, each stage-major, so a device reads its producer's row (and writes its own) in
 * microbatch order, 8 bytes per op: a few sequential streams instead of scattered misses,
 * which is what keeps P = 128 as fast per op as P = 4.
 * Every op has at most one producer (F(s,m) <- F(s-1,m); I|B(s,m) <- I|B(s+1,m), or F(S-1,m)
 * on the last stage; W(s,m) <- I(s,m)), which keeps the inner loops branch-light. */
#ifndef OCTOPIPE_SIM_INTERNAL_H
#define OCTOPIPE_SIM_INTERNAL_H
#include "octopipe/sim.h"

/* Per stage, in the order the inner loops touch them. */
typedef struct sim_stage {
    double dur[3];      /* ms: F, I|B, W (W = 0 for fused stages) */
    double delay_f;     /* ms: transfer from stage s-1 to s (0 on one device or s = 0) */
    double delay_b;     /* ms: gradient transfer from stage s+1 to s (0 if same device / last) */
    int dev;
    int split;          /* 1 = I+W, 0 = B */
    int64_t act, act_w; /* bytes stashed by F; part kept until W */
} sim_stage;

/* Dynamic mode, per stage: what choosing and starting its ops reads, slot-indexed (0 F, 1 I|B,
 * 2 W) so the three candidates are one loop body.  The fields a decision reads come first. */
typedef struct sim_dstage {
    const double *in[3]; /* end row (by mb) of each slot's producer; F of stage 0: a row of 0s */
    double delay[3];     /* ms from the producer's end to arrival here (0 for W, last I|B) */
    int next[3];         /* next mb per slot (ops of a stage and kind run in order); M = none
                          * left, or no such slot (W of a fused stage) */
    uint32_t rank[3];    /* tie rank in the built-in rule: stage (F, W) or S-1-stage (I|B) */
    double *out[3];      /* this stage's own end rows */
    double dur[3];       /* ms */
    int wake_dev[3];     /* consumer's device when it is another one (F -> s+1, I|B -> s-1), or -1 */
    double wake_delay[3];
    int64_t act, act_w;  /* bytes stashed by F; part kept until W */
    int split;
} sim_dstage;

/* Dynamic mode: one device's state, together (the decision loop touches all of it). */
typedef struct sim_dev {
    int first, nst;   /* its stages: dev_stages[first .. first + nst), ascending */
    int busy, inflight, pending_w, n_done;
    int run_stage, run_slot; /* op running */
    int warm, wl, cap; /* policy knobs for this device (sim.h op_sim_policy) */
    int64_t wake_at;  /* earliest pending wake-up as a queue key (sim_key), or the +inf key */
    double free_t;    /* end of its last op */
    int64_t act_now;  /* activations held */
    int64_t static_b; /* static bytes of its stages */
    op_op *out;       /* next slot of p->ops[d] to write */
} sim_dev;

/* Event queue node: a tournament tree over devices, each leaf holding its device's next event
 * (sim_key of its time) and each inner node the winner below it: earliest, then lower device. */
typedef struct sim_tnode {
    int64_t k;
    int32_t d, pad_;
} sim_tnode;

struct op_sim_ws {
    /* sized by ensure() */
    size_t cap_ops, cap_S, cap_P;
    double *end;     /* [S*M*3 + M] end time of each op; < 0 = not done; then a row of 0s */
    sim_stage *st;   /* [S] */
    /* replay */
    int *pos;        /* [P] next op index in the device's order */
    double *free_t;  /* [P] when the device is free */
    int *stack;      /* [P] devices to (re)try */
    uint8_t *inq;    /* [P] */
    /* dynamic */
    int *dev_first;  /* [P+1] device d's stages are dev_stages[dev_first[d] .. dev_first[d+1]) */
    int *dev_stages; /* [S] */
    sim_dstage *ds;  /* [S] */
    int dyn_S, dyn_M; /* shape of the plan being list-scheduled */
    /* event queue: each device's next event is its running op's end when busy, else its
     * earliest wake-up (an input arriving), else none (+inf) */
    sim_tnode *tw;   /* [2 * leaves]: tw[1] = earliest event; tw[leaves + d] = device d's */
    size_t cap_tw;
    int tw_leaves;   /* power of two >= P */
    sim_dev *dv;     /* [P] */
    int delayed;     /* some op started later than its device and input allowed (a hold) */
};

/* Grows ws for the plan's shape and fills ws->st (durations, delays) and resets ws->end. */
void sim_prepare(op_sim_ws *ws, const op_plan *p);

/* Checks stages and placement only (dynamic mode, before there are ops). */
int sim_check_layout(const op_plan *p, op_err *err);

/* Replays p's orders on a prepared ws.  write: store start/end into p->ops.
 * Returns the makespan, or -1 when ops remain that cannot run (deadlock / missing op). */
double sim_replay_core(const op_plan *p, op_sim_ws *ws, int write);

/* After sim_replay_core returned -1: describes the cycle in err (OP_EDEADLOCK). */
int sim_deadlock_report(const op_plan *p, op_sim_ws *ws, op_err *err);

static inline int64_t sim_id(int S, int M, int stage, int mb, int slot) {
    return ((int64_t)slot * S + stage) * M + mb;
}
static inline int sim_slot(int kind) { return kind == OP_F ? 0 : kind == OP_W ? 2 : 1; }

#endif
