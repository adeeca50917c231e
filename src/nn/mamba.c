/* mamba.c: pre-norm Mamba-1 style selective-scan block (M).
 * Shapes: N = B*T rows, d hidden, Di inner, S state, K conv width, R dt rank, P = R + 2S.
 * params, in order: g (d), Win (2Di, d) = [x rows | z rows], convw (Di, K), convb (Di),
 *   Wx (P, Di) = [dt rows | B rows | C rows], Wdt (Di, R), bdt (Di), Alog (Di, S), D (Di),
 *   Wout (d, Di).
 * F:  h = RMSNorm(x); [xs | z] = h Win^T; xc = causal depthwise conv(xs) + convb; u = silu(xc)
 *     [dtr | Bm | Cm] = u Wx^T; dt = softplus(dtr Wdt^T + bdt); A = -exp(Alog)
 *     state_t = exp(dt_t A) * state_{t-1} + dt_t Bm_t u_t;  ys_t = Cm_t . state_t + D u_t
 *     y = x + (ys * silu(z)) Wout^T
 * I runs the scan backwards in time (states recomputed, not stored) and also produces the
 * small per-channel grads (Alog, D) into a stash that W adds: W keeps the sgemm-heavy part. */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    int d, Di, S, K, R, P;
    size_t o_win, o_cw, o_cb, o_wx, o_wdt, o_bdt, o_alog, o_D, o_wout, n;
} mdims;

static mdims dims(const op_nn_cfg *c) {
    mdims m = {c->d, c->ssm_inner, c->ssm_state, c->ssm_conv, c->ssm_dt_rank, 0, 0, 0, 0, 0, 0,
               0, 0, 0, 0, 0};
    m.P = m.R + 2 * m.S;
    m.o_win = (size_t)m.d;
    m.o_cw = m.o_win + 2 * (size_t)m.Di * m.d;
    m.o_cb = m.o_cw + (size_t)m.Di * m.K;
    m.o_wx = m.o_cb + (size_t)m.Di;
    m.o_wdt = m.o_wx + (size_t)m.P * m.Di;
    m.o_bdt = m.o_wdt + (size_t)m.Di * m.R;
    m.o_alog = m.o_bdt + (size_t)m.Di;
    m.o_D = m.o_alog + (size_t)m.Di * m.S;
    m.o_wout = m.o_D + (size_t)m.Di;
    m.n = m.o_wout + (size_t)m.d * m.Di;
    return m;
}

typedef struct {
    float *xhat, *h;         /* (N,d) aw */
    float *rstd;             /* (N) ai */
    float *xz;               /* (N,2Di) aw: xs for the conv weight grad, z for I */
    float *xc;               /* (N,Di) ai: pre-activation of u */
    float *u;                /* (N,Di) aw */
    float *dbc;              /* (N,P) aw */
    float *dtpre, *dt, *ys;  /* (N,Di) ai */
    float *gated;            /* (N,Di) aw: ys * silu(z) */
    /* from I, all aw */
    float *dy, *dxz, *dxc, *ddbc, *ddtpre, *dh, *dAlog, *dD;
} mamba_saved;

size_t op_nn_mamba_nparams(const op_nn_cfg *c) { return dims(c).n; }

void op_nn_mamba_init(const op_nn_cfg *c, float *p, op_rng *r) {
    mdims m = dims(c);
    op_nn_fill_const(p, (size_t)m.d, 1.0f);
    op_nn_fill_normal(p + m.o_win, 2 * (size_t)m.Di * m.d, 1.0f / sqrtf((float)m.d), r);
    op_nn_fill_uniform(p + m.o_cw, (size_t)m.Di * m.K, 1.0f / sqrtf((float)m.K), r);
    op_nn_fill_uniform(p + m.o_cb, (size_t)m.Di, 0.1f, r);
    op_nn_fill_normal(p + m.o_wx, (size_t)m.P * m.Di, 1.0f / sqrtf((float)m.Di), r);
    op_nn_fill_normal(p + m.o_wdt, (size_t)m.Di * m.R, 1.0f / sqrtf((float)m.R), r);
    for (int i = 0; i < m.Di; i++) {
        /* dt log-uniform in [1e-3, 1e-1] at init; bias = softplus^-1(dt) */
        double dt = exp(log(1e-3) + op_rng_uniform(r) * (log(1e-1) - log(1e-3)));
        p[m.o_bdt + i] = (float)(dt + log(-expm1(-dt)));
        for (int s = 0; s < m.S; s++) p[m.o_alog + (size_t)i * m.S + s] = logf((float)(s + 1));
        p[m.o_D + i] = 1.0f;
    }
    op_nn_fill_normal(p + m.o_wout, (size_t)m.d * m.Di, 0.5f / sqrtf((float)m.Di), r);
}

/* One forward step of one channel: st (S) <- exp(dt A) st + dt Bm u; returns Cm . st */
static float scan_step(float *st, const float *A, const float *Bm, const float *Cm, float dt,
                       float u, int S) {
    v4f acc4 = op_nn_splat(0.0f), vdt = op_nn_splat(dt), vdtu = op_nn_splat(dt * u);
    int k = 0;
    for (; k + 4 <= S; k += 4) {
        v4f h = op_nn_fexp4(vdt * op_nn_ld4(A + k)) * op_nn_ld4(st + k) + vdtu * op_nn_ld4(Bm + k);
        op_nn_st4(st + k, h);
        acc4 += op_nn_ld4(Cm + k) * h;
    }
    float acc = (acc4[0] + acc4[1]) + (acc4[2] + acc4[3]);
    for (; k < S; k++) {
        st[k] = op_nn_fexp(dt * A[k]) * st[k] + dt * u * Bm[k];
        acc += Cm[k] * st[k];
    }
    return acc;
}

/* Recompute: H1 (S) = decay * H0 + dt Bm u with decay (S) = exp(dt A), kept for the reverse. */
static void scan_recompute(float *H1, float *decay, const float *H0, const float *A,
                           const float *Bm, float dt, float u, int S) {
    v4f vdt = op_nn_splat(dt), vdtu = op_nn_splat(dt * u);
    int k = 0;
    for (; k + 4 <= S; k += 4) {
        v4f a = op_nn_fexp4(vdt * op_nn_ld4(A + k));
        op_nn_st4(decay + k, a);
        op_nn_st4(H1 + k, a * op_nn_ld4(H0 + k) + vdtu * op_nn_ld4(Bm + k));
    }
    for (; k < S; k++) {
        float a = decay[k] = op_nn_fexp(dt * A[k]);
        H1[k] = a * H0[k] + dt * u * Bm[k];
    }
}

typedef struct {
    const float *A, *Bm, *Cm, *prev, *cur, *decay; /* (S) each */
    float dy, dt, u;
    float *dst, *dA, *dB, *dC; /* (S) each, accumulated */
} rstep;

/* One reverse step of one channel: with g = dL/dstate_t (carried dst + dy Cm),
 * dC += dy state_t, ddt += g (A a prev + Bm u), dA += g a dt prev, dB += g dt u,
 * du += g dt Bm, carry dst = g a.  Returns (du, ddt) in out (without the D term). */
static void scan_reverse(const rstep *r, int S, float *out) {
    v4f vdy = op_nn_splat(r->dy), vdt = op_nn_splat(r->dt), vu = op_nn_splat(r->u), du4 = op_nn_splat(0), dt4 = op_nn_splat(0);
    int k = 0;
    for (; k + 4 <= S; k += 4) {
        v4f a = op_nn_ld4(r->decay + k), prev = op_nn_ld4(r->prev + k), Bm = op_nn_ld4(r->Bm + k);
        v4f g = op_nn_ld4(r->dst + k) + vdy * op_nn_ld4(r->Cm + k);
        op_nn_st4(r->dC + k, op_nn_ld4(r->dC + k) + vdy * op_nn_ld4(r->cur + k));
        dt4 += g * (op_nn_ld4(r->A + k) * a * prev + Bm * vu);
        op_nn_st4(r->dA + k, op_nn_ld4(r->dA + k) + g * a * vdt * prev);
        op_nn_st4(r->dB + k, op_nn_ld4(r->dB + k) + g * vdt * vu);
        du4 += g * vdt * Bm;
        op_nn_st4(r->dst + k, g * a);
    }
    float dU = (du4[0] + du4[1]) + (du4[2] + du4[3]), dT = (dt4[0] + dt4[1]) + (dt4[2] + dt4[3]);
    for (; k < S; k++) {
        float a = r->decay[k], g = r->dst[k] + r->dy * r->Cm[k];
        r->dC[k] += r->dy * r->cur[k];
        dT += g * (r->A[k] * a * r->prev[k] + r->Bm[k] * r->u);
        r->dA[k] += g * a * r->dt * r->prev[k];
        r->dB[k] += g * r->dt * r->u;
        dU += g * r->dt * r->Bm[k];
        r->dst[k] = g * a;
    }
    out[0] = dU, out[1] = dT;
}

static float softplus(float v) { return v > 20.0f ? v : log1pf(expf(v)); }

double op_nn_mamba_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    mdims m = dims(g);
    int B = g->batch, T = g->seq, N = B * T, d = m.d, Di = m.Di, S = m.S, K = m.K, P = m.P;
    const float *p = l->p;
    mamba_saved *s = OP_NN_NEW(c->aw, mamba_saved, 1);
    s->xhat = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->h = OP_NN_NEWF_RAW(c->aw, (size_t)N * d);
    s->rstd = OP_NN_NEWF_RAW(c->ai, N);
    s->xz = OP_NN_NEWF_RAW(c->aw, (size_t)N * 2 * Di);
    s->xc = OP_NN_NEWF_RAW(c->ai, (size_t)N * Di);
    s->u = OP_NN_NEWF_RAW(c->aw, (size_t)N * Di);
    s->dbc = OP_NN_NEWF_RAW(c->aw, (size_t)N * P);
    s->dtpre = OP_NN_NEWF_RAW(c->ai, (size_t)N * Di);
    s->dt = OP_NN_NEWF_RAW(c->ai, (size_t)N * Di);
    s->ys = OP_NN_NEWF_RAW(c->ai, (size_t)N * Di);
    s->gated = OP_NN_NEWF_RAW(c->aw, (size_t)N * Di);
    op_nn_rmsnorm_fwd(s->h, s->xhat, s->rstd, x, p, N, d, g->norm_eps);
    op_nn_linear_fwd(s->xz, 2 * Di, s->h, d, p + m.o_win, N, d, 2 * Di);
    const float *cw = p + m.o_cw, *cb = p + m.o_cb;
    for (int n = 0; n < N; n++) {
        int t = n % T;
        for (int ch = 0; ch < Di; ch++) {
            float a = cb[ch];
            for (int k = 0; k < K; k++) {
                int tt = t - K + 1 + k;
                if (tt >= 0) a += cw[(size_t)ch * K + k] * s->xz[(size_t)(n - t + tt) * 2 * Di + ch];
            }
            s->xc[(size_t)n * Di + ch] = a;
            s->u[(size_t)n * Di + ch] = op_nn_silu(a);
        }
    }
    op_nn_linear_fwd(s->dbc, P, s->u, Di, p + m.o_wx, N, Di, P);
    op_nn_linear_fwd(s->dtpre, Di, s->dbc, P, p + m.o_wdt, N, m.R, Di);
    for (int n = 0; n < N; n++)
        for (int ch = 0; ch < Di; ch++) {
            float *v = s->dtpre + (size_t)n * Di + ch;
            *v += p[m.o_bdt + ch];
            s->dt[(size_t)n * Di + ch] = softplus(*v);
        }
    float *st = OP_NN_NEWF(c->ai, (size_t)S), *A = OP_NN_NEWF(c->ai, (size_t)S);
    for (int ch = 0; ch < Di; ch++) {
        for (int k = 0; k < S; k++) A[k] = -expf(p[m.o_alog + (size_t)ch * S + k]);
        for (int b = 0; b < B; b++) {
            memset(st, 0, sizeof(float) * (size_t)S);
            for (int t = 0; t < T; t++) {
                size_t n = (size_t)b * T + t, e = n * Di + ch;
                const float *Bm = s->dbc + n * P + m.R;
                float acc = scan_step(st, A, Bm, Bm + S, s->dt[e], s->u[e], S);
                s->ys[e] = acc + p[m.o_D + ch] * s->u[e];
            }
        }
    }
    for (int n = 0; n < N; n++)
        for (int ch = 0; ch < Di; ch++)
            s->gated[(size_t)n * Di + ch] =
                s->ys[(size_t)n * Di + ch] * op_nn_silu(s->xz[(size_t)n * 2 * Di + Di + ch]);
    op_nn_linear_fwd(y, d, s->gated, Di, p + m.o_wout, N, Di, d);
    for (size_t i = 0; i < (size_t)N * d; i++) y[i] += x[i];
    c->saved = s;
    return 0;
}

void op_nn_mamba_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    const op_nn_cfg *g = l->cfg;
    mdims m = dims(g);
    int B = g->batch, T = g->seq, N = B * T, d = m.d, Di = m.Di, S = m.S, K = m.K, P = m.P;
    const float *p = l->p;
    mamba_saved *s = c->saved;
    s->dy = op_nn_stash(c->aw, dy, (size_t)N * d);
    for (size_t i = 0; i < (size_t)N * d; i++) dx[i] += dy[i];
    float *dgt = OP_NN_NEWF(c->ai, (size_t)N * Di);
    op_nn_linear_bwd_input(dgt, Di, dy, d, p + m.o_wout, N, Di, d);
    /* gate: gated = ys * silu(z); dgt becomes d ys */
    s->dxz = OP_NN_NEWF(c->aw, (size_t)N * 2 * Di);
    for (int n = 0; n < N; n++)
        for (int ch = 0; ch < Di; ch++) {
            size_t e = (size_t)n * Di + ch;
            float z = s->xz[(size_t)n * 2 * Di + Di + ch];
            s->dxz[(size_t)n * 2 * Di + Di + ch] = dgt[e] * s->ys[e] * op_nn_dsilu(z);
            dgt[e] *= op_nn_silu(z);
        }
    /* reverse-time scan */
    float *du = OP_NN_NEWF_RAW(c->ai, (size_t)N * Di), *ddt = OP_NN_NEWF_RAW(c->ai, (size_t)N * Di);
    s->ddbc = OP_NN_NEWF(c->aw, (size_t)N * P);
    s->dAlog = OP_NN_NEWF(c->aw, (size_t)Di * S);
    s->dD = OP_NN_NEWF(c->aw, (size_t)Di);
    /* H: states after each step, with a zero row in front: row t is the state before t */
    float *H = OP_NN_NEWF(c->ai, (size_t)(T + 1) * S), *dst = OP_NN_NEWF(c->ai, (size_t)S);
    float *decay = OP_NN_NEWF_RAW(c->ai, (size_t)T * S); /* exp(dt_t A), from the recompute */
    float *A = OP_NN_NEWF(c->ai, (size_t)S), *dA = OP_NN_NEWF(c->ai, (size_t)S);
    for (int ch = 0; ch < Di; ch++) {
        for (int k = 0; k < S; k++) A[k] = -expf(p[m.o_alog + (size_t)ch * S + k]);
        memset(dA, 0, sizeof(float) * (size_t)S);
        float dDc = 0;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) { /* recompute the states */
                size_t n = (size_t)b * T + t, e = n * Di + ch;
                scan_recompute(H + (size_t)(t + 1) * S, decay + (size_t)t * S, H + (size_t)t * S,
                               A, s->dbc + n * P + m.R, s->dt[e], s->u[e], S);
            }
            memset(dst, 0, sizeof(float) * (size_t)S);
            for (int t = T - 1; t >= 0; t--) {
                size_t n = (size_t)b * T + t, e = n * Di + ch;
                float *dB = s->ddbc + n * P + m.R;
                const float *Bm = s->dbc + n * P + m.R;
                rstep r = {A, Bm, Bm + S, H + (size_t)t * S, H + (size_t)(t + 1) * S,
                           decay + (size_t)t * S, dgt[e], s->dt[e], s->u[e], dst, dA, dB, dB + S};
                float o[2];
                scan_reverse(&r, S, o);
                dDc += dgt[e] * s->u[e];
                du[e] = o[0] + dgt[e] * p[m.o_D + ch];
                ddt[e] = o[1];
            }
        }
        for (int k = 0; k < S; k++) s->dAlog[(size_t)ch * S + k] = dA[k] * A[k];
        s->dD[ch] = dDc;
    }
    /* softplus: d dtpre = ddt * sigmoid(dtpre) */
    s->ddtpre = OP_NN_NEWF_RAW(c->aw, (size_t)N * Di);
    for (size_t e = 0; e < (size_t)N * Di; e++)
        s->ddtpre[e] = ddt[e] / (1.0f + expf(-s->dtpre[e]));
    op_nn_linear_bwd_input(s->ddbc, P, s->ddtpre, Di, p + m.o_wdt, N, m.R, Di);
    op_nn_linear_bwd_input(du, Di, s->ddbc, P, p + m.o_wx, N, Di, P);
    s->dxc = OP_NN_NEWF_RAW(c->aw, (size_t)N * Di);
    for (size_t e = 0; e < (size_t)N * Di; e++) s->dxc[e] = du[e] * op_nn_dsilu(s->xc[e]);
    const float *cw = p + m.o_cw;
    for (int n = 0; n < N; n++) {
        int t = n % T;
        for (int ch = 0; ch < Di; ch++)
            for (int k = 0; k < K; k++) {
                int tt = t - K + 1 + k;
                if (tt >= 0)
                    s->dxz[(size_t)(n - t + tt) * 2 * Di + ch] +=
                        cw[(size_t)ch * K + k] * s->dxc[(size_t)n * Di + ch];
            }
    }
    s->dh = OP_NN_NEWF(c->aw, (size_t)N * d);
    op_nn_linear_bwd_input(s->dh, d, s->dxz, 2 * Di, p + m.o_win, N, d, 2 * Di);
    op_nn_rmsnorm_bwd_input(dx, s->dh, s->xhat, s->rstd, p, N, d);
}

void op_nn_mamba_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    const op_nn_cfg *g = l->cfg;
    mdims m = dims(g);
    int T = g->seq, N = g->batch * T, d = m.d, Di = m.Di, K = m.K, P = m.P;
    mamba_saved *s = c->saved;
    op_nn_linear_bwd_weight(grad + m.o_wout, s->dy, d, s->gated, Di, N, Di, d);
    op_nn_linear_bwd_weight(grad + m.o_win, s->dxz, 2 * Di, s->h, d, N, d, 2 * Di);
    op_nn_linear_bwd_weight(grad + m.o_wx, s->ddbc, P, s->u, Di, N, Di, P);
    op_nn_linear_bwd_weight(grad + m.o_wdt, s->ddtpre, Di, s->dbc, P, N, m.R, Di);
    float *dcw = grad + m.o_cw, *dcb = grad + m.o_cb, *dbdt = grad + m.o_bdt;
    for (int n = 0; n < N; n++) {
        int t = n % T;
        for (int ch = 0; ch < Di; ch++) {
            float gv = s->dxc[(size_t)n * Di + ch];
            dcb[ch] += gv;
            dbdt[ch] += s->ddtpre[(size_t)n * Di + ch];
            for (int k = 0; k < K; k++) {
                int tt = t - K + 1 + k;
                if (tt >= 0) dcw[(size_t)ch * K + k] += gv * s->xz[(size_t)(n - t + tt) * 2 * Di + ch];
            }
        }
    }
    for (size_t i = 0; i < (size_t)Di * m.S; i++) grad[m.o_alog + i] += s->dAlog[i];
    for (int ch = 0; ch < Di; ch++) grad[m.o_D + ch] += s->dD[ch];
    op_nn_rmsnorm_bwd_weight(grad, s->dh, s->xhat, N, d);
}
