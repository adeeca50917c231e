/* kind_ratio.c: how a layer kind's time changes from one GPU preset to another by the analytic
 * model.  A profile measures times on one GPU; on a mixed cluster the other types' times are
 * the measured ones scaled by this ratio (unless the profile measured them too), because the
 * ratio depends on the kind: Mamba and small layers follow memory bandwidth, large GEMMs follow
 * peak FLOPs. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/cost.h"

/* Sums F, I, W over the layers of `kind` (all layers when kind < 0) of m on d; 0 on error. */
static int kind_sums(const op_model *m, const op_train_cfg *t, const op_device *d, int kind,
                     double s[3]) {
    op_layer_cost *c = op_xcalloc((size_t)m->n_layers, sizeof *c);
    op_err e = {0};
    int n = 0;
    s[0] = s[1] = s[2] = 0;
    if (op_cost_layers(m, t, d, c, &e) == OP_OK)
        for (int l = 0; l < m->n_layers; l++)
            if (kind < 0 || (int)m->layers[l].kind == kind) {
                s[0] += c[l].f_ms, s[1] += c[l].i_ms, s[2] += c[l].w_ms;
                n++;
            }
    free(c);
    return n;
}

int op_cost_kind_ratio(int kind, const op_train_cfg *t, const op_device *to, const op_device *from,
                       double r[3]) {
    r[0] = r[1] = r[2] = 1;
    if (!strcmp(to->name, from->name)) return 1;
    /* the first built-in model (analytic, not a profile) with layers of this kind; failing
     * that, whole models */
    for (int pass = 0; pass < 2; pass++)
        for (const char *const *n = op_model_preset_names(); *n; n++) {
            op_model m;
            op_err e = {0};
            if (op_model_preset(*n, &m, &e) != OP_OK) continue;
            int measured = 0;
            for (int l = 0; l < m.n_layers; l++) measured |= m.layers[l].has_measured;
            double a[3], b[3];
            int k = pass == 0 ? kind : -1;
            int ok = !measured && kind_sums(&m, t, to, k, a) > 0 && kind_sums(&m, t, from, k, b) > 0;
            op_model_free(&m);
            if (!ok) continue;
            for (int p = 0; p < 3; p++)
                r[p] = b[p] > 0 && a[p] > 0 ? a[p] / b[p] : (a[0] + a[1] + a[2]) / (b[0] + b[1] + b[2]);
            return 1;
        }
    return 0;
}
