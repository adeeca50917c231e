/* emulate.c: emulated compute (each op sleeps for its modelled duration while progressing
 * messages) and the scaled plan an emulated run is predicted with. */
#include <string.h>

#include "octopipe/exec.h"

typedef struct emu {
    const op_plan *p;
    double late_s; /* running mean of how late the final wake-up of a sleep comes */
} emu;

static _Thread_local emu emu_state; /* one per rank thread: ranks may be threads */

static int emu_setup(void *ctx, const op_plan *p, int rank, op_err *err) {
    emu_state.p = p;
    emu_state.late_s = 0;
    return OP_OK;
}

/* Sleeps for the op's modelled duration, counted from the call (time spent in the runtime is not
 * hidden).  A sleep ends late by the scheduler's wake-up latency (~0.05-0.3 ms here, more when
 * 16 ranks share 2 cores); the emulated kernel aims that much early, by a running mean of the
 * lateness it saw, so that ops last their modelled time on average, as a real kernel would. */
static int emu_run(void *ctx, const op_compute_call *c, op_err *err) {
    double dur = op_stage_ms(emu_state.p, c->stage, c->kind) * 1e-3;
    double early = emu_state.late_s < dur / 2 ? emu_state.late_s : dur / 2;
    double aim = op_now_s() + dur - early;
    int rc = op_exec_sleep_until(c->rt, aim);
    double late = op_now_s() - aim;
    if (late > 0) emu_state.late_s = 0.9 * emu_state.late_s + 0.1 * late;
    return rc;
}

op_compute op_compute_emulate(void) {
    op_compute c;
    memset(&c, 0, sizeof c);
    c.setup = emu_setup;
    c.run = emu_run;
    c.emulated = 1;
    return c;
}

void op_exec_emulated_plan(op_plan *dst, const op_plan *src, double time_scale,
                           double bytes_scale, const op_comm *measured, double extra_overhead_ms) {
    op_plan_copy(dst, src);
    for (int l = 0; l < dst->n_layers; l++) {
        op_layer_cost *c = &dst->layers[l];
        c->f_ms *= time_scale;
        c->i_ms *= time_scale;
        c->w_ms *= time_scale;
        double x = (double)c->out_bytes * bytes_scale + 0.5; /* capped: the cast stays defined, */
        int64_t b = x < OP_MAX_BYTES ? (int64_t)x : (int64_t)OP_MAX_BYTES; /* lowering refuses it */
        c->out_bytes = b < 1 ? 1 : b;
    }
    dst->op_overhead_ms = src->op_overhead_ms * time_scale + extra_overhead_ms;
    if (measured) dst->comm = *measured;
}
