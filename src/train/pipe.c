/* pipe.c: the reference model as the executor's compute.  Each op of a plan maps onto one
 * stage call (F, I, W, or B = I then W); the rank holding a stage builds it at its first setup
 * and keeps it across iterations, so weights and AdamW state persist between executor runs.
 * Data is regenerated from (seed, step, mb) by the ranks that need it (first stage: tokens,
 * last stage: targets), so no batch crosses ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/train.h"

int op_train_pipe_init(op_train_pipe *tp, const char *model, const char *data, uint64_t seed,
                       const op_adamw *opt, const op_plan *plan, op_err *err) {
    memset(tp, 0, sizeof *tp);
    int rc = op_nn_model_from_spec(&tp->m, model, err);
    if (rc) return rc;
    tp->m.cfg.seed = seed;
    if (plan->n_layers != tp->m.n_layers)
        return op_errf(err, OP_EINVAL, "plan has %d layers, model %s has %d (%s)", plan->n_layers,
                       tp->m.name, tp->m.n_layers, tp->m.pattern);
    rc = op_train_data_open(&tp->data, data, &tp->m.cfg, seed, err);
    if (rc) return rc;
    if (opt && opt->lr > 0) tp->opt = *opt;
    else op_adamw_default(&tp->opt);
    tp->S = plan->S, tp->M = plan->M;
    tp->stage_first = op_xmalloc(sizeof(int) * (size_t)(tp->S + 1));
    memcpy(tp->stage_first, plan->stage_first, sizeof(int) * (size_t)(tp->S + 1));
    tp->stage_dev = op_xmalloc(sizeof(int) * (size_t)tp->S);
    memcpy(tp->stage_dev, plan->stage_dev, sizeof(int) * (size_t)tp->S);
    tp->st = op_xcalloc((size_t)tp->S, sizeof *tp->st);
    tp->built = op_xcalloc((size_t)tp->S, sizeof(int));
    size_t N = (size_t)tp->m.cfg.batch * tp->m.cfg.seq;
    tp->tok = op_xcalloc(N * (size_t)tp->S, sizeof(int32_t));
    tp->tgt = op_xcalloc(N * (size_t)tp->S, sizeof(int32_t));
    tp->loss_mb = op_xcalloc((size_t)tp->M, sizeof(double));
    for (int m = 0; m < tp->M; m++) tp->loss_mb[m] = NAN;
    op_nn_blas_single_thread(); /* once here, before rank threads exist */
    return OP_OK;
}

void op_train_pipe_free(op_train_pipe *tp) {
    for (int s = 0; s < tp->S; s++)
        if (tp->built && tp->built[s]) op_nn_stage_free(&tp->st[s]);
    free(tp->stage_first), free(tp->stage_dev), free(tp->st), free(tp->built);
    free(tp->tok), free(tp->tgt), free(tp->loss_mb);
    op_train_data_free(&tp->data);
    memset(tp, 0, sizeof *tp);
}

void op_train_pipe_build(op_train_pipe *tp, int rank) {
    for (int s = 0; s < tp->S; s++)
        if ((rank < 0 || tp->stage_dev[s] == rank) && !tp->built[s]) {
            op_nn_stage_init(&tp->st[s], &tp->m, tp->stage_first[s], tp->stage_first[s + 1], tp->M);
            op_nn_stage_zero_grad(&tp->st[s]);
            tp->built[s] = 1;
        }
}

static int pipe_setup(void *ctx, const op_plan *p, int rank, op_err *err) {
    op_train_pipe *tp = ctx;
    if (p->S != tp->S || memcmp(p->stage_first, tp->stage_first, sizeof(int) * (size_t)(tp->S + 1)))
        return op_errf(err, OP_EINVAL, "rank %d: plan stages differ from the ones the model was set up with", rank);
    op_train_pipe_build(tp, rank);
    return OP_OK;
}

static int pipe_run(void *ctx, const op_compute_call *c, op_err *err) {
    op_train_pipe *tp = ctx;
    int s = c->stage;
    op_nn_stage *st = &tp->st[s];
    OP_ASSERT(s >= 0 && s < tp->S && tp->built[s], "stage %d not held here", s);
    size_t N = (size_t)tp->m.cfg.batch * tp->m.cfg.seq;
    int first = s == 0, last = s == tp->S - 1;
    switch (c->kind) {
    case OP_F: {
        int32_t *tok = tp->tok + N * (size_t)s, *tgt = tp->tgt + N * (size_t)s;
        if (first || last) op_train_data_batch(&tp->data, tp->step, c->mb, tok, tgt);
        op_nn_batch b = {tok, tgt, 1.0f / (float)tp->M};
        double l = op_nn_stage_forward(st, c->mb, &b, first ? NULL : c->in, last ? NULL : c->out);
        if (last) tp->loss_mb[c->mb] = l;
        break;
    }
    case OP_I: op_nn_stage_backward_input(st, c->mb, last ? NULL : c->in, first ? NULL : c->out); break;
    case OP_W: op_nn_stage_backward_weight(st, c->mb); break;
    case OP_B: op_nn_stage_backward(st, c->mb, last ? NULL : c->in, first ? NULL : c->out); break;
    default: return op_errf(err, OP_EINVAL, "unknown op kind %d", (int)c->kind);
    }
    return OP_OK;
}

static int64_t pipe_boundary(void *ctx, int stage) {
    op_train_pipe *tp = ctx;
    return (int64_t)(op_nn_io_floats(&tp->m) * sizeof(float));
}

op_compute op_train_pipe_compute(op_train_pipe *tp, int progress_thread) {
    op_compute c;
    memset(&c, 0, sizeof c);
    c.ctx = tp;
    c.setup = pipe_setup;
    c.run = pipe_run;
    c.boundary_bytes = pipe_boundary;
    c.progress_thread = progress_thread;
    return c;
}

double op_train_pipe_step_end(op_train_pipe *tp, int rank) {
    for (int s = 0; s < tp->S; s++)
        if (tp->built[s] && (rank < 0 || tp->stage_dev[s] == rank)) {
            op_adamw_stage(&tp->opt, tp->step, &tp->st[s]);
            op_nn_stage_zero_grad(&tp->st[s]);
        }
    tp->step++;
    if (!tp->built[tp->S - 1]) return NAN;
    double ce = 0; /* summed in microbatch order, as op_train_single does */
    for (int m = 0; m < tp->M; m++) ce += tp->loss_mb[m];
    return ce / tp->M;
}

void op_train_layer_costs(const op_nn_model *m, const op_layer_prof *prof, int n_prof,
                          op_layer_cost *out) {
    for (int i = 0; i < m->n_layers; i++) {
        op_layer_cost *c = &out[i];
        memset(c, 0, sizeof *c);
        c->sym = m->pattern[i];
        snprintf(c->name, sizeof c->name, "layers.%d.%c", i, c->sym);
        for (int k = 0; k < n_prof; k++)
            if (prof[k].sym == c->sym) {
                c->f_ms = prof[k].f_ms, c->i_ms = prof[k].i_ms, c->w_ms = prof[k].w_ms;
                /* I stashes output grads for W, so a layer may hold more after I than after
                 * F; the cost model frees act - act_w at I, so act is the larger of the two */
                size_t a = prof[k].act_bytes > prof[k].act_w_bytes ? prof[k].act_bytes
                                                                   : prof[k].act_w_bytes;
                c->act_bytes = (int64_t)a;
                c->act_w_bytes = (int64_t)prof[k].act_w_bytes;
                c->param_bytes = (int64_t)prof[k].param_bytes;
            }
        c->out_bytes = (int64_t)(op_nn_io_floats(m) * sizeof(float));
        c->static_bytes = 4 * c->param_bytes; /* weights, grads, AdamW m and v (FP32) */
    }
}
