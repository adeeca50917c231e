/* ops.c: the small kernels every layer is built from: linear (sgemm), RMSNorm, SwiGLU, SiLU
 * and init fills.  See nn_impl.h for shapes. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "nn/nn_impl.h"

static void blas_one_thread(void) {
#ifdef OPENBLAS_CONST /* OpenBLAS's cblas.h; other BLAS builds: set their own variable */
    openblas_set_num_threads(1);
#endif
}

void op_nn_blas_single_thread(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* rank threads may all get here */
    pthread_once(&once, blas_one_thread);
}

static op_nn_gemm_rec *g_rec;
static int g_rec_cap, *g_rec_n;

void op_nn_gemm_record(op_nn_gemm_rec *rec, int cap, int *n) {
    g_rec = rec, g_rec_cap = cap, g_rec_n = n;
    if (n) *n = 0;
}

static void note(int ta, int tb, int M, int N, int K) {
    if (g_rec && *g_rec_n < g_rec_cap) g_rec[(*g_rec_n)++] = (op_nn_gemm_rec){ta, tb, M, N, K};
}

void op_nn_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    note(ta, tb, M, N, K);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void op_nn_linear_fwd(float *y, int ldy, const float *x, int ldx, const float *W, int N, int in,
                      int out) {
    if (N <= 0) return;
    note(0, 1, N, out, in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x, ldx, W, in, 0.0f,
                y, ldy);
}

void op_nn_linear_bwd_input(float *dx, int lddx, const float *dy, int lddy, const float *W,
                            int N, int in, int out) {
    if (N <= 0) return;
    note(0, 0, N, in, out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy, lddy, W, in,
                1.0f, dx, lddx);
}

void op_nn_linear_bwd_weight(float *dW, const float *dy, int lddy, const float *x, int ldx,
                             int N, int in, int out) {
    if (N <= 0) return;
    note(1, 0, out, in, N);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy, lddy, x, ldx, 1.0f,
                dW, in);
}

void op_nn_rmsnorm_fwd(float *y, float *xhat, float *rstd, const float *x, const float *g, int N,
                       int d, float eps) {
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d;
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        float r = (float)(1.0 / sqrt(ss / d + eps));
        rstd[n] = r;
        for (int i = 0; i < d; i++) {
            float h = xr[i] * r;
            xhat[(size_t)n * d + i] = h;
            y[(size_t)n * d + i] = h * g[i];
        }
    }
}

void op_nn_rmsnorm_bwd_input(float *dx, const float *dy, const float *xhat, const float *rstd,
                             const float *g, int N, int d) {
    for (int n = 0; n < N; n++) {
        const float *dr = dy + (size_t)n * d, *hr = xhat + (size_t)n * d;
        double dot = 0;
        for (int i = 0; i < d; i++) dot += (double)g[i] * dr[i] * hr[i];
        float mean = (float)(dot / d);
        for (int i = 0; i < d; i++) dx[(size_t)n * d + i] += rstd[n] * (g[i] * dr[i] - hr[i] * mean);
    }
}

void op_nn_rmsnorm_bwd_weight(float *dg, const float *dy, const float *xhat, int N, int d) {
    for (int n = 0; n < N; n++)
        for (int i = 0; i < d; i++) dg[i] += dy[(size_t)n * d + i] * xhat[(size_t)n * d + i];
}

float op_nn_silu(float x) { return x / (1.0f + op_nn_fexp(-x)); }

float op_nn_dsilu(float x) {
    float s = 1.0f / (1.0f + op_nn_fexp(-x));
    return s * (1.0f + x * (1.0f - s));
}

/* sigmoid through the shared exp; 4 lanes + a scalar tail per row */
static inline v4f sig4(v4f a) { return 1.0f / (1.0f + op_nn_fexp4(-a)); }
static inline float sig1(float a) { return 1.0f / (1.0f + op_nn_fexp(-a)); }

void op_nn_swiglu_fwd(float *z, const float *ab, int N, int f) {
    for (int n = 0; n < N; n++) {
        const float *a = ab + (size_t)n * 2 * f, *b = a + f;
        float *zr = z + (size_t)n * f;
        int j = 0;
        for (; j + 4 <= f; j += 4) {
            v4f av = op_nn_ld4(a + j);
            op_nn_st4(zr + j, av * sig4(av) * op_nn_ld4(b + j));
        }
        for (; j < f; j++) zr[j] = a[j] * sig1(a[j]) * b[j];
    }
}

void op_nn_swiglu_bwd(float *dab, const float *dz, const float *ab, int N, int f) {
    for (int n = 0; n < N; n++) {
        const float *a = ab + (size_t)n * 2 * f, *b = a + f, *g = dz + (size_t)n * f;
        float *da = dab + (size_t)n * 2 * f, *db = da + f;
        int j = 0;
        for (; j + 4 <= f; j += 4) { /* one exp for silu and its derivative */
            v4f av = op_nn_ld4(a + j), gv = op_nn_ld4(g + j), sg = sig4(av);
            op_nn_st4(da + j, gv * op_nn_ld4(b + j) * (sg * (1.0f + av * (1.0f - sg))));
            op_nn_st4(db + j, gv * (av * sg));
        }
        for (; j < f; j++) {
            float sg = sig1(a[j]);
            da[j] = g[j] * b[j] * (sg * (1.0f + a[j] * (1.0f - sg)));
            db[j] = g[j] * (a[j] * sg);
        }
    }
}

void op_nn_fill_normal(float *p, size_t n, float std, op_rng *r) {
    for (size_t i = 0; i < n; i++) {
        /* Box-Muller; 1-u keeps the log argument in (0, 1] */
        double u1 = 1.0 - op_rng_uniform(r), u2 = op_rng_uniform(r);
        p[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

void op_nn_fill_uniform(float *p, size_t n, float a, op_rng *r) {
    for (size_t i = 0; i < n; i++) p[i] = (float)((2.0 * op_rng_uniform(r) - 1.0) * a);
}

void op_nn_fill_const(float *p, size_t n, float v) {
    for (size_t i = 0; i < n; i++) p[i] = v;
}

float *op_nn_stash(op_nn_mem *a, const float *x, size_t n) {
    float *p = OP_NN_NEWF(a, n);
    memcpy(p, x, n * sizeof *p);
    return p;
}
