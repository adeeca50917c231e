/* dev_types.c: the GPU type of each device of a mixed plan, as the exports name it (SVG row
 * labels, Chrome trace rows, torch stage map, Megatron notes).  A uniform plan names none:
 * its exports stay exactly what they were. */
#include <string.h>

#include "octopipe/export.h"

const char *op_export_dev_type(const op_plan *p, int d) {
    if (p->n_types <= 1 || !p->type_name || !p->dev_type || d < 0 || d >= p->P) return NULL;
    int t = p->dev_type[d];
    if (t < 0 || t >= p->n_types || !p->type_name[t][0]) return NULL;
    return p->type_name[t];
}

int op_export_type_counts(const op_plan *p, op_buf *out) {
    if (!op_export_dev_type(p, 0)) return 0;
    int n = 0;
    for (int d = 0; d < p->P; d++) { /* types in order of first appearance */
        const char *t = op_export_dev_type(p, d);
        int first = 1, cnt = 0;
        for (int e = 0; e < p->P; e++) {
            const char *u = op_export_dev_type(p, e);
            int same = (t && u && !strcmp(t, u)) || (!t && !u);
            if (same && e < d) first = 0;
            cnt += same;
        }
        if (!first) continue;
        op_buf_printf(out, "%s%d %s", n++ ? " + " : "", cnt, t ? t : "unnamed");
    }
    return n;
}
