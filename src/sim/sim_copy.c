/* sim_copy.c: the per-device copy engine of offload stages (sim.h).
 *
 * One engine per device, FIFO, overlapping compute.  Copies are issued while walking the
 * device's order, so an engine sees them in order of their ready times:
 *   - after F(s,m) of an offload stage ends: copy its stash to host (act bytes), unless the
 *     host budget cannot take it when the copy would start (the stash then stays on the
 *     device, as keep);
 *   - when the op at its reload point starts (op_sim_reload_at: as early as the device's memory
 *     allows, at the latest the op before I|B(s,m)): copy it back.
 * A reload issued at t ends at max(t, offload end, engine free) + copy time; the I waits for
 * it.  Because the engine is FIFO, every reload issued before an offload has ended when that
 * offload starts: the host bytes held at that moment are exactly the offloads issued minus
 * the reloads issued, which is what the budget check reads.
 * The replay (which learns the times as it goes) and the prediction (which reads them off
 * the finished timeline) both call these two functions, so they agree by construction. */
#include <stdlib.h>
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

/* Memory per op of device d's order: a difference array over positions, then a running sum.
 * Positions are the ops' indices; what an op holds while it runs is what the simulator's peak
 * sees during it.  Offloaded stashes count during their F and from their reload point. */
int *op_sim_reload_at(const op_plan *p) {
    const int S = p->S, M = p->M, P = p->P;
    int any = 0;
    for (int s = 0; s < S; s++) any |= p->stage_act && p->stage_act[s] == OP_ACT_OFFLOAD;
    if (!any) return NULL;
    int64_t N = 0, nmax = 0;
    for (int d = 0; d < P; d++) N += p->n_ops[d], nmax = p->n_ops[d] > nmax ? p->n_ops[d] : nmax;
    int *at = op_xmalloc(sizeof(int) * (size_t)(N > 0 ? N : 1));
    const int64_t SM = (int64_t)S * M;
    int *pf = op_xmalloc(sizeof(int) * (size_t)SM * 3), *pb = pf + SM, *pw = pb + SM;
    for (int64_t i = 0; i < SM * 3; i++) pf[i] = -1;
    for (int d = 0; d < P; d++)
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            if ((unsigned)o->stage >= (unsigned)S || (unsigned)o->mb >= (unsigned)M || o->kind > OP_B)
                continue;
            int64_t r = (int64_t)o->stage * M + o->mb;
            (o->kind == OP_F ? pf : o->kind == OP_W ? pw : pb)[r] = i;
        }
    double *lev = op_xmalloc(sizeof(double) * (size_t)(nmax + 1));
    int64_t base = 0;
    for (int d = 0; d < P; d++) {
        const int n = p->n_ops[d];
        const op_op *ops = p->ops[d];
        for (int i = 0; i < n; i++) at[base + i] = -1;
        for (int i = 0; i <= n; i++) lev[i] = 0;
        double stat = 0;
        for (int s = 0; s < S; s++)
            if (p->stage_dev[s] == d) stat += (double)op_stage_static_bytes(p, s);
#define ADD(a, b, v) (lev[a] += (v), lev[(b) + 1] -= (v)) /* [a, b] */
        for (int i = 0; i < n; i++) {
            const op_op *o = &ops[i];
            if (o->kind != OP_F || (unsigned)o->stage >= (unsigned)S || (unsigned)o->mb >= (unsigned)M)
                continue;
            const int s = o->stage;
            const int64_t r = (int64_t)s * M + o->mb;
            const int q = pb[r], w = pw[r];
            if (q <= i) continue; /* no backward after it: the replay names the problem */
            const double act = (double)op_stage_stash_bytes(p, s);
            if (p->stage_act[s] == OP_ACT_OFFLOAD) ADD(i, i, act), ADD(q, q, act);
            else ADD(i, q, act);
            ADD(q, q, (double)(op_stage_remat_bytes(p, s) + op_stage_act_i_bytes(p, s)));
            if (p->stage_split[s] && w > q + 1) ADD(q + 1, w, (double)op_stage_act_w_bytes(p, s));
        }
        for (int i = 1; i < n; i++) lev[i] += lev[i - 1];
        const double room = p->mem_limit_bytes > 0 ? p->mem_limit_bytes - stat : -1;
        for (int q = 1; q < n; q++) { /* reload points in order of their I|B */
            const op_op *o = &ops[q];
            if (o->kind == OP_F || o->kind == OP_W || (unsigned)o->stage >= (unsigned)S ||
                (unsigned)o->mb >= (unsigned)M || p->stage_act[o->stage] != OP_ACT_OFFLOAD)
                continue;
            const int f = pf[(int64_t)o->stage * M + o->mb];
            const double act = (double)op_stage_stash_bytes(p, o->stage);
            int j = q - 1;
            if (room >= 0)
                while (j - 1 > f && lev[j - 1] + act <= room) j--;
            for (int k = j; k < q; k++) lev[k] += act;
            at[base + q] = j;
        }
#undef ADD
        base += n;
    }
    free(lev);
    free(pf);
    return at;
}

void sim_copy_triggers(sim_copy *c, const op_plan *p) {
    int *at = op_sim_reload_at(p);
    const int P = p->P;
    size_t N = 0;
    for (int d = 0; d < P; d++) N += (size_t)p->n_ops[d];
    if (N + 1 > c->tcap) {
        c->tfirst = op_xrealloc(c->tfirst, sizeof(int) * (N + 1));
        c->tq = op_xrealloc(c->tq, sizeof(int) * (N + 1));
        c->tcap = N + 1;
    }
    if ((size_t)P + 1 > c->tcap_p) {
        c->tbase = op_xrealloc(c->tbase, sizeof(int) * ((size_t)P + 1));
        c->tcap_p = (size_t)P + 1;
    }
    /* counting sort by reload point; within one point, ascending I|B position */
    for (size_t i = 0; i <= N; i++) c->tfirst[i] = 0;
    c->tbase[0] = 0;
    for (int d = 0; d < P; d++) c->tbase[d + 1] = c->tbase[d] + p->n_ops[d];
    for (int d = 0; d < P && at; d++)
        for (int q = 0; q < p->n_ops[d]; q++)
            if (at[c->tbase[d] + q] >= 0) c->tfirst[c->tbase[d] + at[c->tbase[d] + q] + 1]++;
    for (size_t i = 0; i < N; i++) c->tfirst[i + 1] += c->tfirst[i];
    int *fill = op_xmalloc(sizeof(int) * (N + 1));
    memcpy(fill, c->tfirst, sizeof(int) * (N + 1));
    for (int d = 0; d < P && at; d++)
        for (int q = 0; q < p->n_ops[d]; q++) {
            int j = at[c->tbase[d] + q];
            if (j >= 0) c->tq[fill[c->tbase[d] + j]++] = q;
        }
    free(fill);
    free(at);
}

void sim_copy_free(sim_copy *c) {
    free(c->tbase);
    free(c->tfirst);
    free(c->tq);
    c->tbase = c->tfirst = c->tq = NULL;
    c->tcap = c->tcap_p = 0;
}
