/* zbv_rounds.c: the ZB-V auto-scheduler's construction, as the Zero Bubble authors describe it:
 * one scalar F / I / W cost for every chunk, a fixed V placement, and the schedule built in
 * rounds instead of by an event loop:
 *   1. warm-up: each device i runs chunk 0's F, then as many more chunk-0 F's as fit before
 *      chunk 1's first F reaches it (memory allowing), then chunk 1's first F;
 *   2. fill: the deeper devices run F's, alternating chunks, until each holds at least as many
 *      as the one before it (the V's diagonal);
 *   3. 2M rounds of "one I on every device (the chunk whose input is there), then one F";
 *      before each op a device fills the wait for its input with deferred W's, and, when the
 *      wait is longer than its share of the bubble budget, with one more W (the fill_f / fill_b
 *      options say whether F / chunk-0 I waits are filled so);
 *   4. the remaining W's.
 * Each device's accumulated idle time is its bubble; a run is repeated with the previous run's
 * bubbles as the per-device budget ("approved bubbles") while that lowers the largest bubble.
 * The orders are then re-timed on the real stage costs by the simulator (the caller keeps the
 * best of its settings), which is how ZB-V's users get it: one profiled scalar per op kind.
 *
 * Op spaces: device i holds F chunk 0 = stage i and F chunk 1 = stage 2P-1-i.  The backward
 * chain runs stage 2P-1 (device 0) -> stage P (device P-1) -> stage P-1 -> ... -> stage 0, so
 * in backward space "chunk 0" is stage 2P-1-i (going down the devices, like F chunk 0) and
 * "chunk 1" is stage i.  Memory in units of one chunk's activations: F +1, I -(1-wf), W -wf. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

enum { KF = 0, KI = 1, KW = 2 };

typedef struct zr {
    int P, M;
    double cost[3], mem_d[3], max_mem;
    int fill_f, fill_b;
    const double *approved; /* [P] or NULL */
    double max_approved;
    double *end;      /* [3][2][P][M] end time, -1 = not placed */
    double *cur, *mem, *bub; /* [P] */
    int *cnt;         /* [P][6]: placed ops per (kind, chunk) */
    int *wq, *wh, *wt; /* [P][2M] pending W chunks (FIFO), head, tail */
    op_op **ord;      /* [P][6M] */
    int *nord;
    int bad;          /* a dependency or memory check failed: the run is void */
} zr;

#define ID(k, c, i, m) \
    ((((size_t)(k) * 2 + (size_t)(c)) * (size_t)z->P + (size_t)(i)) * (size_t)z->M + (size_t)(m))
#define CNT(i, k, c) z->cnt[(size_t)(i) * 6 + (size_t)(k) * 2 + (size_t)(c)]

static double end_of(const zr *z, int k, int c, int i, int m) {
    if (i < 0 || i >= z->P || m < 0 || m >= z->M) return -1;
    return z->end[ID(k, c, i, m)];
}

static double max_bubble(const zr *z, int i) {
    double mx = 0;
    for (int j = 0; j < z->P; j++) mx = z->bub[j] > mx ? z->bub[j] : mx;
    if (i >= 0 && z->approved && z->max_approved - z->approved[i] > mx)
        mx = z->max_approved - z->approved[i];
    return mx;
}

static void put(zr *z, int k, int c, int i) {
    if (z->bad) return;
    int m = CNT(i, k, c), P = z->P;
    double t0 = z->cur[i] + z->cost[k], t = t0;
    if (m >= z->M || z->mem[i] + z->mem_d[k] > z->max_mem + 1e-9) {
        z->bad = 1;
        return;
    }
    /* same-device predecessor: F1 after F0 (device P-1 turns the V), I0 after F1 (device 0
     * holds the loss), I1 after I0 (device P-1 again), W after its I */
    if (k == KW) {
        if (end_of(z, KI, c, i, m) < 0) z->bad = 1;
    } else if (k * 2 + c > 0) {
        int prev = k * 2 + c - 1;
        if (end_of(z, prev / 2, prev % 2, i, m) < 0) z->bad = 1;
    }
    if (k != KW) { /* cross-device input: chunk 0 from device i-1, chunk 1 from i+1 */
        int j = c == 0 ? i - 1 : i + 1;
        if (j >= 0 && j < P) {
            double e = end_of(z, k, c, j, m);
            if (e < 0) z->bad = 1;
            if (e + z->cost[k] > t) t = e + z->cost[k];
        }
    }
    if (z->bad) return;
    if (CNT(i, KF, 0) > 0) z->bub[i] += t - t0;
    z->end[ID(k, c, i, m)] = t;
    z->cur[i] = t;
    z->mem[i] += z->mem_d[k];
    op_op *o = &z->ord[i][z->nord[i]++];
    o->kind = (uint8_t)(k == KF ? OP_F : k == KI ? OP_I : OP_W);
    o->stage = (k == KF) == (c == 0) ? i : 2 * P - 1 - i;
    o->mb = m;
    if (k == KI) z->wq[(size_t)i * 2 * (size_t)z->M + (size_t)z->wt[i]++] = c;
    CNT(i, k, c)++;
}

static void put_w(zr *z, int i) {
    if (z->wh[i] == z->wt[i]) {
        z->bad = 1;
        return;
    }
    put(z, KW, z->wq[(size_t)i * 2 * (size_t)z->M + (size_t)z->wh[i]++], i);
}

/* Before an op of kind k whose input is op fa (end time e, -1 if none): fill the wait with
 * W's, then one more W when the wait exceeds the device's bubble budget and filling is on. */
static void fill_wait(zr *z, int i, double e, int fill) {
    while (z->wh[i] < z->wt[i] && e >= 0 && e >= z->cur[i] + z->cost[KW] && !z->bad) put_w(z, i);
    if (z->wh[i] < z->wt[i] && e - z->cur[i] > max_bubble(z, i) - z->bub[i] && fill) put_w(z, i);
}

static void run_once(zr *z) {
    int P = z->P, M = z->M;
    for (int i = 0; i < P; i++) put(z, KF, 0, i);
    for (int i = P - 1; i >= 0 && !z->bad; i--) {
        if (i == P - 1) {
            put(z, KF, 1, i);
            continue;
        }
        double arrive = end_of(z, KF, 1, i + 1, 0);
        while (z->mem[i] + z->mem_d[KF] * (2 + i * 2) <= z->max_mem + 1e-9 &&
               z->cur[i] + z->cost[KF] <= arrive && CNT(i, KF, 0) < M && !z->bad)
            for (int j = 0; j <= i; j++) put(z, KF, 0, j);
        put(z, KF, 1, i);
    }
    int ch = 0, idle = 0;
    for (int i = 1; i < P && !z->bad; i++)
        while (!z->bad && (CNT(i, KF, 0) + CNT(i, KF, 1) < CNT(i - 1, KF, 0) + CNT(i - 1, KF, 1) ||
                           (CNT(i, KF, 1) <= CNT(i - 1, KF, 1) && CNT(i - 1, KF, 1) < M))) {
            int any = 0;
            for (int j = P - 1; j >= i; j--)
                if (CNT(j, KF, ch) < M) put(z, KF, ch, j), any = 1;
            ch = 1 - ch;
            idle = any ? 0 : idle + 1;
            if (idle >= 2) z->bad = 1; /* neither chunk can advance: no progress possible */
        }
    int *ranks = op_xmalloc(sizeof(int) * 2 * (size_t)P);
    for (int r = 0; r < 2 * M && !z->bad; r++) {
        for (int i = 0; i < P; i++)
            while (z->mem[i] + z->mem_d[KI] > z->max_mem + 1e-9 && !z->bad) put_w(z, i);
        /* I's: chunk 1 where its input is there (deepest device first), then chunk 0 */
        int n1 = 0, n = 0;
        for (int i = 0; i < P; i++) {
            int one;
            if (CNT(i, KI, 1) >= CNT(i, KI, 0)) one = 0;
            else if (i == P - 1) one = 1;
            else one = end_of(z, KI, 1, i + 1, CNT(i, KI, 1)) >= 0 || CNT(i, KI, 0) >= M;
            if (one) ranks[P + n1++] = i;
        }
        for (int k = n1 - 1; k >= 0; k--) ranks[n++] = ranks[P + k] * 2 + 1;
        for (int i = 0; i < P; i++) {
            int one = 0;
            for (int k = 0; k < n1; k++) one |= ranks[P + k] == i;
            if (!one) ranks[n++] = i * 2;
        }
        for (int k = 0; k < n && !z->bad; k++) {
            int i = ranks[k] / 2, c = ranks[k] % 2;
            double e = -1;
            if (c == 1 && i < P - 1) e = end_of(z, KI, 1, i + 1, CNT(i, KI, 1));
            if (c == 0 && i > 0) e = end_of(z, KI, 0, i - 1, CNT(i, KI, 0));
            fill_wait(z, i, e, c == 1 || z->fill_b);
            if (CNT(i, KI, c) < M) put(z, KI, c, i);
        }
        for (int i = 0; i < P && !z->bad; i++) { /* then one F per device */
            if (CNT(i, KF, 1) >= M) continue;
            int c = -1;
            if (CNT(i, KF, 1) >= CNT(i, KF, 0)) c = 0;
            else if (i == P - 1) c = 1;
            else if (end_of(z, KF, 1, i + 1, CNT(i, KF, 1)) >= 0) c = 1;
            else if (CNT(i, KF, 0) < M && (i == 0 || end_of(z, KF, 0, i - 1, CNT(i, KF, 0)) >= 0))
                c = 0;
            if (c < 0) continue;
            while (z->mem[i] + z->mem_d[KF] > z->max_mem + 1e-9 && !z->bad) put_w(z, i);
            double e = -1;
            if (c == 0 && i > 0) e = end_of(z, KF, 0, i - 1, CNT(i, KF, 0));
            if (c == 1 && i < P - 1) e = end_of(z, KF, 1, i + 1, CNT(i, KF, 1));
            fill_wait(z, i, e, z->fill_f);
            put(z, KF, c, i);
        }
    }
    free(ranks);
    for (int i = 0; i < P && !z->bad; i++)
        while (z->wh[i] < z->wt[i] && !z->bad) put_w(z, i);
    for (int i = 0; i < P && !z->bad; i++)
        if (z->nord[i] != 6 * M) z->bad = 1;
}

static void reset(zr *z) {
    size_t n = (size_t)6 * (size_t)z->P * (size_t)z->M;
    for (size_t x = 0; x < n; x++) z->end[x] = -1;
    memset(z->cnt, 0, sizeof(int) * 6 * (size_t)z->P);
    for (int i = 0; i < z->P; i++) {
        z->cur[i] = z->mem[i] = z->bub[i] = 0;
        z->wh[i] = z->wt[i] = z->nord[i] = 0;
    }
    z->bad = 0;
}

int sched_zbv_rounds(op_plan *p, const double cost[3], double w_frac, double cap_mb,
                     int fill_f, int fill_b, int max_runs) {
    int P = p->P, M = p->M;
    OP_ASSERT(p->S == 2 * P, "zbv rounds wants the V placement (S=%d P=%d)", p->S, P);
    if (M < 1 || P < 1) return OP_EINVAL;
    op_arena ar = {0};
    zr zz = {0}, *z = &zz;
    z->P = P;
    z->M = M;
    memcpy(z->cost, cost, sizeof z->cost);
    z->mem_d[KF] = 1;
    z->mem_d[KI] = -(1 - w_frac);
    z->mem_d[KW] = -w_frac;
    z->max_mem = 2 * cap_mb;
    z->fill_f = fill_f;
    z->fill_b = fill_b;
    z->end = OP_ARENA_NEW(&ar, double, (size_t)6 * (size_t)P * (size_t)M);
    z->cur = OP_ARENA_NEW(&ar, double, P);
    z->mem = OP_ARENA_NEW(&ar, double, P);
    z->bub = OP_ARENA_NEW(&ar, double, P);
    z->cnt = OP_ARENA_NEW(&ar, int, (size_t)6 * (size_t)P);
    z->wq = OP_ARENA_NEW(&ar, int, (size_t)2 * (size_t)P * (size_t)M);
    z->wh = OP_ARENA_NEW(&ar, int, P);
    z->wt = OP_ARENA_NEW(&ar, int, P);
    z->nord = OP_ARENA_NEW(&ar, int, P);
    z->ord = OP_ARENA_NEW(&ar, op_op *, P);
    for (int i = 0; i < P; i++) z->ord[i] = OP_ARENA_NEW(&ar, op_op, (size_t)6 * (size_t)M);
    double *appr = OP_ARENA_NEW(&ar, double, P);
    op_op **best = OP_ARENA_NEW(&ar, op_op *, P);
    for (int i = 0; i < P; i++) best[i] = OP_ARENA_NEW(&ar, op_op, (size_t)6 * (size_t)M);
    double best_bub = DBL_MAX;
    /* a run, then reruns with the previous run's bubbles approved, while the largest drops */
    for (int runs = 0; runs < max_runs; runs++) {
        reset(z);
        run_once(z);
        if (z->bad) break;
        double b = max_bubble(z, -1);
        if (b >= best_bub) break;
        best_bub = b;
        for (int i = 0; i < P; i++) memcpy(best[i], z->ord[i], sizeof(op_op) * 6 * (size_t)M);
        memcpy(appr, z->bub, sizeof(double) * (size_t)P);
        z->approved = appr;
        z->max_approved = 0;
        for (int i = 0; i < P; i++)
            if (appr[i] > z->max_approved) z->max_approved = appr[i];
    }
    int rc = best_bub < DBL_MAX ? OP_OK : OP_EINVAL;
    if (rc == OP_OK) {
        for (int s = 0; s < p->S; s++) p->stage_split[s] = 1;
        for (int i = 0; i < P; i++) op_plan_set_ops(p, i, best[i], 6 * M);
    }
    op_arena_free(&ar);
    return rc;
}
