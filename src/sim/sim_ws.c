/* sim_ws.c: the simulator's reusable workspace and the per-stage table built before each run.
 * The tuner simulates thousands of plans; after the first run of a shape nothing allocates. */
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"

op_sim_ws *op_sim_ws_new(void) { return op_xcalloc(1, sizeof(op_sim_ws)); }

void op_sim_ws_free(op_sim_ws *ws) {
    if (!ws) return;
    free(ws->end);
    free(ws->st);
    free(ws->pos);
    free(ws->free_t);
    free(ws->stack);
    free(ws->inq);
    free(ws->dev_first);
    free(ws->dev_stages);
    free(ws->dv);
    free(ws->static_b);
    free(ws->ops_base);
    free(ws->wake_at);
    free(ws->tk);
    free(ws->td);
    free(ws->ds);
    free(ws->xfer);
    free(ws->eng);
    free(ws->host);
    free(ws->host_peak);
    sim_copy_free(&ws->cp);
    free(ws);
}

#define GROW(ptr, n) ((ptr) = op_xrealloc((ptr), sizeof(*(ptr)) * (size_t)(n)))

/* Cache-line aligned and not preserved (rebuilt by every run): the dynamic mode's per-stage
 * and per-device records are one or two lines each. */
static void *grow_aligned(void *old, size_t bytes) {
    free(old);
    void *q = aligned_alloc(64, (bytes + 63) / 64 * 64);
    OP_ASSERT(q, "out of memory allocating %zu bytes", bytes);
    return q;
}

static void ensure(op_sim_ws *ws, int P, int S, int M) {
    size_t nops = (size_t)S * (size_t)M * 3;
    if (nops > ws->cap_ops) {
        GROW(ws->end, nops);
        ws->cap_ops = nops;
    }
    if ((size_t)S > ws->cap_S) {
        GROW(ws->st, S);
        GROW(ws->dev_stages, S);
        ws->ds = grow_aligned(ws->ds, sizeof(sim_dstage) * (size_t)S);
        ws->cap_S = (size_t)S;
    }
    if ((size_t)P > ws->cap_P) {
        GROW(ws->pos, P);
        GROW(ws->free_t, P);
        GROW(ws->stack, P);
        GROW(ws->inq, P);
        GROW(ws->dev_first, P + 1);
        ws->dv = grow_aligned(ws->dv, sizeof(sim_dev) * (size_t)P);
        GROW(ws->static_b, P);
        GROW(ws->ops_base, P);
        GROW(ws->wake_at, P);
        GROW(ws->eng, P);
        GROW(ws->host, P);
        GROW(ws->host_peak, P);
        ws->cap_P = (size_t)P;
    }
    size_t leaves = 1;
    while (leaves < (size_t)P) leaves *= 2;
    if (2 * leaves > ws->cap_tw) {
        GROW(ws->tk, 2 * leaves);
        GROW(ws->td, 2 * leaves);
        ws->cap_tw = 2 * leaves;
    }
    ws->tw_leaves = (int)leaves;
    if (nops / 3 * 4 > ws->cap_xfer) {
        GROW(ws->xfer, nops / 3 * 4);
        ws->cap_xfer = nops / 3 * 4;
    }
}

static double link_ms(const op_plan *p, int a, int b, int64_t bytes) {
    if (a == b || p->comm.none) return 0.0;
    return op_comm_ms(&p->comm, a, b, bytes);
}

void sim_prepare(op_sim_ws *ws, const op_plan *p, int reset_end) {
    int S = p->S;
    ensure(ws, p->P, S, p->M);
    ws->any_offload = 0;
    for (int s = 0; s < S; s++) {
        sim_stage *t = &ws->st[s];
        t->dev = p->stage_dev[s];
        t->split = p->stage_split[s] ? 1 : 0;
        t->dur[0] = op_stage_ms(p, s, OP_F);
        t->dur[1] = op_stage_ms(p, s, t->split ? OP_I : OP_B);
        t->dur[2] = t->split ? op_stage_ms(p, s, OP_W) : 0.0;
        t->act_full = op_stage_act_bytes(p, s);
        t->act = op_stage_stash_bytes(p, s);
        t->remat = op_stage_remat_bytes(p, s);
        t->act_w = t->split ? op_stage_act_w_bytes(p, s) : 0;
        t->act_i = op_stage_act_i_bytes(p, s);
        t->offload = p->stage_act && p->stage_act[s] == OP_ACT_OFFLOAD;
        t->copy_ms = t->offload ? op_stage_copy_ms(p, s) : 0.0;
        if (t->offload) ws->any_offload = 1;
    }
    /* The gradient going back from s+1 to s has the size of the activation going forward
     * from s to s+1: both cross the same boundary. */
    for (int s = 0; s < S; s++) {
        int64_t in_bytes = s > 0 ? op_stage_out_bytes(p, s - 1) : 0;
        ws->st[s].delay_f = s > 0 ? link_ms(p, p->stage_dev[s - 1], p->stage_dev[s], in_bytes) : 0;
        ws->st[s].delay_b = s + 1 < S
                                ? link_ms(p, p->stage_dev[s + 1], p->stage_dev[s],
                                          op_stage_out_bytes(p, s))
                                : 0;
    }
    if (ws->any_offload)
        sim_copy_reset(&ws->cp, p, ws->xfer, ws->eng, ws->host, ws->host_peak);
    if (!reset_end) return;
    size_t nops = (size_t)S * (size_t)p->M * 3;
    double *e = ws->end;
    for (size_t i = 0; i < nops; i++) e[i] = -1.0;
}

int sim_check_layout(const op_plan *p, op_err *err) {
    int rc = op_plan_validate_layout(p, err);
    if (rc != OP_OK) return rc;
    for (int l = 0; l < p->n_layers; l++) {
        const op_layer_cost *c = &p->layers[l];
        if (!(c->f_ms >= 0 && c->i_ms >= 0 && c->w_ms >= 0))
            return op_errf(err, OP_EINVAL, "layers[%d] (%s): negative or NaN cost", l, c->name);
    }
    for (int s = 0; s < p->S; s++) {
        if (p->stage_act && p->stage_act[s] >= OP_ACT_N)
            return op_errf(err, OP_EINVAL, "stage %d: unknown activation policy %d", s,
                           p->stage_act[s]);
        if (p->stage_act && p->stage_act[s] == OP_ACT_OFFLOAD &&
            !(p->comm.host_bw_GBps > 0 && p->comm.host_lat_ms >= 0))
            return op_errf(err, OP_EINVAL,
                           "stage %d offloads its activations but the plan has no host link "
                           "(comm.host_bw_GBps = %g)", s, p->comm.host_bw_GBps);
    }
    if (!(p->op_overhead_ms >= 0))
        return op_errf(err, OP_EINVAL, "op_overhead_ms must be >= 0 (got %g)", p->op_overhead_ms);
    return OP_OK;
}
