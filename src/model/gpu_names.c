/* gpu_names.c: the GPU names OctoPipe knows, with their aliases.  The names live here, below
 * the cost model, because a profile names the GPUs it measured on (by_gpu) before any cost
 * is computed; cost/device.c holds each preset's numbers under the same names. */
#include <ctype.h>
#include <string.h>

#include "octopipe/model.h"

static const struct {
    const char *name;
    const char *aliases[6]; /* NULL-terminated; compared after normalisation */
} gpus[] = {
    {"a100-40gb", {"a100-40g", "a100-sxm4-40gb", NULL}},
    {"a100-80gb", {"a100", "a100-80g", "a100-sxm", "a100-sxm4-80gb", NULL}},
    {"h100-80gb", {"h100", "h100-80g", "h100-sxm", "h100-sxm5-80gb", NULL}},
    {"h200", {"h200-141gb", "h200-sxm", NULL}},
    {"b200", {"b200-180gb", "b200-sxm", NULL}},
};

/* lower case, '_' and ' ' become '-' */
static void normalise(const char *in, char *out, size_t cap) {
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++) {
        char c = (char)tolower((unsigned char)in[i]);
        out[i] = (c == '_' || c == ' ') ? '-' : c;
    }
    out[i] = 0;
}

int op_gpu_name(const char *name, const char **canonical, op_err *err) {
    char key[64];
    if (!name || !*name) return op_errf(err, OP_EINVAL, "empty device name (known: a100-40gb, a100-80gb, h100-80gb, h200, b200)");
    normalise(name, key, sizeof key);
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        int hit = !strcmp(key, gpus[i].name);
        for (int j = 0; !hit && gpus[i].aliases[j]; j++) hit = !strcmp(key, gpus[i].aliases[j]);
        if (hit) {
            *canonical = gpus[i].name;
            return OP_OK;
        }
    }
    return op_errf(err, OP_EINVAL,
                   "unknown device '%s' (known: a100-40gb, a100-80gb (alias a100), h100-80gb "
                   "(alias h100), h200, b200)",
                   name);
}
