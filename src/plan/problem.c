/* problem.c: model + GPU + devices + microbatches + options -> op_problem (see problem.h). */
#include "octopipe/problem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/cluster.h"

void op_problem_opts_default(op_problem_opts *o) {
    memset(o, 0, sizeof *o);
    op_train_cfg_default(&o->train);
    o->nodes_of = 8;
}

int op_problem_from_model(op_problem *pr, const op_model *m, const op_device *dev, int P, int M,
                          const op_problem_opts *o, op_layer_cost *costs, op_err *err) {
    op_problem_opts def;
    if (!o) {
        op_problem_opts_default(&def);
        o = &def;
    }
    memset(pr, 0, sizeof *pr);
    if (m->n_layers < 1) return op_errf(err, OP_EINVAL, "model %s has no layers", m->name);
    if (P < 1) return op_errf(err, OP_EINVAL, "devices must be at least 1, got %d", P);
    if (M < 1) return op_errf(err, OP_EINVAL, "microbatches must be at least 1, got %d", M);
    if (!(o->op_overhead_ms >= 0) || !isfinite(o->op_overhead_ms))
        return op_errf(err, OP_EINVAL, "op overhead must be a finite number >= 0 ms");
    if (isnan(o->mem_limit_bytes) || isinf(o->mem_limit_bytes))
        return op_errf(err, OP_EINVAL, "memory limit must be a finite number of bytes");
    int rc = op_cost_layers(m, &o->train, dev, costs, err);
    if (rc != OP_OK) return rc;
    pr->model = m->name;
    pr->layers = costs;
    pr->n_layers = m->n_layers;
    pr->P = P;
    pr->M = M;
    pr->tokens_per_mb = (double)o->train.seq * o->train.mbs;
    pr->op_overhead_ms = o->op_overhead_ms;
    if (o->comm_none) {
        pr->comm.none = 1;
    } else if (o->cluster_file) {
        if ((rc = op_cluster_read(o->cluster_file, &pr->comm, err)) != OP_OK) return rc;
    } else {
        op_comm_default(&pr->comm, o->nodes_of);
    }
    /* the host link (offload) is the GPU's own, whatever links the devices have between them */
    if (!(pr->comm.host_bw_GBps > 0)) pr->comm.host_lat_ms = 0.010;
    op_comm_set_host(&pr->comm, dev);
    if (o->mem_limit_bytes < 0) pr->mem_limit_bytes = 0;
    else if (o->mem_limit_bytes > 0) pr->mem_limit_bytes = o->mem_limit_bytes;
    else pr->mem_limit_bytes = OP_MEM_HEADROOM * dev->mem_GiB * 1073741824.0;
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
    rc = op_problem_from_model(&b->pr, &b->model, &b->dev, P, M, o, b->costs, err);
    if (rc != OP_OK) op_problem_built_free(b);
    return rc;
}

void op_problem_built_free(op_problem_built *b) {
    free(b->costs);
    op_model_free(&b->model);
    memset(b, 0, sizeof *b);
}
