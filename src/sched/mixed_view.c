/* mixed_view.c: activation-policy layer views on mixed clusters.  A schedule searched under a
 * policy sees every device type's costs through op_act_layers, not only row 0; the plan built
 * that way then gets every type's true costs back before it is simulated with stage_act. */
#include <string.h>

#include "octopipe/sched_mem.h"

op_layer_cost *op_act_type_layers(const op_problem *pr, int policy, int cut) {
    if (pr->n_types <= 1 || !pr->type_layers || !pr->dev_type) return NULL;
    size_t L = (size_t)pr->n_layers;
    if (cut > pr->n_layers) cut = pr->n_layers;
    op_layer_cost *v = op_xmalloc(sizeof *v * L * (size_t)pr->n_types);
    memcpy(v, pr->type_layers, sizeof *v * L * (size_t)pr->n_types);
    for (int t = 0; t < pr->n_types && cut > 0; t++)
        op_act_layers(pr->type_layers + (size_t)t * L, cut, policy, v + (size_t)t * L);
    return v;
}

void op_plan_restore_types(op_plan *p, const op_problem *pr) {
    if (pr->n_types <= 1 || !pr->type_layers || p->n_types != pr->n_types) return;
    memcpy(p->type_layers, pr->type_layers,
           sizeof(op_layer_cost) * (size_t)pr->n_layers * (size_t)pr->n_types);
}
