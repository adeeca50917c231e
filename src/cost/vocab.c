/* vocab.c: the vocabulary layers: token embedding (a memory-bound row lookup; its weight
 * gradient is a scatter-add) and the head (final norm, logits GEMM, fp32 softmax
 * cross-entropy).  Both are vocab-parallel under TP, as in Megatron. */
#include "cost/cost_internal.h"

void op_cost_part_embed(op_cost_acc *a, double T, double h, double vocab) {
    double dt = a->dt, tp = a->tp;
    /* F: each TP rank reads the rows of its vocab shard (T*h/tp on average) and writes a
     * full T x h partial sum (zeros elsewhere), reduce-scattered over the sequence */
    op_cost_kernel_rep(a, OP_PASS_F, 0, dt * (T * h / tp + T * h) + 8.0 * T);
    op_cost_coll(a, OP_PASS_F, T, h);
    /* I: token ids have no gradient.  W: all-gather dY, scatter-add it into the fp32
     * gradient rows of the shard (read + write 8 bytes per element) */
    op_cost_kernel_rep(a, OP_PASS_W, T * h / tp, dt * T * h + 8.0 * T * h / tp + 8.0 * T);
    op_cost_coll(a, OP_PASS_W, T, h);
    a->params_shard += vocab * h;
    a->act += 8.0 * T; /* int64 token ids, needed by the scatter */
    a->act_w_in += 8.0 * T;
}

void op_cost_part_head(op_cost_acc *a, double T, double h, double vocab) {
    double dt = a->dt, V = vocab;
    op_cost_norm(a, T, h);
    op_cost_coll(a, OP_PASS_F, T, h); /* all-gather of the normed sequence shards */
    op_cost_coll(a, OP_PASS_I, T, h); /* reduce-scatter of dX */
    op_cost_gemm(a, T, h, V);
    /* cross-entropy over the T x V logits (vocab-parallel; the T-sized max/sum all-reduces
     * are ignored): F upcasts to an fp32 buffer, then exp-sums in place (read + write);
     * I turns the fp32 softmax into the logits gradient and casts it for the GEMMs */
    op_cost_kernel(a, OP_PASS_F, 5.0 * T * V, T * V * (dt + 4.0 + 8.0));
    op_cost_kernel(a, OP_PASS_I, 3.0 * T * V, T * V * (4.0 + 4.0 + dt));
    /* stashed: norm input, norm output, the fp32 logits/softmax buffer.  The logits
     * gradient lives in that buffer until W, so it is no extra W-only memory. */
    a->act += dt * 2.0 * T * h + 4.0 * T * V;
    a->act_w_in += dt * T * h + 4.0 * T * V;
    a->act_w_grad -= dt * T * V;
}
