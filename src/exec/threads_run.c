/* threads_run.c: every rank of a plan as a thread of this process, over the thread transport. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

typedef struct targ {
    const op_plan *p;
    const op_lowered *l;
    op_xport *x;
    const op_compute *c;
    const op_exec_opts *o;
    op_exec_result *res;
    char line[512];
    op_err err;
    int rc;
    int *done; /* ranks finished, for the time limit's poll */
} targ;

static void *rank_main(void *a) {
    targ *t = a;
    t->rc = op_exec_rank_run_line(t->p, t->l, t->x, t->c, t->o, t->x->rank == 0 ? t->res : NULL,
                                  t->line, sizeof t->line, &t->err);
    __atomic_add_fetch(t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

int op_exec_run_threads(const op_plan *p, const op_compute *c, const op_exec_opts *o,
                        op_exec_result *res, op_err *err) {
    memset(res, 0, sizeof *res);
    res->watchdog_rank = -1;
    op_lowered l;
    int rc = op_exec_lower(p, o ? &o->lower : NULL, &l, err);
    if (rc) return rc;
    int P = p->P;
    op_xport *xs = op_xcalloc((size_t)P, sizeof *xs);
    targ *ts = op_xcalloc((size_t)P, sizeof *ts);
    pthread_t *th = op_xcalloc((size_t)P, sizeof *th);
    op_xport_threads_new(xs, P);
    int started = 0, terr = 0, done = 0;
    double t0 = op_now_s();
    for (; started < P; started++) {
        ts[started] = (targ){p, &l, &xs[started], c, o, res, {0}, {0}, 0, &done};
        if ((terr = pthread_create(&th[started], NULL, rank_main, &ts[started]))) {
            /* out of threads (a process or user limit): the ranks started would wait for this
             * one until the watchdog; stop them now and say why */
            xs[0].raise_abort(&xs[0], started + 1);
            break;
        }
    }
    if (!terr && o && o->timeout_s > 0) {
        /* a backstop for a rank that never looks at the limit itself (runtime.c checks it
         * where a rank polls: compute that never returns does not) */
        while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < P) {
            if (op_now_s() - t0 > o->timeout_s) {
                xs[0].raise_abort(&xs[0], op_exec_limit_reason(p));
                break;
            }
            op_exec_nap_us(10e3);
        }
    }
    for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
    if (terr) {
        rc = op_errf(err, OP_EIO, "cannot start rank %d of %d as a thread: %s", started, P,
                     strerror(terr));
        op_xport_threads_free(xs, P);
        op_lowered_free(&l);
        free(xs), free(ts), free(th);
        return rc;
    }
    op_buf rep = {0};
    for (int r = 0; r < P; r++) {
        if (ts[r].line[0]) op_buf_printf(&rep, "%s\n", ts[r].line);
        if (ts[r].rc && !rc) {
            rc = ts[r].rc;
            if (err) *err = ts[r].err;
        }
        if (ts[r].rc == OP_ETIMEOUT && (!err || err->code != OP_ETIMEOUT)) {
            rc = OP_ETIMEOUT; /* the watchdog's message is the useful one */
            if (err) *err = ts[r].err;
        }
    }
    /* of the watchdog's messages, the stuck rank's: rank 0's "waiting for rank 1" named a rank
     * that only waited (describe() in runtime.c words a rank in an op "stuck in compute") */
    for (int r = 0; r < P && rc == OP_ETIMEOUT && err; r++)
        if (ts[r].rc == OP_ETIMEOUT && strstr(ts[r].line, ": stuck in compute ")) {
            *err = ts[r].err;
            break;
        }
    if (rep.len) snprintf(res->wait_report, sizeof res->wait_report, "%s", rep.data);
    if (rc && res->watchdog_rank < 0) {
        int a = xs[0].poll_abort(&xs[0]);
        res->watchdog_rank = a && a != op_exec_limit_reason(p) ? a - 1 : -1;
    }
    op_buf_free(&rep);
    op_xport_threads_free(xs, P);
    op_lowered_free(&l);
    free(xs);
    free(ts);
    free(th);
    return rc;
}
