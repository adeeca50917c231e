/* head.c: final RMSNorm + LM head + softmax cross-entropy (L).
 * params: g (d), Wlm (V,d).  F: loss = mean over rows with target >= 0 of
 * -log softmax(norm(x) Wlm^T)[target].  I starts from d(loss_scale * loss). */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    float *xhat, *hn;   /* (N,d) aw */
    float *rstd;        /* (N) ai */
    float *probs;       /* (N,V) ai: softmax, turned into dlogits by I */
    float *dlogits;     /* (N,V) aw, = probs buffer moved over */
    float *dhn;         /* (N,d) aw */
    int32_t *tgt;       /* (N) ai */
    int n_valid;
} head_saved;

size_t op_nn_head_nparams(const op_nn_cfg *c) { return (size_t)c->d + (size_t)c->vocab * c->d; }

void op_nn_head_init(const op_nn_cfg *c, float *p, op_rng *r) {
    op_nn_fill_const(p, (size_t)c->d, 1.0f);
    op_nn_fill_normal(p + c->d, (size_t)c->vocab * c->d, 1.0f / sqrtf((float)c->d), r);
}

double op_nn_head_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, V = g->vocab;
    const float *gn = l->p, *W = l->p + d;
    head_saved *s = OP_NN_NEW(c->aw, head_saved, 1);
    s->xhat = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->hn = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->rstd = OP_NN_NEWF_RAW(c->ai, N);
    /* probs live in aw: I rewrites them in place into dlogits, which W needs */
    s->probs = OP_NN_NEWF_RAW(c->aw, (size_t)N * V);
    s->tgt = OP_NN_NEW(c->ai, int32_t, N);
    op_nn_rmsnorm_fwd(s->hn, s->xhat, s->rstd, x, gn, N, d, g->norm_eps);
    op_nn_linear_fwd(s->probs, V, s->hn, d, W, N, d, V);
    double loss = 0;
    s->n_valid = 0;
    for (int n = 0; n < N; n++) {
        float *z = s->probs + (size_t)n * V;
        float mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double sum = 0;
        for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
        int32_t t = c->batch.targets[n];
        OP_ASSERT(t < V, "target %d out of range [0,%d)", (int)t, V);
        s->tgt[n] = t;
        if (t >= 0) {
            loss += log(sum) + mx - z[t];
            s->n_valid++;
        }
        for (int v = 0; v < V; v++) z[v] = (float)(exp((double)z[v] - mx) / sum);
    }
    c->saved = s;
    return s->n_valid ? loss / s->n_valid : 0.0;
}

void op_nn_head_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, V = g->vocab;
    head_saved *s = c->saved;
    float k = s->n_valid ? c->batch.loss_scale / (float)s->n_valid : 0.0f;
    s->dlogits = s->probs;
    for (int n = 0; n < N; n++) {
        float *z = s->dlogits + (size_t)n * V;
        if (s->tgt[n] < 0) {
            memset(z, 0, sizeof(float) * (size_t)V);
            continue;
        }
        z[s->tgt[n]] -= 1.0f;
        for (int v = 0; v < V; v++) z[v] *= k;
    }
    s->dhn = OP_NN_NEWF(c->aw, (size_t)N * d);
    op_nn_linear_bwd_input(s->dhn, d, s->dlogits, V, l->p + d, N, d, V);
    op_nn_rmsnorm_bwd_input(dx, s->dhn, s->xhat, s->rstd, l->p, N, d);
}

void op_nn_head_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, V = g->vocab;
    head_saved *s = c->saved;
    op_nn_linear_bwd_weight(grad + d, s->dlogits, V, s->hn, d, N, d, V);
    op_nn_rmsnorm_bwd_weight(grad, s->dhn, s->xhat, N, d);
}
