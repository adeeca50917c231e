/* vstable.c: V-Half and V-Min, the controllable-memory V schedules ("Pipeline Parallelism with
 * Controllable Memory", Qi et al. 2024), built the way their authors' scheduler builds them:
 *
 *   1. a stable pattern: on a grid of unit slots (F = I = W = 1), device d places microbatch
 *      m's four F / I ops at fixed offsets + 6m.  Types: 0 = F of stage d, 1 = F of stage
 *      2P-1-d, 2 = I of stage 2P-1-d (the backward enters at device 0), 3 = I of stage d.
 *        V-Min:  d, 2P-1-d, 2P+g+d, 4P+g-1-d            (g = 2 when 3 | P, else 0)
 *        V-Half: 2d, 3P-2-d, 3P+g+2d-1, 6P+g-2-d        (g = 3 when P is even, else 0)
 *      The offsets keep each device's four ops in distinct residues mod 6, so the pattern
 *      repeats with no collision; the gaps between F and I set the lifespans, hence memory.
 *   2. W's fill the free slots after their I's (type 4, one FIFO for both chunks);
 *   3. reorder: in time order, every op of the warm-up (before device 0's first I of stage 0)
 *      and of the cool-down (after the first F of the last microbatch) moves to the earliest
 *      free slot its inputs allow, if that does not raise the device's peak; the steady phase
 *      keeps the pattern.  Then again without the W's (they go lazily into idle slots), and
 *      finally the W's are re-placed per chunk.
 * The per-device order (ops sorted by slot) is then re-timed on the real costs by the caller's
 * simulation; on uniform costs it is the pattern's exact makespan. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

enum { NT = 5 };  /* types per device: F0 F1 I(2P-1-d) I(d) W */
static const int mem_of[NT] = {1, 1, 0, 0, -1};

typedef struct vs {
    int P, M, len;  /* len: grid slots */
    int *t;         /* [P][NT][2M] slot of op (type, k); types 0-3 use k < M, W k < 2M */
    int *n;         /* [P][NT] ops of the type */
    char *occ;      /* [P][len] */
} vs;

#define T(d, ty, k) z->t[((size_t)(d) * NT + (size_t)(ty)) * 2 * (size_t)z->M + (size_t)(k)]
#define N(d, ty) z->n[(size_t)(d) * NT + (size_t)(ty)]

/* Peak of device d: F +1, W -1; without an explicit W list (lazy), a pending W runs in every
 * slot no op takes. */
static int peak_of(const vs *z, int d, int lazy) {
    int p[NT] = {0}, cur = 0, res = 0, wc = 0, left = 0;
    for (int ty = 0; ty < NT; ty++) left += lazy && ty == 4 ? 0 : N(d, ty);
    for (int i = 0; left > 0 || (lazy && wc > 0); i++) {
        int best = -1, bt = INT_MAX;
        for (int ty = 0; ty < NT; ty++) {
            if (lazy && ty == 4) continue;
            if (p[ty] < N(d, ty) && T(d, ty, p[ty]) < bt) bt = T(d, ty, p[ty]), best = ty;
        }
        if (best >= 0 && bt <= i) {
            p[best]++;
            left--;
            cur += mem_of[best];
            if (best == 2 || best == 3) wc++;
        } else if (lazy && wc > 0) {
            cur--;
            wc--;
        }
        res = cur > res ? cur : res;
        if (i > z->len * 2) break; /* cannot happen: every op has a finite slot */
    }
    return res;
}

/* W's into the free slots after their I's, in order; what is left goes after the end. */
static void put_w(vs *z, int d) {
    int p[4] = {0}, wc = 0, nw = 0, left = 0;
    for (int ty = 0; ty < 4; ty++) left += N(d, ty);
    int i = 0;
    for (; left > 0; i++) {
        int best = -1, bt = INT_MAX;
        for (int ty = 0; ty < 4; ty++)
            if (p[ty] < N(d, ty) && T(d, ty, p[ty]) < bt) bt = T(d, ty, p[ty]), best = ty;
        if (bt <= i) {
            p[best]++;
            left--;
            if (best >= 2) wc++;
        } else if (wc > 0) {
            T(d, 4, nw++) = i;
            wc--;
        }
    }
    while (wc-- > 0) T(d, 4, nw++) = i++;
    N(d, 4) = nw;
}

/* Earliest slot op (d, ty, k) may take: after its inputs and its predecessor of the type. */
static int earliest(const vs *z, int d, int ty, int k) {
    int dep = -1, P = z->P;
#define DEP(x) dep = (x) > dep ? (x) : dep
    if ((ty == 0 || ty == 2) && d > 0) DEP(T(d - 1, ty, k));
    if ((ty == 1 || ty == 3) && d + 1 < P) DEP(T(d + 1, ty, k));
    if (ty > 0 && ty < 4) DEP(T(d, ty - 1, k));
    if (ty == 4) { /* the k-th I of the device, either chunk */
        int a = 0, b = 0, x = -1;
        for (int j = 0; j <= k; j++) {
            if (b >= N(d, 3) || (a < N(d, 2) && T(d, 2, a) < T(d, 3, b))) x = T(d, 2, a++);
            else x = T(d, 3, b++);
        }
        DEP(x);
    }
    if (k > 0) DEP(T(d, ty, k - 1));
#undef DEP
    return dep + 1;
}

static void reorder(vs *z, int with_w) {
    int P = z->P, M = z->M, types = with_w ? NT : 4;
    if (with_w)
        for (int d = 0; d < P; d++) put_w(z, d);
    int cur = 0;
    for (int d = 0; d < P; d++) {
        int pk = peak_of(z, d, !with_w);
        cur = pk > cur ? pk : cur;
    }
    memset(z->occ, 0, (size_t)P * (size_t)z->len);
    int *ptr = op_xcalloc((size_t)P * NT, sizeof *ptr);
    long total = 0;
    for (int d = 0; d < P; d++)
        for (int ty = 0; ty < types; ty++) total += N(d, ty);
    int phase = 0;
    for (long it = 0; it < total; it++) {
        int bd = -1, bty = -1, bt = INT_MAX;
        for (int d = 0; d < P; d++) /* next op in (slot, device, type) order */
            for (int ty = 0; ty < types; ty++) {
                int k = ptr[d * NT + ty];
                if (k < N(d, ty) && T(d, ty, k) < bt) bt = T(d, ty, k), bd = d, bty = ty;
            }
        int d = bd, ty = bty, k = ptr[d * NT + ty]++;
        int keep = 0;
        if (ty == 3 && d == 0 && phase == 0) phase = 1;
        if (phase == 1) {
            if (ty == 0 && k == M - 1) phase = 2;
            keep = 1;
        }
        if (phase == 0 && !with_w) keep = 1;
        if (!keep) {
            int from = earliest(z, d, ty, k), ok = 0;
            for (int s = from < 0 ? 0 : from; s < bt && !ok; s++) {
                if (z->occ[(size_t)d * (size_t)z->len + (size_t)s]) continue;
                T(d, ty, k) = s;
                ok = peak_of(z, d, !with_w) <= cur;
            }
            if (!ok) T(d, ty, k) = bt;
        }
        int s = T(d, ty, k);
        if (s >= 0 && s < z->len) z->occ[(size_t)d * (size_t)z->len + (size_t)s] = 1;
    }
    free(ptr);
    if (with_w)
        for (int d = 0; d < P; d++) N(d, 4) = 0; /* the W decisions are dropped again */
}

typedef struct slot {
    int t, ty, k;
} slot;

static int cmp_slot(const void *x, const void *y) {
    const slot *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->ty != b->ty) return a->ty < b->ty ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

int sched_order_vstable(op_plan *p, int half) {
    int P = p->P, M = p->M;
    OP_ASSERT(p->S == 2 * P, "vstable wants the V placement (S=%d P=%d)", p->S, P);
    if (P < 2 || M < 1) return OP_EINVAL;
    vs zz = {0}, *z = &zz;
    z->P = P;
    z->M = M;
    z->len = 6 * M + 12 * P + 4 * M + 64;
    z->t = op_xcalloc((size_t)P * NT * 2 * (size_t)M, sizeof *z->t);
    z->n = op_xcalloc((size_t)P * NT, sizeof *z->n);
    z->occ = op_xmalloc((size_t)P * (size_t)z->len);
    for (int d = 0; d < P; d++) {
        int o[4];
        if (half) {
            int g = P % 2 == 0 ? 3 : 0;
            o[0] = 2 * d, o[1] = 3 * P - 2 - d, o[2] = 3 * P + g + 2 * d - 1, o[3] = 6 * P + g - 2 - d;
        } else {
            int g = P % 3 == 0 ? 2 : 0;
            o[0] = d, o[1] = 2 * P - 1 - d, o[2] = 2 * P + g + d, o[3] = 4 * P + g - 1 - d;
        }
        for (int ty = 0; ty < 4; ty++) {
            for (int m = 0; m < M; m++) T(d, ty, m) = o[ty] + 6 * m;
            N(d, ty) = M;
        }
    }
    reorder(z, 1);
    reorder(z, 0);
    /* final W's: per chunk now (type 4 after an I of stage 2P-1-d, 5 after one of stage d) */
    for (int s = 0; s < p->S; s++) p->stage_split[s] = 1;
    slot *v = op_xmalloc(sizeof(slot) * 6 * (size_t)M);
    op_op *ops = op_xmalloc(sizeof(op_op) * 6 * (size_t)M);
    for (int d = 0; d < P; d++) {
        int n = 0;
        for (int ty = 0; ty < 4; ty++)
            for (int m = 0; m < M; m++) v[n++] = (slot){T(d, ty, m), ty, m};
        qsort(v, (size_t)n, sizeof *v, cmp_slot);
        /* W's into idle slots after their I's, the I of stage 2P-1-d's chunk first */
        int nw[2] = {0, 0}, pend[2] = {0, 0}, k = 0, i = 0;
        slot *all = op_xmalloc(sizeof(slot) * 6 * (size_t)M);
        int na = 0;
        for (int j = 0; j < n || pend[0] || pend[1]; i++) {
            if (j < n && v[j].t <= i) {
                all[na++] = (slot){i, v[j].ty, v[j].k};
                if (v[j].ty >= 2) pend[v[j].ty - 2]++;
                j++;
            } else {
                for (int w = 0; w < 2; w++)
                    if (pend[w]) {
                        all[na++] = (slot){i, 4 + w, nw[w]++};
                        pend[w]--;
                        break;
                    }
            }
        }
        for (int j = 0; j < na; j++) {
            op_op *o = &ops[k++];
            memset(o, 0, sizeof *o);
            int ty = all[j].ty;
            o->kind = (uint8_t)(ty < 2 ? OP_F : ty < 4 ? OP_I : OP_W);
            /* stage d: F0, I type 3, W after type 3 (5); stage 2P-1-d: F1, I type 2, W 4 */
            o->stage = ty == 0 || ty == 3 || ty == 5 ? d : 2 * P - 1 - d;
            o->mb = all[j].k;
        }
        free(all);
        OP_ASSERT(k == 6 * M, "vstable device %d: %d ops, want %d", d, k, 6 * M);
        op_plan_set_ops(p, d, ops, k);
    }
    free(v);
    free(ops);
    free(z->t);
    free(z->n);
    free(z->occ);
    return OP_OK;
}
