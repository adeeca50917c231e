/* presets.c: built-in models, embedded as text (presets_data.c, generated from the real
 * configs in data/hf-configs by scripts/gen_presets.sh) and parsed on demand. */
#include <pthread.h>
#include <string.h>

#include "model/model_internal.h"

#define MAX_PRESETS 64

/* Filled once (pthread_once): the first calls may come from several threads at once. */
static const char *names[MAX_PRESETS + 1];

static void fill_names(void) {
    int n = 0;
    for (const op_preset_src *p = op_preset_table; p->name; p++) {
        OP_ASSERT(n < MAX_PRESETS, "too many presets; raise MAX_PRESETS");
        names[n++] = p->name;
    }
}

const char *const *op_model_preset_names(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_names);
    return names;
}

static const op_preset_src *find(const char *name) {
    for (const op_preset_src *p = op_preset_table; p->name; p++)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

const char *op_model_preset_desc(const char *name) {
    const op_preset_src *p = name ? find(name) : NULL;
    return p ? p->desc : NULL;
}

int op_model_preset(const char *name, op_model *m, op_err *err) {
    const op_preset_src *p = name ? find(name) : NULL;
    if (!p) {
        op_buf b = {0};
        for (const op_preset_src *q = op_preset_table; q->name; q++)
            op_buf_printf(&b, "%s%s", q == op_preset_table ? "" : ", ", q->name);
        int rc = op_errf(err, OP_EINVAL, "unknown preset '%s' (presets: %s)", name ? name : "(null)",
                         b.data ? b.data : "");
        op_buf_free(&b);
        return rc;
    }
    return op_model_text_is_profile(p->text) ? op_model_from_profile_json(p->text, p->name, m, err)
                                             : op_model_from_hf_json(p->text, p->name, m, err);
}
