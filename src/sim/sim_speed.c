/* sim_speed.c: replays a plan under sampled per-device speed factors (op_sim_speed_samples). */
#include "octopipe/sim.h"

int op_sim_speed_samples(const op_plan *p, const double *speed, int n, double *makespans,
                         op_err *err) {
    op_plan q;
    op_plan_copy(&q, p);
    op_sim_ws *ws = op_sim_ws_new();
    int rc = OP_OK;
    for (int k = 0; k < n && rc == OP_OK; k++) {
        for (int s = 0; s < p->S; s++) {
            double f = speed[(size_t)k * p->P + p->stage_dev[s]];
            OP_ASSERT(f > 0, "speed factors must be positive");
            /* the stage's costs on its device's type (stages hold disjoint layers, so rows
             * shared by devices of one type are scaled once per layer) */
            const op_layer_cost *pa = op_stage_layers(p, s);
            op_layer_cost *qb = (op_layer_cost *)op_stage_layers(&q, s);
            for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
                const op_layer_cost *a = &pa[l];
                op_layer_cost *b = &qb[l];
                b->f_ms = f * a->f_ms, b->i_ms = f * a->i_ms, b->w_ms = f * a->w_ms;
                b->f_sel_ms = f * a->f_sel_ms;
            }
        }
        rc = op_sim_replay(&q, ws, err);
        makespans[k] = q.pred.makespan_ms;
    }
    op_sim_ws_free(ws);
    op_plan_free(&q);
    return rc;
}
