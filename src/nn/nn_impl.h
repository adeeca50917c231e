/* nn_impl.h: kernels shared by the layer files (src/nn/ops.c) and the per-family entry points
 * that layer.c dispatches to.  Internal to src/nn; tests may include it. */
#ifndef OCTOPIPE_NN_IMPL_H
#define OCTOPIPE_NN_IMPL_H
#include <string.h>

#include "octopipe/nn.h"

/* ---- linear: W is (out, in) row-major, no bias ---- */
/* y (N,out) = x (N,in) W^T; ldy/ldx are row strides */
void op_nn_linear_fwd(float *y, int ldy, const float *x, int ldx, const float *W, int N, int in,
                      int out);
/* dx (N,in) += dy (N,out) W */
void op_nn_linear_bwd_input(float *dx, int lddx, const float *dy, int lddy, const float *W,
                            int N, int in, int out);
/* dW (out,in) += dy^T (out,N) x (N,in) */
void op_nn_linear_bwd_weight(float *dW, const float *dy, int lddy, const float *x, int ldx,
                             int N, int in, int out);

/* General row-major sgemm: C (M,N) = alpha op(A) op(B) + beta C (recorded like the above). */
void op_nn_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc);

/* Recording of the sgemm calls the linear kernels make (benchmarks replay them to compare a
 * layer with raw sgemm on the same shapes).  rec = NULL stops recording. */
typedef struct op_nn_gemm_rec {
    int ta, tb, M, N, K; /* cblas row-major transposes and sizes */
} op_nn_gemm_rec;
void op_nn_gemm_record(op_nn_gemm_rec *rec, int cap, int *n);

/* ---- RMSNorm over rows of width d: y = g * x * rstd, rstd = 1/sqrt(mean(x^2) + eps) ---- */
void op_nn_rmsnorm_fwd(float *y, float *xhat, float *rstd, const float *x, const float *g, int N,
                       int d, float eps);
/* dx (N,d) += rstd * (g*dy - xhat * mean(g*dy*xhat)) */
void op_nn_rmsnorm_bwd_input(float *dx, const float *dy, const float *xhat, const float *rstd,
                             const float *g, int N, int d);
/* dg (d) += sum_n dy * xhat */
void op_nn_rmsnorm_bwd_weight(float *dg, const float *dy, const float *xhat, int N, int d);

/* ---- SwiGLU: ab (N, 2f) = [a | b], z (N,f) = silu(a) * b ---- */
void op_nn_swiglu_fwd(float *z, const float *ab, int N, int f);
/* dab (N,2f) = d/d[a|b] given dz (N,f) (overwrites) */
void op_nn_swiglu_bwd(float *dab, const float *dz, const float *ab, int N, int f);

/* exp in float, inline and branch-free: glibc's expf is a call per element, and the scan
 * does one per (token, channel, state) and the gates one per hidden unit.  x = n ln2 + r, |r| <= ln2/2, degree-7 Taylor:
 * relative error < 1e-7 over the clamp range [-87, 88] (exp(-87) ~ 1.6e-38 stands for 0). */
static inline float op_nn_fexp(float x) {
    if (x != x) return x; /* NaN (a diverged run) stays NaN; cast to int below it is undefined */
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    float t = x * 1.44269504f + 12582912.0f; /* + 1.5 * 2^23 rounds to an integer */
    float n = t - 12582912.0f;
    float r = x - n * 0.693145751953125f - n * 1.428606765330187e-6f;
    float q = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
                  r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    union { int32_t i; float f; } u = {((int32_t)n + 127) * (1 << 23)};
    return q * u.f;
}

/* Four lanes at a time with GCC/Clang vector types (SSE2 on x86-64); same polynomial. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f op_nn_ld4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void op_nn_st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }
static inline v4f op_nn_splat(float x) { return (v4f){x, x, x, x}; }

static inline v4f op_nn_fexp4(v4f x) {
    /* NaN lanes (a diverged run) compute on 0 and return NaN: converting NaN to int is undefined */
    const v4i nan = x != x;
    const v4f x0 = x;
    x = (v4f)((v4i)x & ~nan);
    v4i lo = x < op_nn_splat(-87.0f), hi = x > op_nn_splat(88.0f); /* lanes: -1 true, 0 false */
    x = (v4f)(((v4i)x & ~lo) | ((v4i)op_nn_splat(-87.0f) & lo));
    x = (v4f)(((v4i)x & ~hi) | ((v4i)op_nn_splat(88.0f) & hi));
    v4f n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    v4f r = x - n * 0.693145751953125f - n * 1.428606765330187e-6f;
    v4f q = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
                r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    v4i e = (__builtin_convertvector(n, v4i) + 127) * (1 << 23);
    return (v4f)(((v4i)(q * (v4f)e) & ~nan) | ((v4i)x0 & nan));
}

float op_nn_silu(float x);
float op_nn_dsilu(float x); /* d silu / dx */

/* Init helpers: normal(0, std) and uniform(-a, a) fills. */
void op_nn_fill_normal(float *p, size_t n, float std, op_rng *r);
void op_nn_fill_uniform(float *p, size_t n, float a, op_rng *r);
void op_nn_fill_const(float *p, size_t n, float v);

/* Copies n floats into activation memory. */
float *op_nn_stash(op_nn_mem *a, const float *x, size_t n);
#define OP_NN_NEW(a, type, n) ((type *)op_nn_mem_alloc((a), sizeof(type) * (size_t)(n)))
#define OP_NN_NEWF(a, n) OP_NN_NEW((a), float, (n))
/* Not zeroed: only for buffers the next kernel writes completely (a beta-0 sgemm, an
 * elementwise map); everything accumulated into (+=) comes from OP_NN_NEWF. */
#define OP_NN_NEWF_RAW(a, n) ((float *)op_nn_mem_alloc_raw((a), sizeof(float) * (size_t)(n)))

/* ---- per-family entry points (same contract as op_nn_layer_*) ---- */
#define OP_NN_FAMILY(fam)                                                                  \
    size_t op_nn_##fam##_nparams(const op_nn_cfg *c);                                     \
    void op_nn_##fam##_init(const op_nn_cfg *c, float *p, op_rng *r);                     \
    double op_nn_##fam##_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x,       \
                                 float *y);                                                \
    void op_nn_##fam##_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, \
                                      float *dx);                                          \
    void op_nn_##fam##_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad);
OP_NN_FAMILY(embed)
OP_NN_FAMILY(attn)
OP_NN_FAMILY(mamba)
OP_NN_FAMILY(mlp)
OP_NN_FAMILY(moe)
OP_NN_FAMILY(head)
#undef OP_NN_FAMILY

#endif
