/* problem.c: model + GPU + devices + microbatches + options -> op_problem (see problem.h). */
#include "octopipe/problem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

void op_problem_opts_default(op_problem_opts *o) {
    memset(o, 0, sizeof *o);
    op_train_cfg_default(&o->train);
    o->nodes_of = 8;
}

/* The devices of the cluster: o->cluster_file's (links, maybe devices and per-pair links) and
 * o->gpus.  cl is zeroed here; describes no devices when neither lists them. */
static int describe(const op_problem_opts *o, op_cluster *cl, op_err *err) {
    memset(cl, 0, sizeof *cl);
    int rc;
    /* read even with comm_none: its devices still count, and a broken file is an error */
    if (o->cluster_file && (rc = op_cluster_load(o->cluster_file, cl, err))) return rc;
    if (o->gpus) {
        if (cl->P > 0)
            return op_errf(err, OP_EINVAL, "--gpus %s: the cluster file %s lists its devices already: "
                           "give them once", o->gpus, o->cluster_file);
        if ((rc = op_cluster_parse_gpus(o->gpus, cl, err))) return op_err_prefix(err, "--gpus");
    }
    return OP_OK;
}

/* A profile's measured times are for one GPU, `measured_on` (--gpu), unless it measured type
 * `to` too (by_gpu: row has those already): on `to` they become the times on measured_on
 * scaled per layer kind by the analytic ratio of the two presets (op_cost_kind_ratio).  Layers
 * the cost model derived are left alone. */
static void scale_measured(const op_model *m, const op_train_cfg *t, const op_device *to,
                           const op_device *measured_on, op_layer_cost *row) {
    if (op_model_gpu_ms(m, to->name)) return;
    op_layer_cost *base = NULL; /* measured_on's own by_gpu times, when the profile has them */
    op_err e = {0};
    if (op_model_gpu_ms(m, measured_on->name)) {
        base = op_xcalloc((size_t)m->n_layers, sizeof *base);
        if (op_cost_layers(m, t, measured_on, base, &e) != OP_OK) free(base), base = NULL;
    }
    double r[OP_LAYER_KIND_COUNT][3];
    int have[OP_LAYER_KIND_COUNT] = {0};
    for (int l = 0; l < m->n_layers; l++) {
        const op_layer *ly = &m->layers[l];
        if (!ly->has_measured) continue;
        int k = (int)ly->kind;
        if (!have[k]) op_cost_kind_ratio(k, t, to, measured_on, r[k]), have[k] = 1;
        const op_layer_cost *src = base ? &base[l] : &row[l];
        row[l].f_ms = src->f_ms * r[k][0], row[l].i_ms = src->i_ms * r[k][1];
        row[l].w_ms = src->w_ms * r[k][2], row[l].f_sel_ms = src->f_sel_ms * r[k][0];
    }
    free(base);
}

int op_problem_profile_scaled(const op_problem *pr, const op_model *m) {
    if (pr->n_types <= 1) return 0;
    int measured = 0, all_typed = 1;
    for (int l = 0; l < m->n_layers; l++) measured |= m->layers[l].has_measured;
    for (int t = 0; t < pr->n_types; t++) all_typed &= pr->type_name && op_model_gpu_ms(m, pr->type_name[t]) != NULL;
    return measured && !all_typed;
}

/* Per-type costs, names and per-device limits of a described cluster (stored in cl). */
static int fill_types(op_problem *pr, const op_model *m, const op_device *measured_on,
                      const op_problem_opts *o, op_cluster *cl, op_layer_cost *costs, op_err *err) {
    const int L = m->n_layers, T = cl->n_types, P = pr->P;
    cl->type_layers = OP_ARENA_NEW(&cl->arena, op_layer_cost, (size_t)T * (size_t)L);
    cl->type_name = op_arena_alloc(&cl->arena, (size_t)T * 32);
    for (int t = 0; t < T; t++) {
        op_layer_cost *row = cl->type_layers + (size_t)t * L;
        int rc = op_cost_layers(m, &o->train, &cl->type_dev[t], row, err);
        if (rc) return rc;
        scale_measured(m, &o->train, &cl->type_dev[t], measured_on, row);
        snprintf(cl->type_name[t], 32, "%s", cl->type_dev[t].name);
    }
    memcpy(costs, cl->type_layers, sizeof *costs * (size_t)L); /* row 0 = device 0's type */
    op_comm_set_host_devs(&pr->comm, cl->type_dev, cl->dev_type, P, OP_ARENA_NEW(&cl->arena, double, P));
    pr->n_types = T;
    pr->type_layers = cl->type_layers;
    pr->dev_type = cl->dev_type;
    pr->type_name = (const char(*)[32])cl->type_name;
    /* each device OP_MEM_HEADROOM x its own memory; pr->mem_limit_bytes the smallest, for code
     * that knows one limit only (a plan fitting it fits every device) */
    if (o->mem_limit_bytes != 0) return OP_OK; /* set by the caller: the same on every device */
    cl->dev_mem_limit = OP_ARENA_NEW(&cl->arena, double, P);
    int same = 1;
    for (int d = 0; d < P; d++) {
        cl->dev_mem_limit[d] = OP_MEM_HEADROOM * cl->dev_mem_GiB[d] * 1073741824.0;
        same &= cl->dev_mem_limit[d] == cl->dev_mem_limit[0];
        if (d == 0 || cl->dev_mem_limit[d] < pr->mem_limit_bytes) pr->mem_limit_bytes = cl->dev_mem_limit[d];
    }
    if (!same) pr->dev_mem_limit = cl->dev_mem_limit;
    return OP_OK;
}

int op_problem_from_model(op_problem *pr, const op_model *m, const op_device *dev, int P, int M,
                          const op_problem_opts *o, op_layer_cost *costs, op_err *err) {
    op_problem_opts def;
    if (!o) {
        op_problem_opts_default(&def);
        o = &def;
    }
    /* a profile that says the batch its times were measured at is costed at that batch */
    op_problem_opts at_batch;
    if (m->measured_seq > 0 && m->measured_mbs > 0 &&
        (o->train.seq != m->measured_seq || o->train.mbs != m->measured_mbs)) {
        at_batch = *o;
        at_batch.train.seq = m->measured_seq, at_batch.train.mbs = m->measured_mbs;
        o = &at_batch;
    }
    memset(pr, 0, sizeof *pr);
    if (m->n_layers < 1) return op_errf(err, OP_EINVAL, "model %s has no layers", m->name);
    if (P < 1) return op_errf(err, OP_EINVAL, "devices must be at least 1, got %d", P);
    if (M < 1) return op_errf(err, OP_EINVAL, "microbatches must be at least 1, got %d", M);
    if (!(o->op_overhead_ms >= 0) || !isfinite(o->op_overhead_ms))
        return op_errf(err, OP_EINVAL, "op overhead must be a finite number >= 0 ms");
    if (isnan(o->mem_limit_bytes) || isinf(o->mem_limit_bytes))
        return op_errf(err, OP_EINVAL, "memory limit must be a finite number of bytes");
    op_cluster tmp, *cl = o->cluster ? o->cluster : &tmp;
    int rc = describe(o, cl, err);
    if (rc == OP_OK && !o->cluster && (cl->P > 0 || cl->comm.pair_n > 0))
        rc = op_errf(err, OP_EINVAL, "a cluster of listed devices needs op_problem_opts.cluster (storage "
                     "for its per-type costs; op_problem_build provides it)");
    if (rc == OP_OK && cl->P > 0 && cl->P != P)
        rc = op_errf(err, OP_EINVAL, "%s lists %d devices but --devices is %d: the counts must add up",
                     o->gpus ? "--gpus" : o->cluster_file, cl->P, P);
    if (rc == OP_OK && cl->comm.pair_n > 0 && cl->comm.pair_n != P)
        rc = op_errf(err, OP_EINVAL, "%s: pair_lat_ms/pair_bw_GBps are %d x %d but there are %d devices",
                     o->cluster_file, cl->comm.pair_n, cl->comm.pair_n, P);
    if (rc) {
        op_cluster_free(cl);
        return rc;
    }
    /* the host link: one for all first (the slowest type's); fill_types gives each device its own */
    const op_device *host = dev, *measured_on = dev;
    if (cl->P > 0) {
        dev = host = &cl->type_dev[0];
        for (int t = 1; t < cl->n_types; t++)
            if (cl->type_dev[t].host_bw_GBps < host->host_bw_GBps) host = &cl->type_dev[t];
    }
    if ((rc = op_cost_layers(m, &o->train, dev, costs, err)) != OP_OK) {
        if (cl == &tmp) op_cluster_free(&tmp);
        return rc;
    }
    pr->model = m->name;
    pr->layers = costs;
    pr->n_layers = m->n_layers;
    pr->P = P;
    pr->M = M;
    pr->tokens_per_mb = (double)o->train.seq * o->train.mbs;
    pr->tp = o->train.tp, pr->ep = o->train.ep;
    pr->dp = o->train.dp, pr->zero1 = o->train.zero1;
    /* the batch the costs assume: not where every layer's times are a profile's measurements
     * and the profile does not say the batch they were measured at */
    int measured = 1;
    for (int i = 0; i < m->n_layers; i++) measured &= m->layers[i].has_measured != 0;
    if (!measured || m->measured_seq > 0) pr->seq = o->train.seq, pr->mbs = o->train.mbs;
    pr->op_overhead_ms = o->op_overhead_ms;
    if (o->comm_none) pr->comm.none = 1;
    else if (cl->has_links) pr->comm = cl->comm;
    else op_comm_default(&pr->comm, o->nodes_of);
    /* the host link (offload) is the GPU's own, whatever links the devices have between them */
    if (!(pr->comm.host_bw_GBps > 0)) pr->comm.host_lat_ms = 0.010;
    op_comm_set_host(&pr->comm, host);
    if (o->mem_limit_bytes < 0) pr->mem_limit_bytes = 0;
    else if (o->mem_limit_bytes > 0) pr->mem_limit_bytes = o->mem_limit_bytes;
    else pr->mem_limit_bytes = OP_MEM_HEADROOM * dev->mem_GiB * 1073741824.0;
    if (cl->P > 0 && (rc = fill_types(pr, m, measured_on, o, cl, costs, err))) return rc;
    if (cl == &tmp) op_cluster_free(&tmp); /* links only: copied into pr->comm */
    return op_problem_validate(pr, err);
}

int op_problem_build(op_problem_built *b, const char *model, const char *gpu, int P, int M,
                     const op_problem_opts *o, op_err *err) {
    memset(b, 0, sizeof *b);
    if (!model) return op_errf(err, OP_EINVAL, "no model given");
    int rc = op_device_preset(gpu ? gpu : "h100-80gb", &b->dev, err);
    if (rc != OP_OK) return rc;
    if ((rc = op_model_load(model, &b->model, err)) != OP_OK) return rc;
    if (b->model.n_layers >= 1) b->costs = op_xcalloc((size_t)b->model.n_layers, sizeof *b->costs);
    op_problem_opts oo;
    if (o) oo = *o;
    else op_problem_opts_default(&oo);
    oo.cluster = &b->cluster;
    rc = op_problem_from_model(&b->pr, &b->model, &b->dev, P, M, &oo, b->costs, err);
    if (rc != OP_OK) op_problem_built_free(b);
    return rc;
}

void op_problem_built_free(op_problem_built *b) {
    free(b->costs);
    op_model_free(&b->model);
    op_cluster_free(&b->cluster);
    memset(b, 0, sizeof *b);
}
