/* plan.c: the plan type: allocation, copies, stage aggregates, lower bound, validation. */
#include "octopipe/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void op_plan_init(op_plan *p, const char *name, const op_layer_cost *layers, int n_layers,
                  int P, int M, int S, const op_comm *comm) {
    OP_ASSERT(P > 0 && M > 0 && S > 0 && n_layers > 0, "bad plan shape P=%d M=%d S=%d L=%d", P,
              M, S, n_layers);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name ? name : "plan");
    p->n_layers = n_layers;
    p->P = P;
    p->M = M;
    p->S = S;
    if (comm) p->comm = *comm;
    else p->comm.none = 1;
    if (p->comm.pair_n > 0 && p->comm.pair_lat_ms && p->comm.pair_bw_GBps) {
        size_t nn = (size_t)p->comm.pair_n * (size_t)p->comm.pair_n;
        double *lat = OP_ARENA_NEW(&p->arena, double, nn), *bw = OP_ARENA_NEW(&p->arena, double, nn);
        memcpy(lat, comm->pair_lat_ms, sizeof(double) * nn);
        memcpy(bw, comm->pair_bw_GBps, sizeof(double) * nn);
        p->comm.pair_lat_ms = lat;
        p->comm.pair_bw_GBps = bw;
    } else {
        p->comm.pair_n = 0;
        p->comm.pair_lat_ms = p->comm.pair_bw_GBps = NULL;
    }
    if (p->comm.host_n > 0 && p->comm.host_bw_dev_GBps) { /* per-device host links */
        double *h = OP_ARENA_NEW(&p->arena, double, p->comm.host_n);
        memcpy(h, comm->host_bw_dev_GBps, sizeof(double) * (size_t)p->comm.host_n);
        p->comm.host_bw_dev_GBps = h;
    } else {
        p->comm.host_n = 0, p->comm.host_bw_dev_GBps = NULL;
    }
    p->tokens_per_mb = 0;
    p->layers = OP_ARENA_NEW(&p->arena, op_layer_cost, n_layers);
    memcpy(p->layers, layers, sizeof(op_layer_cost) * (size_t)n_layers);
    p->n_types = 1;
    p->type_layers = p->layers;
    p->type_name = op_arena_alloc(&p->arena, 32);
    p->dev_type = OP_ARENA_NEW(&p->arena, int, P);
    p->dev_mem_limit = NULL;
    p->stage_first = OP_ARENA_NEW(&p->arena, int, S + 1);
    p->stage_dev = OP_ARENA_NEW(&p->arena, int, S);
    p->stage_split = OP_ARENA_NEW(&p->arena, uint8_t, S);
    p->stage_act = OP_ARENA_NEW(&p->arena, uint8_t, S);
    p->n_ops = OP_ARENA_NEW(&p->arena, int, P);
    p->ops = OP_ARENA_NEW(&p->arena, op_op *, P);
    p->pred.busy_ms = OP_ARENA_NEW(&p->arena, double, P);
    p->pred.warmup_ms = OP_ARENA_NEW(&p->arena, double, P);
    p->pred.cooldown_ms = OP_ARENA_NEW(&p->arena, double, P);
    p->pred.residual_ms = OP_ARENA_NEW(&p->arena, double, P);
    p->pred.peak_bytes = OP_ARENA_NEW(&p->arena, int64_t, P);
    p->pred.static_bytes = OP_ARENA_NEW(&p->arena, int64_t, P);
}

void op_plan_init_problem(op_plan *p, const char *name, const op_problem *pr, int S) {
    op_plan_init(p, name, pr->layers, pr->n_layers, pr->P, pr->M, S, &pr->comm);
    snprintf(p->model, sizeof p->model, "%s", pr->model ? pr->model : "");
    p->tokens_per_mb = pr->tokens_per_mb;
    p->op_overhead_ms = pr->op_overhead_ms;
    p->mem_limit_bytes = pr->mem_limit_bytes;
    if (pr->n_types > 1 || pr->dev_mem_limit)
        op_plan_set_types(p, pr->n_types > 1 ? pr->n_types : 1, pr->type_name,
                          pr->n_types > 1 ? pr->type_layers : pr->layers,
                          pr->n_types > 1 ? pr->dev_type : NULL, pr->dev_mem_limit);
    else if (pr->type_name)
        snprintf(p->type_name[0], sizeof p->type_name[0], "%s", pr->type_name[0]);
}

void op_plan_set_types(op_plan *p, int n_types, const char (*names)[32],
                       const op_layer_cost *type_layers, const int *dev_type,
                       const double *dev_mem_limit) {
    OP_ASSERT(n_types >= 1, "n_types %d", n_types);
    size_t L = (size_t)p->n_layers;
    p->n_types = n_types;
    p->type_layers = OP_ARENA_NEW(&p->arena, op_layer_cost, (size_t)n_types * L);
    memcpy(p->type_layers, type_layers, sizeof(op_layer_cost) * (size_t)n_types * L);
    memcpy(p->layers, type_layers, sizeof(op_layer_cost) * L);
    p->type_name = op_arena_alloc(&p->arena, (size_t)32 * (size_t)n_types);
    for (int t = 0; names && t < n_types; t++)
        snprintf(p->type_name[t], sizeof p->type_name[t], "%s", names[t]);
    for (int d = 0; d < p->P; d++) {
        p->dev_type[d] = dev_type ? dev_type[d] : 0;
        OP_ASSERT(p->dev_type[d] >= 0 && p->dev_type[d] < n_types, "device %d type %d", d,
                  p->dev_type[d]);
    }
    p->dev_mem_limit = NULL;
    if (dev_mem_limit) {
        p->dev_mem_limit = OP_ARENA_NEW(&p->arena, double, p->P);
        memcpy(p->dev_mem_limit, dev_mem_limit, sizeof(double) * (size_t)p->P);
    }
}

int op_plan_is_mixed(const op_plan *p) {
    return p->n_types > 1 || p->dev_mem_limit != NULL;
}

const op_layer_cost *op_plan_dev_layers(const op_plan *p, int d) {
    if (p->n_types <= 1 || !p->dev_type) return p->layers;
    return p->type_layers + (size_t)p->dev_type[d] * (size_t)p->n_layers;
}

const op_layer_cost *op_stage_layers(const op_plan *p, int s) {
    return op_plan_dev_layers(p, p->stage_dev[s]);
}

double op_plan_dev_mem_limit(const op_plan *p, int d) {
    return p->dev_mem_limit ? p->dev_mem_limit[d] : p->mem_limit_bytes;
}

const op_layer_cost *op_problem_dev_layers(const op_problem *pr, int d) {
    if (pr->n_types <= 1 || !pr->dev_type || !pr->type_layers) return pr->layers;
    return pr->type_layers + (size_t)pr->dev_type[d] * (size_t)pr->n_layers;
}

double op_problem_dev_mem_limit(const op_problem *pr, int d) {
    return pr->dev_mem_limit ? pr->dev_mem_limit[d] : pr->mem_limit_bytes;
}

void op_plan_free(op_plan *p) {
    op_arena_free(&p->arena);
    memset(p, 0, sizeof *p);
}

void op_plan_set_ops(op_plan *p, int d, const op_op *ops, int n) {
    OP_ASSERT(d >= 0 && d < p->P, "device %d out of range", d);
    p->ops[d] = OP_ARENA_NEW(&p->arena, op_op, n);
    if (n) memcpy(p->ops[d], ops, sizeof(op_op) * (size_t)n);
    p->n_ops[d] = n;
}

void op_plan_copy(op_plan *dst, const op_plan *src) {
    op_plan_init(dst, src->name, src->layers, src->n_layers, src->P, src->M, src->S, &src->comm);
    memcpy(dst->model, src->model, sizeof dst->model);
    dst->tokens_per_mb = src->tokens_per_mb;
    dst->op_overhead_ms = src->op_overhead_ms;
    dst->mem_limit_bytes = src->mem_limit_bytes;
    memcpy(dst->stage_first, src->stage_first, sizeof(int) * (size_t)(src->S + 1));
    memcpy(dst->stage_dev, src->stage_dev, sizeof(int) * (size_t)src->S);
    memcpy(dst->stage_split, src->stage_split, (size_t)src->S);
    memcpy(dst->stage_act, src->stage_act, (size_t)src->S);
    if (op_plan_is_mixed(src))
        op_plan_set_types(dst, src->n_types, (const char(*)[32])src->type_name, src->type_layers,
                          src->dev_type, src->dev_mem_limit);
    else
        memcpy(dst->type_name[0], src->type_name[0], sizeof dst->type_name[0]);
    for (int d = 0; d < src->P; d++) op_plan_set_ops(dst, d, src->ops[d], src->n_ops[d]);
    op_pred *a = &dst->pred;
    const op_pred *b = &src->pred;
    a->makespan_ms = b->makespan_ms;
    a->lower_bound_ms = b->lower_bound_ms;
    a->bubble_ratio = b->bubble_ratio;
    a->tokens_per_s = b->tokens_per_s;
    a->peak_bytes_max = b->peak_bytes_max;
    a->valid = b->valid;
    size_t nd = sizeof(double) * (size_t)src->P, ni = sizeof(int64_t) * (size_t)src->P;
    memcpy(a->busy_ms, b->busy_ms, nd);
    memcpy(a->warmup_ms, b->warmup_ms, nd);
    memcpy(a->cooldown_ms, b->cooldown_ms, nd);
    memcpy(a->residual_ms, b->residual_ms, nd);
    memcpy(a->peak_bytes, b->peak_bytes, ni);
    memcpy(a->static_bytes, b->static_bytes, ni);
    if (b->copy_ms) {
        size_t nx = (size_t)src->S * (size_t)src->M * 4;
        a->copy_ms = OP_ARENA_NEW(&dst->arena, double, nx);
        a->host_peak_bytes = OP_ARENA_NEW(&dst->arena, int64_t, src->P);
        memcpy(a->copy_ms, b->copy_ms, sizeof(double) * nx);
        memcpy(a->host_peak_bytes, b->host_peak_bytes, ni);
    }
}

double op_stage_ms(const op_plan *p, int s, op_kind k) {
    double t = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
        const op_layer_cost *c = &ly[l];
        t += k == OP_F ? c->f_ms : k == OP_I ? c->i_ms : k == OP_W ? c->w_ms : c->i_ms + c->w_ms;
    }
    if (k == OP_I || k == OP_B) t += op_stage_recompute_ms(p, s);
    return t + p->op_overhead_ms;
}

static int stage_policy(const op_plan *p, int s) {
    return p->stage_act ? p->stage_act[s] : OP_ACT_KEEP;
}

int64_t op_layer_stash_bytes(const op_layer_cost *l, int policy) {
    return policy == OP_ACT_SELECTIVE ? op_layer_sel_bytes(l)
           : policy == OP_ACT_FULL    ? 0
                                      : l->act_bytes;
}

double op_layer_recompute_ms(const op_layer_cost *l, int policy) {
    double f = policy == OP_ACT_SELECTIVE ? l->f_sel_ms : policy == OP_ACT_FULL ? l->f_ms : 0;
    return f > 0 ? f : 0;
}

int64_t op_stage_in_bytes(const op_plan *p, int s) {
    int l = p->stage_first[s];
    const op_layer_cost *ly = op_stage_layers(p, s);
    if (l > 0) return ly[l - 1].out_bytes;
    if (!(p->tokens_per_mb > 0)) return ly[0].out_bytes; /* no token count: the old rule */
    double ids = 4.0 * ceil(p->tokens_per_mb); /* int32 token ids, 16-byte rounded as arenas are */
    return ids < (double)OP_MAX_BYTES ? ((int64_t)ids + 15) / 16 * 16 : (int64_t)OP_MAX_BYTES;
}

int64_t op_stage_stash_bytes(const op_plan *p, int s) {
    int pol = stage_policy(p, s);
    int64_t act = op_stage_act_bytes(p, s);
    if (pol == OP_ACT_FULL) {
        int64_t in = op_stage_in_bytes(p, s);
        return in < act ? in : act; /* never more than keep would hold */
    }
    if (pol != OP_ACT_SELECTIVE) return act;
    int64_t b = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++)
        b += op_layer_sel_bytes(&ly[l]);
    return b;
}

int64_t op_stage_remat_bytes(const op_plan *p, int s) {
    int pol = stage_policy(p, s);
    if (pol != OP_ACT_SELECTIVE && pol != OP_ACT_FULL) return 0;
    return op_stage_act_bytes(p, s) - op_stage_stash_bytes(p, s);
}

double op_stage_recompute_ms(const op_plan *p, int s) {
    int pol = stage_policy(p, s);
    double t = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++)
        t += op_layer_recompute_ms(&ly[l], pol);
    return t;
}

double op_stage_copy_ms(const op_plan *p, int s) {
    if (stage_policy(p, s) != OP_ACT_OFFLOAD) return 0;
    return op_comm_host_ms_dev(&p->comm, p->stage_dev[s], op_stage_act_bytes(p, s)); /* its device's link */
}

int64_t op_stage_out_bytes(const op_plan *p, int s) {
    return op_stage_layers(p, s)[p->stage_first[s + 1] - 1].out_bytes;
}

int64_t op_stage_act_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += ly[l].act_bytes;
    return b;
}

int64_t op_stage_act_w_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += ly[l].act_w_bytes;
    return b;
}

int64_t op_stage_act_i_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += ly[l].act_i_bytes;
    return b;
}

int64_t op_stage_static_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    const op_layer_cost *ly = op_stage_layers(p, s);
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += ly[l].static_bytes;
    return b;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Each term is a valid bound for any partition, placement and order:
 *  - total work / P;
 *  - one microbatch's F chain down and I chain back through all layers;
 *  - per layer l (indivisible, so on one device): the first F of l cannot start before the F
 *    chain above it, and then its device runs M F and M I of l (and the I chain below the last
 *    one follows), or M F, I and W of l;
 *  - of the kP+1 heaviest layers some device holds k+1 (pigeonhole), each at least as heavy as
 *    the (kP+1)-th: the classic bound for indivisible jobs on P machines;
 *  - warm-up (op_lower_bound_warmup): devices cannot all start at time 0;
 *  - the joint bound (op_lower_bound_joint, plan/bound_joint.c): warm-up, drain and the balance
 *    of indivisible layers at once, for the best assignment of layers to devices. */
/* The warm-up term.  Let the plan use k devices (1 <= k <= min(P, L)) and let a_d be the
 * lowest layer device d holds.  Every op of d needs the forward of some layer l >= a_d for some
 * microbatch m first, and F(l, m) cannot start before F(0..l-1, m) have run one after another,
 * so d is idle until at least head(a_d) = F_0 + ... + F_(a_d - 1) (head is nondecreasing in l).
 * The a_d are distinct, so sorted they satisfy a_(i) >= i and
 *   sum_d start_d >= head(0) + head(1) + ... + head(k-1) =: H_k.
 * Each device runs its M (F + I + W) of its layers after its start, so T >= start_d + work_d
 * for every d; summing over the k devices, k T >= H_k + M * work, i.e.
 *   T >= (M * work + H_k) / k,
 * and taking the smallest over k covers plans that leave devices empty.  It is never below
 * M * work / P (each term is at least M * work / k).  Per-op overhead, communication and
 * recomputation only lengthen ops, so they keep it valid.  On nemotron-h-8b-profile at P = 4,
 * M = 8 (head ~9x a layer, embedding ~2.3 ms) it adds 2.53 ms to work / P. */
double op_lower_bound_warmup(const op_layer_cost *layers, int n_layers, int P, int M) {
    double work = 0, head = 0, H = 0, best = INFINITY;
    for (int l = 0; l < n_layers; l++)
        work += layers[l].f_ms + layers[l].i_ms + layers[l].w_ms;
    for (int k = 1; k <= P && k <= n_layers; k++) {
        H += head;                   /* H_k = head(0) + ... + head(k-1) */
        head += layers[k - 1].f_ms; /* head(k) */
        best = fmin(best, (M * work + H) / k);
    }
    return best;
}

double op_lower_bound(const op_layer_cost *layers, int n_layers, int P, int M) {
    double work = 0, chain = 0, best = 0, head_f = 0, tail_i = 0;
    for (int l = 0; l < n_layers; l++) {
        const op_layer_cost *c = &layers[l];
        work += c->f_ms + c->i_ms + c->w_ms;
        chain += c->f_ms + c->i_ms;
        double a = head_f + M * (c->f_ms + c->i_ms) + tail_i;
        double b = head_f + M * (c->f_ms + c->i_ms + c->w_ms);
        best = fmax(best, fmax(a, b));
        head_f += c->f_ms;
        tail_i += c->i_ms;
    }
    best = fmax(best, fmax(chain, work * M / P));
    best = fmax(best, op_lower_bound_warmup(layers, n_layers, P, M));
    best = fmax(best, op_lower_bound_joint(layers, n_layers, P, M));
    double *w = op_xmalloc(sizeof(double) * (size_t)n_layers);
    for (int l = 0; l < n_layers; l++) w[l] = layers[l].f_ms + layers[l].i_ms + layers[l].w_ms;
    qsort(w, (size_t)n_layers, sizeof(double), cmp_desc);
    for (long k = 1; k * P < n_layers; k++) best = fmax(best, (double)(k + 1) * M * w[k * P]);
    free(w);
    return best;
}

double op_plan_lower_bound(const op_plan *p) {
    if (p->n_types > 1) return op_plan_lower_bound_mixed(p);
    return op_lower_bound(p->layers, p->n_layers, p->P, p->M);
}

typedef struct { double ratio, bytes; } save_item;

static int cmp_ratio(const void *a, const void *b) {
    double x = ((const save_item *)a)->ratio, y = ((const save_item *)b)->ratio;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Snapshot term.  Take any plan under the limit and any microbatch m.  When the I (or B) of
 * the last layer for m starts, every F of m has ended and no other I of m has started, so
 * every layer's stash for m is held: keep act_bytes, selective act_sel_bytes, full at least 0
 * (the stage input), offload act_bytes on the device or on the host.  Adding static bytes,
 *   static + sum_l stash_l <= P * limit + (host bytes offloaded at that moment).
 * So the recompute policies must save need = static + act - P * limit - host capacity bytes
 * for m.  Saving x_l bytes of layer l costs at least r_l * x_l ms of extra compute, with r_l
 * the cheaper rate of selective (f_sel / (act - sel)) and full (f / act); the fractional
 * greedy by rate gives the least total R over all assignments (a relaxation, so a bound).
 * Every microbatch pays R, all of it inside I ops: total work grows by M * R (spread over P
 * devices at best) and microbatch m's own F-I chain by R.  Returns the bound from R (0 when
 * nothing must be saved, +inf when recomputing everything is not enough). */
static double lbm_snapshot(const op_layer_cost *layers, int n_layers, int P, int M, double cap,
                           double stat, double work, double chain) {
    double act = 0;
    save_item *it = op_xmalloc(sizeof *it * (size_t)n_layers);
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        const op_layer_cost *c = &layers[l];
        act += (double)c->act_bytes;
        if (c->act_bytes <= 0) continue;
        double r = c->f_ms / (double)c->act_bytes;
        int64_t sel = op_layer_sel_bytes(c);
        if (sel < c->act_bytes && c->f_sel_ms >= 0) {
            double rs = c->f_sel_ms / (double)(c->act_bytes - sel);
            if (rs < r) r = rs;
        }
        it[n++] = (save_item){r, (double)c->act_bytes};
    }
    double need = stat + act - cap, R = 0;
    qsort(it, (size_t)n, sizeof *it, cmp_ratio);
    for (int i = 0; i < n && need > 0; i++) {
        double x = it[i].bytes < need ? it[i].bytes : need;
        R += it[i].ratio * x;
        need -= x;
    }
    free(it);
    if (need > 0) return INFINITY; /* even recomputing everything leaves too much */
    return fmax((work + R) * M / P, chain + R);
}

/* Memory-time term: what each policy costs one microbatch's stash of one layer l, in device
 * memory x time (byte ms), recompute (ms on a compute timeline) and copy-engine time (ms).
 * c_l = sum_{k >= l} (F_k + I_k) is the least time from F of l's stage starting to I of it
 * ending (the F chain down from l, the I chain back: dependencies of plan.h), over which
 * the simulator holds the stash (F start allocates, I end releases; larger stages, comm and
 * recompute only stretch it).  Per (layer, microbatch), a = act, s = selective stash, B the
 * host link in bytes/ms:
 *   keep       mem a c_l                      rec 0        copy 0
 *   selective  mem s c_l                      rec f_sel    copy 0
 *   full       mem 0 (the stage input)        rec f        copy 0
 *   offload    mem a (F_l + I_l + 2 a / B)    rec 0        copy 2 a / B
 * offload's device time: held through its F and the copy to host (a stage's copy moves all
 * its stash, >= a / B), again from the reload (>= a / B) through its I.  With a host budget H,
 * device + host time of an offloaded stash covers F start .. I end (>= a c_l) and host
 * memory x time is at most T P H; a stash the budget refused is a keep.  host_mem holds that
 * combined time per option (= mem for the others). */
typedef struct lbm_opt { double mem, rec, copy, both; } lbm_opt;

/* The relaxation at a makespan T.  Any fitting plan with makespan T gives per-microbatch
 * fractions x_lj (stashes of layer l under option j, averaged over microbatches;
 * sum_j x_lj = 1) with
 *   M sum x mem <= T Cap                 Cap = P limit - static (every device within limit)
 *   M sum x both <= T (Cap + P H)        (only with a host budget H)
 *   sum x rec <= R = min(C(T) / M - W0, T - chain)  (work over the devices, W0 the work of a
 *                                         microbatch; and every microbatch's chain carries its
 *                                         own recompute, the average too)
 *   C(T) = sum_{i < min(P, L)} max(0, T - H_i), H_i the F chain of layers 0..i-1: the device
 *   with the i-th lowest first layer starts no earlier than H_i (op_lower_bound_warmup's
 *   argument; recomputation runs inside I, so it moves no F), so the busy time of all
 *   devices together is at most C(T) <= P T.
 *   M sum x copy <= P T                  (P copy engines, every copy inside the makespan)
 * Weighting them by (1, beta, lam, mu) >= 0 and taking each layer's cheapest option:
 *   D = sum_l min_j (mem + beta both + lam rec + mu copy) - lam R - mu P T / M
 *       - T ((1 + beta) Cap + beta P H) / M  <=  0.
 * So D > 0 for any multipliers proves no plan fits with makespan T (weak duality).  lbm_lam
 * returns max over lam of D for the others fixed (D is concave piecewise linear in lam; its
 * maximum is where the slope, the rec of the chosen options less R, changes sign). */
typedef struct lbm_ctx {
    const lbm_opt *o;
    int n;
    double M, P, cap, hcap, W0, chain, beta;
    const double *H; /* [nH] F chains below each device's first layer, ascending */
    int nH;
} lbm_ctx;

/* C(T): the most busy time all devices together can have within T (see above). */
static double lbm_capacity(const lbm_ctx *c, double T) {
    double C = 0;
    for (int i = 0; i < c->nH && c->H[i] < T; i++) C += T - c->H[i];
    return C;
}

static double lbm_D(const lbm_ctx *c, double T, double lam, double mu, double *slope) {
    double S = 0, rsum = 0;
    for (int l = 0; l < c->n; l++) {
        const lbm_opt *x = &c->o[l * 4];
        double best = INFINITY, r = 0;
        for (int j = 0; j < 4; j++) {
            if (!isfinite(x[j].mem)) continue;
            double v = x[j].mem + c->beta * x[j].both + lam * x[j].rec + mu * x[j].copy;
            if (v < best || (v == best && x[j].rec < r)) best = v, r = x[j].rec;
        }
        S += best;
        rsum += r;
    }
    double R = fmin(lbm_capacity(c, T) / c->M - c->W0, T - c->chain);
    if (slope) *slope = rsum - R;
    return S - lam * R - mu * c->P * T / c->M -
           T * ((1 + c->beta) * c->cap + c->beta * c->hcap) / c->M;
}

static double lbm_lam(const lbm_ctx *c, double T, double mu, double lam_hi) {
    double lo = 0, hi = lam_hi, sl;
    double best = lbm_D(c, T, 0, mu, &sl);
    if (sl <= 0) return best; /* already decreasing at 0 */
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        if (lbm_D(c, T, mid, mu, &sl), sl > 0) lo = mid;
        else hi = mid;
    }
    return fmax(best, fmax(lbm_D(c, T, lo, mu, NULL), lbm_D(c, T, hi, mu, NULL)));
}

/* max over mu of max over lam of D at T (concave in mu: a partial maximum of a jointly
 * concave function); golden-section search, every point tried being a valid certificate. */
static double lbm_Dmax(const lbm_ctx *c, double T, double lam_hi, double mu_hi) {
    double best = lbm_lam(c, T, 0, lam_hi);
    if (!(mu_hi > 0)) return best;
    const double g = 0.6180339887498949;
    double a = 0, b = mu_hi, x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = lbm_lam(c, T, x1, lam_hi), f2 = lbm_lam(c, T, x2, lam_hi);
    for (int it = 0; it < 50; it++) {
        if (f1 < f2) a = x1, x1 = x2, f1 = f2, x2 = a + g * (b - a), f2 = lbm_lam(c, T, x2, lam_hi);
        else b = x2, x2 = x1, f2 = f1, x1 = b - g * (b - a), f1 = lbm_lam(c, T, x1, lam_hi);
    }
    return fmax(best, fmax(f1, f2));
}

double op_lower_bound_mem(const op_layer_cost *layers, int n_layers, int P, int M,
                          double mem_limit_bytes, const op_comm *comm) {
    double base = op_lower_bound(layers, n_layers, P, M);
    if (!(mem_limit_bytes > 0)) return base;
    double stat = 0, work = 0, chain = 0, act = 0;
    for (int l = 0; l < n_layers; l++) {
        const op_layer_cost *c = &layers[l];
        stat += (double)c->static_bytes;
        act += (double)c->act_bytes;
        work += c->f_ms + c->i_ms + c->w_ms;
        chain += c->f_ms + c->i_ms;
    }
    double cap = (double)P * mem_limit_bytes - stat;
    if (cap < 0) return INFINITY; /* static memory alone exceeds P * limit */
    if (!(act > 0)) return base;
    double B = comm && comm->host_bw_GBps > 0 ? comm->host_bw_GBps * 1e6 : 0; /* bytes/ms */
    double H = B > 0 && comm->host_mem_bytes > 0 ? comm->host_mem_bytes : 0;
    double snap_cap = (double)P * mem_limit_bytes + (double)P * H;
    double best = base;
    if (!(B > 0) || H > 0) best = fmax(best, lbm_snapshot(layers, n_layers, P, M, snap_cap, stat, work, chain));
    if (!isfinite(best)) return best;
    /* options per layer, c_l from the back */
    lbm_opt *o = op_xmalloc(sizeof *o * (size_t)n_layers * 4);
    double c = 0;
    for (int l = n_layers - 1; l >= 0; l--) {
        const op_layer_cost *y = &layers[l];
        double a = (double)y->act_bytes, s = (double)op_layer_sel_bytes(y);
        c += y->f_ms + y->i_ms;
        lbm_opt *x = &o[l * 4];
        x[0] = (lbm_opt){a * c, 0, 0, a * c};
        x[1] = (lbm_opt){s * c, fmax(y->f_sel_ms, 0), 0, s * c};
        x[2] = (lbm_opt){0, fmax(y->f_ms, 0), 0, 0};
        x[3] = (lbm_opt){INFINITY, 0, 0, 0};
        if (B > 0) {
            double dev = a * (y->f_ms + y->i_ms + 2 * a / B);
            x[3] = (lbm_opt){dev, 0, 2 * a / B, fmax(dev, a * c)};
        }
    }
    /* the least T the relaxation allows, by bisection: every T with some multipliers giving
     * D > 0 is impossible, and D only falls as T grows.  hi: all-full is feasible there (no
     * stash, recompute within both budgets), and so is all-keep when it fits at all. */
    double recall = 0, keepmem = 0, lam_hi = 1, mu_hi = 0;
    for (int l = 0; l < n_layers; l++) {
        const lbm_opt *x = &o[l * 4];
        recall += x[2].rec;
        keepmem += x[0].mem;
        for (int j = 0; j < 4; j++)
            if (x[j].rec > 0) lam_hi = fmax(lam_hi, 2 * x[0].mem / x[j].rec); /* keep is never beaten by more */
        if (B > 0 && x[3].copy > 0) mu_hi = fmax(mu_hi, 2 * x[0].mem / x[3].copy);
    }
    int nH = n_layers < P ? n_layers : P;
    double *Hs = op_xmalloc(sizeof *Hs * (size_t)nH), Hsum = 0;
    for (int i = 0; i < nH; i++) Hs[i] = i ? Hs[i - 1] + fmax(layers[i - 1].f_ms, 0) : 0, Hsum += Hs[i];
    double hi = fmax(best, fmax(((work + recall) * M + Hsum) / P, chain + recall));
    if (cap > 0) hi = fmin(hi, fmax(best, M * keepmem / cap));
    double lo = best;
    int nb = H > 0 ? 5 : 1;
    const double betas[5] = {0, 0.25, 1, 4, 16};
    for (int it = 0; it < 80 && hi > lo * (1 + 1e-10); it++) {
        double T = lo > 0 && hi > 4 * lo ? sqrt(lo * hi) : 0.5 * (lo + hi); /* far apart: halve the ratio */
        int imp = 0;
        for (int ib = 0; ib < nb && !imp; ib++) {
            lbm_ctx cx = {o, n_layers, M, P, cap, (double)P * H, work, chain, betas[ib], Hs, nH};
            double D = lbm_Dmax(&cx, T, lam_hi * (1 + betas[ib]), mu_hi * (1 + betas[ib]));
            imp = D > 1e-9 * T * ((1 + betas[ib]) * cap + betas[ib] * P * H) / M; /* rounding */
        }
        if (imp) lo = T;
        else hi = T;
    }
    free(o);
    free(Hs);
    return lo;
}

double op_plan_lower_bound_mem(const op_plan *p) {
    double c = op_lower_bound_count_mem(p->n_types > 1 ? p->type_layers : p->layers, p->n_types,
                                        p->n_layers, p->dev_type, p->dev_mem_limit,
                                        p->mem_limit_bytes, p->P, p->M);
    if (op_plan_is_mixed(p)) return fmax(op_plan_lower_bound(p), c); /* bound_mixed.c */
    return fmax(op_lower_bound_mem(p->layers, p->n_layers, p->P, p->M, p->mem_limit_bytes, &p->comm), c);
}

int op_plan_validate_layout(const op_plan *p, op_err *err) {
    if (p->P < 1) return op_errf(err, OP_EINVAL, "devices must be >= 1 (got %d)", p->P);
    if (p->M < 1) return op_errf(err, OP_EINVAL, "microbatches must be >= 1 (got %d)", p->M);
    if (p->S < 1) return op_errf(err, OP_EINVAL, "a plan needs at least one stage");
    if (p->stage_first[0] != 0)
        return op_errf(err, OP_EINVAL, "stages[0] starts at layer %d, not 0", p->stage_first[0]);
    for (int s = 0; s < p->S; s++) {
        if (p->stage_first[s + 1] <= p->stage_first[s])
            return op_errf(err, OP_EINVAL, "stages[%d] = [%d, %d) is empty or not contiguous", s,
                           p->stage_first[s], p->stage_first[s + 1]);
        if (p->stage_dev[s] < 0 || p->stage_dev[s] >= p->P)
            return op_errf(err, OP_EINVAL, "stage %d is placed on device %d, not in 0..%d", s,
                           p->stage_dev[s], p->P - 1);
    }
    if (p->stage_first[p->S] != p->n_layers)
        return op_errf(err, OP_EINVAL, "stages end at layer %d but the model has %d layers",
                       p->stage_first[p->S], p->n_layers);
    return OP_OK;
}

int op_plan_validate(const op_plan *p, op_err *err) {
    int lrc = op_plan_validate_layout(p, err);
    if (lrc != OP_OK) return lrc;
    /* every op exactly once, on its stage's device */
    int64_t n = (int64_t)p->S * p->M * 3;
    uint8_t *seen = op_xcalloc((size_t)n, 1);
    int rc = OP_OK;
    for (int d = 0; d < p->P && rc == OP_OK; d++) {
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            if (o->kind > OP_B) {
                rc = op_errf(err, OP_EINVAL, "schedule[%d][%d]: unknown op kind %d", d, i, o->kind);
                break;
            }
            if (o->stage < 0 || o->stage >= p->S || o->mb < 0 || o->mb >= p->M) {
                rc = op_errf(err, OP_EINVAL, "schedule[%d][%d]: %s stage %d mb %d out of range",
                             d, i, op_kind_name(o->kind), o->stage, o->mb);
                break;
            }
            if (p->stage_dev[o->stage] != d) {
                rc = op_errf(err, OP_EINVAL,
                             "schedule[%d][%d]: %s(s%d,mb%d) is on device %d but stage %d is "
                             "placed on device %d",
                             d, i, op_kind_name(o->kind), o->stage, o->mb, d, o->stage,
                             p->stage_dev[o->stage]);
                break;
            }
            int split = p->stage_split[o->stage];
            if ((o->kind == OP_B && split) || ((o->kind == OP_I || o->kind == OP_W) && !split)) {
                rc = op_errf(err, OP_EINVAL,
                             "schedule[%d][%d]: %s(s%d,mb%d) but stage %d uses %s", d, i,
                             op_kind_name(o->kind), o->stage, o->mb, o->stage,
                             split ? "I+W" : "fused B");
                break;
            }
            int slot = o->kind == OP_F ? 0 : o->kind == OP_W ? 2 : 1;
            int64_t id = ((int64_t)o->stage * p->M + o->mb) * 3 + slot;
            if (seen[id]) {
                rc = op_errf(err, OP_EINVAL, "schedule[%d][%d]: duplicate op %s(s%d,mb%d)", d, i,
                             op_kind_name(o->kind), o->stage, o->mb);
                break;
            }
            seen[id] = 1;
        }
    }
    for (int s = 0; s < p->S && rc == OP_OK; s++)
        for (int m = 0; m < p->M && rc == OP_OK; m++)
            for (int slot = 0; slot < 3; slot++) {
                if (slot == 2 && !p->stage_split[s]) continue;
                if (!seen[((int64_t)s * p->M + m) * 3 + slot]) {
                    const char *k = slot == 0 ? "F" : slot == 2 ? "W" : p->stage_split[s] ? "I" : "B";
                    rc = op_errf(err, OP_EINVAL, "missing op %s(s%d,mb%d) on device %d", k, s, m,
                                 p->stage_dev[s]);
                    break;
                }
            }
    free(seen);
    return rc;
}
