/* attn.c: attention sublayers: softmax attention (causal, sliding, chunked, bidirectional),
 * multi-head latent attention (DeepSeek MLA) and linear attention (gated delta net,
 * lightning).  Flash attention is assumed: the seq^2 scores are never stored. */
#include "cost/cost_internal.h"

#define LIN_CHUNK 64.0 /* chunk length of chunked linear-attention kernels (fla) */

/* Query-key pairs one sample of s tokens computes. */
static double attn_pairs(const op_layer *l, double s) {
    double w = l->window > 0 ? l->window : s;
    switch (l->attn) {
    case OP_ATTN_BIDIR: return s * s;
    case OP_ATTN_SLIDING: /* query i sees min(i + 1, w) keys */
        if (w >= s) return s * (s + 1) / 2;
        return w * (w + 1) / 2 + (s - w) * w;
    case OP_ATTN_CHUNKED: { /* causal inside each chunk of w tokens */
        if (w >= s) return s * (s + 1) / 2;
        double k = (double)(long long)(s / w), r = s - k * w;
        return k * w * (w + 1) / 2 + r * (r + 1) / 2;
    }
    default: return s * (s + 1) / 2; /* FULL, MLA: causal */
    }
}

/* Flash-attention core over T = mbs * s queries: q_dim = nq * dqk, o_dim = nq * dv. */
static void attn_core(op_cost_acc *a, const op_layer *l, double mbs, double s, double nq,
                      double dqk, double dv, double kv_elems) {
    double T = mbs * s, dt = a->dt;
    double fl = mbs * attn_pairs(l, s) * nq * (2.0 * dqk + 2.0 * dv); /* QK^T and PV */
    double by = dt * T * (nq * dqk + kv_elems + nq * dv) + 4.0 * T * nq; /* q,k,v,o + lse */
    double before = a->ms[OP_PASS_F];
    op_cost_kernel(a, OP_PASS_F, fl, by);
    /* selective recomputation re-runs this kernel from the stashed q, k, v and drops what
     * only it produces: the output o and the softmax statistics (the seq^2 scores are never
     * stored with flash attention, so that is the whole core's stash) */
    a->sel_ms += a->ms[OP_PASS_F] - before;
    a->sel_act += dt * T * nq * dv + 4.0 * T * nq;
    /* backward: 5 matmuls (S recomputed, dV, dP, dQ, dK) vs 2: 2.5x the flops; reads
     * q,k,v,o,dO and writes dq,dk,dv: 2x the bytes */
    op_cost_kernel(a, OP_PASS_I, 2.5 * fl, 2.0 * by);
}

static void softmax_attn(op_cost_acc *a, const op_layer *l, double mbs, double s, double h,
                         double hin) {
    double T = mbs * s, dt = a->dt;
    double nq = l->n_heads, nkv = l->n_kv_heads > 0 ? l->n_kv_heads : nq;
    double hd = l->head_dim > 0 ? l->head_dim : h / nq;
    double q = nq * hd, kv = nkv * hd;
    op_cost_gemm(a, T, hin, q + 2 * kv);
    op_cost_eltwise(a, T * (q + kv), T * (q + kv), 3); /* RoPE on q and k */
    attn_core(a, l, mbs, s, nq, hd, hd, 2 * kv);
    op_cost_gemm(a, T, q, h);
    a->act += dt * (T * (q + 2 * kv) + T * q) + 4.0 * T * nq; /* q,k,v, o, lse */
    a->act_w_in += dt * T * q;                                /* o: input of o_proj */
}

static void mla_attn(op_cost_acc *a, const op_layer *l, double mbs, double s, double h) {
    double T = mbs * s, dt = a->dt, nq = l->n_heads;
    double ql = l->q_lora_rank, kvl = l->kv_lora_rank, rope = l->qk_rope_dim;
    double nope = l->qk_nope_dim, dv = l->v_head_dim > 0 ? l->v_head_dim : nope;
    double dqk = nope + rope;
    if (ql > 0) { /* q_a_proj -> norm -> q_b_proj */
        op_cost_gemm(a, T, h, ql);
        op_cost_norm(a, T, ql);
        op_cost_gemm(a, T, ql, nq * dqk);
        a->act += dt * 2.0 * T * ql;
        a->act_w_in += dt * T * ql;
    } else {
        op_cost_gemm(a, T, h, nq * dqk);
    }
    /* kv_a_proj_with_mqa -> norm(latent) -> kv_b_proj (per-head k_nope and v) */
    op_cost_gemm(a, T, h, kvl + rope);
    op_cost_norm(a, T, kvl);
    op_cost_gemm(a, T, kvl, nq * (nope + dv));
    op_cost_eltwise(a, T * (nq + 1) * rope, T * (nq + 1) * rope, 3); /* RoPE */
    attn_core(a, l, mbs, s, nq, dqk, dv, nq * (dqk + dv));
    op_cost_gemm(a, T, nq * dv, h);
    a->act += dt * T * ((kvl + rope) + kvl + nq * dqk * 2 + nq * dv * 2) + 4.0 * T * nq;
    a->act_w_in += dt * T * (kvl + nq * dv); /* normed latent, o */
}

/* Chunked linear recurrence with a dk x dv state per head (gated delta net, lightning
 * attention, Mamba-2 SSD): FLOPs per token per head.  Intra-chunk causal products cost
 * C*(dk+dv); reading the state and updating it cost 2*dk*dv each. */
double op_cost_chunked_scan_flops(double C, double dk, double dv) {
    return C * (dk + dv) + 4.0 * dk * dv;
}

static void linear_attn(op_cost_acc *a, const op_layer *l, double T, double h) {
    double dt = a->dt;
    /* gated delta net (qwen3_next) has no softmax heads; lightning (MiniMax) keeps them */
    int gdn = l->n_heads == 0;
    double hd = l->head_dim > 0 ? l->head_dim : (l->n_heads > 0 ? h / l->n_heads : 0);
    double nk = l->lin_k_heads > 0 ? l->lin_k_heads : l->n_heads;
    double nv = l->lin_v_heads > 0 ? l->lin_v_heads : l->n_heads;
    double dk = l->lin_k_dim > 0 ? l->lin_k_dim : hd, dv = l->lin_v_dim > 0 ? l->lin_v_dim : hd;
    double qk = nk * dk, vv = nv * dv, gates = gdn ? 2 * nv : 0; /* beta and decay per head */
    /* q, k, v and the output gate z (lightning: q, k, v, output_gate) */
    op_cost_gemm(a, T, h, 2 * qk + 2 * vv + gates);
    a->act += dt * T * (2 * qk + 2 * vv + gates);
    if (gdn) { /* short causal conv over q, k, v; its weight gradient is fused into I */
        double C = 2 * qk + vv, k = l->ssm_conv > 0 ? l->ssm_conv : 4;
        op_cost_kernel(a, OP_PASS_F, 2 * k * T * C, dt * 2 * T * C);
        op_cost_kernel(a, OP_PASS_I, 4 * k * T * C, dt * 3 * T * C);
        a->params_shard += C * k + 2 * nv; /* conv, A_log, dt_bias */
        a->act += dt * T * C;
    }
    double fl = T * nv * op_cost_chunked_scan_flops(LIN_CHUNK, dk, dv);
    double by = dt * T * (2 * qk + 2 * vv + gates) + 2 * 4.0 * (T / LIN_CHUNK) * nv * dk * dv;
    double before = a->ms[OP_PASS_F];
    op_cost_kernel(a, OP_PASS_F, fl, by);
    op_cost_kernel(a, OP_PASS_I, 2.0 * fl, 2.0 * by); /* recompute states + gradients */
    a->sel_ms += a->ms[OP_PASS_F] - before; /* the scan is this layer's attention core */
    a->sel_act += dt * T * vv;              /* its output */
    op_cost_eltwise(a, 2 * T * vv, T * vv, 5);          /* gated RMSNorm(o) * silu(z) */
    a->params_rep += gdn ? dv : vv;
    op_cost_gemm(a, T, vv, h);
    a->act += dt * 2 * T * vv; /* core output, gated-norm output */
    a->act_w_in += dt * T * vv;
}

void op_cost_part_attn(op_cost_acc *a, const op_layer *l, double mbs, double s, double h,
                       int with_frame) {
    double T = mbs * s, hin = l->attn_in_dim > 0 ? l->attn_in_dim : h; /* zamba2: 2h */
    if (with_frame) op_cost_pre(a, T, hin);
    switch (l->attn) {
    case OP_ATTN_NONE: break;
    case OP_ATTN_LINEAR: linear_attn(a, l, T, h); break;
    case OP_ATTN_MLA: mla_attn(a, l, mbs, s, h); break;
    default: softmax_attn(a, l, mbs, s, h, hin); break;
    }
    if (with_frame) op_cost_post(a, T, h);
}
