/* xport_threads.c: the in-process transport: P ranks are P threads of one process, so executor
 * tests run without mpirun and under ASan/valgrind.  A send completes when a receiver has copied
 * its payload; a receive matches on (source, tag) like MPI, whatever the issue order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octopipe/exec.h"

/* A pending send (listed in unexp[dst]) or receive (listed in posted[rank]).  Payloads are
 * copied once, from the sender's buffer to the receiver's, outside the world lock (a 32 MiB copy
 * under it would stall every rank); `state` says who may touch the env meanwhile. */
enum { E_OPEN, E_COPYING, E_DONE };
typedef struct env {
    struct env *next;             /* in unexp[] or posted[] while E_OPEN */
    struct env *all_prev, *all_next; /* every live env, freed by op_xport_threads_free */
    int src, tag, state, bad;
    int64_t n;
    void *data; /* send: the sender's buffer (kept until the send completes); receive: target */
} env;

typedef struct world {
    pthread_mutex_t mu;
    unsigned gen, count; /* barrier */
    int P;
    int abort;
    env **unexp;  /* [P] sends waiting for a receive at that rank */
    env **posted; /* [P] receives waiting for a send */
    env *all;
    const void **gbuf;
    int64_t *glen;
} world;

static world *W(op_xport *x) { return x->impl; }

static env *env_new(world *w, int src, int tag, int64_t n, void *data) {
    env *e = op_xcalloc(1, sizeof *e);
    e->src = src;
    e->tag = tag;
    e->n = n;
    e->data = data;
    e->all_next = w->all;
    if (w->all) w->all->all_prev = e;
    w->all = e;
    return e;
}

static void env_free(world *w, env *e) {
    if (e->all_prev) e->all_prev->all_next = e->all_next;
    else w->all = e->all_next;
    if (e->all_next) e->all_next->all_prev = e->all_prev;
    free(e);
}

/* Unlinks and returns the first open env in *list from src with tag, or NULL. */
static env *take(env **list, int src, int tag) {
    for (env **pp = list; *pp; pp = &(*pp)->next)
        if ((*pp)->src == src && (*pp)->tag == tag) {
            env *e = *pp;
            *pp = e->next;
            e->next = NULL;
            return e;
        }
    return NULL;
}

/* Copies src's payload into dst's buffer with the lock released; both are E_COPYING. */
static void copy_unlocked(world *w, env *snd, env *rcv) {
    snd->state = rcv->state = E_COPYING;
    pthread_mutex_unlock(&w->mu);
    int bad = snd->n != rcv->n;
    if (!bad) memcpy(rcv->data, snd->data, (size_t)snd->n);
    pthread_mutex_lock(&w->mu);
    rcv->bad = bad;
    snd->state = rcv->state = E_DONE;
}

static int t_isend(op_xport *x, const void *buf, int64_t n, int peer, int tag, op_xreq *r) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    r->done = 0;
    env *s = env_new(w, x->rank, tag, n, (void *)buf);
    r->h = s;
    if (w->abort) s->state = E_DONE; /* stopping: the receiver may be gone */
    else {
        env *rcv = take(&w->posted[peer], x->rank, tag);
        if (rcv) copy_unlocked(w, s, rcv);
        else {
            env **tail = &w->unexp[peer];
            while (*tail) tail = &(*tail)->next;
            *tail = s;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int t_irecv(op_xport *x, void *buf, int64_t n, int peer, int tag, op_xreq *r) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    r->done = 0;
    env *e = env_new(w, peer, tag, n, buf);
    r->h = e;
    env *snd = take(&w->unexp[x->rank], peer, tag);
    if (snd) copy_unlocked(w, snd, e);
    else {
        e->next = w->posted[x->rank];
        w->posted[x->rank] = e;
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int t_test(op_xport *x, op_xreq *r) {
    if (r->done || !r->h) {
        r->done = 1;
        return 0;
    }
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    env *e = r->h;
    int rc = 0;
    if (e->state == E_DONE) {
        r->done = 1;
        rc = e->bad ? -1 : 0;
        env_free(w, e);
        r->h = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int t_test_all(op_xport *x, op_xreq *const *rs, int n) {
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (t_test(x, rs[i]) < 0) rc = -1;
    return rc;
}

/* Withdraws a request before its buffer is freed (failure path): unlinks an open env, waits
 * out a copy in progress. */
static void t_cancel(op_xport *x, op_xreq *r) {
    if (r->done || !r->h) return;
    world *w = W(x);
    env *e = r->h;
    pthread_mutex_lock(&w->mu);
    while (e->state == E_COPYING) {
        pthread_mutex_unlock(&w->mu);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&w->mu);
    }
    if (e->state == E_OPEN) {
        for (int k = 0; k < w->P; k++) {
            env **lists[2] = {&w->unexp[k], &w->posted[k]};
            for (int j = 0; j < 2; j++)
                for (env **pp = lists[j]; *pp; pp = &(*pp)->next)
                    if (*pp == e) {
                        *pp = e->next;
                        break;
                    }
        }
    }
    env_free(w, e);
    r->h = NULL;
    r->done = 1;
    pthread_mutex_unlock(&w->mu);
}

static void t_raise(op_xport *x, int reason) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    if (!w->abort) w->abort = reason;
    pthread_mutex_unlock(&w->mu);
}

static int t_poll(op_xport *x) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    int a = w->abort;
    pthread_mutex_unlock(&w->mu);
    return a;
}

/* A polite barrier that gives up when the job is aborting (a failed rank never arrives),
 * unless `hold`: the second barrier of a gather or bcast, which every rank reaches (all passed
 * the first), must not let one leave and free its buffer while another still copies from it
 * (an abort raised meanwhile: run --threads' time limit). */
static int barrier(op_xport *x, int hold) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    unsigned gen = w->gen;
    if ((int)++w->count == w->P) {
        w->count = 0;
        w->gen++;
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    pthread_mutex_unlock(&w->mu);
    for (;;) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&w->mu);
        int passed = w->gen != gen, ab = w->abort && !hold;
        /* leaving, a rank takes its arrival back: else the last to arrive would pass and read
         * the buffers of ranks that already left and freed them */
        if (!passed && ab) w->count--;
        pthread_mutex_unlock(&w->mu);
        if (passed) return 0;
        if (ab) return -1;
    }
}

static int t_barrier(op_xport *x) { return barrier(x, 0); }

static int t_bcast(op_xport *x, void *buf, int64_t n) {
    world *w = W(x);
    if (x->rank == 0) w->gbuf[0] = buf;
    if (t_barrier(x)) return -1;
    if (x->rank != 0) memcpy(buf, w->gbuf[0], (size_t)n);
    barrier(x, 1);
    return 0;
}

static int t_gather(op_xport *x, const void *buf, int64_t n, void **out, int64_t *lens) {
    world *w = W(x);
    w->gbuf[x->rank] = buf;
    w->glen[x->rank] = n;
    if (t_barrier(x)) return -1;
    if (x->rank == 0)
        for (int r = 0; r < w->P; r++) {
            lens[r] = w->glen[r];
            out[r] = op_xmalloc((size_t)w->glen[r] + 1);
            memcpy(out[r], w->gbuf[r], (size_t)w->glen[r]);
        }
    barrier(x, 1);
    return 0;
}

static double t_offset(op_xport *x) { return 0; }

static void t_hard_abort(op_xport *x, int code) { t_raise(x, code); }

void op_xport_threads_new(op_xport *xs, int P) {
    world *w = op_xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    w->P = P;
    w->unexp = op_xcalloc((size_t)P, sizeof(env *));
    w->posted = op_xcalloc((size_t)P, sizeof(env *));
    w->gbuf = op_xcalloc((size_t)P, sizeof(void *));
    w->glen = op_xcalloc((size_t)P, sizeof(int64_t));
    for (int r = 0; r < P; r++) {
        op_xport *x = &xs[r];
        memset(x, 0, sizeof *x);
        x->rank = r;
        x->size = P;
        x->start_lead_s = 0.001;
        x->impl = w;
        x->isend = t_isend;
        x->irecv = t_irecv;
        x->test = t_test;
        x->test_all = t_test_all;
        x->cancel = t_cancel;
        x->raise_abort = t_raise;
        x->poll_abort = t_poll;
        x->barrier = t_barrier;
        x->bcast = t_bcast;
        x->gather = t_gather;
        x->clock_offset = t_offset;
        x->hard_abort = t_hard_abort;
    }
}

void op_xport_threads_free(op_xport *xs, int P) {
    world *w = xs[0].impl;
    while (w->all) env_free(w, w->all); /* requests never completed (a failed run) */
    free(w->unexp);
    free(w->posted);
    free(w->gbuf);
    free(w->glen);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
