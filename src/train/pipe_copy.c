/* pipe_copy.c: the copy engine of a rank whose stages offload (the reference model's side of
 * the simulator's rule, sim.h / sim_copy.c).
 *
 * One thread per rank, a FIFO of transfers, overlapping the rank's compute:
 *   - after F(s,m) of an offload stage ends, its stash is queued to go to host memory
 *     (op_nn_stage_offload: memcpy into the host arena, device pages given back);
 *   - when the rank starts the op before I|B(s,m) in its order, the reload is queued (after
 *     the offload: FIFO), and I|B waits for it to end (op_nn_stage_reload copies it back).
 * A transfer lasts at least the plan's host link time (op_stage_copy_ms: latency + bytes /
 * bandwidth): the engine copies, then sleeps out the rest, so a run shows the link the plan
 * was made for rather than this machine's memcpy.  With a host budget (comm.host_mem_bytes) a
 * stash that would not fit when its offload is queued stays on the device, as the simulator
 * decides.  Bytes are the stage's probed stash (op_stage_act_bytes), what the plan charges. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/pipe_internal.h"

/* Transfer state per (stage, mb) of this rank. */
enum { X_NONE, X_OUT, X_WANT, X_BACK, X_DONE };

typedef struct xfer {
    int s, mb, back; /* back: 0 offload, 1 reload */
} xfer;

struct op_pcopy {
    const op_plan *p;
    op_nn_stage **st; /* [S], the op_ptrain's (only this rank's offload stages are used) */
    int rank;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    xfer *q; /* FIFO, at most 2 per (stage, mb) per step */
    int head, tail, cap, stop;
    int active; /* a transfer is being done */
    int *x;  /* [S*M] X_* */
    int64_t host, host_cap;
    int n_xfers;
    double busy_s;
    double cpu_s; /* thread CPU time of the copies themselves (not the link's sleep) */
};

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_until(double t) {
    for (double now = op_now_s(); now < t; now = op_now_s()) {
        double d = t - now;
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        if (nanosleep(&ts, NULL) && errno != EINTR) break;
    }
}

static void *copy_main(void *a) {
    op_pcopy *c = a;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->head == c->tail && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
        if (c->head == c->tail) break;
        xfer x = c->q[c->head++];
        c->active = 1;
        pthread_mutex_unlock(&c->mu);
        double t0 = op_now_s(), c0 = thread_cpu_s();
        if (x.back) op_nn_stage_reload(c->st[x.s], x.mb);
        else op_nn_stage_offload(c->st[x.s], x.mb);
        double dc = thread_cpu_s() - c0;
        sleep_until(t0 + 1e-3 * op_stage_copy_ms(c->p, x.s)); /* the modelled link */
        pthread_mutex_lock(&c->mu);
        c->busy_s += op_now_s() - t0;
        c->cpu_s += dc;
        c->n_xfers++;
        c->active = 0;
        if (x.back) c->x[x.s * c->p->M + x.mb] = X_DONE;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static int offloads(const op_plan *p, int s) { return p->stage_act[s] == OP_ACT_OFFLOAD; }

int op_pcopy_new(const op_plan *p, op_nn_stage **st, int rank, op_pcopy **out, op_err *err) {
    *out = NULL;
    int any = 0;
    for (int s = 0; s < p->S; s++) any |= p->stage_dev[s] == rank && offloads(p, s) && st[s];
    if (!any) return OP_OK;
    op_pcopy *c = op_xcalloc(1, sizeof *c);
    c->p = p, c->st = st, c->rank = rank;
    c->cap = 2 * p->S * p->M;
    c->q = op_xcalloc((size_t)c->cap, sizeof *c->q);
    c->x = op_xcalloc((size_t)p->S * p->M, sizeof *c->x);
    c->host_cap = p->comm.host_mem_bytes > 0 ? (int64_t)p->comm.host_mem_bytes : 0;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    int terr = pthread_create(&c->th, NULL, copy_main, c);
    if (terr) { /* the process is out of threads (a process or user limit, address space) */
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c->q), free(c->x), free(c);
        return op_errf(err, OP_EIO, "rank %d: cannot start the copy engine of its offload stages "
                       "as a thread: %s", rank, strerror(terr));
    }
    for (int s = 0; s < p->S; s++)
        if (p->stage_dev[s] == rank && offloads(p, s) && st[s]) op_nn_stage_set_copy_async(st[s], 1);
    *out = c;
    return OP_OK;
}

void op_pcopy_free(op_pcopy *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1; /* the thread drains the queue first */
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->q), free(c->x), free(c);
}

void op_pcopy_begin_step(op_pcopy *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    while (c->head != c->tail || c->active) pthread_cond_wait(&c->cv, &c->mu); /* a failed step's copies */
    c->head = c->tail = 0;
    for (int i = 0; i < c->p->S * c->p->M; i++) c->x[i] = X_NONE;
    c->host = 0;
    pthread_mutex_unlock(&c->mu);
}

static void push_locked(op_pcopy *c, int s, int mb, int back) {
    /* cap 2 S M: a checked plan runs each (s, mb)'s F and I once a step, one offload and one
     * reload each, and begin_step empties the queue */
    OP_ASSERT(c->tail < c->cap, "copy engine queue full");
    c->q[c->tail++] = (xfer){s, mb, back};
    pthread_cond_broadcast(&c->cv);
}

/* The reload of (s, mb): queued now if its offload is, else as soon as it is. */
static void want_back(op_pcopy *c, int s, int mb) {
    int *x = &c->x[s * c->p->M + mb];
    pthread_mutex_lock(&c->mu);
    if (*x == X_OUT) {
        *x = X_BACK, push_locked(c, s, mb, 1);
        c->host -= op_stage_act_bytes(c->p, s);
    } else if (*x == X_NONE) {
        *x = X_WANT;
    }
    pthread_mutex_unlock(&c->mu);
}

void op_pcopy_before(op_pcopy *c, int op_index, const op_compute_call *call) {
    if (!c) return;
    const op_plan *p = c->p;
    if (op_index + 1 < p->n_ops[c->rank]) { /* prefetch: the next op's stash */
        const op_op *nx = &p->ops[c->rank][op_index + 1];
        if (nx->kind != OP_F && nx->kind != OP_W && offloads(p, nx->stage)) want_back(c, nx->stage, nx->mb);
    }
    if (call->kind == OP_F || call->kind == OP_W || !offloads(p, call->stage)) return;
    want_back(c, call->stage, call->mb);
    int *x = &c->x[call->stage * p->M + call->mb];
    pthread_mutex_lock(&c->mu);
    while (*x != X_DONE) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void op_pcopy_after(op_pcopy *c, const op_compute_call *call) {
    if (!c || call->kind != OP_F || !offloads(c->p, call->stage)) return;
    int s = call->stage, *x = &c->x[s * c->p->M + call->mb];
    int64_t act = op_stage_act_bytes(c->p, s);
    pthread_mutex_lock(&c->mu);
    int want = *x == X_WANT;
    /* FIFO: every reload queued so far ends before this copy starts, so the host holds what
     * was offloaded and not yet called back; over the budget the stash stays here */
    if (c->host_cap > 0 && c->host + act > c->host_cap) {
        *x = X_DONE;
    } else {
        *x = want ? X_BACK : X_OUT;
        push_locked(c, s, call->mb, 0);
        if (want) push_locked(c, s, call->mb, 1);
        else c->host += act;
    }
    pthread_mutex_unlock(&c->mu);
}

void op_pcopy_stats(const op_pcopy *c, int *n_xfers, double *busy_ms, double *cpu_ms) {
    *n_xfers = 0, *busy_ms = 0;
    if (cpu_ms) *cpu_ms = 0;
    if (!c) return;
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    *n_xfers = c->n_xfers, *busy_ms = 1e3 * c->busy_s;
    if (cpu_ms) *cpu_ms = 1e3 * c->cpu_s;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
}
