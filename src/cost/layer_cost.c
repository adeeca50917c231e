/* layer_cost.c: op_cost_layers: per-layer, per-microbatch F / I / W time and memory from the
 * layer dimensions (or the measured values of a profile).  Formulas: docs/cost-model.md. */
#include <math.h>
#include <string.h>

#include "cost/cost_internal.h"

/* The measured release split when a profile gives activation bytes but no dims: I frees
 * 56.69%, W the remaining 43.31% (the figures the authors' PipelineSimulator uses,
 * simulator/config.py). */
#define MEASURED_W_SHARE 0.4331

static int check_cfg(const op_train_cfg *t, const op_device *d, op_err *err) {
    if (t->seq < 1) return op_errf(err, OP_EINVAL, "sequence length must be >= 1 (got %d)", t->seq);
    if (t->mbs < 1) return op_errf(err, OP_EINVAL, "micro-batch size must be >= 1 (got %d)", t->mbs);
    if (t->tp < 1) return op_errf(err, OP_EINVAL, "TP degree must be >= 1 (got %d)", t->tp);
    if (t->dtype_bytes < 1 || t->dtype_bytes > 8)
        return op_errf(err, OP_EINVAL, "dtype bytes must be 1..8 (got %d)", t->dtype_bytes);
    if (t->dp < 0 || t->ep < 0)
        return op_errf(err, OP_EINVAL, "dp and ep must be >= 0 (got dp %d, ep %d)", t->dp, t->ep);
    if (!(d->peak_tflops > 0) || !(d->mem_bw_GBps > 0) || !(d->mfu > 0 && d->mfu <= 1) ||
        !(d->bw_eff > 0 && d->bw_eff <= 1) || !(d->launch_ms >= 0))
        return op_errf(err, OP_EINVAL,
                       "device '%s': need peak_tflops > 0, mem_bw_GBps > 0, mfu and bw_eff in "
                       "(0, 1], launch_ms >= 0",
                       d->name);
    /* ZeRO-1 shards the experts' optimizer state over the expert-data-parallel group, the dp / ep
     * ranks that hold the same experts (Megatron's distributed optimizer) */
    if (t->zero1 && t->ep > 1 && (t->dp < t->ep || t->dp % t->ep != 0))
        return op_errf(err, OP_EINVAL, "ZeRO-1 with expert parallelism needs the data-parallel "
                       "degree to be a multiple of the expert-parallel one (dp %d, ep %d)",
                       t->dp, t->ep);
    if ((t->tp > 1 || t->ep > 1) && !(d->tp_bw_GBps > 0 && d->tp_lat_ms >= 0))
        return op_errf(err, OP_EINVAL, "device '%s': TP/EP > 1 needs tp_bw_GBps > 0", d->name);
    return OP_OK;
}

#define NEED(cond, what) \
    do { if (!(cond)) return op_errf(err, OP_EINVAL, "%s: %s", where, what); } while (0)

static int check_attn(const op_layer *l, const char *where, op_err *err) {
    NEED(l->attn != OP_ATTN_NONE, "needs an attention kind");
    if (l->attn == OP_ATTN_LINEAR && l->n_heads == 0) {
        NEED(l->lin_k_heads > 0 && l->lin_v_heads > 0 && l->lin_k_dim > 0 && l->lin_v_dim > 0,
             "linear attention needs n_heads or lin_k/v_heads and lin_k/v_dim > 0");
        return OP_OK;
    }
    NEED(l->n_heads > 0, "n_heads must be > 0");
    if (l->attn == OP_ATTN_MLA)
        NEED(l->kv_lora_rank > 0 && l->qk_nope_dim + l->qk_rope_dim > 0,
             "MLA needs kv_lora_rank > 0 and qk_nope_dim + qk_rope_dim > 0");
    if (l->attn == OP_ATTN_SLIDING || l->attn == OP_ATTN_CHUNKED)
        NEED(l->window > 0, "sliding/chunked attention needs window > 0");
    return OP_OK;
}

static int check_ffn(const op_layer *l, const char *where, op_err *err) {
    if (l->ffn == OP_FFN_MLP) NEED(l->ffn_dim > 0, "MLP needs ffn_dim > 0");
    if (l->ffn == OP_FFN_MOE)
        NEED(l->n_experts > 0 && l->top_k > 0 && (l->expert_dim > 0 || l->ffn_dim > 0),
             "MoE needs n_experts > 0, top_k > 0 and expert_dim > 0");
    return OP_OK;
}

/* Tensor parallelism splits heads and widths across ranks: Megatron divides attention heads,
 * KV groups, linear-attention heads, Mamba heads and groups (mamba_mixer asserts ngroups % tp)
 * and every column-parallel width (MLP, expert and shared-expert FFN, Mamba-1's inner width:
 * its divide() asserts) by the TP degree and refuses otherwise, so a degree that does not
 * divide them describes no run.  Widths as the cost model reads them (ffn.c, mamba.c). */
static int check_tp(const op_layer *l, int tp, const char *where, op_err *err) {
    int mlp = l->kind == OP_LAYER_MLP || l->ffn == OP_FFN_MLP;
    int moe = l->kind == OP_LAYER_MOE || l->ffn == OP_FFN_MOE;
    int ssm = l->kind == OP_LAYER_MAMBA || l->kind == OP_LAYER_HYBRID;
    long long expert = moe ? (l->expert_dim > 0 ? l->expert_dim : l->ffn_dim) : 0;
    long long shared = moe && l->n_shared > 0
                           ? (long long)l->n_shared * (l->shared_dim > 0 ? l->shared_dim : expert)
                           : 0;
    const struct { long long n; const char *what; } parts[] = {
        {l->n_heads, "attention heads"},      {l->attn == OP_ATTN_MLA ? 0 : l->n_kv_heads, "KV heads"},
        {l->lin_k_heads, "linear-attention key heads"}, {l->lin_v_heads, "linear-attention value heads"},
        {l->ssm_heads, "Mamba heads"},
        {ssm && l->ssm_version != 1 ? (l->ssm_groups > 0 ? l->ssm_groups : 1) : 0, "Mamba groups"},
        {ssm && l->ssm_version == 1 ? l->ssm_inner : 0, "Mamba inner channels"},
        {mlp ? l->ffn_dim : 0, "MLP width (ffn_dim)"}, {expert, "expert FFN width"},
        {shared, "shared-expert FFN width"}};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
        if (parts[k].n > 0 && parts[k].n % tp != 0)
            return op_errf(err, OP_EINVAL, "%s: --tp %d does not divide its %lld %s", where, tp, parts[k].n,
                           parts[k].what);
    return OP_OK;
}

/* Dimensions the analytic model needs for this kind. */
static int check_layer(const op_layer *l, double h, double V, const char *where, op_err *err) {
    const int dims[] = {l->n_heads, l->n_kv_heads, l->head_dim, l->window, l->q_lora_rank,
                        l->kv_lora_rank, l->qk_nope_dim, l->qk_rope_dim, l->v_head_dim,
                        l->lin_k_heads, l->lin_v_heads, l->lin_k_dim, l->lin_v_dim, l->ffn_dim,
                        l->n_experts, l->top_k, l->expert_dim, l->n_shared, l->shared_dim,
                        l->ssm_inner, l->ssm_state, l->ssm_heads, l->ssm_head_dim,
                        l->ssm_groups, l->ssm_conv, l->ssm_dt_rank, l->vocab,
                        l->out_hidden, l->patch_dim, l->attn_in_dim};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        NEED(dims[k] >= 0, "negative dimension");
    NEED(l->tokens >= 0, "tokens must be >= 0");
    NEED(h > 0, "hidden must be > 0");
    int rc = OP_OK;
    switch (l->kind) {
    case OP_LAYER_EMBED:
    case OP_LAYER_HEAD: NEED(V > 0, "vocab must be > 0"); break;
    case OP_LAYER_ATTN: rc = check_attn(l, where, err); break;
    case OP_LAYER_MAMBA: NEED(l->ssm_version == 0 || l->ssm_version == 1 || l->ssm_version == 2,
                              "ssm_version must be 1 or 2"); break;
    case OP_LAYER_MLP: NEED(l->ffn_dim > 0, "ffn_dim must be > 0"); break;
    case OP_LAYER_MOE:
        NEED(l->n_experts > 0 && l->top_k > 0 && (l->expert_dim > 0 || l->ffn_dim > 0),
             "MoE needs n_experts > 0, top_k > 0 and expert_dim > 0");
        break;
    case OP_LAYER_DECODER:
    case OP_LAYER_HYBRID:
        rc = check_attn(l, where, err);
        if (!rc) rc = check_ffn(l, where, err);
        break;
    case OP_LAYER_MTP:
        NEED(V > 0, "vocab must be > 0");
        rc = check_attn(l, where, err);
        if (!rc) rc = check_ffn(l, where, err);
        break;
    case OP_LAYER_VISION:
        if (l->attn != OP_ATTN_NONE) rc = check_attn(l, where, err);
        if (!rc) rc = check_ffn(l, where, err);
        break;
    default: return op_errf(err, OP_EINVAL, "%s: unknown layer kind %d", where, (int)l->kind);
    }
    return rc;
}

static void part_ffn(op_cost_acc *a, const op_layer *l, double T, double h, int ep) {
    if (l->ffn == OP_FFN_MLP) op_cost_part_mlp(a, T, h, l->ffn_dim, l->ffn_gated, h, 1);
    else if (l->ffn == OP_FFN_MOE) op_cost_part_moe(a, l, T, h, ep, 1);
}

/* Vision layers: patch embedding (patch_dim > 0: pixels x weight GEMM), encoder block
 * (attention and/or FFN with residuals), or the merger/projector into the language model
 * (out_hidden != hidden: norm, then MLP or one linear map to out_hidden, no residual). */
static void vision(op_cost_acc *a, const op_layer *l, double mbs, double s, double h, int ep) {
    double T = mbs * s, dt = a->dt, ho = l->out_hidden > 0 ? l->out_hidden : h;
    if (l->patch_dim > 0) {
        op_cost_gemm(a, T, l->patch_dim, h);
        a->params_shard += h; /* bias */
        a->act += dt * T * l->patch_dim;
        a->act_w_in += dt * T * l->patch_dim;
        return;
    }
    int merger = ho != h || (l->attn == OP_ATTN_NONE && l->ffn == OP_FFN_NONE);
    if (!merger) {
        if (l->attn != OP_ATTN_NONE) op_cost_part_attn(a, l, mbs, s, h, 1);
        part_ffn(a, l, T, h, ep);
        return;
    }
    op_cost_norm(a, T, h);
    a->act += dt * 2 * T * h;
    a->act_w_in += dt * T * h;
    if (l->ffn == OP_FFN_MLP) op_cost_part_mlp(a, T, h, l->ffn_dim, l->ffn_gated, ho, 0);
    else op_cost_gemm(a, T, h, ho);
}

static void derive(op_cost_acc *a, const op_layer *l, double mbs, double s, double h, double V,
                   int ep) {
    double T = mbs * s;
    switch (l->kind) {
    case OP_LAYER_EMBED: op_cost_part_embed(a, T, h, V); break;
    case OP_LAYER_HEAD: op_cost_part_head(a, T, h, V); break;
    case OP_LAYER_ATTN: op_cost_part_attn(a, l, mbs, s, h, 1); break;
    case OP_LAYER_MAMBA: op_cost_part_mamba(a, l, T, h, 1); break;
    case OP_LAYER_MLP: op_cost_part_mlp(a, T, h, l->ffn_dim, l->ffn_gated, h, 1); break;
    case OP_LAYER_MOE: op_cost_part_moe(a, l, T, h, ep, 1); break;
    case OP_LAYER_DECODER:
        op_cost_part_attn(a, l, mbs, s, h, 1);
        part_ffn(a, l, T, h, ep);
        break;
    case OP_LAYER_HYBRID: /* one norm feeds attention and Mamba-2 in parallel; outputs summed */
        op_cost_pre(a, T, h);
        op_cost_part_attn(a, l, mbs, s, h, 0);
        op_cost_part_mamba(a, l, T, h, 0);
        op_cost_post(a, T, h);
        part_ffn(a, l, T, h, ep);
        break;
    case OP_LAYER_VISION: vision(a, l, mbs, s, h, ep); break;
    case OP_LAYER_MTP: /* DeepSeek-V3: emb(shifted tokens), norm both, concat, project 2h->h,
                        * one block, the shared head + loss */
        op_cost_part_embed(a, T, h, V);
        op_cost_norm(a, T, h);
        op_cost_norm(a, T, h);
        op_cost_gemm(a, T, 2 * h, h);
        a->act += a->dt * (2 * T * h + 2 * T * h); /* norm inputs, concat of their outputs */
        a->act_w_in += a->dt * 2 * T * h;
        op_cost_part_attn(a, l, mbs, s, h, 1);
        part_ffn(a, l, T, h, ep);
        op_cost_part_head(a, T, h, V);
        break;
    default: OP_ASSERT(0, "layer kind %d passed validation", (int)l->kind);
    }
}

/* Collectives of pass p: a sequence-parallel all-gather / reduce-scatter of B bytes moves
 * (tp-1)/tp * B per rank; an EP all-to-all moves its bytes / tp.  Plus one latency each. */
static double tp_comm_ms(const op_cost_acc *a, int p, int tp, int ep, const op_device *d) {
    double ms = 0;
    if (tp > 1)
        ms += a->coll[p] * d->tp_lat_ms +
              (tp - 1.0) / tp * a->coll_bytes[p] / (d->tp_bw_GBps * 1e6);
    if (ep > 1) ms += a->n_a2a[p] * (d->tp_lat_ms + a->a2a_bytes / tp / (d->tp_bw_GBps * 1e6));
    return ms;
}

/* x is within [0, OP_MAX_BYTES] (checked by check_figures), so the conversion is exact. */
static int64_t to_i64(double x) { return x > 0 ? (int64_t)llround(x) : 0; }

/* Figures beyond model.h's bounds come from dimensions no device holds (a 16M-token sequence
 * times a huge hidden size); refuse them before they overflow an int64 or the simulator. */
static int check_figures(const char *where, const double *ms, const double *bytes, op_err *err) {
    static const char *const ms_name[] = {"forward", "backward-input", "backward-weight"};
    static const char *const b_name[] = {"weights", "weight/gradient/optimizer state", "activation",
                                         "boundary message"};
    for (int k = 0; k < 3; k++)
        if (!(ms[k] >= 0 && ms[k] <= OP_MAX_MS))
            return op_errf(err, OP_EINVAL, "%s: %s time %.3g ms per microbatch is beyond any device "
                           "(at most %g; check --seq, --mbs and the model's dimensions)",
                           where, ms_name[k], ms[k], OP_MAX_MS);
    for (int k = 0; k < 4; k++)
        if (!(bytes[k] >= 0 && bytes[k] <= OP_MAX_BYTES))
            return op_errf(err, OP_EINVAL, "%s: %s bytes %.3g are beyond any device (at most %.3g; "
                           "check --seq, --mbs and the model's dimensions)",
                           where, b_name[k], bytes[k], OP_MAX_BYTES);
    return OP_OK;
}

/* Width of the boundary message after layer i: its output width, plus the main model's
 * hidden state when MTP blocks follow (an MTP block hands on both), plus the input
 * embeddings a later zamba2-style block attends over (attn_in_dim > hidden). */
static double out_width(const op_model *m, int i, double h) {
    const op_layer *l = &m->layers[i];
    if (l->kind == OP_LAYER_HEAD && i == m->n_layers - 1) return 0; /* only the loss */
    double w = l->out_hidden > 0 ? l->out_hidden : h;
    if (l->kind == OP_LAYER_MTP && i + 1 < m->n_layers && m->layers[i + 1].kind == OP_LAYER_MTP)
        w += h;
    double extra = 0;
    for (int j = i + 1; j < m->n_layers; j++) {
        const op_layer *lj = &m->layers[j];
        double hj = lj->hidden > 0 ? lj->hidden : m->hidden;
        if (lj->attn_in_dim > hj && lj->attn_in_dim - hj > extra) extra = lj->attn_in_dim - hj;
    }
    if (l->kind != OP_LAYER_HEAD) w += extra;
    return w;
}

int op_cost_layers(const op_model *m, const op_train_cfg *t, const op_device *d,
                   op_layer_cost *out, op_err *err) {
    int rc = check_cfg(t, d, err);
    if (rc) return rc;
    double tp = t->tp, dt = t->dtype_bytes, mbs = t->mbs;
    int ep = t->ep > 1 ? t->ep : 1, dp = t->dp > 1 ? t->dp : 1;
    /* bytes per parameter: weight, fp32 gradient, fp32 master (unless the weights are fp32),
     * Adam m and v; ZeRO-1 shards master + Adam over dp, a routed expert's over the dp / ep
     * ranks that hold it (check_cfg: ep divides dp) */
    double opt = (t->dtype_bytes < 4 ? 4.0 : 0.0) + 8.0;
    double per_param = dt + 4.0 + (t->zero1 ? opt / dp : opt);
    double per_expert = dt + 4.0 + (t->zero1 ? opt * ep / dp : opt);
    for (int i = 0; i < m->n_layers; i++) {
        const op_layer *l = &m->layers[i];
        op_layer_cost *c = &out[i];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", l->name);
        if ((int)l->kind < 0 || l->kind >= OP_LAYER_KIND_COUNT)
            return op_errf(err, OP_EINVAL, "layer %d '%s': unknown layer kind %d", i, l->name,
                           (int)l->kind);
        c->sym = op_layer_kind_sym(l->kind);
        double s = l->tokens > 0 ? l->tokens : t->seq, T = mbs * s;
        double h = l->hidden > 0 ? l->hidden : m->hidden, V = l->vocab > 0 ? l->vocab : m->vocab;
        char where[96];
        snprintf(where, sizeof where, "layer %d '%s' (%s)", i, l->name, op_layer_kind_name(l->kind));
        op_cost_acc a = {.dev = d, .tp = tp, .dt = dt};
        op_err scratch = {0};
        rc = check_layer(l, h, V, where, l->has_measured ? &scratch : err);
        if (rc && !l->has_measured) return rc;
        if (!rc && t->tp > 1 && !l->has_measured) rc = check_tp(l, t->tp, where, err);
        /* expert parallelism gives each rank experts / ep whole experts */
        if (!rc && ep > 1 && !l->has_measured && (l->kind == OP_LAYER_MOE || l->ffn == OP_FFN_MOE) &&
            l->n_experts % ep != 0)
            rc = op_errf(err, OP_EINVAL, "%s: expert-parallel degree %d does not divide its %d experts",
                         where, ep, l->n_experts);
        if (rc && !l->has_measured) return rc;
        /* the merger's tokens are placeholders inside each sample's sequence: a shorter
         * sequence cannot carry the image (the language model would cost fewer tokens than
         * the encoder hands it) */
        if (!rc && l->kind == OP_LAYER_VISION && l->out_hidden > 0 && l->tokens > t->seq)
            return op_errf(err, OP_EINVAL, "%s: hands %d image tokens per sample to the language "
                           "model, more than --seq %d holds; give --seq %d or more",
                           where, l->tokens, t->seq, l->tokens);
        /* Megatron pads the vocabulary under TP to a multiple of 128 x tp
         * (--make-vocab-size-divisible-by 128), so every rank holds whole rows of 128 */
        if (t->tp > 1) V = ceil(V / (128.0 * t->tp)) * 128.0 * t->tp;
        if (!rc) derive(&a, l, mbs, s, h, V, ep); /* measured layers may lack dimensions */

        double comm[OP_PASS_N];
        for (int p = 0; p < OP_PASS_N; p++) comm[p] = tp_comm_ms(&a, p, t->tp, ep, d);
        c->comm_f_ms = comm[OP_PASS_F];
        c->comm_i_ms = comm[OP_PASS_I];
        c->f_ms = a.ms[OP_PASS_F] + comm[OP_PASS_F];
        c->i_ms = a.ms[OP_PASS_I] + comm[OP_PASS_I];
        c->w_ms = a.ms[OP_PASS_W] + comm[OP_PASS_W];
        c->flops_f = a.flops[OP_PASS_F];
        c->flops_i = a.flops[OP_PASS_I];
        c->flops_w = a.flops[OP_PASS_W];

        double dense = a.params_shard / tp + a.params_rep, experts = a.params_expert / (tp * ep);
        double local = dense + experts, stat = dense * per_param + experts * per_expert;
        double ow = T * out_width(m, i, h) * dt / tp;
        if (!l->has_measured) {
            const double ms[3] = {c->f_ms, c->i_ms, c->w_ms};
            const double by[4] = {local * dt, stat, a.act / tp, ow};
            if ((rc = check_figures(where, ms, by, err))) return rc;
        }
        c->params = to_i64(a.params_shard + a.params_rep + a.params_expert);
        c->params_active = to_i64(a.params_shard + a.params_rep + a.params_expert_active);
        c->param_bytes = to_i64(local * dt);
        c->static_bytes = to_i64(stat);
        double act_w = a.act_w_in + a.act_w_grad;
        if (act_w > a.act) act_w = a.act; /* W cannot hold more than F stashed (see docs) */
        c->act_bytes = to_i64(a.act / tp);
        c->act_w_bytes = to_i64(act_w / tp);
        c->out_bytes = to_i64(ow);
        if (l->out_bytes_measured > 0) c->out_bytes = l->out_bytes_measured;
        /* selective: the attention core's kernel time and what only it stashes */
        double sel = a.sel_act < a.act ? a.sel_act : a.act;
        c->f_sel_ms = a.sel_ms;
        c->act_sel_bytes = c->act_bytes - to_i64(sel / tp);

        if (l->has_measured) {
            /* the profile's times on this GPU when it measured them there (by_gpu) */
            const double *g = op_model_gpu_ms(m, d->name);
            const double mf = g ? g[i * 4] : l->f_ms;
            double mrec = g ? g[i * 4 + 3] : l->recompute_ms;
            if (g && mrec < 0 && l->recompute_ms > 0 && l->f_ms > 0) mrec = l->recompute_ms * mf / l->f_ms;
            c->f_ms = mf;
            c->i_ms = g ? g[i * 4 + 1] : l->i_ms;
            c->w_ms = g ? g[i * 4 + 2] : l->w_ms;
            c->comm_f_ms = c->comm_i_ms = 0; /* inside the measurement */
            if (l->act_bytes_measured > 0) {
                double share = a.act > 0 ? act_w / a.act : MEASURED_W_SHARE;
                c->act_bytes = l->act_bytes_measured;
                c->act_w_bytes = to_i64(share * (double)l->act_bytes_measured);
            }
            if (!(c->w_ms > 0)) c->act_w_bytes = 0; /* nothing waits for a W without work */
            /* measured layers: the core keeps its analytic share of F and of the stash */
            double fa = a.ms[OP_PASS_F] + comm[OP_PASS_F];
            c->f_sel_ms = fa > 0 && a.sel_ms > 0 ? mf * a.sel_ms / fa : 0;
            c->act_sel_bytes = a.act > 0 ? c->act_bytes - to_i64((double)c->act_bytes * sel / a.act)
                                         : c->act_bytes;
            if (mrec > 0) c->f_sel_ms = mrec;
            if (l->act_sel_bytes_measured > 0) c->act_sel_bytes = l->act_sel_bytes_measured;
            if (l->param_bytes_measured > 0) {
                c->param_bytes = l->param_bytes_measured;
                c->static_bytes = to_i64((double)l->param_bytes_measured / dt * per_param);
            }
            /* a profile's loader bounds its figures, a layer filled by the caller may not: the
             * times and bytes the layer ends with, as for an analytic layer */
            const double ms[3] = {c->f_ms, c->i_ms, c->w_ms};
            const double by[4] = {(double)c->param_bytes, (double)c->static_bytes,
                                  (double)c->act_bytes, (double)c->out_bytes};
            if ((rc = check_figures(where, ms, by, err))) return rc;
        }
    }
    return OP_OK;
}
