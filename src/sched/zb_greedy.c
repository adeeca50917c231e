/* zb_greedy.c: a greedy list scheduler for I/W-split plans, in the manner of Zero Bubble's
 * heuristic (Graph.manual_order): simulate time; whenever a device is free pick a ready I
 * (critical: it feeds the backward chain), else a ready F that fits the memory cap, else a
 * deferred W (no successors: pure filler that also frees memory).  The caller tries several
 * flag combinations and keeps the best, as ZB's initial_solution does.
 *
 * Timing follows the simulator (sim.h): op durations op_stage_ms, a cross-device dependency
 * arrives op_comm_ms after its producer ends, transfers overlap compute.  The message between
 * stages s and s+1 (activation forward, gradient back) is op_stage_out_bytes(s). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

typedef struct zb {
    op_plan *p;
    int S, M, P;
    double *df, *di, *dw;   /* [S] durations */
    double *cf, *cb;        /* [S] comm F(s)->F(s+1), I(s+1)->I(s) */
    double *a, *aw;         /* [S] activation bytes (or units) */
    double *commit;         /* [S] bytes an F commits: see fits() */
    double *fend, *iend;    /* [S*M], -1 = not scheduled */
    int *nf, *ni, *nw;      /* [S] next mb per kind */
    int *dstages, *dn;      /* [P][S] stages per device, count */
    double *free_at, *mem, *lim; /* [P] */
    op_op **out;
    int *nout;
    int flags;
} zb;

#define END(a, s, m) (z->a[(size_t)(s) * (size_t)z->M + (size_t)(m)])

/* ready time of the next F / I / W of stage s; DBL_MAX if none or not yet known */
static double ready_f(const zb *z, int s) {
    int m = z->nf[s];
    if (m >= z->M) return DBL_MAX;
    if (s == 0) return 0;
    double e = END(fend, s - 1, m);
    return e < 0 ? DBL_MAX : e + z->cf[s - 1];
}
static double ready_i(const zb *z, int s) {
    int m = z->ni[s];
    if (m >= z->nf[s]) return DBL_MAX;
    double e = END(fend, s, m);
    if (s == z->S - 1) return e;
    double g = END(iend, s + 1, m);
    if (g < 0) return DBL_MAX;
    g += z->cb[s];
    return g > e ? g : e;
}
static double ready_w(const zb *z, int s) {
    int m = z->nw[s];
    return m < z->ni[s] ? END(iend, s, m) : DBL_MAX;
}

/* Optimistic ready time of I(s, m) when its producer has not run yet: the I chain from the
 * deepest stage already done for m, each I started as soon as its input arrives.  Lets a lazy
 * W see an I coming through idle devices (the cool-down), not only one already due. */
static double est_i(const zb *z, int s, int m, double t) {
    if (m >= z->M || END(fend, s, m) < 0) return DBL_MAX;
    double e = END(fend, s, m);
    int k = s + 1;
    while (k < z->S && END(iend, k, m) < 0 && END(fend, k, m) >= 0) k++;
    /* k: first stage above s whose I for m is done (or the top, or one whose F is not done) */
    double r;
    if (k == z->S) r = t > END(fend, k - 1, m) ? t : END(fend, k - 1, m);
    else if (END(iend, k, m) >= 0) r = END(iend, k, m);
    else return DBL_MAX;
    for (int j = (k == z->S ? k - 1 : k); j > s; j--) {
        if (j < k) r = (r > t ? r : t) + z->di[j];
        r += z->cb[j - 1];
    }
    return r > e ? r : e;
}

/* A microbatch that enters a device's lowest stage will come back for the device's other
 * stages (V and looped placements) before any of it can be freed, so its F commits the
 * activations of all of them at once; later stages' F then add nothing.  Otherwise the cap
 * could fill with first-chunk work that can never finish. */
static int fits(const zb *z, int d, int s) {
    double need = z->commit[s];
    /* per chunk: a deeper stage's F needs room for itself only (its microbatch already holds
     * the device's earlier chunks); an entering microbatch needs room for its whole pass */
    if (z->flags & OP_ZB_PER_CHUNK) need = z->commit[s] > 0 ? z->commit[s] : z->a[s];
    return z->mem[d] + need <= z->lim[d] * (1 + 1e-12);
}

static void run(zb *z, int d, op_kind k, int s, double t) {
    int m;
    double dur;
    if (k == OP_F) {
        m = z->nf[s]++;
        dur = z->df[s];
        END(fend, s, m) = t + dur;
        z->mem[d] += z->flags & OP_ZB_PER_CHUNK ? z->a[s] : z->commit[s];
    } else if (k == OP_I) {
        m = z->ni[s]++;
        dur = z->di[s];
        END(iend, s, m) = t + dur;
        z->mem[d] -= z->a[s] - z->aw[s];
    } else {
        m = z->nw[s]++;
        dur = z->dw[s];
        z->mem[d] -= z->aw[s];
    }
    op_op *o = &z->out[d][z->nout[d]++];
    o->kind = (uint8_t)k;
    o->stage = s;
    o->mb = m;
    o->start = t;
    o->end = t + dur;
    z->free_at[d] = t + dur;
}

/* Picks and runs one op on idle device d at time t; returns 1 if it ran one. */
static int pick(zb *z, int d, double t, int force) {
    const int *st = z->dstages + (size_t)d * (size_t)z->S;
    int n = z->dn[d];
    int bi = -1, bf = -1, bw = -1, bfo = -1; /* best I, F that fits, W, F over the cap */
    for (int j = 0; j < n; j++) {
        int s = st[j];
        if (ready_i(z, s) <= t &&
            (bi < 0 || z->ni[s] < z->ni[bi] || (z->ni[s] == z->ni[bi] && s > bi)))
            bi = s;
        if (ready_f(z, s) <= t) {
            int shallow = z->flags & OP_ZB_F_SHALLOW;
            int *slot = fits(z, d, s) ? &bf : &bfo;
            if (*slot < 0 || (shallow ? s < *slot : s > *slot)) *slot = s;
        }
        if (ready_w(z, s) <= t && (bw < 0 || ready_w(z, s) < ready_w(z, bw))) bw = s;
    }
    if (z->flags & OP_ZB_F_FIRST) {
        if (bf >= 0) return run(z, d, OP_F, bf, t), 1;
        if (bi >= 0) return run(z, d, OP_I, bi, t), 1;
    } else {
        if (bi >= 0) return run(z, d, OP_I, bi, t), 1;
        if (bf >= 0) return run(z, d, OP_F, bf, t), 1;
    }
    if (bw >= 0) {
        int go = 1;
        if (!(z->flags & OP_ZB_W_EAGER)) {
            /* lazy: wait instead if an I (or an F that fits) is due before the W would end */
            double until = t + z->dw[bw];
            for (int j = 0; j < n && go; j++) {
                int s = st[j];
                if (ready_i(z, s) < until) go = 0;
                if ((z->flags & OP_ZB_W_LOOKAHEAD) && est_i(z, s, z->ni[s], t) < until) go = 0;
                if (fits(z, d, s) && ready_f(z, s) < until) go = 0;
            }
        }
        if (go) return run(z, d, OP_W, bw, t), 1;
    }
    if (force && bfo >= 0) return run(z, d, OP_F, bfo, t), 1;
    return 0;
}

/* A binary min-heap of device wake-ups, ordered by (time, device). */
typedef struct wake {
    double t;
    int d;
} wake;
typedef struct heap {
    wake *v;
    int n, cap;
} heap;

static int wake_lt(wake a, wake b) { return a.t < b.t || (a.t == b.t && a.d < b.d); }

static void heap_push(heap *h, double t, int d) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->v = op_xrealloc(h->v, sizeof *h->v * (size_t)h->cap);
    }
    int i = h->n++;
    wake w = {t, d};
    while (i > 0 && wake_lt(w, h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = w;
}

static wake heap_pop(heap *h) {
    wake top = h->v[0], last = h->v[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && wake_lt(h->v[c + 1], h->v[c])) c++;
        if (!wake_lt(h->v[c], last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

int op_sched_zb_greedy(op_plan *p, const double *cap_mb, double mem_limit_bytes, int flags) {
    zb zz = {0}, *z = &zz;
    int S = p->S, M = p->M, P = p->P;
    for (int s = 0; s < S; s++)
        if (!p->stage_split[s]) return OP_EINVAL; /* I and W apart on every stage */
    z->p = p;
    z->S = S;
    z->M = M;
    z->P = P;
    z->flags = flags;
    op_arena ar = {0};
    z->df = OP_ARENA_NEW(&ar, double, S);
    z->di = OP_ARENA_NEW(&ar, double, S);
    z->dw = OP_ARENA_NEW(&ar, double, S);
    z->cf = OP_ARENA_NEW(&ar, double, S);
    z->cb = OP_ARENA_NEW(&ar, double, S);
    z->a = OP_ARENA_NEW(&ar, double, S);
    z->aw = OP_ARENA_NEW(&ar, double, S);
    z->commit = OP_ARENA_NEW(&ar, double, S);
    z->fend = OP_ARENA_NEW(&ar, double, (size_t)S * (size_t)M);
    z->iend = OP_ARENA_NEW(&ar, double, (size_t)S * (size_t)M);
    z->nf = OP_ARENA_NEW(&ar, int, S);
    z->ni = OP_ARENA_NEW(&ar, int, S);
    z->nw = OP_ARENA_NEW(&ar, int, S);
    z->dstages = OP_ARENA_NEW(&ar, int, (size_t)P * (size_t)S);
    z->dn = OP_ARENA_NEW(&ar, int, P);
    z->free_at = OP_ARENA_NEW(&ar, double, P);
    z->mem = OP_ARENA_NEW(&ar, double, P);
    z->lim = OP_ARENA_NEW(&ar, double, P);
    z->out = OP_ARENA_NEW(&ar, op_op *, P);
    z->nout = OP_ARENA_NEW(&ar, int, P);
    int units = 1;
    for (int s = 0; s < S; s++)
        if (op_stage_act_bytes(p, s) > 0) units = 0;
    for (int s = 0; s < S; s++) {
        z->df[s] = op_stage_ms(p, s, OP_F);
        z->di[s] = op_stage_ms(p, s, OP_I);
        z->dw[s] = op_stage_ms(p, s, OP_W);
        int d = p->stage_dev[s];
        if (s + 1 < S && p->stage_dev[s + 1] != d && !p->comm.none) {
            int64_t by = op_stage_out_bytes(p, s);
            z->cf[s] = op_comm_ms(&p->comm, d, p->stage_dev[s + 1], by);
            z->cb[s] = op_comm_ms(&p->comm, p->stage_dev[s + 1], d, by);
        }
        /* F reserves the most a microbatch holds before its W: max(act, act_w), since I may
         * leave more stored than F did (cost.h); I then frees the reserve beyond act_w.  I's
         * transient act_i is not reserved: the simulated peak decides whether a plan fits. */
        const double act = (double)op_stage_act_bytes(p, s);
        const double actw = (double)op_stage_act_w_bytes(p, s);
        z->a[s] = units ? 1 : (actw > act ? actw : act);
        z->aw[s] = units ? 1 : actw;
        z->dstages[(size_t)d * (size_t)S + (size_t)z->dn[d]++] = s;
    }
    for (int d = 0; d < P; d++) { /* stages are listed in ascending order per device */
        const int *st = z->dstages + (size_t)d * (size_t)S;
        for (int j = 0; j < z->dn[d]; j++) z->commit[st[0]] += z->a[st[j]];
    }
    for (size_t i = 0; i < (size_t)S * (size_t)M; i++) z->fend[i] = z->iend[i] = -1;
    for (int d = 0; d < P; d++) {
        double per_mb = 0, stat = 0;
        for (int j = 0; j < z->dn[d]; j++) {
            int s = z->dstages[(size_t)d * (size_t)S + (size_t)j];
            per_mb += z->a[s];
            stat += (double)op_stage_static_bytes(p, s);
        }
        z->lim[d] = cap_mb ? cap_mb[d] * per_mb : DBL_MAX;
        if (!units && mem_limit_bytes > 0 && mem_limit_bytes - stat < z->lim[d])
            z->lim[d] = mem_limit_bytes - stat;
        z->out[d] = OP_ARENA_NEW(&ar, op_op, (size_t)z->dn[d] * (size_t)M * 3);
    }
    /* Event loop over a heap of device wake-ups (time, device): a device is re-examined when
     * it frees up, or when an op it could run becomes ready (pushed by whoever scheduled the
     * producer).  Stale entries are harmless: a busy or idle-with-nothing device just
     * re-arms itself.  Ties go to the lower device, so the result is deterministic. */
    heap h = {0};
    for (int d = 0; d < P; d++) heap_push(&h, 0, d);
    long left = (long)S * M * 3;
    double t = 0;
    int force = 0;
    while (left > 0) {
        if (h.n == 0) {
            OP_ASSERT(!force, "zb greedy: no progress possible even over the memory cap");
            force = 1; /* every device idle and nothing coming: let the oldest F over the cap */
            for (int d = 0; d < P; d++) heap_push(&h, t, d);
            continue;
        }
        wake w = heap_pop(&h);
        int d = w.d;
        t = w.t;
        if (z->free_at[d] > t) continue; /* stale: it re-arms when it frees */
        int n0 = z->nout[d];
        if (pick(z, d, t, force)) {
            left--;
            force = 0;
            heap_push(&h, z->free_at[d], d);
            /* the op's consumer on another device may now have a known ready time */
            const op_op *o = &z->out[d][n0];
            int cs = o->kind == OP_F ? o->stage + 1 : o->kind == OP_I ? o->stage - 1 : -1;
            if (cs >= 0 && cs < S && p->stage_dev[cs] != d) {
                double r = o->kind == OP_F ? o->end + z->cf[o->stage] : o->end + z->cb[cs];
                heap_push(&h, r, p->stage_dev[cs]);
            }
            continue;
        }
        /* nothing to run now: sleep until the next op of this device that is known to come */
        double tn = DBL_MAX;
        const int *st = z->dstages + (size_t)d * (size_t)S;
        for (int j = 0; j < z->dn[d]; j++) {
            int s2 = st[j];
            double r[3] = {ready_f(z, s2), ready_i(z, s2), ready_w(z, s2)};
            for (int k = 0; k < 3; k++)
                if (r[k] > t && r[k] < tn) tn = r[k];
        }
        if (tn < DBL_MAX) heap_push(&h, tn, d);
    }
    free(h.v);
    for (int d = 0; d < P; d++) op_plan_set_ops(p, d, z->out[d], z->nout[d]);
    op_arena_free(&ar);
    return OP_OK;
}
