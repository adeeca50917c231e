/* sched_int.h: internals shared by the schedule generators (src/sched/).
 *
 * A baseline is built as: candidate splits (split.c) x the baseline's order (orders.c,
 * zb_greedy.c), each simulated, the best kept (sched.c).  "Body" layers are the ones a Megatron
 * split counts (decoder layers, or hybrid sublayers); "pre" layers (vision encoder + embedding)
 * always sit on the first stage and "post" layers (MTP + head) on the last, as in Megatron. */
#ifndef OCTOPIPE_SCHED_INT_H
#define OCTOPIPE_SCHED_INT_H
#include "octopipe/sched.h"
#include "octopipe/sim.h"

/* Placement families the baselines use. */
typedef enum sched_place {
    SCHED_PLACE_LOOP, /* stage s on device s % P (chain when S == P) */
    SCHED_PLACE_V     /* S = 2P, stage s on device s for s < P, else 2P-1-s */
} sched_place;

int sched_stage_dev(sched_place pl, int P, int s);

/* How the model's layers divide into pre / body / post. */
typedef struct sched_layout {
    int n_pre, n_body, n_post;
} sched_layout;
void sched_layout_of(const op_layer_cost *layers, int n_layers, sched_layout *lo);

/* One candidate partition. */
typedef struct sched_split {
    int S;
    int *first;     /* [S+1] */
    char desc[64];  /* "even", "account_for_embedding", "first/last 3/5", "explicit", ... */
    double proxy;   /* rough makespan estimate, to rank candidates before simulating */
} sched_split;

typedef struct sched_split_list {
    sched_split *v;
    int n, cap;
    op_arena arena; /* owns every first[] */
} sched_split_list;
void sched_split_list_free(sched_split_list *l);

/* Megatron-style candidates for S stages in placement pl (v = S / P chunks per device):
 * even split, account_for_embedding / loss / both (for V placement: ZB's padding of the first
 * and last stage), and, when first_last is set (loop placement only), every valid
 * --decoder-first/last-pipeline-num-layers pair, of which only the keep_fl best by proxy are
 * kept.  Stages must be non-empty.  Returns the number of candidates. */
int sched_megatron_splits(const op_problem *pr, int S, sched_place pl, int first_last,
                          int keep_fl, sched_split_list *out);

/* Adds the cost-balanced contiguous split into S stages (op_sched_balanced_split) as a
 * candidate, plus (when several stages share a device) a variant refined to balance the
 * devices' loads under placement pl: what Megatron's --pipeline-model-parallel-layout (or the
 * hybrid pattern's '|' segments) or DualPipe's hand-built stage modules let a user write.
 * Returns the number added (0 when there are fewer layers than stages). */
int sched_split_add_balanced(const op_problem *pr, int S, sched_place pl, sched_split_list *out);

/* Mixed clusters: adds the speed-proportional split (op_sched_speed_split, split_speed.c) for
 * placement pl, described "speed-proportional"; 0 on a uniform cluster.  Returns the number
 * added. */
int sched_split_add_speed(const op_problem *pr, int S, sched_place pl, sched_split_list *out);

/* Adds an explicit split (copied) after checking it; OP_EINVAL if it is malformed. */
int sched_split_add_explicit(const op_problem *pr, const int *first, int S,
                             sched_split_list *out, op_err *err);

/* Best-of bookkeeping: keeps the fastest plan that fits (fits first, then makespan, then peak
 * memory, then the earliest candidate); when nothing fits, the one with the lowest peak. */
typedef struct sched_best {
    op_plan plan;
    int have;
    char settings[160];
    int candidates;
} sched_best;

/* Simulates cand; keeps it in best (taking ownership) or frees it.  A candidate that fails to
 * simulate is a bug in a generator: asserts. */
void sched_offer(sched_best *best, op_plan *cand, const char *settings, void *ws);

/* A fresh plan for pr with the split's stages placed by pl; stage_split = split_iw. */
void sched_plan_from_split(op_plan *p, const char *name, const op_problem *pr,
                           const sched_split *sp, sched_place pl, int split_iw);

/* Adjacent-swap hill climbing on p's simulated orders (polish.c), at most max_sims
 * simulations; keeps swaps that lower the makespan without raising the peak.  Returns the
 * number of swaps kept; p is left simulated. */
int sched_polish(op_plan *p, long max_sims, double deadline, op_sim_ws *ws);

/* Explicit orders (orders.c). */
void sched_order_gpipe(op_plan *p);
void sched_order_zbh1(op_plan *p);      /* handcrafted ZB-H1: 1F1B with W lagging r steps */
int sched_order_dualpipev(op_plan *p);  /* OP_EINVAL when M < 2P */
/* DualPipeV's steps with the steady step's order varied: 0 = DualPipeV (F0 B1 F1 B0),
 * 1 = B1 F0 B0 F1 (never over the warm-up's 2P chunks), 2 = B1 F0 F1 B0 */
int sched_order_vpattern(op_plan *p, int variant);

/* ZB-V's auto-scheduler (zbv_rounds.c) on the V placement, planned with one scalar cost per
 * op kind (cost[0..2] = F, I, W), W's share w_frac of a chunk's activations and at most cap_mb
 * microbatches (2 cap_mb chunks) in flight per device; fill_f / fill_b: its two W-filling
 * options; up to max_runs reruns with approved bubbles.  Fills p's orders (stage_split = 1);
 * OP_EINVAL when the construction does not close (p untouched). */
int sched_zbv_rounds(op_plan *p, const double cost[3], double w_frac, double cap_mb,
                     int fill_f, int fill_b, int max_runs);

/* V-Half (half = 1) or V-Min (half = 0) from their stable patterns, reordered as their
 * authors' scheduler does (vstable.c).  Fills p's orders; OP_EINVAL when P < 2. */
int sched_order_vstable(op_plan *p, int half);

#endif
