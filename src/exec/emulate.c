/* emulate.c: emulated compute (each op sleeps for its modelled duration while progressing
 * messages; op_stage_ms of I|B includes the stage's recomputation), the copy engine of offloaded stages, and the scaled plan an emulated run is
 * predicted with.
 *
 * Copy engine (stages whose stage_act is offload): one thread per rank, a FIFO of transfers,
 * each lasting host_lat_ms + bytes / host_bw_GBps (op_exec_opts, else the plan's op_comm host link) with
 * bytes = op_stage_act_bytes: after F(s,m) the stash goes out; its reload is queued when the
 * rank starts the op at its reload point (op_sim_reload_at, as the simulator: as early as
 * memory allows, at the latest the op before I|B(s,m); never before the offload), and I|B
 * waits for the reload to end before its modelled time starts.  Transfers overlap compute.
 * With a host budget (host_mem_bytes) a stash that would not fit when its offload is queued
 * stays on the device (no copies, I does not wait). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/sim.h"
#include "exec/exec_internal.h"

/* Transfer states per (stage, mb) of this rank. */
enum { X_NONE, X_OUT, X_WANT, X_BACK, X_DONE };

typedef struct xfer {
    int sm;        /* stage * M + mb */
    double dur_s;
    int back;      /* 0 offload, 1 reload */
} xfer;

typedef struct copy_engine {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    xfer *q;       /* FIFO: at most 2 per (stage, mb) */
    int head, tail, cap, stop;
    int *st;       /* [S*M] X_* */
    double busy_s; /* time spent copying */
    int n_xfers;
    int64_t host, host_cap; /* bytes offloaded and not yet called back; the host budget (0 = none) */
    int *at, base; /* reload points (op_sim_reload_at), this rank's ops from base */
} copy_engine;

typedef struct emu {
    const op_plan *p;
    int rank, op_i;
    double late_s; /* running mean of how late the final wake-up of a sleep comes */
    double bw_Bps, lat_s;
    copy_engine *ce; /* NULL when no stage of this rank offloads */
    op_exec_copy_stats *stats; /* [P] or NULL */
} emu;

static _Thread_local emu emu_state; /* one per rank thread: ranks may be threads */

static void *copy_main(void *a) {
    copy_engine *ce = a;
    pthread_mutex_lock(&ce->mu);
    for (;;) {
        while (ce->head == ce->tail && !ce->stop) pthread_cond_wait(&ce->cv, &ce->mu);
        if (ce->head == ce->tail) break;
        xfer x = ce->q[ce->head++];
        pthread_mutex_unlock(&ce->mu);
        double t = op_now_s(), end = t + x.dur_s;
        while (op_now_s() < end) op_exec_nap_us((end - op_now_s()) * 1e6);
        pthread_mutex_lock(&ce->mu);
        ce->busy_s += op_now_s() - t;
        ce->n_xfers++;
        if (x.back) ce->st[x.sm] = X_DONE;
        pthread_cond_broadcast(&ce->cv);
    }
    pthread_mutex_unlock(&ce->mu);
    return NULL;
}

static double xfer_s(int s) {
    return emu_state.lat_s + (double)op_stage_act_bytes(emu_state.p, s) / emu_state.bw_Bps;
}

static void push_locked(copy_engine *ce, int s, int sm, int back) {
    /* cap 2 S M, one engine per run: a checked plan has each (s, mb)'s F and I once, so one
     * offload and one reload each */
    OP_ASSERT(ce->tail < ce->cap, "copy engine queue full");
    ce->q[ce->tail++] = (xfer){sm, xfer_s(s), back};
    pthread_cond_broadcast(&ce->cv);
}

/* Asks for the reload of (s, mb): queued now if its offload is, else right after it. */
static void want_back(int s, int mb) {
    copy_engine *ce = emu_state.ce;
    int sm = s * emu_state.p->M + mb;
    pthread_mutex_lock(&ce->mu);
    if (ce->st[sm] == X_OUT) {
        ce->st[sm] = X_BACK, push_locked(ce, s, sm, 1);
        ce->host -= op_stage_act_bytes(emu_state.p, s);
    } else if (ce->st[sm] == X_NONE) {
        ce->st[sm] = X_WANT;
    }
    pthread_mutex_unlock(&ce->mu);
}

static int offloads(const op_plan *p, int s) { return p->stage_act[s] == OP_ACT_OFFLOAD; }

static int emu_setup(void *ctx, const op_plan *p, int rank, op_err *err) {
    const op_exec_opts *o = ctx;
    emu_state = (emu){p, rank, 0, 0, 25e9, 0, NULL, o ? o->copy_stats : NULL};
    if (emu_state.stats) emu_state.stats[rank] = (op_exec_copy_stats){0, 0};
    /* the plan's host link unless the caller sets one */
    if (op_comm_host_bw(&p->comm, rank) > 0) emu_state.bw_Bps = op_comm_host_bw(&p->comm, rank) * 1e9;
    if (p->comm.host_lat_ms > 0) emu_state.lat_s = p->comm.host_lat_ms * 1e-3;
    if (o && o->host_bw_GBps > 0) emu_state.bw_Bps = o->host_bw_GBps * 1e9;
    if (o && o->host_lat_ms > 0) emu_state.lat_s = o->host_lat_ms * 1e-3;
    int any = 0;
    for (int s = 0; s < p->S; s++) any |= p->stage_dev[s] == rank && offloads(p, s);
    if (!any) return OP_OK;
    copy_engine *ce = op_xcalloc(1, sizeof *ce);
    ce->cap = 2 * p->S * p->M;
    ce->q = op_xcalloc((size_t)ce->cap, sizeof *ce->q);
    ce->st = op_xcalloc((size_t)p->S * p->M, sizeof *ce->st);
    ce->host_cap = o && o->host_mem_bytes > 0 ? (int64_t)o->host_mem_bytes
                  : p->comm.host_mem_bytes > 0 ? (int64_t)p->comm.host_mem_bytes : 0;
    pthread_mutex_init(&ce->mu, NULL);
    pthread_cond_init(&ce->cv, NULL);
    if (pthread_create(&ce->th, NULL, copy_main, ce)) {
        free(ce->q), free(ce->st), free(ce);
        return op_errf(err, OP_EIO, "rank %d: cannot start the copy engine thread", rank); /* out of threads */
    }
    ce->at = op_sim_reload_at(p);
    for (int d = 0; d < rank; d++) ce->base += p->n_ops[d];
    emu_state.ce = ce;
    return OP_OK;
}

static void emu_teardown(void *ctx) {
    copy_engine *ce = emu_state.ce;
    if (!ce) return;
    pthread_mutex_lock(&ce->mu);
    ce->stop = 1;
    pthread_cond_broadcast(&ce->cv);
    pthread_mutex_unlock(&ce->mu);
    pthread_join(ce->th, NULL);
    if (emu_state.stats) emu_state.stats[emu_state.rank] = (op_exec_copy_stats){ce->n_xfers, 1e3 * ce->busy_s};
    pthread_mutex_destroy(&ce->mu);
    pthread_cond_destroy(&ce->cv);
    free(ce->q), free(ce->st), free(ce->at), free(ce);
    emu_state.ce = NULL;
}

/* Sleeps for the op's modelled duration, counted from the call (time spent in the runtime is not
 * hidden).  A sleep ends late by the scheduler's wake-up latency (~0.05-0.3 ms here, more when
 * 16 ranks share 2 cores); the emulated kernel aims that much early, by a running mean of the
 * lateness it saw, so that ops last their modelled time on average, as a real kernel would. */
static int emu_run(void *ctx, const op_compute_call *c, op_err *err) {
    const op_plan *p = emu_state.p;
    copy_engine *ce = emu_state.ce;
    int i = emu_state.op_i++;
    if (ce) {
        /* prefetch: the reloads whose point is this op (as the simulator issues them); then
         * this op's, and I|B waits for it */
        for (int q = i + 1; ce->at && q < p->n_ops[emu_state.rank]; q++)
            if (ce->at[ce->base + q] == i) {
                const op_op *nx = &p->ops[emu_state.rank][q];
                want_back(nx->stage, nx->mb);
            }
        if (c->kind != OP_F && c->kind != OP_W && offloads(p, c->stage)) {
            want_back(c->stage, c->mb);
            int sm = c->stage * p->M + c->mb, done;
            for (;;) {
                pthread_mutex_lock(&ce->mu);
                done = ce->st[sm] == X_DONE;
                pthread_mutex_unlock(&ce->mu);
                if (done) break;
                int rc = op_exec_sleep_until(c->rt, op_now_s() + 1e-4);
                if (rc) return rc;
            }
        }
    }
    double dur = op_stage_ms(p, c->stage, c->kind) * 1e-3; /* I and B include the recompute */
    double early = emu_state.late_s < dur / 2 ? emu_state.late_s : dur / 2;
    double aim = op_now_s() + dur - early;
    int rc = op_exec_sleep_until(c->rt, aim);
    double late = op_now_s() - aim;
    if (late > 0) emu_state.late_s = 0.9 * emu_state.late_s + 0.1 * late;
    if (ce && c->kind == OP_F && offloads(p, c->stage)) { /* the stash leaves after F */
        int sm = c->stage * p->M + c->mb;
        int64_t act = op_stage_act_bytes(p, c->stage);
        pthread_mutex_lock(&ce->mu);
        int want = ce->st[sm] == X_WANT;
        /* FIFO: every reload queued so far ends before this copy starts, so the host holds
         * exactly what was offloaded and not yet called back; over budget it stays here */
        if (ce->host_cap > 0 && ce->host + act > ce->host_cap) {
            ce->st[sm] = X_DONE;
        } else {
            ce->st[sm] = want ? X_BACK : X_OUT;
            push_locked(ce, c->stage, sm, 0);
            if (want) push_locked(ce, c->stage, sm, 1);
            else ce->host += act;
        }
        pthread_mutex_unlock(&ce->mu);
    }
    return rc;
}

op_compute op_compute_emulate(void) {
    op_compute c;
    memset(&c, 0, sizeof c);
    c.setup = emu_setup;
    c.run = emu_run;
    c.teardown = emu_teardown;
    c.emulated = 1;
    return c;
}

op_compute op_compute_emulate_opts(const op_exec_opts *o) {
    op_compute c = op_compute_emulate();
    c.ctx = (void *)o;
    return c;
}

void op_exec_emulated_plan(op_plan *dst, const op_plan *src, double time_scale,
                           double bytes_scale, const op_comm *measured, double extra_overhead_ms) {
    op_plan_copy(dst, src);
    /* every device type's row (row 0 is `layers` itself on a uniform plan, a copy otherwise) */
    size_t nrow = (size_t)dst->n_types * (size_t)dst->n_layers;
    for (size_t l = 0; l < nrow; l++) {
        op_layer_cost *c = &dst->type_layers[l];
        c->f_ms *= time_scale;
        c->i_ms *= time_scale;
        c->w_ms *= time_scale;
        c->f_sel_ms *= time_scale;
        double x = (double)c->out_bytes * bytes_scale + 0.5; /* capped: the cast stays defined, */
        int64_t b = x < OP_MAX_BYTES ? (int64_t)x : (int64_t)OP_MAX_BYTES; /* lowering refuses it */
        c->out_bytes = b < 1 ? 1 : b;
    }
    if (dst->type_layers != dst->layers)
        memcpy(dst->layers, dst->type_layers, sizeof *dst->layers * (size_t)dst->n_layers);
    dst->op_overhead_ms = src->op_overhead_ms * time_scale + extra_overhead_ms;
    /* the measured links between devices; the host link (offload) stays the plan's: a cluster
     * file has none, and copying its zero made every offloading plan 'without a host link' */
    if (measured) { /* per pair too, copied: the caller's cluster is freed after this */
        op_comm c = dst->comm;
        op_comm_set_links(&c, measured);
        op_plan_set_comm(dst, &c);
    }
}
