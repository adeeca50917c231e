/* device.c: GPU presets and the default training setup.  Numbers and their sources are in
 * docs/cost-model.md. */
#include <string.h>

#include "octopipe/cost.h"

#define GB_IN_GIB (1e9 / 1073741824.0)

/* Names as op_gpu_name (model/gpu_names.c) gives them; the aliases are resolved there. */
static const op_device presets[] = {
    {"a100-40gb", 312, 1555, 40, 0.60, 0.80, 0.003, 240, 0.010, 25},
    {"a100-80gb", 312, 2039, 80, 0.60, 0.80, 0.003, 240, 0.010, 25},
    {"h100-80gb", 989, 3350, 80, 0.55, 0.80, 0.003, 360, 0.010, 50},
    {"h200", 989, 4800, 141 * GB_IN_GIB, 0.55, 0.80, 0.003, 360, 0.010, 50},
    {"b200", 2250, 7680, 180 * GB_IN_GIB, 0.55, 0.80, 0.003, 720, 0.010, 50},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static const char *const preset_names[] = {"a100-40gb", "a100-80gb", "h100-80gb", "h200", "b200", NULL};

const char *const *op_device_preset_names(void) { return preset_names; }

int op_device_preset(const char *name, op_device *d, op_err *err) {
    const char *canon;
    int rc = op_gpu_name(name, &canon, err);
    if (rc) return rc;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(canon, presets[i].name)) {
            *d = presets[i];
            return OP_OK;
        }
    OP_ASSERT(0, "GPU '%s' has a name but no preset", canon); /* the two tables disagree */
    return OP_EINVAL;
}

void op_train_cfg_default(op_train_cfg *t) {
    memset(t, 0, sizeof *t);
    t->seq = 4096;
    t->mbs = 1;
    t->tp = 1;
    t->dtype_bytes = 2;
    t->dp = 1;
    t->zero1 = 0;
    t->ep = 1;
}
