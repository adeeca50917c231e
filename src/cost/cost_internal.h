/* cost_internal.h: the roofline accumulator the per-kind cost parts share (cost module only).
 *
 * A layer is a list of kernel groups in three passes: F (forward), I (gradient w.r.t. inputs)
 * and W (weight gradients).  Each group has FLOPs and HBM bytes; its time is
 *   max(flops / (peak * mfu), bytes / (bw * bw_eff)) + launch overhead.
 * Parts describe the whole microbatch before tensor parallelism; the accumulator divides
 * work by tp, and op_cost_layers divides activations and sharded parameters by tp. */
#ifndef OCTOPIPE_COST_INTERNAL_H
#define OCTOPIPE_COST_INTERNAL_H
#include "octopipe/cost.h"

enum { OP_PASS_F, OP_PASS_I, OP_PASS_W, OP_PASS_N };

typedef struct op_cost_acc {
    const op_device *dev;
    double tp;               /* work is divided by this */
    double dt;               /* bytes per activation / weight element */
    double ms[OP_PASS_N];    /* kernel time per pass, without communication */
    double flops[OP_PASS_N]; /* per device (after /tp) */
    double bytes[OP_PASS_N];
    double params_shard;  /* parameters split over tp (GEMM weights, per-head tensors) */
    double params_rep;    /* parameters replicated over tp (norm scales, routers) */
    double params_expert; /* routed-expert parameters (split over tp and ep); not in the above */
    double params_expert_active; /* those of them one token passes through (top_k of E) */
    double act;           /* bytes F stashes, whole microbatch (before /tp) */
    double act_w_in;      /* bytes of weight-GEMM inputs among act (W needs them) */
    double act_w_grad;    /* bytes of weight-GEMM output gradients I leaves for W */
    int coll[OP_PASS_N];  /* TP collectives (all-gather or reduce-scatter) per pass */
    double coll_bytes[OP_PASS_N]; /* their full (unsharded) tensor bytes */
    int n_a2a[OP_PASS_N]; /* EP all-to-alls of the routed tokens */
    double a2a_bytes;     /* bytes of one all-to-all, whole microbatch */
    /* the attention core (what selective recomputation drops and re-runs): */
    double sel_ms;        /* its F kernel time, per device */
    double sel_act;       /* bytes of act only it needs (its output, softmax stats) */
} op_cost_acc;

/* One kernel group in pass p: whole-microbatch flops and bytes, divided by tp here. */
void op_cost_kernel(op_cost_acc *a, int p, double flops, double bytes);
/* The same for work TP does not split (already per device). */
void op_cost_kernel_rep(op_cost_acc *a, int p, double flops, double bytes);

/* Weight GEMM Y[M,N] = X[M,K] W[K,N]: F, dX (I), dW (W); K*N parameters; dY kept for W. */
void op_cost_gemm(op_cost_acc *a, double M, double K, double N);
/* n_w weight matrices [K,N] of which `touched` are read, rows M in total (MoE experts). */
void op_cost_gemm_grouped(op_cost_acc *a, double M, double K, double N, double n_w,
                          double touched);
/* RMSNorm over T rows of width h (its scale gradient is fused into the I kernel). */
void op_cost_norm(op_cost_acc *a, double T, double h);
/* Elementwise op reading `in` and writing `out` elements in F; I reads in + dOut, writes dIn. */
void op_cost_eltwise(op_cost_acc *a, double in, double out, double flops_per_out);
/* Pre-norm sublayer frame: norm (+ its input and output stashed, output feeds weight GEMMs)
 * and, after the mixer, the residual add and the TP collectives of one sublayer. */
void op_cost_pre(op_cost_acc *a, double T, double h);
void op_cost_post(op_cost_acc *a, double T, double h);
/* One sequence-parallel collective over a T x width tensor in pass p. */
void op_cost_coll(op_cost_acc *a, int p, double T, double width);

/* FLOPs per token per head of a chunked linear recurrence (chunk C, state dk x dv). */
double op_cost_chunked_scan_flops(double C, double dk, double dv);

/* Parts: add kernel groups, parameters and stashed activations.  with_frame: wrap the part
 * in op_cost_pre / op_cost_post (0 when a block shares one norm between parallel mixers). */
void op_cost_part_attn(op_cost_acc *a, const op_layer *l, double mbs, double s, double h,
                       int with_frame);
void op_cost_part_mamba(op_cost_acc *a, const op_layer *l, double T, double h, int with_frame);
void op_cost_part_mlp(op_cost_acc *a, double T, double h, double ffn, int gated,
                      double h_out, int with_frame);
void op_cost_part_moe(op_cost_acc *a, const op_layer *l, double T, double h, int ep,
                      int with_frame);
void op_cost_part_embed(op_cost_acc *a, double T, double h, double vocab);
void op_cost_part_head(op_cost_acc *a, double T, double h, double vocab);

#endif
