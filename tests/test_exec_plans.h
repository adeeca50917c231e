/* test_exec_plans.h: plans built in memory for the executor's tests and bench: a plain 1F1B and
 * random valid plans (random placements, random dependency-respecting orders). */
#ifndef OCTOPIPE_TESTS_EXEC_PLANS_H
#define OCTOPIPE_TESTS_EXEC_PLANS_H
#include <stdlib.h>
#include <string.h>

#include "octopipe/plan.h"

/* S layers of equal cost, one per stage. */
static inline void xp_layers(op_layer_cost *L, int S, double f, int64_t bytes) {
    memset(L, 0, sizeof(op_layer_cost) * (size_t)S);
    for (int i = 0; i < S; i++) {
        snprintf(L[i].name, sizeof L[i].name, "l%d", i);
        L[i].sym = '-';
        L[i].f_ms = f;
        L[i].i_ms = f;
        L[i].w_ms = f;
        L[i].out_bytes = bytes;
        L[i].act_bytes = bytes;
    }
}

/* Megatron-style 1F1B with P stages (stage d on device d), fused B. */
static inline void xp_1f1b(op_plan *p, int P, int M, double f, int64_t bytes) {
    op_layer_cost *L = calloc((size_t)P, sizeof *L);
    xp_layers(L, P, f, bytes);
    op_comm c = {0};
    c.none = 1;
    op_plan_init(p, "1f1b", L, P, P, M, P, &c);
    free(L);
    for (int s = 0; s <= P; s++) p->stage_first[s] = s;
    for (int s = 0; s < P; s++) p->stage_dev[s] = s;
    op_op *ops = calloc((size_t)M * 2, sizeof *ops);
    for (int d = 0; d < P; d++) {
        int warm = P - 1 - d < M ? P - 1 - d : M, n = 0, nf = 0, nb = 0;
        for (int i = 0; i < warm; i++) ops[n++] = (op_op){OP_F, d, nf++, 0, 0};
        while (nb < M) {
            if (nf < M) ops[n++] = (op_op){OP_F, d, nf++, 0, 0};
            ops[n++] = (op_op){OP_B, d, nb++, 0, 0};
        }
        op_plan_set_ops(p, d, ops, n);
    }
    free(ops);
}

/* Random valid plan: S stages over P devices (each device holds at least one when S >= P), a
 * random I+W split per stage, and per-device orders taken from one random topological order. */
static inline void xp_random(op_plan *p, op_rng *rng, int P, int S, int M, double f,
                             int64_t bytes) {
    op_layer_cost *L = calloc((size_t)S, sizeof *L);
    xp_layers(L, S, f, bytes);
    for (int i = 0; i < S; i++) L[i].f_ms = f * (0.5 + op_rng_uniform(rng));
    op_comm c = {0};
    c.none = 1;
    op_plan_init(p, "random", L, S, P, M, S, &c);
    free(L);
    for (int s = 0; s <= S; s++) p->stage_first[s] = s;
    for (int s = 0; s < S; s++) {
        p->stage_dev[s] = s < P ? s : op_rng_int(rng, P);
        p->stage_split[s] = (uint8_t)op_rng_int(rng, 2);
    }
    for (int s = P; s-- > 1;) { /* shuffle so device order is not stage order */
        int j = op_rng_int(rng, s + 1), t = p->stage_dev[s];
        p->stage_dev[s] = p->stage_dev[j];
        p->stage_dev[j] = t;
    }
    /* state per (s, m): 0 nothing, 1 F done, 2 I/B done, 3 W done */
    int total = 0, n_ready;
    uint8_t *st = calloc((size_t)S * M, 1);
    int *cnt = calloc((size_t)P, sizeof(int));
    op_op **ord = calloc((size_t)P, sizeof(op_op *));
    for (int d = 0; d < P; d++) ord[d] = calloc((size_t)S * M * 3, sizeof(op_op));
    op_op *ready = calloc((size_t)S * M, sizeof(op_op));
    for (int s = 0; s < S; s++) total += M * (p->stage_split[s] ? 3 : 2);
    for (int done = 0; done < total; done++) {
        n_ready = 0;
        for (int s = 0; s < S; s++)
            for (int m = 0; m < M; m++) {
                int k = st[s * M + m];
                op_op o = {0, s, m, 0, 0};
                if (k == 0 && (s == 0 || st[(s - 1) * M + m] >= 1)) o.kind = OP_F;
                else if (k == 1 && (s == S - 1 || st[(s + 1) * M + m] >= 2))
                    o.kind = p->stage_split[s] ? OP_I : OP_B;
                else if (k == 2 && p->stage_split[s]) o.kind = OP_W;
                else continue;
                ready[n_ready++] = o;
            }
        op_op o = ready[op_rng_int(rng, n_ready)];
        int d = p->stage_dev[o.stage];
        ord[d][cnt[d]++] = o;
        uint8_t *k = &st[o.stage * M + o.mb];
        *k = o.kind == OP_F ? 1 : o.kind == OP_W ? 3 : (p->stage_split[o.stage] ? 2 : 3);
    }
    for (int d = 0; d < P; d++) {
        op_plan_set_ops(p, d, ord[d], cnt[d]);
        free(ord[d]);
    }
    free(ord);
    free(ready);
    free(cnt);
    free(st);
}
#endif
