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
    int64_t act, act_w; /* bytes held from F start to I|B end; from I end to W end */
    int64_t act_i;      /* bytes live only while I|B runs, on top of what is held */
    /* activation policy (plan.h): act above is what F stashes (op_stage_stash_bytes) */
    int64_t act_full;   /* the stage's act_bytes (keep's stash; what offload copies) */
    int64_t remat;      /* re-materialised from I's start (selective, full) */
    int offload;        /* 1: stash copied to host after F, back before I */
    double copy_ms;     /* one copy over the host link (offload) */
} sim_stage;

/* The copy engines of offload stages (sim_copy.c): per (s, m) at xfer[(s*M+m)*4 + k],
 * k = 0 offload start, 1 offload end, 2 reload start, 3 reload end, -1 = none. */
typedef struct sim_copy {
    double *xfer;
    double *eng;        /* [P] engine free at */
    int64_t *host;      /* [P] host bytes held */
    int64_t *host_peak; /* [P] */
    int M;
    double cap;         /* host budget per device, 0 = none */
    /* reload points (sim_copy_triggers): device d's op at position j issues, when it starts,
     * the reloads of its ops tq[tfirst[tbase[d] + j] .. tfirst[tbase[d] + j + 1]) */
    int *tbase, *tfirst, *tq;
    size_t tcap, tcap_p;
} sim_copy;
void sim_copy_reset(sim_copy *c, const op_plan *p, double *xfer, double *eng, int64_t *host,
                    int64_t *host_peak);
/* F(s,m) of offload stage t ended at f_end: queue its copy to host (or keep it, budget). */
void sim_copy_offload(sim_copy *c, const sim_stage *t, int s, int m, double f_end);
/* The op that issues the reload of I|B(s,m) (sim_copy_triggers) starts at prev_start: queue
 * the reload. */
void sim_copy_reload(sim_copy *c, const sim_stage *t, int s, int m, double prev_start);
/* Fills c's reload points from p's orders (op_sim_reload_at). */
void sim_copy_triggers(sim_copy *c, const op_plan *p);
void sim_copy_free(sim_copy *c);

/* Dynamic mode, per stage, two cache lines (64-byte aligned).  At P = 128 an event is a
 * chain of dependent loads over ~128 devices' state, which does not fit in L1: what decides
 * the speed is how many L2 round trips an event waits for in sequence.  So a decision reads
 * one line, found from the device alone (no pointer to chase): the end time of the producer
 * of each slot's next op is pushed into it (head) when that producer starts, instead of being
 * looked up in the end[] rows.  The second line is what starting an op needs.
 * Slots: 0 F, 1 I|B, 2 W. */
typedef struct sim_dstage {
    /* line 1: choosing */
    double head[3];      /* end of the producer of the slot's next op (F of stage 0: 0); -1 =
                          * not started yet, or no op left (or none at all: W of a fused
                          * stage) */
    double delay[2];     /* ms from the producer's end to arrival here: F, I|B (0 on the last
                          * stage); W reads its own I, no delay */
    int next[3];         /* next mb per slot (a stage's ops of one kind run in mb order); M =
                          * none left */
    int stage;
    int64_t f_need;      /* bytes an F must find under mem_limit: its stash plus what its
                          * own I|B adds on top (max(0, act_i, act_w - act)) */
    /* line 2: starting */
    double dur[3];       /* ms */
    int64_t act_end_b;   /* bytes freed at the end of I (act - act_w, < 0 when I leaves more
                          * than F stored) or B (act); act = act_end_b + act_w */
    int64_t act_w;       /* bytes freed at the end of W */
    int32_t prod[3];     /* producer of the slot's ops: its stage << 2 | slot; -1 for F of
                          * stage 0 (input at time 0) */
    int32_t split;       /* 1 = I+W, 0 = B */
    int32_t wake_dev[2]; /* consumer's device when it is another one (F -> s+1, I|B -> s-1),
                          * else -1 */
} __attribute__((aligned(64))) sim_dstage;

/* Dynamic mode: one device's state, one cache line. */
typedef struct sim_dev {
    double free_t;    /* end of its last op */
    int64_t held;     /* bytes held: static + activations */
    int64_t fin_held; /* bytes the running op frees at its end */
    op_op *out;       /* next slot of p->ops[d] to write */
    int inflight, pending_w;
    int run;          /* op running: stage << 2 | slot; slot 3 = idle */
    int fin_pend;     /* change of pending_w at the running op's end */
    int warm, wl, cap; /* policy knobs for this device (sim.h op_sim_policy) */
} __attribute__((aligned(64))) sim_dev;

struct op_sim_ws {
    /* sized by ensure() */
    size_t cap_ops, cap_S, cap_P;
    double *end;     /* [S*M*3] end time of each op; < 0 = not done (dynamic mode: see
                      * sim_dstage.prod) */
    sim_stage *st;   /* [S] */
    /* replay */
    int *pos;        /* [P] next op index in the device's order */
    double *free_t;  /* [P] when the device is free */
    int *stack;      /* [P] devices to (re)try */
    uint8_t *inq;    /* [P] */
    /* dynamic */
    int *dev_first;  /* [P+1] device d's stages are dev_stages[dev_first[d] .. dev_first[d+1]),
                      * ascending */
    int *dev_stages; /* [S] */
    sim_dstage *ds;  /* [S] */
    int dyn_S, dyn_M; /* shape of the plan being list-scheduled */
    int64_t dyn_SM;  /* its end[] plane size */
    op_op **ops_base; /* [P] p->ops[d] of that plan */
    int64_t *wake_at; /* [P] earliest pending wake-up as a queue key (sim_key); the +inf key
                       * when none; INT64_MIN when busy.  Dense: every op's start reads its
                       * consumer's */
    int64_t *static_b; /* [P] static bytes per device */
    /* event queue: each device's next event is its running op's end when busy, else its
     * earliest wake-up (an input arriving), else none (+inf) */
    /* a tournament tree: leaf leaves + d holds device d's next event as a key (sim_key of its
     * time), each inner node the winner below it (earliest, then lower device) */
    int64_t *tk;     /* [2 * leaves] keys; tk[1] = earliest event */
    int32_t *td;     /* [2 * leaves] devices; td[1] = its device */
    size_t cap_tw;
    int tw_leaves;   /* power of two >= P */
    sim_dev *dv;     /* [P] */
    int delayed;     /* some op started later than its device and input allowed (a hold) */
    double last_f, first_b; /* dynamic: latest F end, first I|B start (-1: none yet) */
    /* offload (sim_copy.c); any_offload = 0 leaves these untouched */
    int any_offload;
    size_t cap_xfer;
    double *xfer;       /* [S*M*4] */
    double *eng;        /* [P] */
    int64_t *host, *host_peak; /* [P] */
    sim_copy cp;
};

/* Grows ws for the plan's shape and fills ws->st (durations, delays); reset_end: sets every
 * ws->end to -1 (not done), which the dynamic mode does not need. */
void sim_prepare(op_sim_ws *ws, const op_plan *p, int reset_end);

/* Checks stages and placement only (dynamic mode, before there are ops). */
int sim_check_layout(const op_plan *p, op_err *err);
/* op_sim_fill_pred without its range check, for plans this module has already checked (every
 * replay runs op_plan_validate or its layout check first). */
void sim_fill_pred(op_plan *p);

/* Replays p's orders on a prepared ws.  write: store start/end into p->ops.
 * Returns the makespan, or -1 when ops remain that cannot run (deadlock / missing op). */
double sim_replay_core(const op_plan *p, op_sim_ws *ws, int write);

/* op_sim_fill_pred given what its first pass finds: T = the last end, tb = the first I|B
 * start (-1: none), tf = the last F end (0: none); the dynamic mode knows them already. */
void sim_fill_pred_at(op_plan *p, double T, double tb, double tf);

/* After sim_replay_core returned -1: describes the cycle in err (OP_EDEADLOCK). */
int sim_deadlock_report(const op_plan *p, op_sim_ws *ws, op_err *err);

static inline int64_t sim_id(int S, int M, int stage, int mb, int slot) {
    return ((int64_t)slot * S + stage) * M + mb;
}
static inline int sim_slot(int kind) { return kind == OP_F ? 0 : kind == OP_W ? 2 : 1; }

#endif
