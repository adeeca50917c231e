/* test_nn.c: every layer of the reference model against an independent naive double-precision
 * forward (written here from the math, not from the kernels), its I and W against central
 * finite differences of that double forward, and the I/W split against running them fused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "octopipe/nn.h"

/* ---------------- naive double references ---------------- */

static void rms(double *y, const double *x, const double *g, int N, int d, double eps) {
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int i = 0; i < d; i++) ss += x[n * d + i] * x[n * d + i];
        double r = 1.0 / sqrt(ss / d + eps);
        for (int i = 0; i < d; i++) y[n * d + i] = x[n * d + i] * r * g[i];
    }
}
/* y (N,out) = x (N,in) W^T, W (out,in) */
static void lin(double *y, const double *x, const double *W, int N, int in, int out) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double a = 0;
            for (int i = 0; i < in; i++) a += x[n * in + i] * W[o * in + i];
            y[n * out + o] = a;
        }
}
static double silu(double v) { return v / (1 + exp(-v)); }
static double *dz(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
/* expert / MLP: out (N,d) += scale_n * W2 (silu(a) * b), [a|b] = h W1^T */
static void swiglu_mlp(double *out, const double *h, const double *W1, const double *W2,
                       const double *scale, int N, int d, int f) {
    double *ab = dz((size_t)N * 2 * f), *z = dz((size_t)N * f), *o = dz((size_t)N * d);
    lin(ab, h, W1, N, d, 2 * f);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < f; j++) z[n * f + j] = silu(ab[n * 2 * f + j]) * ab[n * 2 * f + f + j];
    lin(o, z, W2, N, f, d);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < d; i++) out[n * d + i] += (scale ? scale[n] : 1.0) * o[n * d + i];
    free(ab), free(z), free(o);
}

/* Forward of layer `sym` in double; returns the layer's loss term. */
static double ref_forward(char sym, const op_nn_cfg *c, const double *p, const double *x,
                          const int32_t *tok, const int32_t *tgt, double *y) {
    int B = c->batch, T = c->seq, N = B * T, d = c->d, V = c->vocab;
    double loss = 0;
    double *h = dz((size_t)N * d);
    if (sym == 'E') {
        for (int n = 0; n < N; n++)
            for (int i = 0; i < d; i++) y[n * d + i] = p[tok[n] * d + i] + p[(V + n % T) * d + i];
        free(h);
        return 0;
    }
    rms(h, x, p, N, d, c->norm_eps);
    if (sym != 'L') memcpy(y, x, sizeof(double) * N * d);
    if (sym == 'L') {
        double *lg = dz((size_t)N * V);
        lin(lg, h, p + d, N, d, V);
        int nv = 0;
        for (int n = 0; n < N; n++) {
            if (tgt[n] < 0) continue;
            double mx = -1e300, s = 0;
            for (int v = 0; v < V; v++) mx = fmax(mx, lg[n * V + v]);
            for (int v = 0; v < V; v++) s += exp(lg[n * V + v] - mx);
            loss += log(s) + mx - lg[n * V + tgt[n]];
            nv++;
        }
        free(lg);
        loss = nv ? loss / nv : 0;
    } else if (sym == '-') {
        swiglu_mlp(y, h, p + d, p + d + 2 * c->ffn * d, NULL, N, d, c->ffn);
    } else if (sym == '*') {
        int H = c->n_heads, hd = d / H;
        double *qkv = dz((size_t)N * 3 * d), *o = dz((size_t)N * d), *sc = dz(T);
        lin(qkv, h, p + d, N, d, 3 * d);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++)
                for (int t = 0; t < T; t++) {
                    double mx = -1e300, s = 0;
                    for (int u = 0; u <= t; u++) {
                        if (c->window > 0 && u <= t - c->window) continue;
                        double a = 0;
                        for (int i = 0; i < hd; i++)
                            a += qkv[(b * T + t) * 3 * d + j * hd + i] * qkv[(b * T + u) * 3 * d + d + j * hd + i];
                        sc[u] = a / sqrt((double)hd);
                        mx = fmax(mx, sc[u]);
                    }
                    for (int u = 0; u <= t; u++)
                        if (!(c->window > 0 && u <= t - c->window)) s += exp(sc[u] - mx);
                    for (int u = 0; u <= t; u++) {
                        if (c->window > 0 && u <= t - c->window) continue;
                        double w = exp(sc[u] - mx) / s;
                        for (int i = 0; i < hd; i++)
                            o[(b * T + t) * d + j * hd + i] += w * qkv[(b * T + u) * 3 * d + 2 * d + j * hd + i];
                    }
                }
        double *out = dz((size_t)N * d);
        lin(out, o, p + d + 3 * d * d, N, d, d);
        for (int i = 0; i < N * d; i++) y[i] += out[i];
        free(qkv), free(o), free(sc), free(out);
    } else if (sym == '#') {
        int E = c->n_experts, k = c->top_k, fe = c->expert_dim, fs = c->shared_dim;
        double *lg = dz((size_t)N * E), *cnt = dz(E), *pm = dz(E), *sc = dz(N);
        lin(lg, h, p + d, N, d, E);
        const double *W = p + d + E * d;
        for (int e = 0; e < E; e++) {
            /* rows whose top-k contains e, and their gate */
            for (int n = 0; n < N; n++) {
                const double *l = lg + n * E;
                int rank = 0;
                for (int q = 0; q < E; q++) rank += l[q] > l[e] || (l[q] == l[e] && q < e);
                sc[n] = 0;
                if (rank >= k) continue;
                double s = 0;
                for (int q = 0; q < E; q++) {
                    int rq = 0;
                    for (int r = 0; r < E; r++) rq += l[r] > l[q] || (l[r] == l[q] && r < q);
                    if (rq < k) s += exp(l[q] - l[e]);
                }
                sc[n] = 1.0 / s;
                cnt[e] += 1;
            }
            swiglu_mlp(y, h, W + e * 3 * fe * d, W + e * 3 * fe * d + 2 * fe * d, sc, N, d, fe);
        }
        if (fs > 0) swiglu_mlp(y, h, W + E * 3 * fe * d, W + E * 3 * fe * d + 2 * fs * d, NULL, N, d, fs);
        for (int n = 0; n < N; n++) {
            double mx = -1e300, s = 0;
            for (int e = 0; e < E; e++) mx = fmax(mx, lg[n * E + e]);
            for (int e = 0; e < E; e++) s += exp(lg[n * E + e] - mx);
            for (int e = 0; e < E; e++) pm[e] += exp(lg[n * E + e] - mx) / s / N;
        }
        for (int e = 0; e < E; e++) loss += cnt[e] / (N * k) * pm[e];
        loss *= c->aux_coef * E;
        free(lg), free(cnt), free(pm), free(sc);
    } else if (sym == 'M') {
        int Di = c->ssm_inner, S = c->ssm_state, K = c->ssm_conv, R = c->ssm_dt_rank, P = R + 2 * S;
        const double *Win = p + d, *cw = Win + 2 * Di * d, *cb = cw + Di * K, *Wx = cb + Di;
        const double *Wdt = Wx + P * Di, *bdt = Wdt + Di * R, *Al = bdt + Di, *D = Al + Di * S;
        const double *Wout = D + Di;
        double *xz = dz((size_t)N * 2 * Di), *u = dz((size_t)N * Di), *dbc = dz((size_t)N * P);
        double *dt = dz((size_t)N * Di), *g = dz((size_t)N * Di), *out = dz((size_t)N * d);
        lin(xz, h, Win, N, d, 2 * Di);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int ch = 0; ch < Di; ch++) {
                    double a = cb[ch];
                    for (int q = 0; q < K; q++) {
                        int tt = t - (K - 1) + q;
                        if (tt >= 0) a += cw[ch * K + q] * xz[(b * T + tt) * 2 * Di + ch];
                    }
                    u[(b * T + t) * Di + ch] = silu(a);
                }
        lin(dbc, u, Wx, N, Di, P);
        for (int n = 0; n < N; n++)
            for (int ch = 0; ch < Di; ch++) {
                double a = bdt[ch];
                for (int r = 0; r < R; r++) a += dbc[n * P + r] * Wdt[ch * R + r];
                dt[n * Di + ch] = log1p(exp(a));
            }
        double *st = dz(S);
        for (int b = 0; b < B; b++)
            for (int ch = 0; ch < Di; ch++) {
                memset(st, 0, sizeof(double) * S);
                for (int t = 0; t < T; t++) {
                    int n = b * T + t;
                    double acc = D[ch] * u[n * Di + ch];
                    for (int s = 0; s < S; s++) {
                        st[s] = exp(-dt[n * Di + ch] * exp(Al[ch * S + s])) * st[s] +
                                dt[n * Di + ch] * dbc[n * P + R + s] * u[n * Di + ch];
                        acc += dbc[n * P + R + S + s] * st[s];
                    }
                    g[n * Di + ch] = acc * silu(xz[n * 2 * Di + Di + ch]);
                }
            }
        lin(out, g, Wout, N, Di, d);
        for (int i = 0; i < N * d; i++) y[i] += out[i];
        free(xz), free(u), free(dbc), free(dt), free(g), free(out), free(st);
    }
    free(h);
    return loss;
}

/* ---------------- fixtures ---------------- */

static op_nn_cfg tiny_cfg(void) {
    op_nn_cfg c = {0};
    c.vocab = 11, c.d = 8, c.seq = 5, c.batch = 2, c.n_heads = 2, c.window = 0;
    c.ssm_inner = 12, c.ssm_state = 5, c.ssm_conv = 3, c.ssm_dt_rank = 2; /* S = 5: the 4-lane path and the tail */
    c.ffn = 10, c.n_experts = 4, c.top_k = 2, c.expert_dim = 6, c.shared_dim = 5;
    c.aux_coef = 0.5f, c.norm_eps = 1e-5f, c.seed = 7;
    return c;
}

typedef struct {
    op_nn_cfg cfg;
    op_nn_layer l;
    size_t np;
    int N;
    float *x, *r;
    int32_t tok[64], tgt[64];
} fixture;

static void fx_init(fixture *f, char sym, const op_nn_cfg *cfg, uint64_t seed) {
    f->cfg = *cfg;
    f->np = op_nn_layer_nparams(sym, &f->cfg);
    f->N = cfg->batch * cfg->seq;
    f->l = (op_nn_layer){sym, 3, &f->cfg, calloc(f->np, sizeof(float))};
    op_nn_layer_init(&f->l);
    op_rng r;
    op_rng_seed(&r, seed);
    /* move every parameter off its init constant so norms, D, biases are really tested */
    for (size_t i = 0; i < f->np; i++) f->l.p[i] += (float)(0.2 * (op_rng_uniform(&r) - 0.5));
    size_t nx = (size_t)f->N * cfg->d;
    f->x = calloc(nx, sizeof(float));
    f->r = calloc(nx, sizeof(float));
    for (size_t i = 0; i < nx; i++) {
        f->x[i] = (float)(2 * op_rng_uniform(&r) - 1);
        f->r[i] = (float)(2 * op_rng_uniform(&r) - 1);
    }
    for (int n = 0; n < f->N; n++) {
        f->tok[n] = op_rng_int(&r, cfg->vocab);
        f->tgt[n] = n % 4 == 3 ? -1 : op_rng_int(&r, cfg->vocab);
    }
}

static void fx_free(fixture *f) { free(f->l.p), free(f->x), free(f->r); }

static const float kScale = 0.75f; /* loss_scale: checks it is applied exactly once */

/* J = sum(y * r) + kScale * loss, in double through the reference */
static double ref_J(const fixture *f, const double *p, const double *x) {
    size_t nx = (size_t)f->N * f->cfg.d;
    double *y = dz(nx);
    double loss = ref_forward(f->l.sym, &f->cfg, p, x, f->tok, f->tgt, y);
    double J = kScale * loss;
    if (f->l.sym != 'L')
        for (size_t i = 0; i < nx; i++) J += y[i] * f->r[i];
    free(y);
    return J;
}

static double max_abs(const double *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

static int corrupt_grad; /* test of the test: perturb one analytic gradient */

/* Checks forward, I and W of f's layer; returns worst relative errors through out args. */
static void check_layer(fixture *f, double *e_fwd, double *e_dx, double *e_dw) {
    size_t nx = (size_t)f->N * f->cfg.d;
    op_nn_mem ai = {0}, aw = {0};
    op_nn_ctx c = {&ai, &aw, {f->tok, f->tgt, kScale}, NULL, NULL};
    float *y = calloc(nx, sizeof(float)), *dx = calloc(nx, sizeof(float));
    float *g = calloc(f->np, sizeof(float));
    char s = f->l.sym;
    double loss = op_nn_layer_forward(&f->l, &c, s == 'E' ? NULL : f->x, s == 'L' ? NULL : y);
    op_nn_layer_backward_input(&f->l, &c, s == 'L' ? NULL : f->r, s == 'E' ? NULL : dx);
    op_nn_mem_release(&ai); /* W must not need anything from the I-only arena */
    op_nn_layer_backward_weight(&f->l, &c, g);
    op_nn_mem_release(&aw);
    if (corrupt_grad) g[f->np / 2] += 1e-3f * (1.0f + fabsf(g[f->np / 2]));

    double *pd = dz(f->np), *xd = dz(nx), *yd = dz(nx);
    for (size_t i = 0; i < f->np; i++) pd[i] = f->l.p[i];
    for (size_t i = 0; i < nx; i++) xd[i] = f->x[i];
    double lref = ref_forward(s, &f->cfg, pd, xd, f->tok, f->tgt, yd);
    double err = fabs(loss - lref) / fmax(1.0, fabs(lref));
    if (s != 'L') {
        double m = fmax(max_abs(yd, nx), 1e-3);
        for (size_t i = 0; i < nx; i++) err = fmax(err, fabs(y[i] - yd[i]) / m);
    }
    *e_fwd = err;

    const double h = 1e-5;
    double *num = dz(nx > f->np ? nx : f->np);
    *e_dx = 0;
    if (s != 'E') {
        for (size_t i = 0; i < nx; i++) {
            double keep = xd[i];
            xd[i] = keep + h;
            double jp = ref_J(f, pd, xd);
            xd[i] = keep - h;
            double jm = ref_J(f, pd, xd);
            xd[i] = keep;
            num[i] = (jp - jm) / (2 * h);
        }
        double m = fmax(max_abs(num, nx), 1e-3);
        for (size_t i = 0; i < nx; i++) *e_dx = fmax(*e_dx, fabs(dx[i] - num[i]) / m);
    }
    for (size_t i = 0; i < f->np; i++) {
        double keep = pd[i];
        pd[i] = keep + h;
        double jp = ref_J(f, pd, xd);
        pd[i] = keep - h;
        double jm = ref_J(f, pd, xd);
        pd[i] = keep;
        num[i] = (jp - jm) / (2 * h);
    }
    double m = fmax(max_abs(num, f->np), 1e-3);
    *e_dw = 0;
    for (size_t i = 0; i < f->np; i++) *e_dw = fmax(*e_dw, fabs(g[i] - num[i]) / m);
    free(y), free(dx), free(g), free(pd), free(xd), free(yd), free(num);
}

static void layer_case(char sym, const op_nn_cfg *cfg) {
    fixture f;
    fx_init(&f, sym, cfg, 1234 + (uint64_t)sym);
    double ef, ex, ew;
    check_layer(&f, &ef, &ex, &ew);
    printf("  layer '%c' window %d: forward rel err %.2e, I vs FD %.2e, W vs FD %.2e\n", sym,
           cfg->window, ef, ex, ew);
    CHECK_MSG(ef < 1e-5, "'%c' forward err %g", sym, ef);
    CHECK_MSG(ex < 2e-5, "'%c' I err %g", sym, ex);
    CHECK_MSG(ew < 2e-5, "'%c' W err %g", sym, ew);
    fx_free(&f);
}

TEST(embed_grads) { op_nn_cfg c = tiny_cfg(); layer_case('E', &c); }
TEST(head_grads) { op_nn_cfg c = tiny_cfg(); layer_case('L', &c); }
TEST(mlp_grads) { op_nn_cfg c = tiny_cfg(); layer_case('-', &c); }
TEST(attn_grads) { op_nn_cfg c = tiny_cfg(); layer_case('*', &c); }
TEST(attn_window_grads) {
    op_nn_cfg c = tiny_cfg();
    c.window = 2;
    layer_case('*', &c);
}
TEST(mamba_grads) { op_nn_cfg c = tiny_cfg(); layer_case('M', &c); }
TEST(moe_grads) { op_nn_cfg c = tiny_cfg(); layer_case('#', &c); }
TEST(moe_noshared_grads) {
    op_nn_cfg c = tiny_cfg();
    c.shared_dim = 0;
    c.top_k = 1;
    layer_case('#', &c);
}

/* The check itself must be able to fail: a gradient off by 0.1% in one entry is caught. */
TEST(fd_check_detects_errors) {
    op_nn_cfg c = tiny_cfg();
    fixture f;
    fx_init(&f, 'M', &c, 99);
    double ef, ex, ew;
    corrupt_grad = 1;
    check_layer(&f, &ef, &ex, &ew);
    corrupt_grad = 0;
    CHECK_MSG(ew > 2e-5, "corrupted W grad not detected: %g", ew);
    fx_free(&f);
}

/* I and W run apart (other microbatches in between, I-only arena freed) give bitwise the
 * results of running them back to back. */
static void split_case(char sym) {
    op_nn_cfg c = tiny_cfg();
    fixture f[2];
    fx_init(&f[0], sym, &c, 5);
    fx_init(&f[1], sym, &c, 6);
    memcpy(f[1].l.p, f[0].l.p, f[0].np * sizeof(float));
    size_t nx = (size_t)f[0].N * c.d, np = f[0].np;
    float *gA = calloc(np, sizeof(float)), *gB = calloc(np, sizeof(float));
    float *dxA[2], *dxB[2], *y[2];
    for (int m = 0; m < 2; m++) {
        dxA[m] = calloc(nx, sizeof(float)), dxB[m] = calloc(nx, sizeof(float));
        y[m] = calloc(nx, sizeof(float));
    }
    const float *xin[2] = {sym == 'E' ? NULL : f[0].x, sym == 'E' ? NULL : f[1].x};
    float *yo[2] = {sym == 'L' ? NULL : y[0], sym == 'L' ? NULL : y[1]};
    /* fused order: F0 I0 W0 F1 I1 W1 */
    for (int m = 0; m < 2; m++) {
        op_nn_mem ai = {0}, aw = {0};
        op_nn_ctx cx = {&ai, &aw, {f[m].tok, f[m].tgt, 0.5f}, NULL, NULL};
        op_nn_layer_forward(&f[0].l, &cx, xin[m], yo[m]);
        op_nn_layer_backward_input(&f[0].l, &cx, sym == 'L' ? NULL : f[m].r, sym == 'E' ? NULL : dxA[m]);
        op_nn_layer_backward_weight(&f[0].l, &cx, gA);
        op_nn_mem_release(&ai), op_nn_mem_release(&aw);
    }
    /* split order: F0 F1 I1 I0 (free I arenas) W0 W1 */
    op_nn_mem ai[2] = {{0}}, aw[2] = {{0}};
    op_nn_ctx cx[2];
    for (int m = 0; m < 2; m++) {
        cx[m] = (op_nn_ctx){&ai[m], &aw[m], {f[m].tok, f[m].tgt, 0.5f}, NULL, NULL};
        op_nn_layer_forward(&f[0].l, &cx[m], xin[m], yo[m]);
    }
    for (int m = 1; m >= 0; m--) {
        op_nn_layer_backward_input(&f[0].l, &cx[m], sym == 'L' ? NULL : f[m].r, sym == 'E' ? NULL : dxB[m]);
        op_nn_mem_release(&ai[m]);
    }
    for (int m = 0; m < 2; m++) {
        op_nn_layer_backward_weight(&f[0].l, &cx[m], gB);
        op_nn_mem_release(&aw[m]);
    }
    CHECK_MSG(!memcmp(gA, gB, np * sizeof(float)), "'%c' W grads differ", sym);
    for (int m = 0; m < 2; m++) CHECK(!memcmp(dxA[m], dxB[m], nx * sizeof(float)));
    double gn = 0;
    for (size_t i = 0; i < np; i++) gn += fabs(gA[i]);
    CHECK(gn > 0);
    for (int m = 0; m < 2; m++) free(dxA[m]), free(dxB[m]), free(y[m]);
    free(gA), free(gB);
    fx_free(&f[0]), fx_free(&f[1]);
}

TEST(split_iw_equals_fused) {
    const char *syms = "EM*-#L";
    for (const char *s = syms; *s; s++) split_case(*s);
}

/* Selective recomputation at the layer: F with a drop arena leaves the probabilities out of
 * `ai` (exactly B*H*T*T floats less), I recomputes them, and y, dx and the weight gradient
 * are bit for bit those of keep; op_nn_attn_core rows are probabilities (sum 1 on the band,
 * 0 outside). */
TEST(attn_selective_recompute_bitwise) {
    op_nn_cfg cfg = tiny_cfg();
    cfg.window = 5; /* a band narrower than T */
    fixture f;
    fx_init(&f, '*', &cfg, 21);
    size_t nx = (size_t)f.N * cfg.d;
    float *y[2], *dx[2], *g[2];
    size_t held[2];
    for (int k = 0; k < 2; k++) {
        op_nn_mem ai = {0}, aw = {0}, drop = {0};
        op_nn_ctx c = {&ai, &aw, {f.tok, f.tgt, kScale}, NULL, k ? &drop : NULL};
        y[k] = calloc(nx, sizeof(float)), dx[k] = calloc(nx, sizeof(float));
        g[k] = calloc(f.np, sizeof(float));
        op_nn_layer_forward(&f.l, &c, f.x, y[k]);
        op_nn_mem_release(&drop); /* what the stage does after F */
        held[k] = ai.used_bytes + aw.used_bytes;
        op_nn_layer_backward_input(&f.l, &c, f.r, dx[k]);
        op_nn_mem_release(&ai);
        op_nn_layer_backward_weight(&f.l, &c, g[k]);
        op_nn_mem_release(&aw);
    }
    size_t core = (size_t)cfg.batch * cfg.n_heads * cfg.seq * cfg.seq * sizeof(float);
    CHECK_EQ_INT(op_nn_attn_core_bytes(&cfg), core);
    CHECK_EQ_INT(held[0] - held[1], core);
    CHECK(!memcmp(y[0], y[1], nx * 4) && !memcmp(dx[0], dx[1], nx * 4));
    CHECK(!memcmp(g[0], g[1], f.np * 4));
    float *qkv = calloc(3 * nx, sizeof(float)), *att = malloc(core);
    for (size_t i = 0; i < 3 * nx; i++) qkv[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    op_nn_attn_core(&cfg, qkv, att);
    int T = cfg.seq, bad = 0;
    for (int row = 0; row < cfg.batch * cfg.n_heads * T; row++) {
        int t = row % T;
        double sum = 0;
        for (int u = 0; u < T; u++) {
            float p = att[(size_t)row * T + u];
            if (u > t || u <= t - cfg.window) bad += p != 0.0f;
            sum += p;
        }
        bad += fabs(sum - 1) > 1e-5;
    }
    CHECK_EQ_INT(bad, 0);
    for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]), free(g[k]);
    free(qkv), free(att);
    fx_free(&f);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(embed_grads);
    RUN(head_grads);
    RUN(mlp_grads);
    RUN(attn_grads);
    RUN(attn_window_grads);
    RUN(mamba_grads);
    RUN(moe_grads);
    RUN(moe_noshared_grads);
    RUN(fd_check_detects_errors);
    RUN(split_iw_equals_fused);
    RUN(attn_selective_recompute_bitwise);
    return check_report("nn");
}
