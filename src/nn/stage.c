/* stage.c: a pipeline stage = contiguous layers [first, last) with its own parameter, gradient
 * and AdamW arenas, and per-microbatch activation arenas that F allocates, I partly frees and
 * W frees.  This is the unit the executor's compute interface calls. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"

enum { OP_NN_OFFLOAD = 3 }; /* op_act_policy's offload (cost.h; nn does not include it) */

size_t op_nn_io_floats(const op_nn_model *m) {
    return (size_t)m->cfg.batch * m->cfg.seq * m->cfg.d;
}

void op_nn_stage_init(op_nn_stage *s, const op_nn_model *m, int first, int last, int n_mb) {
    OP_ASSERT(0 <= first && first < last && last <= m->n_layers, "bad stage [%d,%d)", first, last);
    OP_ASSERT(n_mb >= 1, "n_mb %d", n_mb);
    memset(s, 0, sizeof *s);
    op_nn_blas_single_thread();
    s->m = m, s->first = first, s->last = last, s->n_mb = n_mb;
    s->n_params = m->off[last] - m->off[first];
    s->params = OP_ARENA_NEW(&s->arena, float, s->n_params);
    s->grads = OP_ARENA_NEW(&s->arena, float, s->n_params);
    s->adam_m = OP_ARENA_NEW(&s->arena, float, s->n_params);
    s->adam_v = OP_ARENA_NEW(&s->arena, float, s->n_params);
    s->wscratch = OP_ARENA_NEW(&s->arena, float, s->n_params);
    int nl = last - first;
    s->layers = OP_ARENA_NEW(&s->arena, op_nn_layer, nl);
    for (int i = 0; i < nl; i++) {
        op_nn_layer *l = &s->layers[i];
        l->sym = m->pattern[first + i];
        l->index = first + i;
        l->cfg = &m->cfg;
        l->p = s->params + (m->off[first + i] - m->off[first]);
        op_nn_layer_init(l);
    }
    s->mb = OP_ARENA_NEW(&s->arena, op_nn_mbstate, n_mb);
    for (int b = 0; b < n_mb; b++) {
        s->mb[b].ctx = OP_ARENA_NEW(&s->arena, op_nn_ctx, nl);
        s->mb[b].ai.pool = s->mb[b].aw.pool = s->mb[b].ax.pool = &s->pool;
        s->mb[b].host.pool = &s->host_pool;
    }
    s->drop.pool = &s->pool;
    for (int k = 0; k < 2; k++) s->buf[k] = OP_ARENA_NEW(&s->arena, float, op_nn_io_floats(m));
}

void op_nn_stage_free(op_nn_stage *s) {
    for (int b = 0; b < s->n_mb; b++) {
        op_nn_mem_release(&s->mb[b].ai);
        op_nn_mem_release(&s->mb[b].aw);
        op_nn_mem_release(&s->mb[b].ax);
        op_nn_mem_release(&s->mb[b].host);
        free(s->mb[b].pending);
    }
    op_nn_mem_release(&s->drop);
    op_nn_pool_free(&s->pool);
    op_nn_pool_free(&s->host_pool);
    op_arena_free(&s->arena);
    memset(s, 0, sizeof *s);
}

size_t op_nn_stage_static_bytes(const op_nn_stage *s) { return 4 * s->n_params * sizeof(float); }

void op_nn_meter_init(op_nn_meter *mt) {
    memset(mt, 0, sizeof *mt);
    pthread_mutex_init(&mt->mu, NULL);
}

void op_nn_meter_destroy(op_nn_meter *mt) { pthread_mutex_destroy(&mt->mu); }

/* The stage's device bytes go from `before` to `after` (parts of act_bytes); with a meter the
 * change is one step of the rank's sum, taken under its lock (a copy thread changes it too). */
static void track(op_nn_stage *s, size_t before, size_t after) {
    op_nn_meter *mt = s->meter;
    if (mt) pthread_mutex_lock(&mt->mu);
    s->act_bytes = s->act_bytes - before + after;
    if (s->act_bytes > s->peak_act_bytes) s->peak_act_bytes = s->act_bytes;
    if (mt) {
        mt->live += (int64_t)after - (int64_t)before;
        if (mt->live > mt->peak) mt->peak = mt->live;
        pthread_mutex_unlock(&mt->mu);
    }
}

void op_nn_stage_set_copy_async(op_nn_stage *s, int on) { s->copy_async = on != 0; }

void op_nn_stage_set_meter(op_nn_stage *s, op_nn_meter *meter) { s->meter = meter; }

size_t op_nn_stage_offload(op_nn_stage *s, int mb) {
    OP_ASSERT(mb >= 0 && mb < s->n_mb, "microbatch %d of %d", mb, s->n_mb);
    op_nn_mbstate *ms = &s->mb[mb];
    if (s->policy != OP_NN_OFFLOAD) return 0;
    OP_ASSERT(ms->state == 1 && !ms->host.head, "offload(stage %d, mb %d) not right after F", s->first, mb);
    /* the device bytes stay counted until the copy has ended, as on a copy engine */
    size_t n = op_nn_mem_offload(&ms->ai, &ms->host) + op_nn_mem_offload(&ms->aw, &ms->host);
    s->host_bytes += n;
    if (s->host_bytes > s->peak_host_bytes) s->peak_host_bytes = s->host_bytes;
    track(s, n, 0);
    return n;
}

size_t op_nn_stage_reload(op_nn_stage *s, int mb) {
    OP_ASSERT(mb >= 0 && mb < s->n_mb, "microbatch %d of %d", mb, s->n_mb);
    op_nn_mbstate *ms = &s->mb[mb];
    if (!ms->host.head) return 0; /* never went away */
    size_t n = ms->ai.used_bytes + ms->aw.used_bytes;
    track(s, 0, n); /* held again from the reload's start */
    op_nn_mem_reload(&ms->ai, &ms->host);
    op_nn_mem_reload(&ms->aw, &ms->host);
    op_nn_mem_release(&ms->host);
    s->host_bytes -= n;
    return n;
}

void op_nn_stage_set_policy(op_nn_stage *s, int policy) {
    OP_ASSERT(policy >= 0 && policy <= 3, "activation policy %d", policy);
    for (int b = 0; b < s->n_mb; b++)
        OP_ASSERT(s->mb[b].state == 0, "policy change with microbatch %d in flight", b);
    s->policy = policy;
}

size_t op_nn_stage_in_bytes(const op_nn_model *m, int first) {
    size_t n = first == 0 ? (size_t)m->cfg.batch * m->cfg.seq * sizeof(int32_t)
                          : op_nn_io_floats(m) * sizeof(float);
    return (n + 15) & ~(size_t)15; /* as the arena rounds it */
}

static size_t held(const op_nn_mbstate *ms) {
    return ms->ai.used_bytes + ms->aw.used_bytes + ms->ax.used_bytes;
}

/* Runs layers [0, nl) forward for microbatch ms from x_in (NULL: E reads the batch); the last
 * layer writes x_out (NULL: L, or a stage buffer when recomputing).  full_f: each layer saves
 * into the scratch arena, released after it (F under full).  Returns the head's CE. */
static double run_forward(op_nn_stage *s, op_nn_mbstate *ms, const float *x_in, float *x_out,
                          int full_f, int recompute) {
    int nl = s->last - s->first;
    double loss = 0;
    for (int i = 0; i < nl; i++) {
        op_nn_ctx *c = &ms->ctx[i];
        *c = (op_nn_ctx){&ms->ai, &ms->aw, ms->batch, NULL, NULL};
        if (full_f) c->ai = c->aw = &s->drop;
        if (s->policy == 1 && !recompute) c->drop = &s->drop; /* selective: I recomputes it */
        const float *in = i == 0 ? x_in : s->buf[(i - 1) & 1];
        float *out = i == nl - 1 ? x_out : s->buf[i & 1];
        if (i == nl - 1 && !out && s->layers[i].sym != 'L') out = s->buf[i & 1];
        double l = op_nn_layer_forward(&s->layers[i], c, in, out);
        op_nn_mem_release(&s->drop); /* what no microbatch keeps */
        if (recompute) continue;       /* loss terms were counted by F */
        if (s->layers[i].sym == 'L') loss = l;
        else s->aux_loss += l; /* MoE balance terms: reported apart, never mixed into CE */
    }
    return loss;
}

double op_nn_stage_forward(op_nn_stage *s, int mb, const op_nn_batch *b, const float *x_in,
                           float *x_out) {
    OP_ASSERT(mb >= 0 && mb < s->n_mb, "microbatch %d of %d", mb, s->n_mb);
    op_nn_mbstate *ms = &s->mb[mb];
    OP_ASSERT(ms->state == 0, "F(stage %d, mb %d) twice without I/W", s->first, mb);
    int nl = s->last - s->first;
    OP_ASSERT((x_in == NULL) == (s->layers[0].sym == 'E'), "x_in must be NULL iff stage starts with E");
    OP_ASSERT((x_out == NULL) == (s->layers[nl - 1].sym == 'L'), "x_out must be NULL iff stage ends with L");
    ms->batch = *b;
    ms->x_in = NULL;
    if (s->policy == 2) { /* full: keep only the stage input */
        if (x_in) {
            ms->x_in = op_nn_stash(&ms->ax, x_in, op_nn_io_floats(s->m));
        } else {
            size_t N = (size_t)s->m->cfg.batch * s->m->cfg.seq;
            int32_t *tok = OP_NN_NEW(&ms->ax, int32_t, N);
            memcpy(tok, b->tokens, N * sizeof *tok);
            ms->batch.tokens = tok;
        }
    }
    double loss = run_forward(s, ms, x_in, x_out, s->policy == 2, 0);
    track(s, 0, held(ms));
    ms->state = 1;
    /* offload: the stash moves to host memory, device pages go back (or a copy thread does it) */
    if (s->policy == OP_NN_OFFLOAD && !s->copy_async) op_nn_stage_offload(s, mb);
    return loss;
}

void op_nn_stage_backward_input(op_nn_stage *s, int mb, const float *dy_out, float *dx_in) {
    op_nn_mbstate *ms = &s->mb[mb];
    OP_ASSERT(ms->state == 1, "I(stage %d, mb %d) without F", s->first, mb);
    int nl = s->last - s->first;
    if (s->policy == OP_NN_OFFLOAD) { /* the stash comes back first (I waits for its reload) */
        if (!s->copy_async) op_nn_stage_reload(s, mb);
        OP_ASSERT(!ms->host.head, "I(stage %d, mb %d) before its reload", s->first, mb);
    }
    if (s->policy == 2) { /* full: re-run the forward from the kept input, then drop it */
        size_t in = held(ms);
        run_forward(s, ms, ms->x_in, NULL, 0, 1);
        track(s, in, held(ms));
        size_t all = held(ms);
        op_nn_mem_release(&ms->ax);
        ms->x_in = NULL;
        track(s, all, held(ms));
    }
    size_t before = ms->ai.used_bytes + ms->aw.used_bytes, nio = op_nn_io_floats(s->m);
    /* layer i reads the gradient of its output from buf[(i+1)&1] and writes its input's
     * gradient to buf[i&1] (the caller's buffers at the stage ends) */
    for (int i = nl - 1; i >= 0; i--) {
        const float *dy = i == nl - 1 ? dy_out : s->buf[(i + 1) & 1];
        float *dx = i == 0 ? dx_in : s->buf[i & 1];
        if (dx) memset(dx, 0, nio * sizeof(float));
        op_nn_layer_backward_input(&s->layers[i], &ms->ctx[i], dy, dx);
    }
    size_t peak = ms->ai.used_bytes + ms->aw.used_bytes;
    track(s, before, peak); /* I's own stash counts until the I-only arena goes */
    op_nn_mem_release(&ms->ai);
    track(s, peak, ms->aw.used_bytes);
    ms->state = 2;
}

static void add_into(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void op_nn_stage_backward_weight(op_nn_stage *s, int mb) {
    op_nn_mbstate *ms = &s->mb[mb];
    OP_ASSERT(ms->state == 2, "W(stage %d, mb %d) without I", s->first, mb);
    int nl = s->last - s->first;
    memset(s->wscratch, 0, s->n_params * sizeof(float));
    for (int i = 0; i < nl; i++)
        op_nn_layer_backward_weight(&s->layers[i], &ms->ctx[i],
                                    s->wscratch + (s->layers[i].p - s->params));
    track(s, ms->aw.used_bytes, 0);
    op_nn_mem_release(&ms->aw);
    ms->state = 0;
    /* fold in microbatch order, whatever order W runs in: bitwise schedule-independent */
    if (mb != s->next_w) {
        OP_ASSERT(!ms->pending && mb > s->next_w, "W(stage %d, mb %d) twice in a step", s->first, mb);
        ms->pending = op_xmalloc(s->n_params * sizeof(float));
        memcpy(ms->pending, s->wscratch, s->n_params * sizeof(float));
        return;
    }
    add_into(s->grads, s->wscratch, s->n_params);
    s->next_w++;
    while (s->next_w < s->n_mb && s->mb[s->next_w].pending) {
        op_nn_mbstate *q = &s->mb[s->next_w];
        add_into(s->grads, q->pending, s->n_params);
        free(q->pending);
        q->pending = NULL;
        s->next_w++;
    }
}

void op_nn_stage_backward(op_nn_stage *s, int mb, const float *dy_out, float *dx_in) {
    op_nn_stage_backward_input(s, mb, dy_out, dx_in);
    op_nn_stage_backward_weight(s, mb);
}

void op_nn_stage_zero_grad(op_nn_stage *s) {
    for (int b = 0; b < s->n_mb; b++)
        OP_ASSERT(!s->mb[b].pending && s->mb[b].state == 0, "zero_grad with microbatch %d in flight", b);
    memset(s->grads, 0, s->n_params * sizeof(float));
    s->next_w = 0;
    s->aux_loss = 0;
}
