/* tune_fixtures.h: the layer stack the memory tuner's tests share (after check.h). */
#ifndef OCTOPIPE_TESTS_TUNE_FIXTURES_H
#define OCTOPIPE_TESTS_TUNE_FIXTURES_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "octopipe/cost.h"
#include "octopipe/plan.h"

#define MIB (1 << 20)

/* n layers: f 1 ms, i 1.5, w 0.5; act `act` MiB, act_w a third of it, out 2 MiB, static `stat`
 * MiB (params an eighth of it); the last layer a head twice as heavy.  The caller frees. */
static inline op_layer_cost *tf_layers(int n, int64_t act, int64_t stat) {
    op_layer_cost *l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < n; i++) {
        double k = i == n - 1 ? 2 : 1;
        snprintf(l[i].name, sizeof l[i].name, "l%d", i);
        l[i].sym = i == n - 1 ? 'L' : 'T';
        l[i].f_ms = 1 * k, l[i].i_ms = 1.5 * k, l[i].w_ms = 0.5 * k;
        l[i].act_bytes = act * MIB;
        l[i].act_w_bytes = act * MIB / 3;
        l[i].out_bytes = 2 * MIB;
        l[i].static_bytes = stat * MIB;
        l[i].param_bytes = stat * MIB / 8;
    }
    return l;
}

/* A problem over those layers: P devices, M microbatches, free communication, a limit of
 * limit_mib MiB per device (0: none). */
static inline op_problem tf_problem(op_layer_cost *l, int n, int P, int M, double limit_mib) {
    op_problem pr = {0};
    pr.model = "t";
    pr.layers = l;
    pr.n_layers = n;
    pr.P = P;
    pr.M = M;
    pr.tokens_per_mb = 4096;
    pr.comm.none = 1;
    pr.mem_limit_bytes = limit_mib * MIB;
    return pr;
}

#endif
