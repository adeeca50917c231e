/* mamba.c: Mamba sublayers.  Projections are GEMMs; the causal conv1d and the selective scan
 * are memory-bound kernels timed from their HBM bytes (the roofline max picks bytes).
 *   Mamba-1 (jamba):       in_proj h->2*inner, conv, x_proj inner->r+2N, dt_proj r->inner,
 *                          selective scan (gated by z), out_proj inner->h.
 *   Mamba-2 (nemotron_h, falcon_h1): in_proj h->2*inner+2*g*N+heads, conv over x,B,C,
 *                          SSD chunked scan, gated RMSNorm, out_proj inner->h. */
#include <math.h>

#include "cost/cost_internal.h"

#define SSD_CHUNK 128.0 /* Mamba-2 chunk length (nemotron_h chunk_size) */

/* causal depthwise conv1d over C channels, k taps; its weight gradient is fused into I */
static void conv1d(op_cost_acc *a, double T, double C, double k) {
    op_cost_kernel(a, OP_PASS_F, 2 * k * T * C, a->dt * 2 * T * C);
    op_cost_kernel(a, OP_PASS_I, 4 * k * T * C, a->dt * 3 * T * C);
    a->params_shard += C * (k + 1); /* weight and bias */
}

static void mamba2(op_cost_acc *a, const op_layer *l, double T, double h) {
    double dt = a->dt, inner = l->ssm_inner > 0 ? l->ssm_inner : 2 * h;
    double N = l->ssm_state > 0 ? l->ssm_state : 128, g = l->ssm_groups > 0 ? l->ssm_groups : 1;
    double hd = l->ssm_head_dim > 0 ? l->ssm_head_dim : 64;
    double nh = l->ssm_heads > 0 ? l->ssm_heads : inner / hd;
    double k = l->ssm_conv > 0 ? l->ssm_conv : 4, bc = 2 * g * N;
    hd = inner / nh;
    op_cost_gemm(a, T, h, 2 * inner + bc + nh); /* z, x, B, C, dt */
    conv1d(a, T, inner + bc, k);
    /* SSD: reads x, B, C, dt, writes y; chunk states (fp32) written and read back */
    double fl = T * nh * op_cost_chunked_scan_flops(SSD_CHUNK, N, hd);
    double by = dt * T * (inner + bc + nh + inner) + 2 * 4.0 * (T / SSD_CHUNK) * nh * hd * N;
    op_cost_kernel(a, OP_PASS_F, fl, by);
    op_cost_kernel(a, OP_PASS_I, 2.0 * fl, 2.0 * by); /* scan backward: ~2x forward */
    a->params_shard += 3 * nh;                        /* A_log, D, dt_bias */
    op_cost_eltwise(a, 2 * T * inner, T * inner, 5);  /* RMSNorm(y) * silu(z) */
    a->params_shard += inner;
    op_cost_gemm(a, T, inner, h);
    /* in_proj output, conv output, y, gated-norm output */
    a->act += dt * T * ((2 * inner + bc + nh) + (inner + bc) + inner + inner);
    a->act_w_in += dt * T * inner;
}

static void mamba1(op_cost_acc *a, const op_layer *l, double T, double h) {
    double dt = a->dt, inner = l->ssm_inner > 0 ? l->ssm_inner : 2 * h;
    double N = l->ssm_state > 0 ? l->ssm_state : 16, k = l->ssm_conv > 0 ? l->ssm_conv : 4;
    double r = l->ssm_dt_rank > 0 ? l->ssm_dt_rank : ceil(h / 16.0);
    op_cost_gemm(a, T, h, 2 * inner); /* x, z */
    conv1d(a, T, inner, k);
    op_cost_gemm(a, T, inner, r + 2 * N); /* x_proj: dt, B, C */
    op_cost_gemm(a, T, r, inner);         /* dt_proj */
    a->params_shard += inner;             /* dt_proj bias */
    /* selective scan, state in SRAM: reads u, delta, z, B, C, writes y; ~9 flops per
     * (token, channel, state) */
    double fl = 9.0 * T * inner * N, by = dt * T * (4 * inner + 2 * N);
    op_cost_kernel(a, OP_PASS_F, fl, by);
    op_cost_kernel(a, OP_PASS_I, 2.0 * fl, 2.0 * by);
    a->params_shard += inner * N + inner; /* A_log, D */
    op_cost_gemm(a, T, inner, h);
    /* in_proj output, conv output, x_proj output, delta, y */
    a->act += dt * T * (2 * inner + inner + (r + 2 * N) + inner + inner);
    a->act_w_in += dt * T * (inner + r + inner); /* inputs of x_proj, dt_proj, out_proj */
}

void op_cost_part_mamba(op_cost_acc *a, const op_layer *l, double T, double h, int with_frame) {
    if (with_frame) op_cost_pre(a, T, h);
    if (l->ssm_version == 1) mamba1(a, l, T, h);
    else mamba2(a, l, T, h);
    if (with_frame) op_cost_post(a, T, h);
}
