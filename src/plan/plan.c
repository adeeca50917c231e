/* plan.c: the plan type: allocation, copies, stage aggregates, lower bound, validation. */
#include "octopipe/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/check_int.h"

void op_plan_set_comm(op_plan *p, const op_comm *comm) {
    op_comm c = *comm;
    if (c.pair_n > 0 && c.pair_lat_ms && c.pair_bw_GBps) {
        size_t nn = (size_t)c.pair_n * (size_t)c.pair_n;
        double *lat = OP_ARENA_NEW(&p->arena, double, nn), *bw = OP_ARENA_NEW(&p->arena, double, nn);
        memcpy(lat, comm->pair_lat_ms, sizeof(double) * nn);
        memcpy(bw, comm->pair_bw_GBps, sizeof(double) * nn);
        c.pair_lat_ms = lat;
        c.pair_bw_GBps = bw;
    } else {
        c.pair_n = 0;
        c.pair_lat_ms = c.pair_bw_GBps = NULL;
    }
    if (c.host_n > 0 && c.host_bw_dev_GBps) { /* per-device host links */
        double *h = OP_ARENA_NEW(&p->arena, double, c.host_n);
        memcpy(h, comm->host_bw_dev_GBps, sizeof(double) * (size_t)c.host_n);
        c.host_bw_dev_GBps = h;
    } else {
        c.host_n = 0, c.host_bw_dev_GBps = NULL;
    }
    p->comm = c;
}

int op_plan_init(op_plan *p, const char *name, const op_layer_cost *layers, int n_layers,
                 int P, int M, int S, const op_comm *comm) {
    memset(p, 0, sizeof *p);
    if (P < 1 || M < 1 || S < 1 || n_layers < 1) return OP_EINVAL; /* p stays empty */
    if (P > OP_PLAN_MAX_COUNT || M > OP_PLAN_MAX_COUNT || S > OP_PLAN_MAX_COUNT || n_layers > OP_PLAN_MAX_COUNT)
        return OP_EINVAL; /* S + 1 entries and S x M x 3 ops must stay in range */
    op_copy_name(p->name, sizeof p->name, name ? name : "plan"); /* UTF-8: JSON, SVG */
    p->n_layers = n_layers;
    p->P = P;
    p->M = M;
    p->S = S;
    if (comm) op_plan_set_comm(p, comm);
    else p->comm.none = 1;
    p->tokens_per_mb = 0;
    p->tp = p->ep = p->dp = 1;
    p->zero1 = p->seq = p->mbs = 0;
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
    return OP_OK;
}

void op_plan_init_problem(op_plan *p, const char *name, const op_problem *pr, int S) {
    op_plan_init(p, name, pr->layers, pr->n_layers, pr->P, pr->M, S, &pr->comm);
    /* a long model name cut mid-character made a plan file no reader takes */
    op_copy_name(p->model, sizeof p->model, pr->model ? pr->model : "");
    p->tokens_per_mb = pr->tokens_per_mb;
    p->op_overhead_ms = pr->op_overhead_ms;
    p->mem_limit_bytes = pr->mem_limit_bytes;
    p->tp = pr->tp > 1 ? pr->tp : 1, p->ep = pr->ep > 1 ? pr->ep : 1; /* a problem may say 0 */
    p->dp = pr->dp > 1 ? pr->dp : 1, p->zero1 = pr->zero1 != 0 && p->dp > 1;
    if (pr->seq > 0 && pr->mbs > 0) p->seq = pr->seq, p->mbs = pr->mbs;
    if (pr->n_types > 1 || pr->dev_mem_limit)
        op_plan_set_types(p, pr->n_types > 1 ? pr->n_types : 1, pr->type_name,
                          pr->n_types > 1 ? pr->type_layers : pr->layers,
                          pr->n_types > 1 ? pr->dev_type : NULL, pr->dev_mem_limit);
    else if (pr->type_name)
        snprintf(p->type_name[0], sizeof p->type_name[0], "%s", pr->type_name[0]);
}

int op_plan_set_types(op_plan *p, int n_types, const char (*names)[32],
                      const op_layer_cost *type_layers, const int *dev_type,
                      const double *dev_mem_limit) {
    /* the caller's numbers: refused before p changes (this asserted, aborting the caller) */
    if (n_types < 1) return OP_EINVAL;
    for (int d = 0; dev_type && d < p->P; d++)
        if (dev_type[d] < 0 || dev_type[d] >= n_types) return OP_EINVAL;
    size_t L = (size_t)p->n_layers;
    p->n_types = n_types;
    p->type_layers = OP_ARENA_NEW(&p->arena, op_layer_cost, (size_t)n_types * L);
    memcpy(p->type_layers, type_layers, sizeof(op_layer_cost) * (size_t)n_types * L);
    memcpy(p->layers, type_layers, sizeof(op_layer_cost) * L);
    p->type_name = op_arena_alloc(&p->arena, (size_t)32 * (size_t)n_types);
    for (int t = 0; names && t < n_types; t++)
        snprintf(p->type_name[t], sizeof p->type_name[t], "%s", names[t]);
    for (int d = 0; d < p->P; d++) p->dev_type[d] = dev_type ? dev_type[d] : 0;
    p->dev_mem_limit = NULL;
    if (dev_mem_limit) {
        p->dev_mem_limit = OP_ARENA_NEW(&p->arena, double, p->P);
        memcpy(p->dev_mem_limit, dev_mem_limit, sizeof(double) * (size_t)p->P);
    }
    return OP_OK;
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

/* Messages name the limit a user set: one figure when every device has it, else the range, so
 * a mixed cluster's error does not quote a limit only some devices have. */
void op_problem_limit_text(const op_problem *pr, char *buf, size_t n) {
    double lo = op_problem_dev_mem_limit(pr, 0), hi = lo;
    for (int d = 1; d < pr->P; d++) {
        double l = op_problem_dev_mem_limit(pr, d);
        lo = l < lo ? l : lo;
        hi = l > hi ? l : hi;
    }
    char a[32], b[32];
    if (lo == hi) snprintf(buf, n, "%s GiB per device", op_gib_text(lo, a, sizeof a));
    else snprintf(buf, n, "each device's own limit (%s to %s GiB)", op_gib_text(lo, a, sizeof a),
                  op_gib_text(hi, b, sizeof b));
}

void op_plan_free(op_plan *p) {
    op_arena_free(&p->arena);
    memset(p, 0, sizeof *p);
}

int op_plan_set_ops(op_plan *p, int d, const op_op *ops, int n) {
    if (d < 0 || d >= p->P || n < 0 || (n && !ops)) return OP_EINVAL;
    p->ops[d] = OP_ARENA_NEW(&p->arena, op_op, n);
    if (n) memcpy(p->ops[d], ops, sizeof(op_op) * (size_t)n);
    p->n_ops[d] = n;
    return OP_OK;
}

void op_plan_copy(op_plan *dst, const op_plan *src) {
    op_plan_init(dst, src->name, src->layers, src->n_layers, src->P, src->M, src->S, &src->comm);
    memcpy(dst->model, src->model, sizeof dst->model);
    dst->tokens_per_mb = src->tokens_per_mb;
    dst->op_overhead_ms = src->op_overhead_ms;
    dst->mem_limit_bytes = src->mem_limit_bytes;
    dst->tp = src->tp, dst->ep = src->ep, dst->dp = src->dp, dst->zero1 = src->zero1;
    dst->seq = src->seq, dst->mbs = src->mbs;
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
 *    of indivisible layers at once, for the best assignment of layers to devices;
 *  - the pipeline-fill bound (op_lower_bound_fill, plan/bound_fill.c): the work no device can
 *    have done by time t, because microbatches reach a layer only one after another. */
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
    /* no problem, no bound: P = 0 looped forever below (k * P < n_layers) */
    if (!layers || n_layers < 1 || P < 1 || M < 1) return 0;
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
    best = fmax(best, op_lower_bound_fill(layers, n_layers, P, M));
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

/* The numbers the simulator sums.  A plan filled by the caller (op_plan_init) has been through
 * neither op_problem_validate nor the plan reader: NaN links or times replayed to NaN op times
 * with OP_OK, a zero bandwidth aborted in op_comm_ms and byte figures overflowed stage sums. */
static int plan_numbers_validate(const op_plan *p, op_err *err) {
    int T = p->n_types > 1 ? p->n_types : 1;
    if (p->n_types > 1 && (!p->type_layers || !p->dev_type))
        return op_errf(err, OP_EINVAL, "%d device types without their costs or each device's type",
                       p->n_types);
    for (int d = 0; d < p->P && p->dev_type; d++)
        if (p->dev_type[d] < 0 || p->dev_type[d] >= T)
            return op_errf(err, OP_EINVAL, "device %d: type %d is not in 0..%d", d, p->dev_type[d], T - 1);
    for (int t = 0; t < T; t++) {
        const op_layer_cost *row = p->n_types > 1 ? p->type_layers + (size_t)t * p->n_layers : p->layers;
        char what[48];
        snprintf(what, sizeof what, "layers of device type %d", t);
        int rc = op_layer_costs_validate(row, p->n_layers, p->M, what, err);
        if (rc) return rc;
    }
    int rc = op_comm_validate(&p->comm, p->P, err);
    if (rc) return rc;
    if ((rc = pc_overhead_validate(p->op_overhead_ms, err))) return rc;
    /* as a problem's (op_problem_validate): a plan file of 1e308 tokens was read and simulated
     * to infinite tokens/s */
    if ((rc = pc_tokens_validate(p->tokens_per_mb, err))) return rc;
    for (int d = 0; d < p->P; d++)
        if (!(op_plan_dev_mem_limit(p, d) >= 0 && isfinite(op_plan_dev_mem_limit(p, d))))
            return op_errf(err, OP_EINVAL, "device %d: memory limit %.6g bytes must be finite and >= 0 "
                           "(0 = none)", d, op_plan_dev_mem_limit(p, d));
    /* (an offloading stage without a host link is the simulator's refusal, not the plan's: the
     * executor takes its copy engine's link from its own options) */
    for (int s = 0; s < p->S; s++)
        if (p->stage_act[s] >= OP_ACT_N)
            return op_errf(err, OP_EINVAL, "stage %d: unknown activation policy %d", s, p->stage_act[s]);
    return OP_OK;
}

int op_plan_ops_in_range(const op_plan *p, int d) {
    if (op_plan_validate_layout(p, NULL) != OP_OK || d >= p->P) return 0;
    for (int e = d < 0 ? 0 : d; e < (d < 0 ? p->P : d + 1); e++) {
        if (p->n_ops[e] < 0) return 0;
        for (int i = 0; i < p->n_ops[e]; i++) {
            const op_op *o = &p->ops[e][i];
            if (o->kind > OP_B || o->stage < 0 || o->stage >= p->S || p->stage_dev[o->stage] != e ||
                o->mb < 0 || o->mb >= p->M)
                return 0;
        }
    }
    return 1;
}

int op_plan_validate_numbers(const op_plan *p, op_err *err) {
    int rc = op_plan_validate_layout(p, err);
    return rc != OP_OK ? rc : plan_numbers_validate(p, err);
}

int op_plan_validate(const op_plan *p, op_err *err) {
    int lrc = op_plan_validate_numbers(p, err);
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
