/* layer.c: dispatch from a layer symbol to its family (embed.c, attn.c, mamba.c, mlp.c,
 * moe.c, head.c). */
#include "nn/nn_impl.h"

#define DISPATCH(sym, call)                       \
    switch (sym) {                                \
    case 'E': return op_nn_embed_##call;          \
    case '*': return op_nn_attn_##call;           \
    case 'M': return op_nn_mamba_##call;          \
    case '-': return op_nn_mlp_##call;            \
    case '#': return op_nn_moe_##call;            \
    case 'L': return op_nn_head_##call;           \
    default: break;                               \
    }

int op_nn_sym_valid(char sym) {
    return sym == 'E' || sym == '*' || sym == 'M' || sym == '-' || sym == '#' || sym == 'L';
}

size_t op_nn_layer_nparams(char sym, const op_nn_cfg *c) {
    DISPATCH(sym, nparams(c))
    return 0;
}

void op_nn_layer_init(const op_nn_layer *l) {
    op_rng r;
    /* seeded by (model seed, layer index) only: any partition gives the same weights */
    op_rng_seed(&r, l->cfg->seed * 1000003u + (uint64_t)l->index * 7919u + 1u);
    DISPATCH(l->sym, init(l->cfg, l->p, &r))
    OP_ASSERT(0, "unknown layer symbol '%c'", l->sym);
}

double op_nn_layer_forward(const op_nn_layer *l, op_nn_ctx *c, const float *x, float *y) {
    DISPATCH(l->sym, forward(l, c, x, y))
    OP_ASSERT(0, "unknown layer symbol '%c'", l->sym);
}

void op_nn_layer_backward_input(const op_nn_layer *l, op_nn_ctx *c, const float *dy, float *dx) {
    DISPATCH(l->sym, backward_input(l, c, dy, dx))
    OP_ASSERT(0, "unknown layer symbol '%c'", l->sym);
}

void op_nn_layer_backward_weight(const op_nn_layer *l, op_nn_ctx *c, float *grad) {
    DISPATCH(l->sym, backward_weight(l, c, grad))
    OP_ASSERT(0, "unknown layer symbol '%c'", l->sym);
}
