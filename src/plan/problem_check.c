/* problem_check.c: op_problem_validate, the one place that says whether a planning problem is
 * one the schedulers, the tuner and the simulator can take.  Every entry point that starts from
 * an op_problem (op_sched_build, op_tune, the CLI) calls it first, so a bad input is refused
 * with one message instead of reaching an internal assertion (a zero link bandwidth in
 * op_comm_ms, a balanced split whose sums overflowed, a tuner whose makespan is 0). */
#include <math.h>
#include <stdio.h>

#include "octopipe/plan.h"
#include "plan/check_int.h"

/* Per-device memory is a sum over held layers and in-flight microbatches of int64 byte figures;
 * keeping the sum for all layers and all microbatches below 2^62 keeps every partial sum exact
 * and far from overflow. */
#define MEM_SUM_MAX 4611686018427387904.0 /* 2^62 */

/* Tokens in one microbatch: a count, exact in a double up to 2^53; bounded, tokens/s (tokens x
 * M / makespan) stays finite. */
#define TOKENS_MAX 9007199254740992.0 /* 2^53 */

int op_layer_costs_validate(const op_layer_cost *L, int n, int M, const char *what, op_err *err) {
    if (!L || n < 1) return op_errf(err, OP_EINVAL, "%s: no layers", what);
    double mem = 0;
    for (int l = 0; l < n; l++) {
        const op_layer_cost *c = &L[l];
        const double ms[3] = {c->f_ms, c->i_ms, c->w_ms};
        for (int k = 0; k < 3; k++)
            if (!(ms[k] >= 0 && ms[k] <= OP_MAX_MS))
                return op_errf(err, OP_EINVAL, "%s: layer %d '%s': %s time %.6g ms is not in [0, %g]",
                               what, l, c->name, op_kind_name((op_kind)k), ms[k], OP_MAX_MS);
        /* selective recomputation's figures (cost.h) reach I's time and the stash: a NaN or
         * negative core time gave NaN or negative op times under selective, and a stash
         * beyond 2^53 bytes was refused only when its plan was read back */
        if (!(c->f_sel_ms >= 0 && c->f_sel_ms <= OP_MAX_MS))
            return op_errf(err, OP_EINVAL, "%s: layer %d '%s': attention core time (f_sel_ms) %.6g ms "
                           "is not in [0, %g]", what, l, c->name, c->f_sel_ms, OP_MAX_MS);
        if ((double)c->act_sel_bytes > OP_MAX_BYTES)
            return op_errf(err, OP_EINVAL, "%s: layer %d '%s': act_sel_bytes %lld is beyond 2^53", what,
                           l, c->name, (long long)c->act_sel_bytes);
        const int64_t by[6] = {c->out_bytes,   c->act_bytes,   c->act_w_bytes,
                               c->act_i_bytes, c->param_bytes, c->static_bytes};
        static const char *const by_name[6] = {"out_bytes",   "act_bytes",   "act_w_bytes",
                                               "act_i_bytes", "param_bytes", "static_bytes"};
        for (int k = 0; k < 6; k++)
            if (by[k] < 0 || (double)by[k] > OP_MAX_BYTES)
                return op_errf(err, OP_EINVAL, "%s: layer %d '%s': %s %lld is not in [0, 2^53]", what,
                               l, c->name, by_name[k], (long long)by[k]);
        mem += (double)c->static_bytes +
               (double)M * ((double)c->act_bytes + (double)c->act_w_bytes + (double)c->act_i_bytes);
    }
    if (mem > MEM_SUM_MAX)
        return op_errf(err, OP_EINVAL, "%s: %d microbatches of these layers hold %.3g bytes, beyond what "
                       "any device (or a 64-bit count) holds", what, M, mem);
    return OP_OK;
}

static int check_link(const char *name, double lat, double bw, op_err *err) {
    if (!(lat >= 0 && lat <= OP_MAX_MS))
        return op_errf(err, OP_EINVAL, "links: %s latency %.6g ms is not in [0, %g]", name, lat, OP_MAX_MS);
    if (!(bw >= OP_MIN_GBPS && isfinite(bw)))
        return op_errf(err, OP_EINVAL, "links: %s bandwidth %.6g GB/s must be at least %g (1 kB/s; for "
                       "free links set comm.none, --comm none)", name, bw, OP_MIN_GBPS);
    return OP_OK;
}

int op_comm_validate(const op_comm *c, int P, op_err *err) {
    /* per-device host links (offload; independent of none) */
    if (c->host_n != 0 && (c->host_n != P || !c->host_bw_dev_GBps))
        return op_errf(err, OP_EINVAL, "links: %d per-device host links but there are %d devices", c->host_n, P);
    for (int d = 0; d < c->host_n; d++)
        if (!(c->host_bw_dev_GBps[d] >= OP_MIN_GBPS && isfinite(c->host_bw_dev_GBps[d])))
            return op_errf(err, OP_EINVAL, "links: device %d's host link %.6g GB/s must be at least %g "
                           "(1 kB/s)", d, c->host_bw_dev_GBps[d], OP_MIN_GBPS);
    /* the shared host link: <= 0 means no offload; a positive one is a link like the others.
     * NaN or -inf passed as "no link" and made plans that no file can hold */
    if (!isfinite(c->host_bw_GBps) || (c->host_bw_GBps > 0 && c->host_bw_GBps < OP_MIN_GBPS))
        return op_errf(err, OP_EINVAL, "links: host link %.6g GB/s must be at least %g (1 kB/s), or 0 "
                       "for none", c->host_bw_GBps, OP_MIN_GBPS);
    /* the host budget is a byte count like the layers' (and the executor converts it to an
     * int64): a negative, NaN or infinite one was taken as it came */
    if (!(c->host_mem_bytes >= 0 && c->host_mem_bytes <= OP_MAX_BYTES))
        return op_errf(err, OP_EINVAL, "links: host memory %.6g bytes per device is not in [0, 2^53] "
                       "(0 = no limit)", c->host_mem_bytes);
    if (!(c->host_lat_ms >= 0 && c->host_lat_ms <= OP_MAX_MS))
        return op_errf(err, OP_EINVAL, "links: host link latency %.6g ms is not in [0, %g]",
                       c->host_lat_ms, OP_MAX_MS);
    int rc;
    if (c->nodes_of < 0) return op_errf(err, OP_EINVAL, "links: nodes_of %d must be >= 0", c->nodes_of);
    /* a plan records every link figure, used or not (free links, one device, one node): each
     * must be a number its file can hold, or the plan could not be written */
    const double fig[4] = {c->intra_lat_ms, c->intra_bw_GBps, c->inter_lat_ms, c->inter_bw_GBps};
    static const char *const fig_name[4] = {"intra-node latency", "intra-node bandwidth",
                                            "inter-node latency", "inter-node bandwidth"};
    for (int k = 0; k < 4; k++)
        if (!(fig[k] >= 0 && isfinite(fig[k])))
            return op_errf(err, OP_EINVAL, "links: %s %.6g must be finite and >= 0, even where no "
                           "device pair uses it", fig_name[k], fig[k]);
    if (c->pair_n != 0) {
        /* per-pair links: a P x P matrix, every pair a link op_comm_ms can use, the diagonal
         * (no transfer) at least numbers */
        if (c->pair_n != P || !c->pair_lat_ms || !c->pair_bw_GBps)
            return op_errf(err, OP_EINVAL, "links: the per-pair matrix is %d x %d but there are %d devices",
                           c->pair_n, c->pair_n, P);
        for (int a = 0; a < P; a++)
            for (int b = 0; b < P; b++) {
                size_t k = (size_t)a * (size_t)P + (size_t)b;
                char name[48];
                snprintf(name, sizeof name, "pair %d -> %d", a, b);
                if (a != b && (rc = check_link(name, c->pair_lat_ms[k], c->pair_bw_GBps[k], err))) return rc;
                if (a == b && !(c->pair_lat_ms[k] >= 0 && c->pair_lat_ms[k] <= OP_MAX_MS &&
                                c->pair_bw_GBps[k] >= 0 && isfinite(c->pair_bw_GBps[k])))
                    return op_errf(err, OP_EINVAL, "links: %s (the device itself) latency %.6g ms and "
                                   "bandwidth %.6g GB/s must be finite and >= 0", name,
                                   c->pair_lat_ms[k], c->pair_bw_GBps[k]);
            }
    }
    if (c->none) return OP_OK;
    if (P > 1 && (rc = check_link("intra-node", c->intra_lat_ms, c->intra_bw_GBps, err))) return rc;
    if (c->nodes_of > 0 && P > c->nodes_of &&
        (rc = check_link("inter-node", c->inter_lat_ms, c->inter_bw_GBps, err)))
        return rc;
    return OP_OK;
}

/* Device types (mixed clusters): every device's type exists, every type's costs are valid and
 * row 0 is `layers` (which readers that know one cost row use), per-device limits are sane. */
/* 1 when no op of these layers takes any time: every F, I and W 0 and no per-op overhead */
static int takes_no_time(const op_layer_cost *L, int n, double overhead_ms) {
    double work = 0;
    for (int l = 0; l < n; l++) work += L[l].f_ms + L[l].i_ms + L[l].w_ms;
    return !(work > 0) && !(overhead_ms > 0);
}

static int types_validate(const op_problem *pr, const char *what, op_err *err) {
    if (pr->dev_mem_limit)
        for (int d = 0; d < pr->P; d++)
            if (!(pr->dev_mem_limit[d] >= 0 && isfinite(pr->dev_mem_limit[d])))
                return op_errf(err, OP_EINVAL, "device %d: memory limit %.6g bytes must be finite and "
                               ">= 0 (0 = none)", d, pr->dev_mem_limit[d]);
    if (pr->n_types <= 1) return OP_OK;
    if (pr->n_types > 64 || !pr->type_layers || !pr->dev_type)
        return op_errf(err, OP_EINVAL, "%s: %d device types need 1 to 64 types with their costs "
                       "(type_layers) and each device's type (dev_type)", what, pr->n_types);
    for (int d = 0; d < pr->P; d++)
        if (pr->dev_type[d] < 0 || pr->dev_type[d] >= pr->n_types)
            return op_errf(err, OP_EINVAL, "device %d: type %d is not in 0..%d", d, pr->dev_type[d],
                           pr->n_types - 1);
    for (int l = 0; l < pr->n_layers; l++) {
        const op_layer_cost *a = &pr->layers[l], *b = &pr->type_layers[l];
        if (a->f_ms != b->f_ms || a->i_ms != b->i_ms || a->w_ms != b->w_ms ||
            a->act_bytes != b->act_bytes || a->static_bytes != b->static_bytes)
            return op_errf(err, OP_EINVAL, "%s: layer %d: type 0's costs (type_layers row 0) differ "
                           "from layers", what, l);
    }
    for (int t = 0; t < pr->n_types; t++) {
        char tw[160];
        snprintf(tw, sizeof tw, "%s on device type %d (%s)", what, t,
                 pr->type_name ? pr->type_name[t] : "unnamed");
        const op_layer_cost *row = pr->type_layers + (size_t)t * pr->n_layers;
        /* row 0 too: it was compared with layers on five fields only, and its others (out_bytes,
         * f_sel_ms, ...) reached the baselines unchecked, which took the refusal for a bug */
        int rc = op_layer_costs_validate(row, pr->n_layers, pr->M, tw, err);
        if (rc) return rc;
        /* a type that takes no time (a profile's by_gpu times all 0) makes the bound 0 and
         * every gap 0%, and the tuner, which puts the fastest type first, refused the problem
         * as having nothing to schedule: refuse it here, whichever type it is */
        if (takes_no_time(row, pr->n_layers, pr->op_overhead_ms))
            return op_errf(err, OP_EINVAL, "%s: every layer's forward, backward and weight time is 0: "
                           "nothing to schedule on those devices", tw);
    }
    return OP_OK;
}

int pc_overhead_validate(double op_overhead_ms, op_err *err) {
    if (!(op_overhead_ms >= 0 && op_overhead_ms <= OP_MAX_MS))
        return op_errf(err, OP_EINVAL, "per-op overhead %.6g ms is not in [0, %g]", op_overhead_ms,
                       OP_MAX_MS);
    return OP_OK;
}

int pc_tokens_validate(double tokens_per_mb, op_err *err) {
    /* a finite 1e308 made tokens/s infinite, and the plan unwritable */
    if (!(tokens_per_mb >= 0 && tokens_per_mb <= TOKENS_MAX))
        return op_errf(err, OP_EINVAL, "tokens per microbatch %.6g is not in [0, 2^53]", tokens_per_mb);
    return OP_OK;
}

int op_problem_validate(const op_problem *pr, op_err *err) {
    if (!pr) return op_errf(err, OP_EINVAL, "no problem given");
    const char *what = pr->model && pr->model[0] ? pr->model : "model";
    if (!pr->layers || pr->n_layers < 1) return op_errf(err, OP_EINVAL, "%s: no layers", what);
    if (pr->P < 1) return op_errf(err, OP_EINVAL, "devices must be >= 1 (got %d)", pr->P);
    if (pr->M < 1) return op_errf(err, OP_EINVAL, "microbatches must be >= 1 (got %d)", pr->M);
    /* every device holds at least one layer in every schedule OctoPipe builds */
    if (pr->n_layers < pr->P)
        return op_errf(err, OP_EINVAL, "%s: %d layers cannot fill %d devices (each device needs at "
                       "least one layer)", what, pr->n_layers, pr->P);
    /* every plan of it holds at least P x M ops per kind: beyond a plan file's limit the
     * schedulers would fill many GB (2000 devices x 65536 microbatches: 14 GB in 40 s and
     * growing) for plans no file may hold */
    if ((int64_t)pr->P * pr->M > OP_PLAN_MAX_STAGE_MB)
        return op_errf(err, OP_EINVAL, "%d devices x %d microbatches is more ops than a plan may hold "
                       "(64 Mi per kind, a stage at least per device): use fewer microbatches",
                       pr->P, pr->M);
    int rc = op_layer_costs_validate(pr->layers, pr->n_layers, pr->M, what, err);
    if (rc) return rc;
    if ((rc = pc_overhead_validate(pr->op_overhead_ms, err))) return rc;
    /* as for profile times: a denormal overhead on a profile of zeros passed "nothing to
     * schedule" and printed makespans of 0.00 ms at hundreds of millions of tokens/s */
    if (pr->op_overhead_ms > 0 && pr->op_overhead_ms < OP_MIN_MS)
        return op_errf(err, OP_EINVAL, "per-op overhead %.6g ms is neither 0 nor at least %g ms",
                       pr->op_overhead_ms, OP_MIN_MS);
    /* with no time anywhere every schedule has makespan 0 and nothing can be compared (device
     * types are checked one by one in types_validate, which names the type) */
    if (pr->n_types <= 1 && takes_no_time(pr->layers, pr->n_layers, pr->op_overhead_ms))
        return op_errf(err, OP_EINVAL, "%s: every layer's forward, backward and weight time is 0: "
                       "nothing to schedule", what);
    if ((rc = pc_tokens_validate(pr->tokens_per_mb, err))) return rc;
    if (!(pr->mem_limit_bytes >= 0 && isfinite(pr->mem_limit_bytes)))
        return op_errf(err, OP_EINVAL, "memory limit %.6g bytes must be finite and >= 0 (0 = none)",
                       pr->mem_limit_bytes);
    if ((rc = types_validate(pr, what, err))) return rc;
    return op_comm_validate(&pr->comm, pr->P, err);
}
