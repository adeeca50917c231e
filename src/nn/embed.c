/* embed.c: token + learned position embedding (E).
 * params: wte (V,d), wpe (T,d).  F: y[b,t] = wte[tok[b,t]] + wpe[t].  No input gradient. */
#include <string.h>

#include "nn/nn_impl.h"

typedef struct {
    int32_t *tok; /* (N) copy, so W does not depend on the caller's buffer */
    float *dy;    /* (N,d) stashed by I for W */
} embed_saved;

size_t op_nn_embed_nparams(const op_nn_cfg *c) { return (size_t)(c->vocab + c->seq) * c->d; }

void op_nn_embed_init(const op_nn_cfg *c, float *p, op_rng *r) {
    op_nn_fill_normal(p, op_nn_embed_nparams(c), 0.1f, r);
}

double op_nn_embed_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d, V = g->vocab;
    const float *wte = l->p, *wpe = l->p + (size_t)V * d;
    embed_saved *s = OP_NN_NEW(c->aw, embed_saved, 1);
    s->tok = OP_NN_NEW(c->aw, int32_t, N);
    for (int n = 0; n < N; n++) {
        int32_t t = c->batch.tokens[n];
        OP_ASSERT(t >= 0 && t < V, "token %d out of range [0,%d)", (int)t, V);
        s->tok[n] = t;
        const float *e = wte + (size_t)t * d, *pe = wpe + (size_t)(n % g->seq) * d;
        for (int i = 0; i < d; i++) y[(size_t)n * d + i] = e[i] + pe[i];
    }
    c->saved = s;
    return 0;
}

void op_nn_embed_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    const op_nn_cfg *g = l->cfg;
    embed_saved *s = c->saved;
    s->dy = op_nn_stash(c->aw, dy, (size_t)g->batch * g->seq * g->d);
}

void op_nn_embed_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    const op_nn_cfg *g = l->cfg;
    int N = g->batch * g->seq, d = g->d;
    embed_saved *s = c->saved;
    float *dwte = grad, *dwpe = grad + (size_t)g->vocab * d;
    for (int n = 0; n < N; n++) {
        float *a = dwte + (size_t)s->tok[n] * d, *b = dwpe + (size_t)(n % g->seq) * d;
        const float *r = s->dy + (size_t)n * d;
        for (int i = 0; i < d; i++) {
            a[i] += r[i];
            b[i] += r[i];
        }
    }
}
