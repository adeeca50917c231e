/* attn.c: pre-norm causal multi-head attention block (*), optional sliding window.
 * params: g (d), Wqkv (3d, d) = [q rows | k rows | v rows], Wo (d, d).
 * y = x + Wo attn(h), h = RMSNorm(x); head j uses columns [j*hd, (j+1)*hd) of q, k, v.
 * Query t sees keys u with t - window < u <= t (window 0: all u <= t).  No positional
 * rotation: positions come from the embedding and from Mamba layers. */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    float *xhat, *h;  /* (N,d) aw */
    float *rstd;      /* (N) ai */
    float *qkv;       /* (N,3d) ai */
    float *att;       /* (B,H,T,T) ai: softmax probabilities, lower band only */
    float *o;         /* (N,d) aw: attention output before Wo */
    float *dy, *dqkv, *dh; /* aw, from I */
} attn_saved;

size_t op_nn_attn_nparams(const op_nn_cfg *c) { return (size_t)c->d + 4 * (size_t)c->d * c->d; }

void op_nn_attn_init(const op_nn_cfg *c, float *p, op_rng *r) {
    int d = c->d;
    op_nn_fill_const(p, (size_t)d, 1.0f);
    op_nn_fill_normal(p + d, 3 * (size_t)d * d, 1.0f / sqrtf((float)d), r);
    op_nn_fill_normal(p + d + 3 * (size_t)d * d, (size_t)d * d, 0.5f / sqrtf((float)d), r);
}

static int lo_key(const op_nn_cfg *g, int t) {
    return g->window > 0 && t - g->window + 1 > 0 ? t - g->window + 1 : 0;
}

double op_nn_attn_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    int B = g->batch, T = g->seq, N = B * T, d = g->d, H = g->n_heads, hd = d / H;
    const float *gn = l->p, *Wqkv = gn + d, *Wo = Wqkv + 3 * (size_t)d * d;
    float scale = 1.0f / sqrtf((float)hd);
    attn_saved *s = OP_NN_NEW(c->aw, attn_saved, 1);
    s->xhat = OP_NN_NEWF(c->aw, (size_t)N * d);
    s->h = OP_NN_NEWF(c->aw, (size_t)N * d);
    s->rstd = OP_NN_NEWF(c->ai, N);
    s->qkv = OP_NN_NEWF(c->ai, (size_t)N * 3 * d);
    s->att = OP_NN_NEWF(c->ai, (size_t)B * H * T * T);
    s->o = OP_NN_NEWF(c->aw, (size_t)N * d);
    op_nn_rmsnorm_fwd(s->h, s->xhat, s->rstd, x, gn, N, d, g->norm_eps);
    op_nn_linear_fwd(s->qkv, 3 * d, s->h, d, Wqkv, N, d, 3 * d);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++)
            for (int t = 0; t < T; t++) {
                const float *q = s->qkv + (size_t)(b * T + t) * 3 * d + j * hd;
                float *p = s->att + (((size_t)b * H + j) * T + t) * T;
                int lo = lo_key(g, t);
                float mx = -INFINITY;
                for (int u = lo; u <= t; u++) {
                    const float *k = s->qkv + (size_t)(b * T + u) * 3 * d + d + j * hd;
                    float dot = 0;
                    for (int i = 0; i < hd; i++) dot += q[i] * k[i];
                    p[u] = dot * scale;
                    mx = p[u] > mx ? p[u] : mx;
                }
                float sum = 0;
                for (int u = lo; u <= t; u++) sum += (p[u] = expf(p[u] - mx));
                float *o = s->o + (size_t)(b * T + t) * d + j * hd;
                for (int u = lo; u <= t; u++) {
                    p[u] /= sum;
                    const float *v = s->qkv + (size_t)(b * T + u) * 3 * d + 2 * d + j * hd;
                    for (int i = 0; i < hd; i++) o[i] += p[u] * v[i];
                }
            }
    op_nn_linear_fwd(y, d, s->o, d, Wo, N, d, d);
    for (size_t i = 0; i < (size_t)N * d; i++) y[i] += x[i];
    c->saved = s;
    return 0;
}

void op_nn_attn_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    const op_nn_cfg *g = l->cfg;
    int B = g->batch, T = g->seq, N = B * T, d = g->d, H = g->n_heads, hd = d / H;
    const float *gn = l->p, *Wqkv = gn + d, *Wo = Wqkv + 3 * (size_t)d * d;
    float scale = 1.0f / sqrtf((float)hd);
    attn_saved *s = c->saved;
    s->dy = op_nn_stash(c->aw, dy, (size_t)N * d);
    for (size_t i = 0; i < (size_t)N * d; i++) dx[i] += dy[i];
    float *dO = OP_NN_NEWF(c->ai, (size_t)N * d);
    op_nn_linear_bwd_input(dO, d, dy, d, Wo, N, d, d);
    s->dqkv = OP_NN_NEWF(c->aw, (size_t)N * 3 * d);
    float *dp = OP_NN_NEWF(c->ai, (size_t)T);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++)
            for (int t = 0; t < T; t++) {
                size_t qo = (size_t)(b * T + t) * 3 * d + j * hd;
                const float *q = s->qkv + qo, *go = dO + (size_t)(b * T + t) * d + j * hd;
                float *dq = s->dqkv + qo;
                const float *p = s->att + (((size_t)b * H + j) * T + t) * T;
                int lo = lo_key(g, t);
                float pdp = 0;
                for (int u = lo; u <= t; u++) {
                    const float *v = s->qkv + (size_t)(b * T + u) * 3 * d + 2 * d + j * hd;
                    float *dv = s->dqkv + (size_t)(b * T + u) * 3 * d + 2 * d + j * hd;
                    float a = 0;
                    for (int i = 0; i < hd; i++) {
                        a += go[i] * v[i];
                        dv[i] += p[u] * go[i];
                    }
                    dp[u] = a;
                    pdp += p[u] * a;
                }
                for (int u = lo; u <= t; u++) {
                    float ds = p[u] * (dp[u] - pdp) * scale;
                    const float *k = s->qkv + (size_t)(b * T + u) * 3 * d + d + j * hd;
                    float *dk = s->dqkv + (size_t)(b * T + u) * 3 * d + d + j * hd;
                    for (int i = 0; i < hd; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
    s->dh = OP_NN_NEWF(c->aw, (size_t)N * d);
    op_nn_linear_bwd_input(s->dh, d, s->dqkv, 3 * d, Wqkv, N, d, 3 * d);
    op_nn_rmsnorm_bwd_input(dx, s->dh, s->xhat, s->rstd, gn, N, d);
}

void op_nn_attn_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d;
    attn_saved *s = c->saved;
    float *dg = grad, *dWqkv = dg + d, *dWo = dWqkv + 3 * (size_t)d * d;
    op_nn_linear_bwd_weight(dWo, s->dy, d, s->o, d, N, d, d);
    op_nn_linear_bwd_weight(dWqkv, s->dqkv, 3 * d, s->h, d, N, d, 3 * d);
    op_nn_rmsnorm_bwd_weight(dg, s->dh, s->xhat, N, d);
}
