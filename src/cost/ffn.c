/* ffn.c: dense MLP and mixture-of-experts sublayers.
 * MoE: tokens are routed evenly (each of E experts gets T*k/E rows); the expert GEMMs run as
 * one grouped GEMM per projection whose FLOPs scale with top_k and whose weight traffic
 * scales with the experts a device holds (all of them once T*k >= E). */
#include "cost/cost_internal.h"

void op_cost_part_mlp(op_cost_acc *a, double T, double h, double ffn, int gated,
                      double h_out, int with_frame) {
    if (ffn <= 0) return;
    double dt = a->dt, up = gated ? 2 * ffn : ffn;
    if (with_frame) op_cost_pre(a, T, h);
    op_cost_gemm(a, T, h, up);
    op_cost_eltwise(a, T * up, T * ffn, gated ? 5 : 3); /* silu(g)*u, gelu, relu^2 */
    op_cost_gemm(a, T, ffn, h_out);
    a->act += dt * T * (up + ffn); /* up output (activation backward), activation output */
    a->act_w_in += dt * T * ffn;   /* input of the down projection */
    if (with_frame) op_cost_post(a, T, h);
}

void op_cost_part_moe(op_cost_acc *a, const op_layer *l, double T, double h, int ep,
                      int with_frame) {
    double dt = a->dt, E = l->n_experts, k = l->top_k > 0 ? l->top_k : 1;
    double d = l->expert_dim > 0 ? l->expert_dim : l->ffn_dim;
    double up = l->ffn_gated ? 2 * d : d, Tk = T * k;
    if (E <= 0 || d <= 0) return;
    if (k > E) k = E, Tk = T * k;
    if (with_frame) op_cost_pre(a, T, h);
    /* router: replicated over TP (each rank routes its sequence shard) */
    op_cost_gemm(a, T, h, E);
    a->params_shard -= h * E;
    a->params_rep += h * E;
    /* softmax + top-k over fp32 logits; keeps probs and indices */
    op_cost_kernel(a, OP_PASS_F, 5 * T * E, 8.0 * T * E + 8.0 * Tk);
    op_cost_kernel(a, OP_PASS_I, 5 * T * E, 8.0 * T * E + 8.0 * Tk);
    a->act += 4.0 * T * E + 8.0 * Tk;
    /* permute tokens to experts (F), gather their gradients back (I) */
    op_cost_kernel(a, OP_PASS_F, 0, dt * (T * h + Tk * h));
    op_cost_kernel(a, OP_PASS_I, Tk * h, dt * (Tk * h + T * h));
    /* experts: this device holds E/ep of them and processes T*k rows on average */
    double held = E / (ep > 0 ? ep : 1), touched = Tk < held ? Tk : held;
    op_cost_gemm_grouped(a, Tk, h, up, held, touched);
    op_cost_eltwise(a, Tk * up, Tk * d, l->ffn_gated ? 5 : 3);
    op_cost_gemm_grouped(a, Tk, d, h, held, touched);
    a->params_expert += E * (h * up + d * h);
    a->params_expert_active += k * (h * up + d * h);
    /* unpermute and weighted combine: F reads expert outputs and probs, writes T*h;
     * I reads dY and the expert outputs (for d probs), writes their gradients */
    op_cost_kernel(a, OP_PASS_F, 2 * Tk * h, dt * (Tk * h + T * h));
    op_cost_kernel(a, OP_PASS_I, 2 * Tk * h, dt * (T * h + 2 * Tk * h));
    /* permuted input, up output, activation output, expert output */
    a->act += dt * Tk * (h + up + d + h);
    a->act_w_in += dt * Tk * (h + d);
    /* shared experts: one dense MLP of n_shared * shared_dim on every token */
    if (l->n_shared > 0) {
        double sd = l->shared_dim > 0 ? l->shared_dim : d;
        op_cost_part_mlp(a, T, h, l->n_shared * sd, l->ffn_gated, h, 0);
    }
    if (ep > 1) { /* dispatch and combine all-to-all in F, their mirrors in I */
        a->n_a2a[OP_PASS_F] += 2;
        a->n_a2a[OP_PASS_I] += 2;
        a->a2a_bytes = dt * Tk * h * (ep - 1) / ep;
    }
    if (with_frame) op_cost_post(a, T, h);
}
