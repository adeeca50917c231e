/* adamw.c: AdamW with linear warm-up.  Elementwise, so a stage updates its own arena and any
 * partition of the model gives the same weights. */
#include <math.h>

#include "octopipe/train.h"

void op_adamw_default(op_adamw *o) {
    o->lr = 3e-3f, o->beta1 = 0.9f, o->beta2 = 0.95f, o->eps = 1e-8f, o->wd = 0.01f;
    o->warmup = 10;
}

void op_adamw_update(const op_adamw *o, int64_t t, float *p, const float *g, float *m, float *v,
                     size_t n) {
    double lr = o->lr * (o->warmup > 0 && t < o->warmup ? (double)(t + 1) / o->warmup : 1.0);
    float c1 = (float)(1.0 - pow(o->beta1, (double)(t + 1)));
    float c2 = (float)(1.0 - pow(o->beta2, (double)(t + 1)));
    float lrf = (float)lr;
    for (size_t i = 0; i < n; i++) {
        m[i] = o->beta1 * m[i] + (1.0f - o->beta1) * g[i];
        v[i] = o->beta2 * v[i] + (1.0f - o->beta2) * g[i] * g[i];
        float mh = m[i] / c1, vh = v[i] / c2;
        p[i] -= lrf * (mh / (sqrtf(vh) + o->eps) + o->wd * p[i]);
    }
}

void op_adamw_stage(const op_adamw *o, int64_t t, op_nn_stage *s) {
    op_adamw_update(o, t, s->params, s->grads, s->adam_m, s->adam_v, s->n_params);
}
