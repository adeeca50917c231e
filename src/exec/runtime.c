/* runtime.c: one rank walking its instruction list (exec.h): nonblocking messages, polite
 * waits, progress during compute, the watchdog and per-op records. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec_internal.h"

enum { B_NONE, B_RECV, B_SEND, B_HELD };
#define POOL 64                   /* buffers kept for reuse, at most */
#define POOL_BYTES (128LL << 20) /* and at most this many bytes */

typedef struct op_exec_rank op_exec_rank;
static void *buf_get(op_exec_rank *rt, int b, int64_t n);
static void buf_put(op_exec_rank *rt, int b);

struct op_exec_rank {
    const op_plan *p;
    const op_prog *prog;
    op_xport *x;
    const op_compute *c;
    op_exec_opts o;
    void **buf;
    uint8_t *state; /* [n_bufs] B_* */
    op_xreq *req;   /* [n_bufs] */
    int *act;       /* buffers with a request in flight */
    op_xreq **ptrs; /* scratch for test_all */
    int64_t *bsize; /* [n_bufs] bytes of each live buffer */
    void *pool[POOL];  /* released buffers kept for reuse, with their sizes */
    int64_t pool_n[POOL];
    int n_pool;
    int64_t pool_bytes;
    double last_abort_poll;
    double deadline;      /* op_now_s() past which the rank raises the time limit (0: none) */
    int n_act;
    int xerr;       /* transport error seen by progress */
    int abort_reason;
    pthread_mutex_t mu;
    /* progress thread */
    pthread_t th;
    int th_on, stop, computing;
    /* what this rank is doing, for the watchdog report */
    const op_instr *cur;
    double cur_since;
};

/* Message buffers come from a small pool of released ones of the same size: a fresh malloc of a
 * large buffer is a fresh mmap, whose page faults (and the munmap's TLB shootdowns) cost more
 * than the transfer itself on a busy machine.  Pooled buffers are touched once, when made. */
static void *buf_get(op_exec_rank *rt, int b, int64_t n) {
    for (int i = 0; i < rt->n_pool; i++)
        if (rt->pool_n[i] == n) {
            void *p = rt->pool[i];
            rt->n_pool--;
            rt->pool_bytes -= n;
            rt->pool[i] = rt->pool[rt->n_pool];
            rt->pool_n[i] = rt->pool_n[rt->n_pool];
            rt->buf[b] = p;
            rt->bsize[b] = n;
            return p;
        }
    void *p = op_xmalloc((size_t)n);
    memset(p, 0, (size_t)n);
    rt->buf[b] = p;
    rt->bsize[b] = n;
    return p;
}

static void buf_put(op_exec_rank *rt, int b) {
    void *p = rt->buf[b];
    rt->buf[b] = NULL;
    if (!p) return;
    if (rt->n_pool < POOL && rt->pool_bytes + rt->bsize[b] <= POOL_BYTES) {
        rt->pool_bytes += rt->bsize[b];
        rt->pool[rt->n_pool] = p;
        rt->pool_n[rt->n_pool++] = rt->bsize[b];
    } else {
        free(p);
    }
}

void op_exec_timer_slack_fine(void) {
    /* default slack is 50 us: every nanosleep would overshoot by that much */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

void op_exec_nap_us(double us) {
    struct timespec ts = {(time_t)(us / 1e6), (long)(((long long)(us * 1000)) % 1000000000LL)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static void progress_locked(op_exec_rank *rt) {
    for (int i = 0; i < rt->n_act; i++) rt->ptrs[i] = &rt->req[rt->act[i]];
    if (rt->n_act && rt->x->test_all(rt->x, rt->ptrs, rt->n_act) < 0) rt->xerr = 1;
    for (int i = 0; i < rt->n_act;) {
        int b = rt->act[i];
        if (rt->req[b].done) {
            if (rt->state[b] == B_SEND) {
                buf_put(rt, b);
                rt->state[b] = B_NONE;
            } else {
                rt->state[b] = B_HELD;
            }
            rt->act[i] = rt->act[--rt->n_act];
        } else {
            i++;
        }
    }
    /* the watchdog channel costs another progress pass: look every 2 ms only */
    double now = op_now_s();
    if (!rt->abort_reason && now - rt->last_abort_poll > 2e-3) {
        rt->last_abort_poll = now;
        rt->abort_reason = rt->x->poll_abort(rt->x);
        /* the time limit, kept by every rank itself: a rank stuck where nobody waits on it
         * still reaches here (an injected hang naps in op_exec_sleep_until), and under MPI
         * each rank then says what it was doing, which mpirun's own limit does not */
        if (!rt->abort_reason && rt->deadline > 0 && now > rt->deadline) {
            rt->abort_reason = op_exec_limit_reason(rt->p);
            rt->x->raise_abort(rt->x, rt->abort_reason); /* the rank's lock is held */
        }
    }
}

void op_exec_progress(op_exec_rank *rt) {
    pthread_mutex_lock(&rt->mu);
    progress_locked(rt);
    pthread_mutex_unlock(&rt->mu);
}

/* abort_reason, n_act, xerr and the states of buffers in flight change under the rank's lock,
 * on the progress thread too (while the rank computes, and for a moment after): the rank's own
 * thread reads them under it as well, never bare. */
static int abort_of(op_exec_rank *rt) {
    pthread_mutex_lock(&rt->mu);
    int a = rt->abort_reason;
    pthread_mutex_unlock(&rt->mu);
    return a;
}

int op_exec_sleep_until(op_exec_rank *rt, double deadline) {
    double slice = (rt->o.slice_ms > 0 ? rt->o.slice_ms : 0.5) * 1e-3;
    for (;;) {
        /* called from compute: with the progress thread on, it writes abort_reason and n_act
         * meanwhile, so they are read under the lock */
        pthread_mutex_lock(&rt->mu);
        if (!rt->th_on) progress_locked(rt);
        int stop = rt->abort_reason != 0, busy = rt->n_act != 0;
        pthread_mutex_unlock(&rt->mu);
        if (stop) return OP_ETIMEOUT;
        double left = deadline - op_now_s();
        if (left <= 0) return OP_OK;
        /* with nothing in flight only the watchdog channel needs a look, so nap longer */
        double s = busy ? slice : 20 * slice;
        op_exec_nap_us((left < s ? left : s) * 1e6);
    }
}

/* The progress thread works only while the rank computes, and `computing` is checked under
 * the lock: once set_computing(rt, 0) returns, no pass of this thread is under way or starts,
 * so the rank reads its state (abort_reason, n_act, state[], xerr) without the lock again.
 * (A check before the lock let a pass that saw 1 run on after the rank had left compute.) */
static void *progress_main(void *arg) {
    op_exec_rank *rt = arg;
    while (!__atomic_load_n(&rt->stop, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&rt->computing, __ATOMIC_RELAXED)) { /* no lock taken while idle */
            pthread_mutex_lock(&rt->mu);
            if (__atomic_load_n(&rt->computing, __ATOMIC_RELAXED)) progress_locked(rt);
            pthread_mutex_unlock(&rt->mu);
        }
        op_exec_nap_us(50);
    }
    return NULL;
}

static void set_computing(op_exec_rank *rt, int on) {
    if (!rt->th_on) return;
    pthread_mutex_lock(&rt->mu);
    __atomic_store_n(&rt->computing, on, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&rt->mu);
}

/* This rank stops the job (unless a reason came first): its reason, and the notice, which goes
 * through the transport, so it takes the rank's lock like every other transport call (the
 * progress thread may be in MPI right now). */
static void raise_own(op_exec_rank *rt) {
    pthread_mutex_lock(&rt->mu);
    if (!rt->abort_reason) {
        rt->abort_reason = rt->x->rank + 1;
        rt->x->raise_abort(rt->x, rt->x->rank + 1);
    }
    pthread_mutex_unlock(&rt->mu);
}

static void describe(op_exec_rank *rt, char *line, size_t cap) {
    const op_instr *x = rt->cur;
    double dt = op_now_s() - rt->cur_since;
    int r = rt->x->rank;
    if (!x) {
        snprintf(line, cap, "rank %d: finished its ops, waiting for its sends to complete (%.1f s)", r, dt);
    } else if (x->code == OP_I_WAIT) {
        snprintf(line, cap,
                 "rank %d: waiting %.1f s for the %s input of %s(s%d,mb%d) from rank %d (tag %d)", r,
                 dt, x->kind == OP_F ? "activation" : "gradient", op_kind_name((op_kind)x->kind),
                 x->stage, x->mb, x->peer, x->tag);
    } else {
        /* the watchdog fires because a rank waited on this one: stuck.  The time limit also
         * stops a run that was merely slow, whose ops ran for a moment each: only an op past
         * a second is called stuck there */
        int stuck = abort_of(rt) != op_exec_limit_reason(rt->p) || dt >= 1.0;
        snprintf(line, cap, "rank %d: %sin compute %s(s%d,mb%d) for %.1f s", r, stuck ? "stuck " : "",
                 op_kind_name((op_kind)x->kind), x->stage, x->mb, dt);
    }
}

/* Called when this rank sees the watchdog: report, return OP_ETIMEOUT. */
static int watchdog_out(op_exec_rank *rt, char *line, size_t cap, op_err *err) {
    char tmp[512];
    describe(rt, tmp, sizeof tmp);
    if (line) snprintf(line, cap, "%s", tmp);
    int reason = abort_of(rt), limit = reason == op_exec_limit_reason(rt->p);
    if (!line && !rt->o.quiet) fprintf(stderr, "octopipe exec: %s: %s\n", limit ? "time limit" : "watchdog", tmp);
    if (limit)
        return op_errf(err, OP_ETIMEOUT, "the run passed its --timeout of %g s: %s", rt->o.timeout_s, tmp);
    return op_errf(err, OP_ETIMEOUT, "watchdog (raised by rank %d): %s", reason - 1, tmp);
}

/* Polls until buffer b's request completed (b < 0: until every send completed). */
static int wait_for(op_exec_rank *rt, int b, char *line, size_t cap, op_err *err) {
    double poll = rt->o.poll_us > 0 ? rt->o.poll_us : 20;
    double wd = rt->o.watchdog_s > 0 ? rt->o.watchdog_s : 30;
    for (;;) {
        pthread_mutex_lock(&rt->mu);
        progress_locked(rt);
        int xerr = rt->xerr, done = b >= 0 ? rt->state[b] == B_HELD : rt->n_act == 0, stop = rt->abort_reason;
        pthread_mutex_unlock(&rt->mu);
        if (xerr) return op_errf(err, OP_EPEER, "rank %d: transport error", rt->x->rank);
        if (done) return OP_OK;
        if (stop) return watchdog_out(rt, line, cap, err);
        if (op_now_s() - rt->cur_since > wd) {
            raise_own(rt);
            return watchdog_out(rt, line, cap, err);
        }
        /* back off as the wait grows: a rank idle in a long bubble must not steal the cores
         * the computing ranks need (16 ranks on 2 cores); reacting 1% late costs 1% of a wait */
        double g = rt->o.poll_growth > 0 ? rt->o.poll_growth : 0.003;
        double most = rt->o.poll_max_us > 0 ? rt->o.poll_max_us : 300;
        double waited_us = (op_now_s() - rt->cur_since) * 1e6, nap = waited_us * g;
        op_exec_nap_us(nap < poll ? poll : nap > most ? most : nap);
    }
}

static int run_list(op_exec_rank *rt, double t0, op_exec_rec *recs, char *line, size_t cap,
                    op_err *err) {
    const op_prog *pr = rt->prog;
    op_xport *x = rt->x;
    int nrec = 0, rc = OP_OK;
    for (int i = 0; i < pr->n && rc == OP_OK; i++) {
        const op_instr *in = &pr->ins[i];
        int b = in->buf;
        switch (in->code) {
        case OP_I_RECV:
            pthread_mutex_lock(&rt->mu);
            buf_get(rt, b, in->bytes);
            rt->state[b] = B_RECV;
            memset(&rt->req[b], 0, sizeof rt->req[b]);
            if (x->irecv(x, rt->buf[b], in->bytes, in->peer, in->tag, &rt->req[b]) < 0) rt->xerr = 1;
            rt->act[rt->n_act++] = b;
            pthread_mutex_unlock(&rt->mu);
            break;
        case OP_I_WAIT:
            rt->cur = in;
            rt->cur_since = op_now_s();
            rc = wait_for(rt, b, line, cap, err);
            break;
        case OP_I_SEND:
            pthread_mutex_lock(&rt->mu);
            rt->state[b] = B_SEND;
            memset(&rt->req[b], 0, sizeof rt->req[b]);
            if (x->isend(x, rt->buf[b], in->bytes, in->peer, in->tag, &rt->req[b]) < 0) rt->xerr = 1;
            rt->act[rt->n_act++] = b;
            pthread_mutex_unlock(&rt->mu);
            break;
        case OP_I_FREE:
            pthread_mutex_lock(&rt->mu); /* the pool is shared with the progress thread */
            buf_put(rt, b);
            pthread_mutex_unlock(&rt->mu);
            rt->state[b] = B_NONE;
            break;
        case OP_I_COMP: {
            if (in->out >= 0) {
                pthread_mutex_lock(&rt->mu);
                buf_get(rt, in->out, in->out_bytes);
                pthread_mutex_unlock(&rt->mu);
                rt->state[in->out] = B_HELD;
            }
            rt->cur = in;
            double t = op_now_s();
            rt->cur_since = t;
            const op_exec_fault *f = &rt->o.fault;
            if (f->kind != OP_FAULT_NONE && f->rank == x->rank && f->op_index == in->op_index) {
                if (f->kind == OP_FAULT_CRASH) raise(SIGKILL);
                /* hung inside the op: a progress thread polls the abort channel meanwhile (the
                 * naps below leave that to it), else nothing would ever end the hang */
                set_computing(rt, 1);
                while (op_exec_sleep_until(rt, op_now_s() + 1.0) == OP_OK) {
                }
                set_computing(rt, 0);
                rc = watchdog_out(rt, line, cap, err);
                break;
            }
            op_compute_call call = {(op_kind)in->kind, in->stage, in->mb,
                                    in->buf >= 0 ? rt->buf[in->buf] : NULL, in->bytes,
                                    in->out >= 0 ? rt->buf[in->out] : NULL, in->out_bytes, rt};
            set_computing(rt, 1);
            rc = rt->c->run(rt->c->ctx, &call, err);
            set_computing(rt, 0);
            double e = op_now_s();
            if (rc == OP_ETIMEOUT || (rc == OP_OK && abort_of(rt)))
                rc = watchdog_out(rt, line, cap, err);
            recs[nrec++] = (op_exec_rec){in->kind, in->stage, in->mb, (t - t0) * 1e3, (e - t0) * 1e3};
            break;
        }
        }
    }
    /* stop everyone: a failed rank must not leave the others waiting for the watchdog */
    if (rc != OP_OK) raise_own(rt);
    if (rc == OP_OK) {
        rt->cur = NULL;
        rt->cur_since = op_now_s();
        rc = wait_for(rt, -1, line, cap, err);
    }
    return rc;
}

int op_exec_rank_run_line(const op_plan *p, const op_lowered *l, op_xport *x, const op_compute *c,
                          const op_exec_opts *o, op_exec_result *res, char *line, size_t cap,
                          op_err *err) {
    op_exec_opts def = {0};
    op_exec_rank rt = {0};
    rt.p = p;
    rt.prog = &l->progs[x->rank];
    rt.x = x;
    rt.c = c;
    rt.o = o ? *o : def;
    rt.deadline = rt.o.timeout_s > 0 ? op_now_s() + rt.o.timeout_s : 0;
    int nb = rt.prog->n_bufs + 1;
    rt.buf = op_xcalloc((size_t)nb, sizeof(void *));
    rt.state = op_xcalloc((size_t)nb, 1);
    rt.req = op_xcalloc((size_t)nb, sizeof(op_xreq));
    rt.act = op_xcalloc((size_t)nb, sizeof(int));
    rt.ptrs = op_xcalloc((size_t)nb, sizeof(op_xreq *));
    rt.bsize = op_xcalloc((size_t)nb, sizeof(int64_t));
    pthread_mutex_init(&rt.mu, NULL);
    op_exec_timer_slack_fine();
    op_exec_rec *recs = op_xcalloc((size_t)rt.prog->n_comp + 1, sizeof *recs);

    int rc = c->setup ? c->setup(c->ctx, p, x->rank, err) : OP_OK;
    /* common start: rank 0 picks a time start_lead_s ahead in its clock; all sleep until then */
    double off = 0, start = 0;
    if (rc == OP_OK) {
        x->barrier(x);
        off = x->clock_offset(x);
        start = op_now_s() + off + (x->start_lead_s > 0 ? x->start_lead_s : 0.02);
        x->bcast(x, &start, sizeof start);
        double local = start - off;
        while (op_now_s() < local) op_exec_nap_us((local - op_now_s()) * 1e6);
        if (c->progress_thread && pthread_create(&rt.th, NULL, progress_main, &rt) == 0) rt.th_on = 1;
        rc = run_list(&rt, start - off, recs, line, cap, err);
        if (rt.th_on) {
            __atomic_store_n(&rt.stop, 1, __ATOMIC_RELEASE);
            pthread_join(rt.th, NULL);
        }
    }
    if (c->teardown) c->teardown(c->ctx);
    if (rc == OP_OK) {
        /* records to rank 0 (outside the timed region) */
        void **all = NULL;
        int64_t *lens = NULL;
        if (x->rank == 0) {
            all = op_xcalloc((size_t)x->size, sizeof(void *));
            lens = op_xcalloc((size_t)x->size, sizeof(int64_t));
        }
        rc = x->gather(x, recs, (int64_t)sizeof(op_exec_rec) * rt.prog->n_comp, all, lens);
        if (rc == OP_OK && x->rank == 0 && res) {
            int *n = op_xcalloc((size_t)x->size, sizeof(int));
            for (int r = 0; r < x->size; r++) n[r] = (int)(lens[r] / (int64_t)sizeof(op_exec_rec));
            op_exec_result_build(res, p, (op_exec_rec **)all, n);
            free(n);
        }
        if (all)
            for (int r = 0; r < x->size; r++) free(all[r]);
        free(all);
        free(lens);
        if (rc) rc = op_errf(err, OP_EPEER, "rank %d: gathering the records failed", x->rank);
    } else if (res) {
        res->watchdog_rank = rt.abort_reason && rt.abort_reason != op_exec_limit_reason(p) ? rt.abort_reason - 1 : -1;
    }
    for (int i = 0; i < rt.n_act; i++) /* failure path: nobody may still write into these */
        if (x->cancel) x->cancel(x, &rt.req[rt.act[i]]);
    for (int b = 0; b < nb; b++) free(rt.buf[b]);
    for (int i = 0; i < rt.n_pool; i++) free(rt.pool[i]);
    free(rt.bsize);
    free(rt.buf);
    free(rt.state);
    free(rt.req);
    free(rt.act);
    free(rt.ptrs);
    free(recs);
    pthread_mutex_destroy(&rt.mu);
    return rc;
}

int op_exec_rank_run(const op_plan *p, const op_lowered *l, op_xport *x, const op_compute *c,
                     const op_exec_opts *o, op_exec_result *res, op_err *err) {
    return op_exec_rank_run_line(p, l, x, c, o, res, NULL, 0, err);
}
