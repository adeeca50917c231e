/* xport_threads.c: the in-process transport: P ranks are P threads of one process, so executor
 * tests run without mpirun and under ASan/valgrind.  Sends are buffered (copied at isend, complete
 * at once); a receive matches on (source, tag) like MPI, whatever the issue order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octopipe/exec.h"

typedef struct env {   /* an unmatched send or a posted receive */
    struct env *next;
    int src, tag;
    int64_t n;
    void *data;        /* send: copy; receive: destination */
    int done, bad;     /* receive: matched; size mismatch */
} env;

typedef struct world {
    pthread_mutex_t mu;
    unsigned gen, count; /* barrier */
    int P;
    int abort;
    env **unexp;  /* [P] sends waiting for a receive at that rank */
    env **posted; /* [P] receives waiting for a send */
    const void **gbuf;
    int64_t *glen;
} world;

static world *W(op_xport *x) { return x->impl; }

static int t_isend(op_xport *x, const void *buf, int64_t n, int peer, int tag, op_xreq *r) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    r->done = 1;
    r->h = NULL;
    if (w->abort) { /* the job is stopping: receivers may already have freed their buffers */
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    for (env *e = w->posted[peer]; e; e = e->next) {
        if (!e->done && e->src == x->rank && e->tag == tag) {
            if (e->n != n) e->bad = 1;
            else memcpy(e->data, buf, (size_t)n);
            e->done = 1; /* stays listed until tested, so an untested one is still freed */
            pthread_mutex_unlock(&w->mu);
            return 0;
        }
    }
    env *e = op_xcalloc(1, sizeof *e);
    e->src = x->rank;
    e->tag = tag;
    e->n = n;
    e->data = op_xmalloc((size_t)n);
    memcpy(e->data, buf, (size_t)n);
    env **tail = &w->unexp[peer];
    while (*tail) tail = &(*tail)->next;
    *tail = e;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int t_irecv(op_xport *x, void *buf, int64_t n, int peer, int tag, op_xreq *r) {
    world *w = W(x);
    pthread_mutex_lock(&w->mu);
    r->done = 0;
    env *e = op_xcalloc(1, sizeof *e);
    e->src = peer;
    e->tag = tag;
    e->n = n;
    e->data = buf;
    r->h = e;
    for (env **pp = &w->unexp[x->rank]; *pp; pp = &(*pp)->next) {
        env *u = *pp;
        if (u->src == peer && u->tag == tag) {
            if (u->n != n) e->bad = 1;
            else memcpy(buf, u->data, (size_t)n);
            e->done = 1;
            *pp = u->next;
            free(u->data);
            free(u);
            break;
        }
    }
    e->next = w->posted[x->rank];
    w->posted[x->rank] = e;
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
    if (e->done) {
        r->done = 1;
        rc = e->bad ? -1 : 0;
        for (env **pp = &w->posted[x->rank]; *pp; pp = &(*pp)->next)
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        free(e);
        r->h = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
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

/* A polite barrier that gives up when the job is aborting (a failed rank never arrives). */
static int t_barrier(op_xport *x) {
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
        int passed = w->gen != gen, ab = w->abort;
        pthread_mutex_unlock(&w->mu);
        if (passed) return 0;
        if (ab) return -1;
    }
}

static int t_bcast(op_xport *x, void *buf, int64_t n) {
    world *w = W(x);
    if (x->rank == 0) w->gbuf[0] = buf;
    if (t_barrier(x)) return -1;
    if (x->rank != 0) memcpy(buf, w->gbuf[0], (size_t)n);
    return t_barrier(x);
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
    return t_barrier(x);
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
    for (int r = 0; r < P; r++) {
        for (env *e = w->unexp[r], *nx; e; e = nx) {
            nx = e->next;
            free(e->data);
            free(e);
        }
        for (env *e = w->posted[r], *nx; e; e = nx) { /* owned by requests never completed */
            nx = e->next;
            free(e);
        }
    }
    free(w->unexp);
    free(w->posted);
    free(w->gbuf);
    free(w->glen);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
