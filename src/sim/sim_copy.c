/* sim_copy.c: the per-device copy engine of offload stages (sim.h).
 *
 * One engine per device, FIFO, overlapping compute.  Copies are issued while walking the
 * device's order, so an engine sees them in order of their ready times:
 *   - after F(s,m) of an offload stage ends: copy its stash to host (act bytes), unless the
 *     host budget cannot take it when the copy would start (the stash then stays on the
 *     device, as keep);
 *   - when the op before I|B(s,m) in the order starts: copy it back (prefetch one op ahead).
 * A reload issued at t ends at max(t, offload end, engine free) + copy time; the I waits for
 * it.  Because the engine is FIFO, every reload issued before an offload has ended when that
 * offload starts: the host bytes held at that moment are exactly the offloads issued minus
 * the reloads issued, which is what the budget check reads.
 * The replay (which learns the times as it goes) and the prediction (which reads them off
 * the finished timeline) both call these two functions, so they agree by construction. */
#include <string.h>

#include "sim/sim_internal.h"

void sim_copy_reset(sim_copy *c, const op_plan *p, double *xfer, double *eng, int64_t *host,
                    int64_t *host_peak) {
    c->xfer = xfer;
    c->eng = eng;
    c->host = host;
    c->host_peak = host_peak;
    c->M = p->M;
    c->cap = p->comm.host_mem_bytes;
    for (int64_t i = 0; i < (int64_t)p->S * p->M * 4; i++) xfer[i] = -1.0;
    for (int d = 0; d < p->P; d++) eng[d] = 0.0, host[d] = 0, host_peak[d] = 0;
}

void sim_copy_offload(sim_copy *c, const sim_stage *t, int s, int m, double f_end) {
    double *x = &c->xfer[((int64_t)s * c->M + m) * 4];
    const int d = t->dev;
    double cs = f_end > c->eng[d] ? f_end : c->eng[d];
    if (c->cap > 0 && (double)(c->host[d] + t->act) > c->cap) return; /* stays on the device */
    x[0] = cs;
    x[1] = cs + t->copy_ms;
    c->eng[d] = x[1];
    c->host[d] += t->act;
    if (c->host[d] > c->host_peak[d]) c->host_peak[d] = c->host[d];
}

void sim_copy_reload(sim_copy *c, const sim_stage *t, int s, int m, double prev_start) {
    double *x = &c->xfer[((int64_t)s * c->M + m) * 4];
    if (x[1] < 0 || x[2] >= 0) return; /* not offloaded, or already issued */
    const int d = t->dev;
    double rs = prev_start > x[1] ? prev_start : x[1];
    if (c->eng[d] > rs) rs = c->eng[d];
    x[2] = rs;
    x[3] = rs + t->copy_ms;
    c->eng[d] = x[3];
    c->host[d] -= t->act;
}
