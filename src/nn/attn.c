/* attn.c: pre-norm causal multi-head attention block (*), optional sliding window.
 * params: g (d), Wqkv (3d, d) = [q rows | k rows | v rows], Wo (d, d).
 * y = x + Wo attn(h), h = RMSNorm(x); head j uses columns [j*hd, (j+1)*hd) of q, k, v.
 * Query t sees keys u with t - window < u <= t (window 0: all u <= t).  No positional
 * rotation: positions come from the embedding and from Mamba layers.  Scores, P V and their
 * gradients are sgemm calls per (sample, head) over the full T x T block; causality and the
 * window are a mask (P = 0 outside the band), which keeps the layer GEMM-bound.
 * Selective recomputation (ctx->drop) drops the probabilities after F (op_nn_attn_core). */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    float *xhat, *h;  /* (N,d) aw */
    float *rstd;      /* (N) ai */
    float *qkv;       /* (N,3d) ai */
    float *att;       /* (B,H,T,T) ai: softmax probabilities, 0 outside the causal band */
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

/* The attention core of one microbatch: att (B,H,T,T) = band softmax(Q K^T * scale) per
 * (sample, head), from qkv (N,3d).  F computes it; I recomputes it under selective
 * recomputation (the same calls on the same inputs: bitwise the same probabilities). */
void op_nn_attn_core(const op_nn_cfg *g, const float *qkv, float *att) {
    int B = g->batch, T = g->seq, d = g->d, H = g->n_heads, hd = d / H;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++) {
            const float *Q = qkv + (size_t)b * T * 3 * d + j * hd, *K = Q + d;
            float *P = att + ((size_t)b * H + j) * T * T;
            op_nn_gemm(0, 1, T, T, hd, scale, Q, 3 * d, K, 3 * d, 0.0f, P, T);
            for (int t = 0; t < T; t++) {
                float *p = P + (size_t)t * T;
                int lo = lo_key(g, t);
                float mx = -INFINITY, sum = 0;
                for (int u = lo; u <= t; u++) mx = p[u] > mx ? p[u] : mx;
                for (int u = lo; u <= t; u++) sum += (p[u] = expf(p[u] - mx));
                for (int u = 0; u < T; u++) p[u] = u >= lo && u <= t ? p[u] / sum : 0.0f;
            }
        }
}

size_t op_nn_attn_core_bytes(const op_nn_cfg *g) {
    return ((size_t)g->batch * g->n_heads * g->seq * g->seq * sizeof(float) + 15) & ~(size_t)15;
}

double op_nn_attn_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    int B = g->batch, T = g->seq, N = B * T, d = g->d, H = g->n_heads, hd = d / H;
    const float *gn = l->p, *Wqkv = gn + d, *Wo = Wqkv + 3 * (size_t)d * d;
    attn_saved *s = OP_NN_NEW(c->aw, attn_saved, 1);
    s->xhat = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->h = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->rstd = OP_NN_NEWF_RAW(c->ai, N);
    s->qkv = OP_NN_NEWF_RAW(c->ai, (size_t)N * 3 * d);
    /* selective: the core goes to the stage's scratch, and I recomputes it (s->att NULL) */
    float *att = OP_NN_NEWF_RAW(c->drop ? c->drop : c->ai, (size_t)B * H * T * T);
    s->att = c->drop ? NULL : att;
    s->o = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    op_nn_rmsnorm_fwd(s->h, s->xhat, s->rstd, x, gn, N, d, g->norm_eps);
    op_nn_linear_fwd(s->qkv, 3 * d, s->h, d, Wqkv, N, d, 3 * d);
    op_nn_attn_core(g, s->qkv, att);
    /* O = P V per (sample, head) by sgemm */
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++) {
            const float *V = s->qkv + (size_t)b * T * 3 * d + j * hd + 2 * d;
            const float *P = att + ((size_t)b * H + j) * T * T;
            op_nn_gemm(0, 0, T, hd, T, 1.0f, P, T, V, 3 * d, 0.0f,
                       s->o + (size_t)b * T * d + j * hd, d);
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
    if (!s->att) { /* selective: F dropped the core; recompute it, held until I ends */
        s->att = OP_NN_NEWF_RAW(c->ai, (size_t)B * H * T * T);
        op_nn_attn_core(g, s->qkv, s->att);
    }
    s->dy = op_nn_stash(c->aw, dy, (size_t)N * d);
    for (size_t i = 0; i < (size_t)N * d; i++) dx[i] += dy[i];
    float *dO = OP_NN_NEWF(c->ai, (size_t)N * d);
    op_nn_linear_bwd_input(dO, d, dy, d, Wo, N, d, d);
    s->dqkv = OP_NN_NEWF(c->aw, (size_t)N * 3 * d);
    float *dS = OP_NN_NEWF_RAW(c->ai, (size_t)T * T);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++) {
            size_t qo = (size_t)b * T * 3 * d + j * hd;
            const float *Q = s->qkv + qo, *K = Q + d, *V = Q + 2 * d;
            float *dQ = s->dqkv + qo, *dK = dQ + d, *dV = dQ + 2 * d;
            const float *P = s->att + ((size_t)b * H + j) * T * T;
            const float *G = dO + (size_t)b * T * d + j * hd; /* (T, hd), row stride d */
            op_nn_gemm(0, 1, T, T, hd, 1.0f, G, d, V, 3 * d, 0.0f, dS, T); /* dP = dO V^T */
            for (int t = 0; t < T; t++) { /* dS = P (dP - sum P dP) scale; 0 off the band */
                const float *p = P + (size_t)t * T;
                float *r = dS + (size_t)t * T, pdp = 0;
                for (int u = 0; u < T; u++) pdp += p[u] * r[u];
                for (int u = 0; u < T; u++) r[u] = p[u] * (r[u] - pdp) * scale;
            }
            op_nn_gemm(0, 0, T, hd, T, 1.0f, dS, T, K, 3 * d, 1.0f, dQ, 3 * d); /* dQ += dS K */
            op_nn_gemm(1, 0, T, hd, T, 1.0f, dS, T, Q, 3 * d, 1.0f, dK, 3 * d); /* dK += dS^T Q */
            op_nn_gemm(1, 0, T, hd, T, 1.0f, P, T, G, d, 1.0f, dV, 3 * d);      /* dV += P^T dO */
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
