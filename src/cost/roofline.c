/* roofline.c: kernel-group timing and the building blocks every layer is made of (GEMM,
 * RMSNorm, elementwise, the pre-norm/residual frame).  Formulas: docs/cost-model.md. */
#include "cost/cost_internal.h"

static double group_ms(const op_device *d, double flops, double bytes) {
    double t_flop = flops / (d->peak_tflops * 1e12 * d->mfu);
    double t_mem = bytes / (d->mem_bw_GBps * 1e9 * d->bw_eff);
    return (t_flop > t_mem ? t_flop : t_mem) * 1e3 + d->launch_ms;
}

void op_cost_kernel_rep(op_cost_acc *a, int p, double flops, double bytes) {
    OP_ASSERT(p >= 0 && p < OP_PASS_N, "bad pass %d", p);
    a->flops[p] += flops;
    a->bytes[p] += bytes;
    a->ms[p] += group_ms(a->dev, flops, bytes);
}

void op_cost_kernel(op_cost_acc *a, int p, double flops, double bytes) {
    op_cost_kernel_rep(a, p, flops / a->tp, bytes / a->tp);
}

void op_cost_gemm_grouped(op_cost_acc *a, double M, double K, double N, double n_w,
                          double touched) {
    if (M <= 0 || K <= 0 || N <= 0 || n_w <= 0) return;
    double fl = 2.0 * M * K * N, dt = a->dt, wb = touched * K * N;
    op_cost_kernel(a, OP_PASS_F, fl, dt * (M * K + wb + M * N));
    /* dX[M,K] = dY[M,N] W^T: reads dY and W, writes dX */
    op_cost_kernel(a, OP_PASS_I, fl, dt * (M * N + wb + M * K));
    /* dW[K,N] = X^T dY, accumulated into the fp32 main gradient (read + write: 8 B/param) */
    op_cost_kernel(a, OP_PASS_W, fl, dt * (M * K + M * N) + 8.0 * wb);
    a->act_w_grad += dt * M * N; /* dY, produced by I, consumed by W */
}

void op_cost_gemm(op_cost_acc *a, double M, double K, double N) {
    if (M <= 0 || K <= 0 || N <= 0) return;
    op_cost_gemm_grouped(a, M, K, N, 1, 1);
    a->params_shard += K * N;
}

void op_cost_norm(op_cost_acc *a, double T, double h) {
    if (T <= 0 || h <= 0) return;
    op_cost_kernel(a, OP_PASS_F, 4.0 * T * h, a->dt * 2.0 * T * h);
    /* reads x and dy, writes dx; the scale gradient is reduced in the same kernel */
    op_cost_kernel(a, OP_PASS_I, 6.0 * T * h, a->dt * 3.0 * T * h);
    a->params_rep += h;
}

void op_cost_eltwise(op_cost_acc *a, double in, double out, double flops_per_out) {
    if (in <= 0 && out <= 0) return;
    op_cost_kernel(a, OP_PASS_F, flops_per_out * out, a->dt * (in + out));
    op_cost_kernel(a, OP_PASS_I, 2.0 * flops_per_out * out, a->dt * (in + out + in));
}

void op_cost_pre(op_cost_acc *a, double T, double h) {
    op_cost_norm(a, T, h);
    a->act += a->dt * 2.0 * T * h;  /* norm input (for its backward) and output */
    a->act_w_in += a->dt * T * h;   /* the norm output is the input of the first GEMMs */
    op_cost_coll(a, OP_PASS_F, T, h); /* sequence-parallel all-gather before the mixer */
    op_cost_coll(a, OP_PASS_I, T, h); /* its backward: reduce-scatter of dX */
}

void op_cost_coll(op_cost_acc *a, int p, double T, double width) {
    a->coll[p] += 1;
    a->coll_bytes[p] += a->dt * T * width;
}

void op_cost_post(op_cost_acc *a, double T, double h) {
    /* residual add: reads x and the branch output, writes the sum; backward adds the
     * branch's dX into the residual gradient (same traffic) */
    op_cost_kernel(a, OP_PASS_F, T * h, a->dt * 3.0 * T * h);
    op_cost_kernel(a, OP_PASS_I, T * h, a->dt * 3.0 * T * h);
    op_cost_coll(a, OP_PASS_F, T, h); /* reduce-scatter of the branch output */
    op_cost_coll(a, OP_PASS_I, T, h); /* its backward: all-gather of dY */
}
