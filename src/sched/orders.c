/* orders.c: the hand-written per-device orders: GPipe, Megatron 1F1B, Megatron interleaved 1F1B,
 * the handcrafted ZB-H1 pattern and DeepSeek's DualPipeV.  Each takes a plan whose stages and
 * placement are set and fills p->ops (and stage_split). */
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

typedef struct obuf {
    op_op *v;
    int n, cap;
} obuf;

static void emit(obuf *b, op_kind k, int stage, int mb) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->v = op_xrealloc(b->v, sizeof *b->v * (size_t)b->cap);
    }
    op_op *o = &b->v[b->n++];
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)k;
    o->stage = stage;
    o->mb = mb;
}

static void flush(op_plan *p, int d, obuf *b) {
    op_plan_set_ops(p, d, b->v, b->n);
    b->n = 0;
}

static void set_split(op_plan *p, int iw) {
    for (int s = 0; s < p->S; s++) p->stage_split[s] = (uint8_t)iw;
}

void sched_order_gpipe(op_plan *p) {
    OP_ASSERT(p->S == p->P, "gpipe wants one stage per device (S=%d P=%d)", p->S, p->P);
    set_split(p, 0);
    obuf b = {0};
    for (int d = 0; d < p->P; d++) {
        for (int m = 0; m < p->M; m++) emit(&b, OP_F, d, m);
        for (int m = 0; m < p->M; m++) emit(&b, OP_B, d, m);
        flush(p, d, &b);
    }
    free(b.v);
}

/* Megatron forward_backward_pipelining_without_interleaving: warm-up min(P-d-1, M) forwards,
 * then one F and one B per step, then the remaining backwards. */
int op_sched_order_1f1b(op_plan *p) {
    if (p->S != p->P) return OP_EINVAL; /* one stage per device */
    set_split(p, 0);
    obuf b = {0};
    int M = p->M;
    for (int d = 0; d < p->P; d++) {
        int w = p->P - d - 1 < M ? p->P - d - 1 : M;
        for (int m = 0; m < w; m++) emit(&b, OP_F, d, m);
        for (int k = 0; k < M - w; k++) {
            emit(&b, OP_F, d, w + k);
            emit(&b, OP_B, d, k);
        }
        for (int k = M - w; k < M; k++) emit(&b, OP_B, d, k);
        flush(p, d, &b);
    }
    free(b.v);
    return OP_OK;
}

/* Megatron forward_backward_pipelining_with_interleaving.  Virtual microbatch k of a device
 * maps through the schedule table: groups of G microbatches, and within a group every chunk in
 * turn (PP2, G=3, M=5, v=2 gives mb 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1).
 * Backward k uses the same table with the chunk mirrored (v-1-c).  Warm-up on device d:
 * min((P-d-1)*2 + (v-1)*G, M*v), or all M*v when M == P (Megatron's special case); then
 * steady F(warmup+k) B(k); then the cool-down B's. */
int op_sched_order_interleaved(op_plan *p, int v, int G) {
    int P = p->P, M = p->M, n = M * v;
    if (v < 1 || G < 1 || p->S != v * P) return OP_EINVAL;
    set_split(p, 0);
    int *tmb = op_xmalloc(sizeof(int) * (size_t)n), *tch = op_xmalloc(sizeof(int) * (size_t)n);
    int k = 0;
    for (int g0 = 0; g0 < M; g0 += G) {
        int g1 = g0 + G < M ? g0 + G : M;
        for (int c = 0; c < v; c++)
            for (int m = g0; m < g1; m++) {
                tmb[k] = m;
                tch[k++] = c;
            }
    }
    OP_ASSERT(k == n, "schedule table has %d entries, want %d", k, n);
    obuf b = {0};
    for (int d = 0; d < P; d++) {
        /* Megatron runs everything as warm-up (all F, then all B) when M == P */
        /* in 64 bits: G is the caller's (any G >= 1), and (v - 1) * G overflowed an int */
        long long w64 = M == P ? n : (long long)(P - d - 1) * 2 + (long long)(v - 1) * G;
        int w = w64 > n ? n : (int)w64;
#define FWD(i) emit(&b, OP_F, tch[i] * P + d, tmb[i])
#define BWD(i) emit(&b, OP_B, (v - 1 - tch[i]) * P + d, tmb[i])
        for (int i = 0; i < w; i++) FWD(i);
        for (int i = 0; i < n - w; i++) {
            FWD(w + i);
            BWD(i);
        }
        for (int i = n - w; i < n; i++) BWD(i);
#undef FWD
#undef BWD
        flush(p, d, &b);
    }
    free(b.v);
    free(tmb);
    free(tch);
    return OP_OK;
}

/* ZB-H1 as drawn in the Zero Bubble paper: 1F1B's warm-up (P-d-1 forwards) with B split into
 * I and W, and device d's W running d steps behind its I, so every device holds at most P
 * microbatches of activations (1F1B's peak) while the I chain back through the pipeline no
 * longer waits for W's. */
void sched_order_zbh1(op_plan *p) {
    OP_ASSERT(p->S == p->P, "zbh1 wants one stage per device (S=%d P=%d)", p->S, p->P);
    set_split(p, 1);
    obuf b = {0};
    int M = p->M;
    for (int d = 0; d < p->P; d++) {
        int w = p->P - d - 1 < M ? p->P - d - 1 : M, nw = 0;
        for (int m = 0; m < w; m++) emit(&b, OP_F, d, m);
        for (int i = 0; i < M; i++) {
            if (w + i < M) emit(&b, OP_F, d, w + i);
            emit(&b, OP_I, d, i);
            if (i >= d) emit(&b, OP_W, d, nw++);
        }
        while (nw < M) emit(&b, OP_W, d, nw++);
        flush(p, d, &b);
    }
    free(b.v);
}

/* DualPipeV (DeepSeek, dualpipev.py step()): rank r of R holds chunk 0 = stage r and chunk 1 =
 * stage 2R-1-r.  Backwards marked zero-bubble run I now and queue W (FIFO); the others run I
 * and W back to back.  The 8 steps of dualpipev.py:
 *   1 F0 x 2(R-r-1)   2 (F0 F1) x (r+1)   3 (I1 W1 F1) x (R-r-1)
 *   4 (F0 B1 F1 B0) x (M-2R+r+1)          5 (B1 F1 B0) x (R-r-1)
 *   6 (B1 B0) x (r+1), zero-bubble from the middle on (odd ranks switch before B1, even
 *     ranks before B0)                    7 (W B0zb) x (R-r-1)   8 the remaining W's. */
typedef struct dpv {
    obuf *b;
    int st[2];       /* stage of chunk 0 / 1 */
    int nf[2], nb[2];
    int *qs, *qm, qh, qt; /* W queue */
} dpv;

static void dpv_f(dpv *x, int c) { emit(x->b, OP_F, x->st[c], x->nf[c]++); }
static void dpv_b(dpv *x, int c, int zb) {
    int m = x->nb[c]++;
    emit(x->b, OP_I, x->st[c], m);
    if (!zb) emit(x->b, OP_W, x->st[c], m);
    else {
        x->qs[x->qt] = x->st[c];
        x->qm[x->qt++] = m;
    }
}
static void dpv_w(dpv *x) {
    if (x->qh == x->qt) return;
    emit(x->b, OP_W, x->qs[x->qh], x->qm[x->qh]);
    x->qh++;
}

int sched_order_dualpipev(op_plan *p) { return sched_order_vpattern(p, 0); }

int sched_order_vpattern(op_plan *p, int variant) {
    int R = p->P, M = p->M;
    OP_ASSERT(p->S == 2 * R, "dualpipev wants 2P stages (S=%d P=%d)", p->S, R);
    if (M < 2 * R) return OP_EINVAL;
    set_split(p, 1);
    obuf b = {0};
    int *qs = op_xmalloc(sizeof(int) * (size_t)(2 * M)), *qm = op_xmalloc(sizeof(int) * (size_t)(2 * M));
    for (int r = 0; r < R; r++) {
        dpv x = {.b = &b, .st = {r, 2 * R - 1 - r}, .qs = qs, .qm = qm};
        for (int i = 0; i < 2 * (R - r - 1); i++) dpv_f(&x, 0);
        for (int i = 0; i < r + 1; i++) {
            dpv_f(&x, 0);
            dpv_f(&x, 1);
        }
        for (int i = 0; i < R - r - 1; i++) {
            dpv_b(&x, 1, 1);
            dpv_w(&x);
            dpv_f(&x, 1);
        }
        for (int i = 0; i < M - 2 * R + r + 1; i++) {
            if (variant == 1) { /* backward first: never more than the warm-up's 2P chunks */
                dpv_b(&x, 1, 0);
                dpv_f(&x, 0);
                dpv_b(&x, 0, 0);
                dpv_f(&x, 1);
            } else if (variant == 2) {
                dpv_b(&x, 1, 0);
                dpv_f(&x, 0);
                dpv_f(&x, 1);
                dpv_b(&x, 0, 0);
            } else {
                dpv_f(&x, 0);
                dpv_b(&x, 1, 0);
                dpv_f(&x, 1);
                dpv_b(&x, 0, 0);
            }
        }
        for (int i = 0; i < R - r - 1; i++) {
            dpv_b(&x, 1, 0);
            dpv_f(&x, 1);
            dpv_b(&x, 0, 0);
        }
        int zb = 0, half = (r + 1) / 2;
        for (int i = 0; i < r + 1; i++) {
            if (i == half && r % 2 == 1) zb = 1;
            dpv_b(&x, 1, zb);
            if (i == half && r % 2 == 0) zb = 1;
            dpv_b(&x, 0, zb);
        }
        for (int i = 0; i < R - r - 1; i++) {
            dpv_w(&x);
            dpv_b(&x, 0, 1);
        }
        while (x.qh < x.qt) dpv_w(&x);
        OP_ASSERT(x.nf[0] == M && x.nf[1] == M && x.nb[0] == M && x.nb[1] == M,
                  "dualpipev rank %d: F %d/%d B %d/%d of %d", r, x.nf[0], x.nf[1], x.nb[0],
                  x.nb[1], M);
        flush(p, r, &b);
    }
    free(qs);
    free(qm);
    free(b.v);
    return OP_OK;
}
