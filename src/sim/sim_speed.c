/* sim_speed.c: replays a plan under sampled per-device speed factors (op_sim_speed_samples). */
#include <math.h>

#include "octopipe/sim.h"

int op_sim_speed_samples(const op_plan *p, const double *speed, int n, double *makespans,
                         op_err *err) {
    int vrc = op_plan_validate(p, err); /* speed[] and the rows are indexed by its layout */
    if (vrc != OP_OK) return vrc;
    op_plan q;
    op_plan_copy(&q, p);
    op_sim_ws *ws = op_sim_ws_new();
    int rc = OP_OK;
    for (int k = 0; k < n && rc == OP_OK; k++) {
        for (int s = 0; s < p->S && rc == OP_OK; s++) {
            int d = p->stage_dev[s];
            double f = speed[(size_t)k * p->P + d];
            /* the factors are the caller's input: a zero, negative or NaN one has no meaning */
            if (!(f > 0 && isfinite(f))) {
                rc = op_errf(err, OP_EINVAL, "speed sample %d: device %d's factor %.6g must be "
                             "finite and > 0", k, d, f);
                break;
            }
            /* the stage's costs on its device's type (stages hold disjoint layers, so rows
             * shared by devices of one type are scaled once per layer) */
            const op_layer_cost *pa = op_stage_layers(p, s);
            op_layer_cost *qb = (op_layer_cost *)op_stage_layers(&q, s);
            for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
                const op_layer_cost *a = &pa[l];
                op_layer_cost *b = &qb[l];
                b->f_ms = f * a->f_ms, b->i_ms = f * a->i_ms, b->w_ms = f * a->w_ms;
                b->f_sel_ms = f * a->f_sel_ms;
                /* a huge factor made every time infinite and the makespan with it; an op
                 * beyond OP_MAX_MS is refused as op_problem_validate refuses it */
                if (!(b->f_ms <= OP_MAX_MS && b->i_ms <= OP_MAX_MS && b->w_ms <= OP_MAX_MS)) {
                    rc = op_errf(err, OP_EINVAL, "speed sample %d: device %d's factor %.6g makes "
                                 "layer %d take more than %g ms per op", k, d, f, l, OP_MAX_MS);
                    break;
                }
            }
        }
        if (rc != OP_OK) break;
        rc = op_sim_replay(&q, ws, err);
        makespans[k] = q.pred.makespan_ms;
    }
    op_sim_ws_free(ws);
    op_plan_free(&q);
    return rc;
}
