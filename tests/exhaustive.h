/* exhaustive.h: the exact optimum of a tiny problem for tests (included by the tests that
 * compare a plan or a bound with it): every partition x placement (device labels canonical:
 * comm is free, so devices are interchangeable) x active schedule, by Giffler-Thompson branch
 * and bound (an optimal makespan schedule is always active).  At most 8 stages, 4
 * microbatches, 4 devices; no memory limit, no communication. */
#ifndef OCTOPIPE_TESTS_EXHAUSTIVE_H
#define OCTOPIPE_TESTS_EXHAUSTIVE_H
#include <float.h>
#include <string.h>

#include "octopipe/cost.h"

typedef struct ex_state {
    int S, M, P, nops;
    int dev[8];
    double dur[8][3];   /* per stage F, I, W */
    double end[8][4][3];
    int done[8][4][3];
    double mfree[4];
    double rem[4];      /* unscheduled work per device */
    double best;
    long nodes;
} ex_state;

static int ex_pred_ok(const ex_state *x, int s, int m, int k, double *ready) {
    if (k == 0) {
        if (s == 0) return *ready = 0, 1;
        if (!x->done[s - 1][m][0]) return 0;
        return *ready = x->end[s - 1][m][0], 1;
    }
    if (k == 1) {
        if (s == x->S - 1) {
            if (!x->done[s][m][0]) return 0;
            return *ready = x->end[s][m][0], 1;
        }
        if (!x->done[s + 1][m][1]) return 0;
        return *ready = x->end[s + 1][m][1], 1;
    }
    if (!x->done[s][m][1]) return 0;
    return *ready = x->end[s][m][1], 1;
}

static void ex_dfs(ex_state *x, int left, double mk) {
    x->nodes++;
    if (left == 0) {
        if (mk < x->best) x->best = mk;
        return;
    }
    double lb = mk;
    for (int d = 0; d < x->P; d++)
        if (x->mfree[d] + x->rem[d] > lb) lb = x->mfree[d] + x->rem[d];
    /* each microbatch's F..I chain is sequential: its unscheduled rest bounds the makespan */
    for (int m = 0; m < x->M && lb < x->best; m++) {
        double t = 0, rest = 0;
        int started = 1;
        for (int j = 0; j < 2 * x->S; j++) {
            int s = j < x->S ? j : 2 * x->S - 1 - j, k = j < x->S ? 0 : 1;
            if (started && x->done[s][m][k]) t = x->end[s][m][k];
            else started = 0, rest += x->dur[s][k];
        }
        if (!x->done[0][m][2]) rest += x->dur[0][2];
        if (t + rest > lb) lb = t + rest;
    }
    if (lb >= x->best - 1e-12) return;
    /* G&T: the schedulable op with the earliest completion fixes the machine and the conflict
     * set; branch on every op of that machine that could start before that completion */
    double bec = DBL_MAX;
    int bd = -1;
    for (int s = 0; s < x->S; s++)
        for (int m = 0; m < x->M; m++)
            for (int k = 0; k < 3; k++) {
                double r;
                if (x->done[s][m][k] || !ex_pred_ok(x, s, m, k, &r)) continue;
                double es = r > x->mfree[x->dev[s]] ? r : x->mfree[x->dev[s]];
                if (es + x->dur[s][k] < bec) bec = es + x->dur[s][k], bd = x->dev[s];
            }
    for (int s = 0; s < x->S; s++) {
        if (x->dev[s] != bd) continue;
        for (int m = 0; m < x->M; m++)
            for (int k = 0; k < 3; k++) {
                double r;
                if (x->done[s][m][k] || !ex_pred_ok(x, s, m, k, &r)) continue;
                double es = r > x->mfree[bd] ? r : x->mfree[bd];
                /* (a zero-length op at the earliest completion is that op itself) */
                if (es >= bec - 1e-12 && es + x->dur[s][k] > bec + 1e-12) continue;
                double save = x->mfree[bd], en = es + x->dur[s][k];
                x->done[s][m][k] = 1;
                x->end[s][m][k] = en;
                x->mfree[bd] = en;
                x->rem[bd] -= x->dur[s][k];
                ex_dfs(x, left - 1, en > mk ? en : mk);
                x->rem[bd] += x->dur[s][k];
                x->mfree[bd] = save;
                x->done[s][m][k] = 0;
            }
    }
}

/* Optimum over all partitions and placements (device labels canonical: comm is free, so
 * devices are interchangeable), starting from the incumbent `ub`. */
static double exhaustive(const op_layer_cost *l, int L, int P, int M, double ub, long *nodes) {
    ex_state x;
    memset(&x, 0, sizeof x);
    x.P = P;
    x.M = M;
    x.best = ub;
    for (int mask = 0; mask < (1 << (L - 1)); mask++) { /* bit i: cut after layer i */
        int first[9], S = 0;
        first[S++] = 0;
        for (int i = 0; i < L - 1; i++)
            if (mask >> i & 1) first[S++] = i + 1;
        first[S] = L;
        long nplace = 1;
        for (int s = 0; s < S; s++) nplace *= P;
        for (long code = 0; code < nplace; code++) {
            long c = code;
            int maxd = -1, ok = 1;
            for (int s = 0; s < S; s++) {
                x.dev[s] = (int)(c % P);
                c /= P;
                if (x.dev[s] > maxd + 1) ok = 0; /* canonical labelling */
                if (x.dev[s] > maxd) maxd = x.dev[s];
            }
            if (!ok) continue;
            x.S = S;
            memset(x.done, 0, sizeof x.done);
            memset(x.mfree, 0, sizeof x.mfree);
            memset(x.rem, 0, sizeof x.rem);
            for (int s = 0; s < S; s++) {
                x.dur[s][0] = x.dur[s][1] = x.dur[s][2] = 0;
                for (int i = first[s]; i < first[s + 1]; i++) {
                    x.dur[s][0] += l[i].f_ms;
                    x.dur[s][1] += l[i].i_ms;
                    x.dur[s][2] += l[i].w_ms;
                }
                x.rem[x.dev[s]] += M * (x.dur[s][0] + x.dur[s][1] + x.dur[s][2]);
            }
            ex_dfs(&x, S * M * 3, 0);
        }
    }
    *nodes = x.nodes;
    return x.best;
}

#endif
