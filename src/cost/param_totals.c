/* param_totals.c: a model's parameter totals from its per-layer costs (cost.h). */
#include "octopipe/cost.h"

void op_cost_param_totals(const op_model *m, const op_layer_cost *c, double *total,
                          double *active, double *mtp) {
    double t = 0, a = 0, x = 0;
    for (int i = 0; m && c && i < m->n_layers; i++) {
        if (m->layers[i].shares_params_with >= 0) continue; /* counted where it is owned */
        if (m->layers[i].kind == OP_LAYER_MTP) {
            x += (double)c[i].params;
            continue;
        }
        t += (double)c[i].params;
        a += (double)c[i].params_active;
    }
    if (total) *total = t;
    if (active) *active = a;
    if (mtp) *mtp = x;
}
