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

typedef struct vs {
    int P, M, len;  /* len: grid slots */
    int *t;         /* [P][NT][2M] slot of op (type, k); types 0-3 use k < M, W k < 2M */
    int *n;         /* [P][NT] ops of the type */
    char *occ;      /* [P][len] */
} vs;

#define T(d, ty, k) z->t[((size_t)(d) * NT + (size_t)(ty)) * 2 * (size_t)z->M + (size_t)(k)]
#define N(d, ty) z->n[(size_t)(d) * NT + (size_t)(ty)]

/* Per-device slot tallies of the ops placed so far (several ops may share a slot while
 * ops move; they then count in that slot together). */
typedef struct tally {
    int *nf, *ni, *nw; /* [len] F's, I's, explicit W's in the slot */
    int *prof;         /* [len] with explicit W's: activations held after the slot */
    int *cur, *wc, *pk; /* [len] lazy W's: state after the slot (held, W's pending, peak so far) */
} tally;

/* Lazy-W state from slot s on (W's run in free slots), using the state after s-1; returns
 * the peak over the whole device and, when store, records the states. */
static int lazy_from(const vs *z, tally *ty, int s, int store) {
    int cur = s > 0 ? ty->cur[s - 1] : 0, wc = s > 0 ? ty->wc[s - 1] : 0;
    int pk = s > 0 ? ty->pk[s - 1] : 0;
    for (int i = s; i < z->len; i++) {
        if (ty->nf[i] + ty->ni[i] > 0) {
            cur += ty->nf[i];
            wc += ty->ni[i];
        } else if (wc > 0) {
            cur--;
            wc--;
        }
        pk = cur > pk ? cur : pk;
        if (store) ty->cur[i] = cur, ty->wc[i] = wc, ty->pk[i] = pk;
    }
    return pk;
}

static void tally_add(const vs *z, tally *ty, int kind, int s, int n) {
    (void)z;
    if (kind < 2) ty->nf[s] += n;
    else if (kind < 4) ty->ni[s] += n;
    else ty->nw[s] += n;
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
    int P = z->P, M = z->M, types = with_w ? NT : 4, L = z->len;
    if (with_w)
        for (int d = 0; d < P; d++) put_w(z, d);
    /* tallies, and the peak no move may exceed: the worst device's */
    tally *tl = op_xcalloc((size_t)P, sizeof *tl);
    int cur = 0;
    for (int d = 0; d < P; d++) {
        tally *ty = &tl[d];
        ty->nf = op_xcalloc((size_t)L * 7, sizeof(int));
        ty->ni = ty->nf + L, ty->nw = ty->ni + L, ty->prof = ty->nw + L;
        ty->cur = ty->prof + L, ty->wc = ty->cur + L, ty->pk = ty->wc + L;
        for (int t2 = 0; t2 < types; t2++)
            for (int k = 0; k < N(d, t2); k++) tally_add(z, ty, t2, T(d, t2, k), 1);
        int pk = 0;
        if (with_w) {
            for (int i = 0, m = 0; i < L; i++) {
                m += ty->nf[i] - ty->nw[i];
                ty->prof[i] = m;
                pk = m > pk ? m : pk;
            }
        } else {
            pk = lazy_from(z, ty, 0, 1);
        }
        cur = pk > cur ? pk : cur;
    }
    memset(z->occ, 0, (size_t)P * (size_t)L);
    int *ptr = op_xcalloc((size_t)P * NT, sizeof *ptr);
    long total = 0;
    for (int d = 0; d < P; d++)
        for (int t2 = 0; t2 < types; t2++) total += N(d, t2);
    int phase = 0;
    for (long it = 0; it < total; it++) {
        int bd = -1, bty = -1, bt = INT_MAX;
        for (int d = 0; d < P; d++) /* next op in (slot, device, type) order */
            for (int t2 = 0; t2 < types; t2++) {
                int k = ptr[d * NT + t2];
                if (k < N(d, t2) && T(d, t2, k) < bt) bt = T(d, t2, k), bd = d, bty = t2;
            }
        int d = bd, ty = bty, k = ptr[d * NT + ty]++;
        tally *tk = &tl[d];
        int keep = 0;
        if (ty == 3 && d == 0 && phase == 0) phase = 1;
        if (phase == 1) {
            if (ty == 0 && k == M - 1) phase = 2;
            keep = 1;
        }
        if (phase == 0 && !with_w) keep = 1;
        int to = bt;
        for (int s = keep ? bt : earliest(z, d, ty, k); s < bt; s++) {
            if (s < 0 || z->occ[(size_t)d * (size_t)L + (size_t)s]) continue;
            int ok;
            if (with_w) { /* an F adds one over [s, bt); an I changes nothing; a W lowers */
                ok = 1;
                for (int i = s; i < bt && ty < 2 && ok; i++) ok = tk->prof[i] + 1 <= cur;
            } else { /* lazy W's: re-run the device from s with the op moved */
                tally_add(z, tk, ty, bt, -1);
                tally_add(z, tk, ty, s, 1);
                ok = lazy_from(z, tk, s, 0) <= cur;
                tally_add(z, tk, ty, s, -1);
                tally_add(z, tk, ty, bt, 1);
            }
            if (ok) {
                to = s;
                break;
            }
        }
        if (to != bt) {
            tally_add(z, tk, ty, bt, -1);
            tally_add(z, tk, ty, to, 1);
            if (with_w && (ty < 2 || ty == 4))
                for (int i = to; i < bt; i++) tk->prof[i] += ty < 2 ? 1 : -1;
            if (!with_w) lazy_from(z, tk, to, 1);
            T(d, ty, k) = to;
        }
        if (to >= 0 && to < L) z->occ[(size_t)d * (size_t)L + (size_t)to] = 1;
    }
    free(ptr);
    for (int d = 0; d < P; d++) free(tl[d].nf);
    free(tl);
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
            o[0] = 2 * d, o[1] = 3 * P - 2 - d;
            o[2] = 3 * P + g + 2 * d - 1, o[3] = 6 * P + g - 2 - d;
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
