/* slow_plan.c: a plan whose devices compute at given fractions of the speed it was costed
 * at: the mixed-cluster form of "rank d is k[d] times slower" (op_exec_slow_plan).  Emulation
 * and the reference model's --slowdown both predict their runs from it, so the simulator sees
 * each rank's own speed through the per-type costs every stage aggregate already follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/exec.h"

static void scale(op_layer_cost *c, double k) {
    c->f_ms *= k;
    c->i_ms *= k;
    c->w_ms *= k;
    c->f_sel_ms *= k;
}

int op_exec_slow_plan(op_plan *p, const double *k) {
    int P = p->P, L = p->n_layers, nt = 0;
    for (int d = 0; d < P; d++)
        if (!(k[d] > 0 && k[d] <= 1e6)) return OP_EINVAL;
    /* new type of device d: the distinct (old type, k) pairs in device order, at most P */
    int *old = op_xcalloc((size_t)P, sizeof(int)), *nty = op_xcalloc((size_t)P, sizeof(int));
    double *kt = op_xcalloc((size_t)P, sizeof(double));
    for (int d = 0; d < P; d++) {
        int t = 0;
        while (t < nt && !(old[t] == p->dev_type[d] && kt[t] == k[d])) t++;
        if (t == nt) old[nt] = p->dev_type[d], kt[nt] = k[d], nt++;
        nty[d] = t;
    }
    op_layer_cost *rows = op_xcalloc((size_t)nt * (size_t)L, sizeof *rows);
    char(*names)[32] = op_xcalloc((size_t)nt, 32);
    for (int t = 0; t < nt; t++) {
        const op_layer_cost *src = p->n_types > 1 ? p->type_layers + (size_t)old[t] * L : p->layers;
        memcpy(rows + (size_t)t * L, src, sizeof *rows * (size_t)L);
        for (int l = 0; l < L; l++) scale(&rows[(size_t)t * L + l], kt[t]);
        const char *base = p->type_name ? p->type_name[p->n_types > 1 ? old[t] : 0] : "";
        /* "a100-80gb" at k 1 keeps its name; otherwise "a100-80gb x2" or "x2" (no name) */
        if (kt[t] == 1 && base[0]) snprintf(names[t], 32, "%.31s", base);
        else snprintf(names[t], 32, "%.20s%sx%g", base, base[0] ? " " : "", kt[t]);
    }
    op_plan_set_types(p, nt, (const char(*)[32])names, rows, nty, p->dev_mem_limit);
    free(rows), free(names), free(old), free(nty), free(kt);
    return OP_OK;
}
