/* sim_internal.h: what the simulator's files share: the reusable workspace and the per-stage
 * table (durations, device, transfer delays) every mode reads in its inner loop.
 *
 * Op ids are flat: id = (mb * S + stage) * 3 + slot, slot 0 = F, 1 = I or B, 2 = W.
 * Microbatch-major, so an op's producer (same mb, next stage) is 3 entries away and the ops in
 * flight at one time share cache lines.
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

struct op_sim_ws {
    /* sized by ensure() */
    size_t cap_ops, cap_S, cap_P;
    double *end;     /* [S*M*3] end time of each op; < 0 = not done */
    sim_stage *st;   /* [S] */
    /* replay */
    int *pos;        /* [P] next op index in the device's order */
    double *free_t;  /* [P] when the device is free (replay and dynamic) */
    int *stack;      /* [P] devices to (re)try */
    uint8_t *inq;    /* [P] */
    /* dynamic */
    int *dev_first;  /* [P+1] device d's stages are dev_stages[dev_first[d] .. dev_first[d+1]) */
    int *dev_stages; /* [S] */
    int *next[3];    /* [S] next microbatch per (stage, slot) */
    int *out_n;      /* [P] ops written to p->ops[d] so far */
    /* event queue: a tournament tree over devices, each with one next event time: its running
     * op's end when busy, else its earliest wake-up (an input arriving), else +inf */
    int *tw;         /* [2 * leaves]: device winning each node; tw[1] = earliest event */
    double *key;     /* [2 * leaves]: its time; leaves + d = device d's own next event */
    size_t cap_tw;
    int tw_leaves;   /* power of two >= P */
    int64_t *run_id; /* [P] op running on the device */
    double *wake_at; /* [P] */
    int delayed;     /* some op started later than its device and input allowed (a hold) */
    uint8_t *busy, *dirty; /* [P] */
    int *dirty_list; /* [P] */
    int *inflight, *pending_w, *n_done; /* [P] */
    int64_t *act_now, *static_b;        /* [P] */
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

static inline int64_t sim_id(int S, int stage, int mb, int slot) {
    return ((int64_t)mb * S + stage) * 3 + slot;
}
static inline int sim_slot(int kind) { return kind == OP_F ? 0 : kind == OP_W ? 2 : 1; }

#endif
