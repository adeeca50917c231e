/* moe.c: pre-norm top-k mixture-of-experts block (#).
 * Shapes: N rows, d hidden, E experts of SwiGLU width fe, top k, optional shared expert fs.
 * params: g (d), Wr (E, d), then per expert W1 (2fe, d), W2 (d, fe), then shared W1s (2fs, d),
 *   W2s (d, fs) when fs > 0.
 * F: h = RMSNorm(x); p = softmax(h Wr^T); each row picks its k largest logits (ties: lower
 *    index) with gates = softmax over the picked logits; y = x + sum_j gate_j expert_j(h)
 *    + shared(h).  Load-balancing loss (Switch): aux = coef * E * sum_e f_e P_e, f_e = share of
 *    the N*k assignments on e (no gradient), P_e = mean_n p[n,e].  Returned as the loss term;
 *    its gradient (times loss_scale) enters in I. */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    int n;           /* rows routed here */
    int *rows;       /* (n) ascending token rows */
    int *slot;       /* (n) which of the row's k picks */
    float *X;        /* (n,d) aw: gathered h */
    float *ab;       /* (n,2fe) ai */
    float *z;        /* (n,fe) aw */
    float *out;      /* (n,d) ai: expert output before the gate */
    float *dout, *dab; /* aw, from I */
} moe_expert;

typedef struct {
    float *xhat, *h;   /* (N,d) aw */
    float *rstd;       /* (N) ai */
    float *prob;       /* (N,E) ai */
    int *pick;         /* (N,k) ai */
    float *gate;       /* (N,k) ai */
    float *frac;       /* (E) ai: f_e */
    moe_expert *ex;    /* (E) aw */
    float *sab, *sz;   /* shared expert: (N,2fs) ai, (N,fs) aw */
    float *dy, *dsab, *dlogit, *dh; /* aw, from I */
} moe_saved;

static size_t expert_n(int d, int f) { return 3 * (size_t)f * d; }

size_t op_nn_moe_nparams(const op_nn_cfg *c) {
    return (size_t)c->d + (size_t)c->n_experts * c->d +
           (size_t)c->n_experts * expert_n(c->d, c->expert_dim) + expert_n(c->d, c->shared_dim);
}

static void init_expert(float *p, int d, int f, op_rng *r) {
    op_nn_fill_normal(p, 2 * (size_t)f * d, 1.0f / sqrtf((float)d), r);
    op_nn_fill_normal(p + 2 * (size_t)f * d, (size_t)d * f, 0.5f / sqrtf((float)f), r);
}

void op_nn_moe_init(const op_nn_cfg *c, float *p, op_rng *r) {
    int d = c->d, E = c->n_experts;
    op_nn_fill_const(p, (size_t)d, 1.0f);
    op_nn_fill_normal(p + d, (size_t)E * d, 1.0f / sqrtf((float)d), r);
    float *q = p + d + (size_t)E * d;
    for (int e = 0; e < E; e++, q += expert_n(d, c->expert_dim)) init_expert(q, d, c->expert_dim, r);
    if (c->shared_dim > 0) init_expert(q, d, c->shared_dim, r);
}

double op_nn_moe_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, E = g->n_experts, k = g->top_k, fe = g->expert_dim;
    int fs = g->shared_dim;
    const float *gn = l->p, *Wr = gn + d, *W = Wr + (size_t)E * d;
    moe_saved *s = OP_NN_NEW(c->aw, moe_saved, 1);
    s->xhat = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->h = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->rstd = OP_NN_NEWF_RAW(c->ai, N);
    s->prob = OP_NN_NEWF_RAW(c->ai, (size_t)N * E);
    s->pick = OP_NN_NEW(c->ai, int, (size_t)N * k);
    s->gate = OP_NN_NEWF(c->ai, (size_t)N * k);
    s->frac = OP_NN_NEWF(c->ai, E);
    s->ex = OP_NN_NEW(c->aw, moe_expert, E);
    op_nn_rmsnorm_fwd(s->h, s->xhat, s->rstd, x, gn, N, d, g->norm_eps);
    op_nn_linear_fwd(s->prob, E, s->h, d, Wr, N, d, E);
    for (int n = 0; n < N; n++) {
        float *lg = s->prob + (size_t)n * E;
        int *pk = s->pick + (size_t)n * k;
        for (int j = 0; j < k; j++) { /* k largest logits, ties to the lower index */
            int best = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int q = 0; q < j; q++) used |= pk[q] == e;
                if (!used && (best < 0 || lg[e] > lg[best])) best = e;
            }
            pk[j] = best;
        }
        float mx = lg[pk[0]], sum = 0;
        for (int j = 0; j < k; j++) sum += (s->gate[(size_t)n * k + j] = expf(lg[pk[j]] - mx));
        for (int j = 0; j < k; j++) s->gate[(size_t)n * k + j] /= sum;
        float m2 = lg[0], s2 = 0;
        for (int e = 1; e < E; e++) m2 = lg[e] > m2 ? lg[e] : m2;
        for (int e = 0; e < E; e++) s2 += (lg[e] = expf(lg[e] - m2));
        for (int e = 0; e < E; e++) lg[e] /= s2;
        for (int j = 0; j < k; j++) s->ex[pk[j]].n++;
    }
    double aux = 0;
    for (int e = 0; e < E; e++) {
        double pe = 0;
        for (int n = 0; n < N; n++) pe += s->prob[(size_t)n * E + e];
        s->frac[e] = (float)s->ex[e].n / (float)(N * k);
        aux += s->frac[e] * (pe / N);
    }
    aux *= (double)g->aux_coef * E;
    memcpy(y, x, sizeof(float) * (size_t)N * d);
    for (int e = 0; e < E; e++) {
        moe_expert *X = &s->ex[e];
        const float *W1 = W + (size_t)e * expert_n(d, fe), *W2 = W1 + 2 * (size_t)fe * d;
        X->rows = OP_NN_NEW(c->aw, int, X->n);
        X->slot = OP_NN_NEW(c->aw, int, X->n);
        X->X = OP_NN_NEWF_RAW(c->aw, (size_t)X->n * d);
        X->ab = OP_NN_NEWF_RAW(c->ai, (size_t)X->n * 2 * fe);
        X->z = OP_NN_NEWF_RAW(c->aw, (size_t)X->n * fe);
        X->out = OP_NN_NEWF_RAW(c->ai, (size_t)X->n * d);
        int i = 0;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < k; j++)
                if (s->pick[(size_t)n * k + j] == e) {
                    X->rows[i] = n;
                    X->slot[i] = j;
                    memcpy(X->X + (size_t)i * d, s->h + (size_t)n * d, sizeof(float) * (size_t)d);
                    i++;
                }
        op_nn_linear_fwd(X->ab, 2 * fe, X->X, d, W1, X->n, d, 2 * fe);
        op_nn_swiglu_fwd(X->z, X->ab, X->n, fe);
        op_nn_linear_fwd(X->out, d, X->z, fe, W2, X->n, fe, d);
        for (i = 0; i < X->n; i++) {
            float gt = s->gate[(size_t)X->rows[i] * k + X->slot[i]];
            float *yr = y + (size_t)X->rows[i] * d;
            for (int q = 0; q < d; q++) yr[q] += gt * X->out[(size_t)i * d + q];
        }
    }
    if (fs > 0) {
        const float *W1 = W + (size_t)E * expert_n(d, fe), *W2 = W1 + 2 * (size_t)fs * d;
        s->sab = OP_NN_NEWF_RAW(c->ai, (size_t)N * 2 * fs);
        s->sz = OP_NN_NEWF_RAW(c->aw, (size_t)N * fs);
        float *so = OP_NN_NEWF_RAW(c->ai, (size_t)N * d);
        op_nn_linear_fwd(s->sab, 2 * fs, s->h, d, W1, N, d, 2 * fs);
        op_nn_swiglu_fwd(s->sz, s->sab, N, fs);
        op_nn_linear_fwd(so, d, s->sz, fs, W2, N, fs, d);
        for (size_t i = 0; i < (size_t)N * d; i++) y[i] += so[i];
    }
    c->saved = s;
    return aux;
}

void op_nn_moe_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, E = g->n_experts, k = g->top_k, fe = g->expert_dim;
    int fs = g->shared_dim;
    const float *gn = l->p, *Wr = gn + d, *W = Wr + (size_t)E * d;
    moe_saved *s = c->saved;
    s->dy = op_nn_stash(c->aw, dy, (size_t)N * d);
    for (size_t i = 0; i < (size_t)N * d; i++) dx[i] += dy[i];
    s->dh = OP_NN_NEWF(c->aw, (size_t)N * d);
    float *dgate = OP_NN_NEWF(c->ai, (size_t)N * k);
    for (int e = 0; e < E; e++) {
        moe_expert *X = &s->ex[e];
        const float *W1 = W + (size_t)e * expert_n(d, fe), *W2 = W1 + 2 * (size_t)fe * d;
        X->dout = OP_NN_NEWF_RAW(c->aw, (size_t)X->n * d);
        for (int i = 0; i < X->n; i++) {
            size_t gi = (size_t)X->rows[i] * k + X->slot[i];
            const float *dr = dy + (size_t)X->rows[i] * d, *o = X->out + (size_t)i * d;
            float dot = 0;
            for (int q = 0; q < d; q++) {
                X->dout[(size_t)i * d + q] = s->gate[gi] * dr[q];
                dot += dr[q] * o[q];
            }
            dgate[gi] = dot;
        }
        float *dz = OP_NN_NEWF(c->ai, (size_t)X->n * fe);
        op_nn_linear_bwd_input(dz, fe, X->dout, d, W2, X->n, fe, d);
        X->dab = OP_NN_NEWF_RAW(c->aw, (size_t)X->n * 2 * fe);
        op_nn_swiglu_bwd(X->dab, dz, X->ab, X->n, fe);
        float *dX = OP_NN_NEWF(c->ai, (size_t)X->n * d);
        op_nn_linear_bwd_input(dX, d, X->dab, 2 * fe, W1, X->n, d, 2 * fe);
        for (int i = 0; i < X->n; i++)
            for (int q = 0; q < d; q++) s->dh[(size_t)X->rows[i] * d + q] += dX[(size_t)i * d + q];
    }
    if (fs > 0) {
        const float *W1 = W + (size_t)E * expert_n(d, fe), *W2 = W1 + 2 * (size_t)fs * d;
        float *dz = OP_NN_NEWF(c->ai, (size_t)N * fs);
        op_nn_linear_bwd_input(dz, fs, dy, d, W2, N, fs, d);
        s->dsab = OP_NN_NEWF_RAW(c->aw, (size_t)N * 2 * fs);
        op_nn_swiglu_bwd(s->dsab, dz, s->sab, N, fs);
        op_nn_linear_bwd_input(s->dh, d, s->dsab, 2 * fs, W1, N, d, 2 * fs);
    }
    /* router: gates are a softmax over the picked logits; aux flows through the full softmax */
    s->dlogit = OP_NN_NEWF(c->aw, (size_t)N * E);
    float auxk = c->batch.loss_scale * g->aux_coef * (float)E / (float)N;
    for (int n = 0; n < N; n++) {
        const float *gt = s->gate + (size_t)n * k, *dg = dgate + (size_t)n * k;
        const float *pr = s->prob + (size_t)n * E;
        float *dl = s->dlogit + (size_t)n * E;
        float sg = 0, sp = 0;
        for (int j = 0; j < k; j++) sg += gt[j] * dg[j];
        for (int j = 0; j < k; j++) dl[s->pick[(size_t)n * k + j]] += gt[j] * (dg[j] - sg);
        for (int e = 0; e < E; e++) sp += pr[e] * auxk * s->frac[e];
        for (int e = 0; e < E; e++) dl[e] += pr[e] * (auxk * s->frac[e] - sp);
    }
    op_nn_linear_bwd_input(s->dh, d, s->dlogit, E, Wr, N, d, E);
    op_nn_rmsnorm_bwd_input(dx, s->dh, s->xhat, s->rstd, gn, N, d);
}

void op_nn_moe_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, E = g->n_experts, fe = g->expert_dim, fs = g->shared_dim;
    moe_saved *s = c->saved;
    float *dg = grad, *dWr = dg + d, *dW = dWr + (size_t)E * d;
    op_nn_linear_bwd_weight(dWr, s->dlogit, E, s->h, d, N, d, E);
    for (int e = 0; e < E; e++) {
        moe_expert *X = &s->ex[e];
        float *dW1 = dW + (size_t)e * expert_n(d, fe), *dW2 = dW1 + 2 * (size_t)fe * d;
        op_nn_linear_bwd_weight(dW2, X->dout, d, X->z, fe, X->n, fe, d);
        op_nn_linear_bwd_weight(dW1, X->dab, 2 * fe, X->X, d, X->n, d, 2 * fe);
    }
    if (fs > 0) {
        float *dW1 = dW + (size_t)E * expert_n(d, fe), *dW2 = dW1 + 2 * (size_t)fs * d;
        op_nn_linear_bwd_weight(dW2, s->dy, d, s->sz, fs, N, fs, d);
        op_nn_linear_bwd_weight(dW1, s->dsab, 2 * fs, s->h, d, N, d, 2 * fs);
    }
    op_nn_rmsnorm_bwd_weight(dg, s->dh, s->xhat, N, d);
}
