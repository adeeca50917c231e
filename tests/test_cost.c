/* test_cost.c: the analytic cost and memory model (hand-computed kernels, scaling laws of each
 * layer kind, TP, memory accounting), the link model and device presets. */
#include "check.h"
#include "cost_fixtures.h"

/* A toy device with round numbers: 50 TFLOP/s and 500 GB/s achievable, no launch cost. */
static op_device toy(void) {
    op_device d = {"toy", 100, 1000, 80, 0.5, 0.5, 0, 100, 0, 0};
    return d;
}
/* roofline of one kernel group on the toy device, in ms */
static double roof(double flops, double bytes) {
    double a = flops / 50e12, b = bytes / 500e9;
    return (a > b ? a : b) * 1e3;
}

static op_layer layers_buf[4];
static op_model one_layer(op_layer l) {
    op_model m;
    memset(&m, 0, sizeof m);
    layers_buf[0] = l;
    m.layers = layers_buf;
    m.n_layers = 1;
    m.hidden = l.hidden;
    m.vocab = l.vocab;
    return m;
}

static op_layer_cost cost1(op_layer l, const op_train_cfg *t, const op_device *d) {
    op_model m = one_layer(l);
    op_layer_cost c;
    memset(&c, 0, sizeof c);
    op_err e = {0};
    int rc = op_cost_layers(&m, t, d, &c, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    return c;
}


static op_layer mlp_layer(int h, int f, int gated) {
    op_layer l;
    memset(&l, 0, sizeof l);
    l.kind = OP_LAYER_MLP;
    snprintf(l.name, sizeof l.name, "mlp");
    l.hidden = h, l.ffn = OP_FFN_MLP, l.ffn_dim = f, l.ffn_gated = gated;
    l.shares_params_with = -1;
    return l;
}

static op_layer attn_layer(op_attn_kind k, int h, int heads, int kv, int hd, int window) {
    op_layer l;
    memset(&l, 0, sizeof l);
    l.kind = OP_LAYER_ATTN;
    snprintf(l.name, sizeof l.name, "attn");
    l.hidden = h, l.attn = k, l.n_heads = heads, l.n_kv_heads = kv, l.head_dim = hd;
    l.window = window;
    l.shares_params_with = -1;
    return l;
}

static op_layer moe_layer(int h, int E, int k, int d) {
    op_layer l;
    memset(&l, 0, sizeof l);
    l.kind = OP_LAYER_MOE;
    snprintf(l.name, sizeof l.name, "moe");
    l.hidden = h, l.ffn = OP_FFN_MOE, l.n_experts = E, l.top_k = k, l.expert_dim = d;
    l.ffn_gated = 1, l.shares_params_with = -1;
    return l;
}

/* MLP h=1024, f=4096 (ReLU-like, not gated), 4096 tokens on the toy device: every kernel by
 * hand.  The GEMMs are compute-bound, the norm/activation/residual memory-bound. */
TEST(mlp_gemm_bound_by_hand) {
    double T = 4096, h = 1024, f = 4096;
    op_train_cfg t = cfg(4096, 1);
    op_device d = toy();
    op_layer_cost c = cost1(mlp_layer(1024, 4096, 0), &t, &d);
    double gemm_fl = 2 * T * h * f, gemm_by = 2 * (T * h + h * f + T * f);
    CHECK(gemm_fl / 50e12 > gemm_by / 500e9); /* really GEMM-bound */
    double F = roof(4 * T * h, 2 * 2 * T * h)    /* RMSNorm */
               + roof(gemm_fl, gemm_by)          /* up */
               + roof(3 * T * f, 2 * (T * f + T * f)) /* activation */
               + roof(gemm_fl, gemm_by)          /* down */
               + roof(T * h, 2 * 3 * T * h);     /* residual */
    double I = roof(6 * T * h, 2 * 3 * T * h) + roof(gemm_fl, gemm_by) +
               roof(6 * T * f, 2 * 3 * T * f) + roof(gemm_fl, gemm_by) + roof(T * h, 2 * 3 * T * h);
    double W = 2 * roof(gemm_fl, 2 * (T * h + T * f) + 8 * h * f);
    CHECK_NEAR(c.f_ms, F, 1e-12);
    CHECK_NEAR(c.i_ms, I, 1e-12);
    CHECK_NEAR(c.w_ms, W, 1e-12);
    CHECK_NEAR(c.flops_f, 4 * T * h + 2 * gemm_fl + 3 * T * f + T * h, 1e-12);
    CHECK_NEAR(c.flops_w, 2 * gemm_fl, 1e-12);
    CHECK_EQ_INT(c.params, 2 * 1024 * 4096 + 1024);
    CHECK_EQ_INT(c.param_bytes, 2 * c.params);
    CHECK_EQ_INT(c.out_bytes, 2 * 4096 * 1024);
    /* stashed: norm in, norm out, up out, act out */
    CHECK_EQ_INT(c.act_bytes, 2 * (2 * 4096 * 1024 + 2 * 4096 * 4096));
    CHECK(c.act_w_bytes > 0 && c.act_w_bytes <= c.act_bytes);
    CHECK(c.comm_f_ms == 0 && c.comm_i_ms == 0);
}

/* Embedding: a pure memory-bound lookup; no input gradient; W is the gradient scatter. */
TEST(embed_memory_bound_by_hand) {
    double T = 4096, h = 1024;
    op_layer l;
    memset(&l, 0, sizeof l);
    l.kind = OP_LAYER_EMBED, l.hidden = 1024, l.vocab = 32000, l.shares_params_with = -1;
    op_train_cfg t = cfg(4096, 1);
    op_device d = toy();
    op_layer_cost c = cost1(l, &t, &d);
    CHECK_NEAR(c.f_ms, (2 * (T * h + T * h) + 8 * T) / 500e9 * 1e3, 1e-12);
    CHECK(c.i_ms == 0);
    CHECK_NEAR(c.w_ms, (2 * T * h + 8 * T * h + 8 * T) / 500e9 * 1e3, 1e-12);
    CHECK(c.flops_f == 0);
    CHECK_EQ_INT(c.params, 32000LL * 1024);
    CHECK_EQ_INT(c.static_bytes, 18LL * 32000 * 1024);
    CHECK_EQ_INT(c.act_bytes, 8 * 4096);
    CHECK_EQ_INT(c.out_bytes, 2 * 4096 * 1024);
    CHECK(c.sym == 'E');
}

static double attn_f(op_attn_kind k, int seq, int window) {
    op_train_cfg t = cfg(seq, 1);
    op_device d = h100();
    return cost1(attn_layer(k, 1024, 8, 8, 128, window), &t, &d).f_ms;
}

TEST(attention_seq_scaling) {
    double r_full = attn_f(OP_ATTN_FULL, 65536, 0) / attn_f(OP_ATTN_FULL, 32768, 0);
    CHECK_MSG(r_full > 3.5 && r_full < 4.05, "full causal x%.3f", r_full);
    double r_bidir = attn_f(OP_ATTN_BIDIR, 65536, 0) / attn_f(OP_ATTN_BIDIR, 32768, 0);
    CHECK_MSG(r_bidir > 3.6 && r_bidir < 4.05, "bidir x%.3f", r_bidir);
    /* non-causal does about twice the core work of causal at long sequence */
    double b_over_c = attn_f(OP_ATTN_BIDIR, 65536, 0) / attn_f(OP_ATTN_FULL, 65536, 0);
    CHECK_MSG(b_over_c > 1.7 && b_over_c < 2.0, "bidir/causal %.3f", b_over_c);
    double r_slide = attn_f(OP_ATTN_SLIDING, 65536, 4096) / attn_f(OP_ATTN_SLIDING, 32768, 4096);
    CHECK_MSG(r_slide > 1.95 && r_slide < 2.05, "sliding x%.3f", r_slide);
    double r_chunk = attn_f(OP_ATTN_CHUNKED, 65536, 8192) / attn_f(OP_ATTN_CHUNKED, 32768, 8192);
    CHECK_MSG(r_chunk > 1.95 && r_chunk < 2.05, "chunked x%.3f", r_chunk);
    CHECK(attn_f(OP_ATTN_SLIDING, 65536, 4096) < 0.2 * attn_f(OP_ATTN_FULL, 65536, 0));
    /* a window longer than the sequence changes nothing */
    CHECK_NEAR(attn_f(OP_ATTN_SLIDING, 4096, 8192), attn_f(OP_ATTN_FULL, 4096, 0), 1e-12);
    double r_lin = attn_f(OP_ATTN_LINEAR, 65536, 0) / attn_f(OP_ATTN_LINEAR, 32768, 0);
    CHECK_MSG(r_lin > 1.95 && r_lin < 2.05, "linear x%.3f", r_lin);
}

/* FLOPs of the causal core: pairs s(s+1)/2 per sample, (2*dqk + 2*dv) per pair per head. */
TEST(attention_core_flops_exact) {
    op_train_cfg t = cfg(1024, 1);
    t.mbs = 2;
    op_device d = toy();
    op_layer l = attn_layer(OP_ATTN_FULL, 512, 4, 2, 64, 0);
    op_layer_cost c = cost1(l, &t, &d);
    double T = 2048, h = 512, q = 256, kv = 128;
    double proj = 2 * T * h * (q + 2 * kv) + 2 * T * q * h;
    double core = 2.0 * 1024 * 1025 / 2 * 4 * (2 * 64 + 2 * 64);
    double elt = 4 * T * h + 3 * T * (q + kv) + T * h; /* norm, rope, residual */
    CHECK_NEAR(c.flops_f, proj + core + elt, 1e-12);
    /* W: only the projections; I: projections + 2.5x the core + elementwise backward */
    CHECK_NEAR(c.flops_w, proj, 1e-12);
    CHECK_NEAR(c.flops_i, proj + 2.5 * core + 6 * T * h + 6 * T * (q + kv) + T * h, 1e-12);
    CHECK_EQ_INT(c.params, 512LL * (256 + 256) + 256LL * 512 + 512);
    /* flash attention: no seq^2 in the stash; q,k,v,o + lse + norm in/out */
    CHECK_EQ_INT(c.act_bytes, (int64_t)(2 * (T * (q + 2 * kv) + T * q + 2 * T * h) + 4 * T * 4));
}

TEST(mla_params_and_scaling) {
    op_layer l = attn_layer(OP_ATTN_MLA, 2048, 16, 16, 0, 0);
    l.kv_lora_rank = 512, l.qk_nope_dim = 128, l.qk_rope_dim = 64, l.v_head_dim = 128;
    op_train_cfg t = cfg(4096, 1);
    op_device d = h100();
    op_layer_cost c = cost1(l, &t, &d);
    /* q_proj, kv_a (latent + rope), kv_a norm, kv_b, o_proj, input norm (DeepSeek-V2-Lite) */
    int64_t p = 2048LL * 16 * 192 + 2048LL * (512 + 64) + 512 + 512LL * 16 * 256 +
                16LL * 128 * 2048 + 2048;
    CHECK_EQ_INT(c.params, p);
    l.q_lora_rank = 1536; /* DeepSeek-V3 style low-rank q: q_a, q norm, q_b */
    op_layer_cost c2 = cost1(l, &t, &d);
    CHECK_EQ_INT(c2.params, p - 2048LL * 16 * 192 + 2048LL * 1536 + 1536 + 1536LL * 16 * 192);
    op_train_cfg t2 = cfg(65536, 1), t1 = cfg(32768, 1);
    double r = cost1(l, &t2, &d).f_ms / cost1(l, &t1, &d).f_ms;
    CHECK_MSG(r > 3.4 && r < 4.05, "MLA x%.3f", r);
}

TEST(tp_halves_a_layer) {
    op_layer l = attn_layer(OP_ATTN_FULL, 4096, 32, 8, 128, 0);
    l.kind = OP_LAYER_DECODER, l.ffn = OP_FFN_MLP, l.ffn_dim = 14336, l.ffn_gated = 1;
    op_device d = h100();
    op_train_cfg t1 = cfg(4096, 1), t2 = cfg(4096, 2);
    op_layer_cost a = cost1(l, &t1, &d), b = cost1(l, &t2, &d);
    double r = b.f_ms / a.f_ms;
    CHECK_MSG(r > 0.5 && r < 0.62, "tp2 F ratio %.3f", r);
    CHECK_MSG(b.i_ms / a.i_ms > 0.5 && b.i_ms / a.i_ms < 0.62, "tp2 I ratio %.3f", b.i_ms / a.i_ms);
    CHECK_NEAR(b.w_ms / a.w_ms, 0.5, 0.02);
    CHECK(a.comm_f_ms == 0 && b.comm_f_ms > 0);
    /* 4 steps (all-gather + reduce-scatter per sublayer) of (tp-1)/tp * T*h*dt each */
    double step = d.tp_lat_ms + 0.5 * 4096.0 * 4096 * 2 / (d.tp_bw_GBps * 1e9) * 1e3;
    CHECK_NEAR(b.comm_f_ms, 4 * step, 1e-12);
    CHECK_NEAR(b.comm_i_ms, 4 * step, 1e-12);
    CHECK_EQ_INT(b.act_bytes * 2, a.act_bytes);
    CHECK_EQ_INT(b.out_bytes * 2, a.out_bytes); /* sequence parallel */
    CHECK_EQ_INT(2 * b.param_bytes - a.param_bytes, 2 * (2 * 4096)); /* norms replicated */
    CHECK_EQ_INT(b.params, a.params);
}

TEST(moe_scales_with_topk_not_experts) {
    op_device d = h100();
    op_train_cfg t = cfg(8192, 1);
    op_layer_cost e8 = cost1(moe_layer(4096, 8, 2, 14336), &t, &d);
    op_layer_cost e16 = cost1(moe_layer(4096, 16, 2, 14336), &t, &d);
    op_layer_cost k4 = cost1(moe_layer(4096, 8, 4, 14336), &t, &d);
    CHECK_MSG(e16.f_ms / e8.f_ms < 1.05, "E 8->16: x%.3f", e16.f_ms / e8.f_ms);
    CHECK_MSG(k4.f_ms / e8.f_ms > 1.7 && k4.f_ms / e8.f_ms < 2.05, "k 2->4: x%.3f",
              k4.f_ms / e8.f_ms);
    CHECK_NEAR((double)e16.params / (double)e8.params, 2.0, 0.01);
    CHECK_EQ_INT(e8.params, 8LL * 3 * 4096 * 14336 + 4096LL * 8 + 4096);
    CHECK_EQ_INT(k4.params, e8.params);
    /* shared experts add a dense MLP on every token */
    op_layer s = moe_layer(4096, 8, 2, 14336);
    s.n_shared = 2, s.shared_dim = 1408;
    op_layer_cost cs = cost1(s, &t, &d);
    CHECK_EQ_INT(cs.params - e8.params, 2LL * 3 * 4096 * 1408);
    CHECK(cs.f_ms > e8.f_ms);
    /* expert parallelism: expert memory split, all-to-all time added */
    t.ep = 4;
    op_layer_cost ep4 = cost1(moe_layer(4096, 8, 2, 14336), &t, &d);
    CHECK_EQ_INT(ep4.params, e8.params);
    CHECK_NEAR((double)ep4.param_bytes, 2.0 * (8.0 * 3 * 4096 * 14336 / 4 + 4096 * 8 + 4096), 1e-9);
    CHECK(ep4.comm_f_ms > 0 && ep4.f_ms > e8.f_ms * 0.9);
}

TEST(static_bytes_18_and_zero1) {
    op_device d = h100();
    op_train_cfg t = cfg(4096, 1);
    op_layer_cost c = cost1(mlp_layer(4096, 14336, 1), &t, &d);
    CHECK_EQ_INT(c.params, 3LL * 4096 * 14336 + 4096);
    CHECK_EQ_INT(c.static_bytes, 18 * c.params);
    t.zero1 = 1, t.dp = 8; /* 2 + 4 + 12/8 */
    c = cost1(mlp_layer(4096, 14336, 1), &t, &d);
    CHECK_NEAR((double)c.static_bytes, 7.5 * (double)c.params, 1e-12);
    t.dp = 1; /* zero1 over one replica shards nothing */
    c = cost1(mlp_layer(4096, 14336, 1), &t, &d);
    CHECK_EQ_INT(c.static_bytes, 18 * c.params);
}

/* ZeRO-1 with expert parallelism (Megatron's distributed optimizer): a routed expert's master
 * weights and Adam state are sharded over the dp / ep ranks that hold the same experts, the
 * rest over all dp ranks; the same total per device as sharding everything over dp, but each
 * device holds 1/ep of the experts' weights and gradients. */
TEST(zero1_shards_experts_over_dp_over_ep) {
    op_device d = h100();
    op_train_cfg t = cfg(4096, 1);
    const double experts = 8.0 * 3 * 4096 * 14336, dense = 4096.0 * 8 + 4096; /* router, norm */
    t.ep = 4, t.dp = 8, t.zero1 = 1;
    op_layer_cost c = cost1(moe_layer(4096, 8, 2, 14336), &t, &d);
    /* dense: 2 + 4 + 12/8 bytes a parameter; experts: a quarter of them at 2 + 4 + 12/(8/4) */
    CHECK_NEAR((double)c.static_bytes, dense * 7.5 + experts / 4 * 12.0, 1e-12);
    t.zero1 = 0;
    c = cost1(moe_layer(4096, 8, 2, 14336), &t, &d);
    CHECK_NEAR((double)c.static_bytes, dense * 18.0 + experts / 4 * 18.0, 1e-12);
    /* the expert-data-parallel group must be whole ranks */
    t.zero1 = 1, t.dp = 6;
    op_model m = one_layer(moe_layer(4096, 8, 2, 14336));
    op_err e = {0};
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "dp 6, ep 4");
    /* an expert count ep does not divide */
    t.zero1 = 0, t.ep = 3;
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "does not divide its 8 experts");
}

TEST(head_scales_with_vocab) {
    op_layer l;
    memset(&l, 0, sizeof l);
    l.kind = OP_LAYER_HEAD, l.hidden = 4096, l.vocab = 32000, l.shares_params_with = -1;
    op_device d = h100();
    op_train_cfg t = cfg(4096, 1);
    op_layer_cost a = cost1(l, &t, &d);
    l.vocab = 256000;
    op_layer_cost b = cost1(l, &t, &d);
    CHECK_MSG(b.f_ms / a.f_ms > 7 && b.f_ms / a.f_ms < 8.05, "F x%.3f", b.f_ms / a.f_ms);
    CHECK_MSG(b.w_ms / a.w_ms > 7 && b.w_ms / a.w_ms < 8.05, "W x%.3f", b.w_ms / a.w_ms);
    CHECK_NEAR(b.flops_w, 2.0 * 4096 * 4096 * 256000, 1e-12);
    /* the fp32 logits buffer dominates the stash and stays until W (dlogits live in it) */
    CHECK_EQ_INT(b.act_bytes, 2LL * 2 * 4096 * 4096 + 4LL * 4096 * 256000);
    CHECK_EQ_INT(b.act_w_bytes, 2LL * 4096 * 4096 + 4LL * 4096 * 256000);
    CHECK_EQ_INT(b.out_bytes, 0); /* last layer: only the loss */
    CHECK_EQ_INT(b.params, 256000LL * 4096 + 4096);
    /* under TP the vocabulary is padded as Megatron pads it, to a multiple of 128 x tp:
     * 32000 rows are whole at tp 2 (256 x 125), 32256 at tp 4 (512 x 63) */
    l.vocab = 32000;
    t.tp = 2;
    CHECK_EQ_INT(cost1(l, &t, &d).params, 32000LL * 4096 + 4096);
    t.tp = 4;
    op_layer_cost c4 = cost1(l, &t, &d);
    CHECK_EQ_INT(c4.params, 32256LL * 4096 + 4096);
    CHECK_EQ_INT(c4.act_bytes, (2LL * 2 * 4096 * 4096 + 4LL * 4096 * 32256) / 4);
}

TEST(fiw_relations) {
    op_device d = h100();
    /* W of attention excludes the parameter-free core: doubling seq doubles W exactly, while
     * F grows by the seq^2 term */
    op_train_cfg t1 = cfg(16384, 1), t2 = cfg(32768, 1);
    op_layer a = attn_layer(OP_ATTN_FULL, 2048, 16, 16, 128, 0);
    op_layer_cost c1 = cost1(a, &t1, &d), c2 = cost1(a, &t2, &d);
    CHECK_NEAR(c2.flops_w / c1.flops_w, 2.0, 1e-12);
    CHECK(c2.flops_f / c1.flops_f > 2.5);
    CHECK(c1.i_ms > c1.f_ms && c1.w_ms < c1.f_ms);
    /* a GEMM-dominated MLP: F ~ I ~ W */
    op_layer_cost m = cost1(mlp_layer(4096, 14336, 1), &t1, &d);
    CHECK_NEAR(m.flops_w, 2 * 2.0 * 16384 * 4096 * 3 * 14336 / 2, 1e-12);
    CHECK(m.i_ms >= m.f_ms * 0.95 && m.w_ms <= m.f_ms * 1.05 && m.w_ms > 0.8 * m.f_ms);
    /* Mamba: scan backward makes I > F; W has only the projections */
    op_layer mb;
    memset(&mb, 0, sizeof mb);
    mb.kind = OP_LAYER_MAMBA, mb.hidden = 4096, mb.ssm_version = 2, mb.ssm_inner = 8192;
    mb.ssm_state = 128, mb.ssm_groups = 8, mb.ssm_heads = 128, mb.ssm_head_dim = 64, mb.ssm_conv = 4;
    op_layer_cost c = cost1(mb, &t1, &d);
    CHECK_EQ_INT(c.params, 109640064); /* Nemotron-H-8B mixer, as in the checkpoint */
    CHECK(c.i_ms > c.f_ms && c.w_ms < c.f_ms && c.w_ms > 0);
    CHECK(c.act_w_bytes < c.act_bytes);
}

TEST(mamba_scan_memory_bound) {
    op_device d = toy();
    op_train_cfg t = cfg(4096, 1);
    op_layer mb;
    memset(&mb, 0, sizeof mb);
    mb.kind = OP_LAYER_MAMBA, mb.hidden = 1024, mb.ssm_version = 1, mb.ssm_inner = 2048;
    mb.ssm_state = 16, mb.ssm_conv = 4, mb.ssm_dt_rank = 64;
    op_layer_cost c = cost1(mb, &t, &d);
    /* F = in_proj + x_proj + dt_proj + out_proj GEMMs + memory-bound kernels; the scan alone
     * moves 2*T*(4*inner + 2N) bytes at 500 GB/s */
    double T = 4096, scan = 2 * T * (4 * 2048 + 32) / 500e9 * 1e3;
    CHECK(9.0 * T * 2048 * 16 / 50e12 * 1e3 < scan); /* bytes win the roofline */
    double gemms = roof(2 * T * 1024 * 4096, 2 * (T * 1024 + 1024 * 4096 + T * 4096)) +
                   roof(2 * T * 2048 * 96, 2 * (T * 2048 + 2048 * 96 + T * 96)) +
                   roof(2 * T * 64 * 2048, 2 * (T * 64 + 64 * 2048 + T * 2048)) +
                   roof(2 * T * 2048 * 1024, 2 * (T * 2048 + 2048 * 1024 + T * 1024));
    CHECK(c.f_ms > gemms + scan);
    CHECK_EQ_INT(c.params, 1024LL * 4096 + 2048 * 5 + 2048LL * 96 + 64 * 2048 + 2048 +
                               2048 * 16 + 2048 + 2048LL * 1024 + 1024);
}

TEST(hybrid_decoder_vision_mtp) {
    op_device d = h100();
    op_train_cfg t = cfg(4096, 1);
    op_layer a = attn_layer(OP_ATTN_FULL, 2048, 16, 4, 128, 0);
    op_layer_cost ca = cost1(a, &t, &d);
    op_layer_cost cm = cost1(mlp_layer(2048, 8192, 1), &t, &d);
    op_layer dec = a;
    dec.kind = OP_LAYER_DECODER, dec.ffn = OP_FFN_MLP, dec.ffn_dim = 8192, dec.ffn_gated = 1;
    op_layer_cost cd = cost1(dec, &t, &d);
    CHECK_NEAR(cd.f_ms, ca.f_ms + cm.f_ms, 1e-9);
    CHECK_EQ_INT(cd.params, ca.params + cm.params);
    CHECK(cd.sym == 'T');
    /* falcon_h1: attention and Mamba-2 share one norm */
    op_layer hy = dec;
    hy.kind = OP_LAYER_HYBRID, hy.ssm_version = 2, hy.ssm_inner = 4096, hy.ssm_state = 128;
    hy.ssm_heads = 64, hy.ssm_head_dim = 64, hy.ssm_groups = 1, hy.ssm_conv = 4;
    op_layer mb = hy;
    mb.kind = OP_LAYER_MAMBA;
    op_layer_cost ch = cost1(hy, &t, &d), cmb = cost1(mb, &t, &d);
    CHECK_EQ_INT(ch.params, cd.params + cmb.params - 2048); /* one input norm less */
    CHECK(ch.f_ms > cd.f_ms && ch.f_ms < cd.f_ms + cmb.f_ms);
    /* vision block: own width and token count */
    op_layer v = attn_layer(OP_ATTN_BIDIR, 1280, 16, 16, 80, 0);
    v.kind = OP_LAYER_VISION, v.tokens = 1024, v.ffn = OP_FFN_MLP, v.ffn_dim = 5120;
    op_layer_cost cv = cost1(v, &t, &d);
    CHECK_EQ_INT(cv.out_bytes, 2LL * 1024 * 1280);
    CHECK_EQ_INT(cv.params, 4LL * 1280 * 1280 + 2LL * 1280 * 5120 + 2 * 1280);
    /* MTP: embedding + 2 norms + 2h->h projection + block + shared head */
    op_layer m = dec;
    m.kind = OP_LAYER_MTP, m.vocab = 32000;
    op_layer_cost cmtp = cost1(m, &t, &d);
    CHECK_EQ_INT(cmtp.params, cd.params + 2LL * 32000 * 2048 + 2 * 2048 + 2LL * 2048 * 2048 + 2048);
    CHECK(cmtp.f_ms > cd.f_ms);
}

/* Selective recomputation's share (cost.h f_sel_ms, act_sel_bytes): the attention core's F
 * kernel (flash: QK^T and PV over the causal pairs, reading q, k, v and writing o + lse) and
 * what only it stashes (o and the softmax statistics), by hand on the toy device; split by
 * TP like everything else; nothing for a layer without attention. */
TEST(selective_share_by_hand) {
    op_train_cfg t = cfg(1024, 1);
    t.mbs = 2;
    op_device d = toy();
    op_layer l = attn_layer(OP_ATTN_FULL, 512, 4, 2, 64, 0);
    op_layer_cost c = cost1(l, &t, &d);
    double T = 2048, q = 256, kv = 128;
    double core = 2.0 * 1024 * 1025 / 2 * 4 * (2 * 64 + 2 * 64);
    double by = 2 * T * (q + 2 * kv + q) + 4 * T * 4;
    CHECK_NEAR(c.f_sel_ms, roof(core, by), 1e-12);
    CHECK(c.f_sel_ms < c.f_ms);
    CHECK_EQ_INT(c.act_sel_bytes, c.act_bytes - (int64_t)(2 * T * q + 4 * T * 4));
    CHECK_EQ_INT(op_layer_sel_bytes(&c), c.act_sel_bytes);
    t.tp = 2;
    op_layer_cost c2 = cost1(l, &t, &d);
    CHECK_NEAR(c2.f_sel_ms, c.f_sel_ms / 2, 1e-12);
    CHECK_EQ_INT(c2.act_bytes - c2.act_sel_bytes, (int64_t)(T * q + 2 * T * 4));
    t.tp = 1;
    op_layer_cost m = cost1(mlp_layer(512, 2048, 1), &t, &d);
    CHECK(m.f_sel_ms == 0);
    CHECK_EQ_INT(m.act_sel_bytes, m.act_bytes);
    /* measured layers: the analytic share of the measured F unless the profile gives it */
    l.has_measured = 1, l.f_ms = 2 * c.f_ms, l.i_ms = 1, l.w_ms = 1;
    op_layer_cost c3 = cost1(l, &t, &d);
    CHECK_NEAR(c3.f_sel_ms, 2 * c.f_sel_ms, 1e-9);
    l.recompute_ms = 0.25, l.act_sel_bytes_measured = 12345;
    c3 = cost1(l, &t, &d);
    CHECK(c3.f_sel_ms == 0.25);
    CHECK_EQ_INT(c3.act_sel_bytes, 12345);
    /* profiles carry them per symbol */
    const char *prof = "{\"pattern\": \"*-\", \"forward_ms\": {\"E\": 0.1, \"*\": 2, \"-\": 1, "
                       "\"L\": 0.2}, \"backward_ms\": {\"E\": 0.1, \"*\": 4, \"-\": 2, \"L\": 0.4}, "
                       "\"act_bytes\": {\"*\": 1000}, \"recompute_ms\": {\"*\": 0.5}, "
                       "\"act_sel_bytes\": {\"*\": 600}}";
    op_model pm;
    op_err e = {0};
    CHECK_EQ_INT(op_model_from_profile_json(prof, "p.json", &pm, &e), OP_OK);
    op_layer_cost pc[8];
    CHECK(pm.n_layers == 4);
    if (pm.n_layers == 4) {
        CHECK_EQ_INT(op_cost_layers(&pm, &t, &d, pc, &e), OP_OK);
        CHECK(pc[1].f_sel_ms == 0.5 && pc[1].act_sel_bytes == 600);
        CHECK(pc[2].f_sel_ms == 0);
    }
    op_model_free(&pm);
    CHECK(op_model_from_profile_json("{\"pattern\": \"*\", \"forward_ms\": {\"E\": 1, \"*\": 1, "
                                     "\"L\": 1}, \"backward_ms\": {\"E\": 1, \"*\": 1, \"L\": 1}, "
                                     "\"recompute_ms\": {\"*\": -1}}", "bad.json", &pm, &e) != OP_OK);
    CHECK_STR_CONTAINS(e.msg, "recompute_ms");
}

TEST(measured_layers_use_measurements) {
    op_layer l = mlp_layer(4096, 14336, 1);
    l.has_measured = 1, l.f_ms = 1.5, l.i_ms = 1.25, l.w_ms = 1.0;
    op_device d = h100();
    op_train_cfg t = cfg(4096, 1);
    op_layer_cost c = cost1(l, &t, &d);
    CHECK(c.f_ms == 1.5 && c.i_ms == 1.25 && c.w_ms == 1.0);
    CHECK(c.act_bytes > 0 && c.param_bytes > 0); /* derived from the dims */
    l.act_bytes_measured = 1000000, l.param_bytes_measured = 2000;
    c = cost1(l, &t, &d);
    CHECK_EQ_INT(c.act_bytes, 1000000);
    CHECK(c.act_w_bytes > 0 && c.act_w_bytes <= 1000000);
    CHECK_EQ_INT(c.param_bytes, 2000);
    CHECK_EQ_INT(c.static_bytes, 18000);
    /* a profile layer with no dimensions at all */
    op_layer p;
    memset(&p, 0, sizeof p);
    p.kind = OP_LAYER_MAMBA, p.has_measured = 1, p.f_ms = 2, p.i_ms = 3, p.w_ms = 0;
    p.act_bytes_measured = 5000;
    op_model m = one_layer(p);
    op_layer_cost pc;
    op_err e = {0};
    CHECK(op_cost_layers(&m, &t, &d, &pc, &e) == OP_OK);
    CHECK(pc.f_ms == 2 && pc.i_ms == 3 && pc.w_ms == 0);
    CHECK_EQ_INT(pc.act_bytes, 5000);
    CHECK_EQ_INT(pc.act_w_bytes, 0); /* nothing waits for a W that does no work */
    layers_buf[0].w_ms = 0.5;          /* with W work: SimPipe's measured 43.31% share */
    CHECK(op_cost_layers(&m, &t, &d, &pc, &e) == OP_OK);
    CHECK_EQ_INT(pc.act_w_bytes, 2166);
    layers_buf[0].out_bytes_measured = 777;
    CHECK(op_cost_layers(&m, &t, &d, &pc, &e) == OP_OK);
    CHECK_EQ_INT(pc.out_bytes, 777);
    /* measured figures set by the caller are bounded as analytic ones are (they were returned
     * with OP_OK: 1e12 ms, or NaN) */
    layers_buf[0].f_ms = 1e12;
    CHECK(op_cost_layers(&m, &t, &d, &pc, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "forward time 1e+12 ms");
    layers_buf[0].f_ms = NAN;
    CHECK(op_cost_layers(&m, &t, &d, &pc, &e) == OP_EINVAL);
    layers_buf[0].f_ms = 2;
    layers_buf[0].act_bytes_measured = INT64_MAX;
    CHECK(op_cost_layers(&m, &t, &d, &pc, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "activation bytes");
}

TEST(bad_input_rejected) {
    op_device d = h100();
    op_train_cfg t = cfg(4096, 0);
    op_layer l = attn_layer(OP_ATTN_FULL, 1024, 8, 8, 128, 0);
    op_model m = one_layer(l);
    op_layer_cost c;
    op_err e = {0};
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "TP degree");
    t = cfg(4096, 1);
    layers_buf[0].n_heads = 0;
    snprintf(layers_buf[0].name, sizeof layers_buf[0].name, "layers.7.self_attn");
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layers.7.self_attn");
    CHECK_STR_CONTAINS(e.msg, "n_heads");
    layers_buf[0] = attn_layer(OP_ATTN_SLIDING, 1024, 8, 8, 128, 0);
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "window");
    layers_buf[0] = mlp_layer(1024, -5, 1);
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    d.mfu = 0;
    layers_buf[0] = mlp_layer(1024, 4096, 1);
    CHECK(op_cost_layers(&m, &t, &d, &c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "mfu");
}

TEST(comm_model) {
    op_comm c;
    op_comm_default(&c, 8);
    CHECK(op_comm_ms(&c, 3, 3, 1 << 30) == 0);
    double intra = op_comm_ms(&c, 0, 7, 64 << 20), inter = op_comm_ms(&c, 7, 8, 64 << 20);
    CHECK_NEAR(intra, c.intra_lat_ms + (64 << 20) / (c.intra_bw_GBps * 1e9) * 1e3, 1e-12);
    CHECK_NEAR(inter, c.inter_lat_ms + (64 << 20) / (c.inter_bw_GBps * 1e9) * 1e3, 1e-12);
    CHECK(inter > 5 * intra);
    CHECK_NEAR(op_comm_ms(&c, 8, 15, 0), c.intra_lat_ms, 1e-12); /* same node 1 */
    op_comm one;
    op_comm_default(&one, 0); /* one node */
    CHECK_NEAR(op_comm_ms(&one, 0, 100, 1000), one.intra_lat_ms + 1000 / (one.intra_bw_GBps * 1e6), 1e-12);
    c.none = 1;
    CHECK(op_comm_ms(&c, 0, 15, 1 << 30) == 0);
}

TEST(device_presets) {
    op_device d;
    op_err e = {0};
    CHECK(op_device_preset("H100", &d, &e) == OP_OK);
    CHECK(!strcmp(d.name, "h100-80gb") && d.peak_tflops == 989 && d.mem_bw_GBps == 3350);
    CHECK(op_device_preset("a100", &d, &e) == OP_OK && d.peak_tflops == 312 && d.mem_GiB == 80);
    CHECK(op_device_preset("A100_80GB", &d, &e) == OP_OK && d.mem_bw_GBps == 2039);
    CHECK(op_device_preset("h200", &d, &e) == OP_OK && d.mem_bw_GBps == 4800);
    CHECK_NEAR(d.mem_GiB * 1073741824.0, 141e9, 1e-12);
    CHECK(d.mfu >= 0.5 && d.mfu <= 0.6 && d.bw_eff == 0.8);
    CHECK(op_device_preset("tpu-v5", &d, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "tpu-v5");
    CHECK_STR_CONTAINS(e.msg, "a100-80gb");
    CHECK_STR_CONTAINS(e.msg, "h200");
    const char *const *n = op_device_preset_names();
    int k = 0;
    for (; n[k]; k++) CHECK(op_device_preset(n[k], &d, &e) == OP_OK);
    CHECK_EQ_INT(k, 5);
    /* the 40 GB A100: the 80 GB one's compute, its own HBM2 and memory */
    CHECK(op_device_preset("A100-SXM4-40GB", &d, &e) == OP_OK && !strcmp(d.name, "a100-40gb"));
    CHECK(d.peak_tflops == 312 && d.mem_bw_GBps == 1555 && d.mem_GiB == 40 && d.host_bw_GBps == 25);
    /* B200: 2.25 PF dense bf16, 7.68 TB/s, 180 GB, NVLink 5 at 80% of 900 GB/s, PCIe Gen5 */
    CHECK(op_device_preset("B200", &d, &e) == OP_OK && !strcmp(d.name, "b200"));
    CHECK(d.peak_tflops == 2250 && d.mem_bw_GBps == 7680 && d.tp_bw_GBps == 720 && d.host_bw_GBps == 50);
    CHECK_NEAR(d.mem_GiB * 1073741824.0, 180e9, 1e-12);
    /* the same GEMM-bound layer is faster on H100 than on A100 */
    op_device a, h;
    CHECK(op_device_preset("a100", &a, &e) == OP_OK && op_device_preset("h100", &h, &e) == OP_OK);
    op_train_cfg t = cfg(4096, 1);
    double ra = cost1(mlp_layer(4096, 14336, 1), &t, &a).f_ms;
    double rh = cost1(mlp_layer(4096, 14336, 1), &t, &h).f_ms;
    CHECK(ra / rh > 2.5 && ra / rh < 3.5);
}


/* A zeroed op_comm (none = 0, no bandwidth: op_comm_validate refuses it, a library caller may
 * not have asked) moves no byte: HUGE_VAL, not an abort; no bytes cost the latency alone. */
TEST(comm_without_bandwidth_never_delivers) {
    op_comm c;
    memset(&c, 0, sizeof c);
    c.intra_lat_ms = 0.5;
    CHECK(op_comm_ms(&c, 0, 1, 1000) == HUGE_VAL);
    CHECK(op_comm_ms(&c, 0, 1, 0) == 0.5);
    CHECK(op_comm_ms(&c, 1, 1, 1000) == 0); /* one device */
    double lat[4] = {0, 0.1, 0.1, 0}, bw[4] = {0, 0, 10, 0};
    c.pair_n = 2, c.pair_lat_ms = lat, c.pair_bw_GBps = bw;
    CHECK(op_comm_ms(&c, 0, 1, 1000) == HUGE_VAL);
    CHECK_NEAR(op_comm_ms(&c, 1, 0, 1000000), 0.1 + 0.1, 1e-12); /* 1 MB at 10 GB/s */
    c.intra_bw_GBps = 1;
    c.pair_n = 0;
    CHECK_NEAR(op_comm_ms(&c, 0, 1, 1000000), 0.5 + 1, 1e-12);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(mlp_gemm_bound_by_hand);
    RUN(comm_without_bandwidth_never_delivers);
    RUN(embed_memory_bound_by_hand);
    RUN(attention_seq_scaling);
    RUN(attention_core_flops_exact);
    RUN(mla_params_and_scaling);
    RUN(tp_halves_a_layer);
    RUN(moe_scales_with_topk_not_experts);
    RUN(static_bytes_18_and_zero1);
    RUN(zero1_shards_experts_over_dp_over_ep);
    RUN(head_scales_with_vocab);
    RUN(fiw_relations);
    RUN(mamba_scan_memory_bound);
    RUN(hybrid_decoder_vision_mtp);
    RUN(selective_share_by_hand);
    RUN(measured_layers_use_measurements);
    RUN(bad_input_rejected);
    RUN(comm_model);
    RUN(device_presets);
    return check_report("cost");
}
