/* cost_fixtures.h: training setups and devices shared by the cost-model tests (after check.h). */
#ifndef OCTOPIPE_TESTS_COST_FIXTURES_H
#define OCTOPIPE_TESTS_COST_FIXTURES_H
#include "octopipe/cost.h"

/* the default setup (bf16, mbs 1) at this sequence length and TP degree */
static inline op_train_cfg cfg(int seq, int tp) {
    op_train_cfg t;
    op_train_cfg_default(&t);
    t.seq = seq;
    t.tp = tp;
    return t;
}

static inline op_device h100(void) {
    op_device d;
    op_err e = {0};
    CHECK(op_device_preset("h100-80gb", &d, &e) == OP_OK);
    return d;
}
#endif
