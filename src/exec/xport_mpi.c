/* xport_mpi.c: the MPI transport over MPI_COMM_WORLD.  Every wait, including collectives, is a
 * nonblocking call plus a test-and-sleep loop, so ranks can outnumber cores.
 * The runtime serialises calls with its own mutex, so MPI_THREAD_SERIALIZED is enough even with
 * the progress thread. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

#define CTRL_TAG ((1 << 28) - 1) /* watchdog notices; data tags are below (exec.h) */

typedef struct mimpl {
    MPI_Request ctrl_req;
    int ctrl_msg;
    int abort;
    int inited_here;
    int sent_abort;
    int ctrl_out[1];
    MPI_Request *reqs; /* scratch for test_all */
    int *idx, *map, cap;
} mimpl;

static mimpl *MI(op_xport *x) { return x->impl; }

static void wait_polite(MPI_Request *r) {
    int done = 0;
    for (;;) {
        MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (done) return;
        op_exec_nap_us(20);
    }
}

static int m_isend(op_xport *x, const void *buf, int64_t n, int peer, int tag, op_xreq *r) {
    MPI_Request *q = op_xmalloc(sizeof *q);
    r->h = q;
    r->done = 0;
    return MPI_Isend(buf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, q) == MPI_SUCCESS ? 0 : -1;
}

static int m_irecv(op_xport *x, void *buf, int64_t n, int peer, int tag, op_xreq *r) {
    MPI_Request *q = op_xmalloc(sizeof *q);
    r->h = q;
    r->done = 0;
    return MPI_Irecv(buf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, q) == MPI_SUCCESS ? 0 : -1;
}

static int m_test(op_xport *x, op_xreq *r) {
    if (r->done || !r->h) {
        r->done = 1;
        return 0;
    }
    int done = 0;
    MPI_Status st;
    if (MPI_Test((MPI_Request *)r->h, &done, &st) != MPI_SUCCESS) return -1;
    if (done) {
        r->done = 1;
        free(r->h);
        r->h = NULL;
    }
    return 0;
}

/* One MPI_Testsome over copies of the handles: Open MPI runs its progress engine once per call,
 * so testing 30 requests one by one would poll every shared-memory peer 30 times. */
static int m_test_all(op_xport *x, op_xreq *const *rs, int n) {
    mimpl *m = MI(x);
    if (n > m->cap) {
        m->cap = 2 * n;
        m->reqs = op_xrealloc(m->reqs, sizeof(MPI_Request) * (size_t)m->cap);
        m->idx = op_xrealloc(m->idx, sizeof(int) * (size_t)m->cap);
        m->map = op_xrealloc(m->map, sizeof(int) * (size_t)m->cap);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!rs[i]->done && rs[i]->h) {
            m->reqs[k] = *(MPI_Request *)rs[i]->h;
            m->map[k++] = i;
        } else {
            rs[i]->done = 1;
        }
    if (!k) return 0;
    int outc = 0;
    if (MPI_Testsome(k, m->reqs, &outc, m->idx, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return -1;
    for (int j = 0; j < outc && outc != MPI_UNDEFINED; j++) {
        op_xreq *r = rs[m->map[m->idx[j]]];
        r->done = 1;
        free(r->h);
        r->h = NULL;
    }
    return 0;
}

static void m_raise(op_xport *x, int reason) {
    mimpl *m = MI(x);
    if (m->sent_abort) return;
    m->sent_abort = 1;
    if (!m->abort) m->abort = reason;
    m->ctrl_out[0] = reason;
    for (int r = 0; r < x->size; r++) {
        if (r == x->rank) continue;
        MPI_Request q; /* fire and forget: the job ends right after */
        MPI_Isend(m->ctrl_out, 1, MPI_INT, r, CTRL_TAG, MPI_COMM_WORLD, &q);
        MPI_Request_free(&q);
    }
}

static int m_poll(op_xport *x) {
    mimpl *m = MI(x);
    if (!m->abort) {
        int done = 0;
        MPI_Test(&m->ctrl_req, &done, MPI_STATUS_IGNORE);
        if (done) m->abort = m->ctrl_msg;
    }
    return m->abort;
}

static int m_barrier(op_xport *x) {
    MPI_Request q;
    MPI_Ibarrier(MPI_COMM_WORLD, &q);
    wait_polite(&q);
    return 0;
}

static int m_bcast(op_xport *x, void *buf, int64_t n) {
    MPI_Request q;
    MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &q);
    wait_polite(&q);
    return 0;
}

static int m_gather(op_xport *x, const void *buf, int64_t n, void **out, int64_t *lens) {
    int len = (int)n, *all = NULL, *disp = NULL;
    char *big = NULL;
    if (x->rank == 0) all = op_xcalloc((size_t)x->size, sizeof(int));
    MPI_Request q;
    MPI_Igather(&len, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD, &q);
    wait_polite(&q);
    int64_t total = 0;
    if (x->rank == 0) {
        disp = op_xcalloc((size_t)x->size, sizeof(int));
        for (int r = 0; r < x->size; r++) {
            disp[r] = (int)total;
            total += all[r];
        }
        big = op_xmalloc((size_t)total + 1);
    }
    MPI_Igatherv(buf, len, MPI_BYTE, big, all, disp, MPI_BYTE, 0, MPI_COMM_WORLD, &q);
    wait_polite(&q);
    if (x->rank == 0)
        for (int r = 0; r < x->size; r++) {
            lens[r] = all[r];
            out[r] = op_xmalloc((size_t)all[r] + 1);
            memcpy(out[r], big + disp[r], (size_t)all[r]);
        }
    free(all);
    free(disp);
    free(big);
    return 0;
}

/* Offset to rank 0's clock by the fastest of 8 round trips (Cristian's method): rank 0 answers
 * each rank's ping with its time; offset = t0 - midpoint of the round trip. */
static double m_offset(op_xport *x) {
    double best_rtt = 1e9, off = 0;
    MPI_Request q;
    for (int r = 1; r < x->size; r++) {
        for (int k = 0; k < 8; k++) {
            if (x->rank == r) {
                double t1 = op_now_s(), t0;
                MPI_Isend(&t1, 1, MPI_DOUBLE, 0, CTRL_TAG - 1, MPI_COMM_WORLD, &q);
                wait_polite(&q);
                MPI_Irecv(&t0, 1, MPI_DOUBLE, 0, CTRL_TAG - 1, MPI_COMM_WORLD, &q);
                wait_polite(&q);
                double t2 = op_now_s();
                if (t2 - t1 < best_rtt) {
                    best_rtt = t2 - t1;
                    off = t0 - (t1 + t2) / 2;
                }
            } else if (x->rank == 0) {
                double t;
                MPI_Irecv(&t, 1, MPI_DOUBLE, r, CTRL_TAG - 1, MPI_COMM_WORLD, &q);
                wait_polite(&q);
                t = op_now_s();
                MPI_Isend(&t, 1, MPI_DOUBLE, r, CTRL_TAG - 1, MPI_COMM_WORLD, &q);
                wait_polite(&q);
            }
        }
    }
    return off;
}

static void m_hard_abort(op_xport *x, int code) { MPI_Abort(MPI_COMM_WORLD, code); }

int op_xport_mpi_init(op_xport *x, int *argc, char ***argv, op_err *err) {
    memset(x, 0, sizeof *x);
    mimpl *m = op_xcalloc(1, sizeof *m);
    int inited = 0, prov = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &prov) != MPI_SUCCESS) {
            free(m);
            return op_errf(err, OP_EPEER, "MPI_Init_thread failed");
        }
        m->inited_here = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &x->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x->size);
    x->start_lead_s = 0.02;
    MPI_Irecv(&m->ctrl_msg, 1, MPI_INT, MPI_ANY_SOURCE, CTRL_TAG, MPI_COMM_WORLD, &m->ctrl_req);
    x->impl = m;
    x->isend = m_isend;
    x->irecv = m_irecv;
    x->test = m_test;
    x->test_all = m_test_all;
    x->raise_abort = m_raise;
    x->poll_abort = m_poll;
    x->barrier = m_barrier;
    x->bcast = m_bcast;
    x->gather = m_gather;
    x->clock_offset = m_offset;
    x->hard_abort = m_hard_abort;
    return OP_OK;
}

void op_xport_mpi_finalize(op_xport *x) {
    mimpl *m = MI(x);
    if (!m) return;
    int done = 0;
    MPI_Test(&m->ctrl_req, &done, MPI_STATUS_IGNORE);
    if (!done) {
        MPI_Cancel(&m->ctrl_req);
        MPI_Wait(&m->ctrl_req, MPI_STATUS_IGNORE);
    }
    m_barrier(x);
    if (m->inited_here) MPI_Finalize();
    free(m->reqs);
    free(m->idx);
    free(m->map);
    free(m);
    x->impl = NULL;
}
