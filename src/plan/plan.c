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
    p->tokens_per_mb = 0;
    p->layers = OP_ARENA_NEW(&p->arena, op_layer_cost, n_layers);
    memcpy(p->layers, layers, sizeof(op_layer_cost) * (size_t)n_layers);
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
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
        const op_layer_cost *c = &p->layers[l];
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
    if (l > 0) return p->layers[l - 1].out_bytes;
    if (!(p->tokens_per_mb > 0)) return p->layers[0].out_bytes; /* no token count: the old rule */
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
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++)
        b += op_layer_sel_bytes(&p->layers[l]);
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
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++)
        t += op_layer_recompute_ms(&p->layers[l], pol);
    return t;
}

double op_stage_copy_ms(const op_plan *p, int s) {
    if (stage_policy(p, s) != OP_ACT_OFFLOAD) return 0;
    return op_comm_host_ms(&p->comm, op_stage_act_bytes(p, s));
}

int64_t op_stage_out_bytes(const op_plan *p, int s) {
    return p->layers[p->stage_first[s + 1] - 1].out_bytes;
}

int64_t op_stage_act_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += p->layers[l].act_bytes;
    return b;
}

int64_t op_stage_act_w_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += p->layers[l].act_w_bytes;
    return b;
}

int64_t op_stage_act_i_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += p->layers[l].act_i_bytes;
    return b;
}

int64_t op_stage_static_bytes(const op_plan *p, int s) {
    int64_t b = 0;
    for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) b += p->layers[l].static_bytes;
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
 *    the (kP+1)-th: the classic bound for indivisible jobs on P machines. */
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
    double *w = op_xmalloc(sizeof(double) * (size_t)n_layers);
    for (int l = 0; l < n_layers; l++) w[l] = layers[l].f_ms + layers[l].i_ms + layers[l].w_ms;
    qsort(w, (size_t)n_layers, sizeof(double), cmp_desc);
    for (long k = 1; k * P < n_layers; k++) best = fmax(best, (double)(k + 1) * M * w[k * P]);
    free(w);
    return best;
}

double op_plan_lower_bound(const op_plan *p) {
    return op_lower_bound(p->layers, p->n_layers, p->P, p->M);
}

typedef struct { double ratio, bytes; } save_item;

static int cmp_ratio(const void *a, const void *b) {
    double x = ((const save_item *)a)->ratio, y = ((const save_item *)b)->ratio;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Why it holds.  Take any plan under the limit and any microbatch m.  When the I (or B) of
 * the last layer for m starts, every F of m has ended and no other I of m has started, so
 * every layer's stash for m is held: keep act_bytes, selective act_sel_bytes, full at least 0
 * (the stage input), offload act_bytes on the device or on the host.  Adding static bytes,
 *   static + sum_l stash_l <= P * limit + (host bytes offloaded at that moment).
 * So the recompute policies must save need = static + act - P * limit - host capacity bytes
 * for m.  Saving x_l bytes of layer l costs at least r_l * x_l ms of extra compute, with r_l
 * the cheaper rate of selective (f_sel / (act - sel)) and full (f / act); the fractional
 * greedy by rate gives the least total R over all assignments (a relaxation, so a bound).
 * Every microbatch pays R, all of it inside I ops: total work grows by M * R (spread over P
 * devices at best) and microbatch m's own F-I chain by R. */
double op_lower_bound_mem(const op_layer_cost *layers, int n_layers, int P, int M,
                          double mem_limit_bytes, const op_comm *comm) {
    double base = op_lower_bound(layers, n_layers, P, M);
    if (!(mem_limit_bytes > 0)) return base;
    double stat = 0, act = 0, work = 0, chain = 0;
    save_item *it = op_xmalloc(sizeof *it * (size_t)n_layers);
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        const op_layer_cost *c = &layers[l];
        stat += (double)c->static_bytes;
        act += (double)c->act_bytes;
        work += c->f_ms + c->i_ms + c->w_ms;
        chain += c->f_ms + c->i_ms;
        if (c->act_bytes <= 0) continue;
        double r = c->f_ms / (double)c->act_bytes;
        int64_t sel = op_layer_sel_bytes(c);
        if (sel < c->act_bytes && c->f_sel_ms >= 0) {
            double rs = c->f_sel_ms / (double)(c->act_bytes - sel);
            if (rs < r) r = rs;
        }
        it[n++] = (save_item){r, (double)c->act_bytes};
    }
    double cap = (double)P * mem_limit_bytes;
    if (stat > cap) {
        free(it);
        return INFINITY;
    }
    if (comm && comm->host_bw_GBps > 0) {
        if (!(comm->host_mem_bytes > 0)) { /* unlimited host memory: offload saves it all */
            free(it);
            return base;
        }
        cap += (double)P * comm->host_mem_bytes;
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
    return fmax(base, fmax((work + R) * M / P, chain + R));
}

double op_plan_lower_bound_mem(const op_plan *p) {
    return op_lower_bound_mem(p->layers, p->n_layers, p->P, p->M, p->mem_limit_bytes, &p->comm);
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
