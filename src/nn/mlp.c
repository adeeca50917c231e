/* mlp.c: pre-norm gated MLP block (-): y = x + W2 (silu(h W1a^T) * h W1b^T), h = RMSNorm(x).
 * params: g (d), W1 (2f, d) = [gate rows | up rows], W2 (d, f). */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    float *xhat, *h;  /* (N,d) aw */
    float *rstd;      /* (N) ai */
    float *ab;        /* (N,2f) ai */
    float *z;         /* (N,f) aw */
    float *dy;        /* (N,d) aw, from I */
    float *dab;       /* (N,2f) aw, from I */
    float *dh;        /* (N,d) aw, from I */
} mlp_saved;

size_t op_nn_mlp_nparams(const op_nn_cfg *c) {
    return (size_t)c->d + 3 * (size_t)c->ffn * c->d;
}

void op_nn_mlp_init(const op_nn_cfg *c, float *p, op_rng *r) {
    int d = c->d, f = c->ffn;
    op_nn_fill_const(p, (size_t)d, 1.0f);
    op_nn_fill_normal(p + d, 2 * (size_t)f * d, 1.0f / sqrtf((float)d), r);
    op_nn_fill_normal(p + d + 2 * (size_t)f * d, (size_t)d * f, 0.5f / sqrtf((float)f), r);
}

double op_nn_mlp_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, f = g->ffn;
    const float *gn = l->p, *W1 = gn + d, *W2 = W1 + 2 * (size_t)f * d;
    mlp_saved *s = OP_NN_NEW(c->aw, mlp_saved, 1);
    s->xhat = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->h = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->rstd = OP_NN_NEWF_RAW(c->ai, N);
    s->ab = OP_NN_NEWF_RAW(c->ai, (size_t)N * 2 * f);
    s->z = OP_NN_NEWF_RAW(c->aw, (size_t)N * f);
    op_nn_rmsnorm_fwd(s->h, s->xhat, s->rstd, x, gn, N, d, g->norm_eps);
    op_nn_linear_fwd(s->ab, 2 * f, s->h, d, W1, N, d, 2 * f);
    op_nn_swiglu_fwd(s->z, s->ab, N, f);
    op_nn_linear_fwd(y, d, s->z, f, W2, N, f, d);
    for (size_t i = 0; i < (size_t)N * d; i++) y[i] += x[i];
    c->saved = s;
    return 0;
}

void op_nn_mlp_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, f = g->ffn;
    const float *gn = l->p, *W1 = gn + d, *W2 = W1 + 2 * (size_t)f * d;
    mlp_saved *s = c->saved;
    s->dy = op_nn_stash(c->aw, dy, (size_t)N * d);
    for (size_t i = 0; i < (size_t)N * d; i++) dx[i] += dy[i];
    float *dz = OP_NN_NEWF(c->ai, (size_t)N * f);
    op_nn_linear_bwd_input(dz, f, dy, d, W2, N, f, d);
    s->dab = OP_NN_NEWF_RAW(c->aw, (size_t)N * 2 * f);
    op_nn_swiglu_bwd(s->dab, dz, s->ab, N, f);
    s->dh = OP_NN_NEWF(c->aw, (size_t)N * d);
    op_nn_linear_bwd_input(s->dh, d, s->dab, 2 * f, W1, N, d, 2 * f);
    op_nn_rmsnorm_bwd_input(dx, s->dh, s->xhat, s->rstd, gn, N, d);
}

void op_nn_mlp_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, f = g->ffn;
    mlp_saved *s = c->saved;
    float *dg = grad, *dW1 = dg + d, *dW2 = dW1 + 2 * (size_t)f * d;
    op_nn_linear_bwd_weight(dW2, s->dy, d, s->z, f, N, f, d);
    op_nn_linear_bwd_weight(dW1, s->dab, 2 * f, s->h, d, N, d, 2 * f);
    op_nn_rmsnorm_bwd_weight(dg, s->dh, s->xhat, N, d);
}
