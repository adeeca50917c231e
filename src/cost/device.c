/* device.c: GPU presets and the default training setup.  Numbers and their sources are in
 * docs/cost-model.md. */
#include <ctype.h>
#include <string.h>

#include "octopipe/cost.h"

typedef struct preset {
    const char *name;
    const char *aliases[6]; /* NULL-terminated; compared after normalisation */
    op_device d;
} preset;

#define GB_IN_GIB (1e9 / 1073741824.0)

static const preset presets[] = {
    {"a100-80gb", {"a100", "a100-80g", "a100-sxm", "a100-sxm4-80gb", NULL},
     {"a100-80gb", 312, 2039, 80, 0.60, 0.80, 0.003, 240, 0.010, 25}},
    {"h100-80gb", {"h100", "h100-80g", "h100-sxm", "h100-sxm5-80gb", NULL},
     {"h100-80gb", 989, 3350, 80, 0.55, 0.80, 0.003, 360, 0.010, 50}},
    {"h200", {"h200-141gb", "h200-sxm", NULL},
     {"h200", 989, 4800, 141 * GB_IN_GIB, 0.55, 0.80, 0.003, 360, 0.010, 50}},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static const char *const preset_names[] = {"a100-80gb", "h100-80gb", "h200", NULL};

const char *const *op_device_preset_names(void) { return preset_names; }

/* lower case, '_' and ' ' become '-' */
static void normalise(const char *in, char *out, size_t cap) {
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++) {
        char c = (char)tolower((unsigned char)in[i]);
        out[i] = (c == '_' || c == ' ') ? '-' : c;
    }
    out[i] = 0;
}

int op_device_preset(const char *name, op_device *d, op_err *err) {
    char key[64];
    if (!name || !*name) return op_errf(err, OP_EINVAL, "empty device name (known: a100-80gb, h100-80gb, h200)");
    normalise(name, key, sizeof key);
    for (size_t i = 0; i < N_PRESETS; i++) {
        int hit = !strcmp(key, presets[i].name);
        for (int j = 0; !hit && presets[i].aliases[j]; j++) hit = !strcmp(key, presets[i].aliases[j]);
        if (hit) {
            *d = presets[i].d;
            return OP_OK;
        }
    }
    return op_errf(err, OP_EINVAL,
                   "unknown device '%s' (known: a100-80gb (alias a100), h100-80gb (alias h100), "
                   "h200)",
                   name);
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
