/* plan_devsweep.c: makespan against the devices (`octopipe plan --device-sweep`).
 * Users size jobs with it: tokens/s per device falls where added devices mostly wait (a layer
 * that runs whole on one device, the fill and drain of a deep pipeline), and climbs back only
 * where fewer devices had to recompute for want of memory.  On one GPU type the rows are the
 * given P, halves of it down to the fewest whose static memory fits, and the count at which the
 * lower bound stops falling (op_problem_bound_devices), each on the first k devices.  On a
 * mixed cluster they are each kind of device alone (type and limit: "8 x a100-80gb") and all of
 * them: what the slower GPUs add.  Every row is a full tune of the same job
 * (op_problem_subset). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_out.h"
#include "cli/plan_sweep.h"
#include "octopipe/sim.h"

#define GIB 1073741824.0
#define MAX_ROWS 40

typedef struct {
    char label[96]; /* "8 x a100-80gb (limit 72 GiB)": room for any type name and limit */
    int k;
    int *idx; /* [k] devices of the row, in rank order */
} row;

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void row_first(row *r, int k, const char *mark) {
    snprintf(r->label, sizeof r->label, "%d%s", k, mark);
    r->k = k;
    r->idx = op_xmalloc(sizeof(int) * (size_t)k);
    for (int j = 0; j < k; j++) r->idx[j] = j;
}

/* One GPU type: P, its halves while static memory fits (the first that does not is noted in
 * *no_fit, a row of its own), and kb, ascending. */
static int rows_uniform(const op_problem *pr, int kb, row *rows, int *no_fit) {
    const int P = pr->P;
    int cnt[MAX_ROWS], n = 0;
    cnt[n++] = P;
    *no_fit = 0;
    for (int k = P / 2; k >= 1 && n < MAX_ROWS - 2; k /= 2) {
        if (pr->mem_limit_bytes > 0 &&
            op_problem_static_floor(pr->layers, pr->n_layers, k) > pr->mem_limit_bytes) {
            *no_fit = k;
            break;
        }
        cnt[n++] = k;
    }
    int have_kb = 0;
    for (int i = 0; i < n; i++) have_kb |= cnt[i] == kb;
    if (!have_kb && kb > *no_fit) cnt[n++] = kb;
    qsort(cnt, (size_t)n, sizeof *cnt, cmp_int);
    for (int i = 0; i < n; i++) row_first(&rows[i], cnt[i], cnt[i] == P ? "*" : cnt[i] == kb ? "=" : "");
    return n;
}

/* A mixed cluster: each kind of device (type and limit) alone, in order of its first device,
 * then all of them. */
static int rows_mixed(const op_cli_setup *s, row *rows) {
    const op_problem *pr = &s->pr;
    const int P = pr->P;
    int n = 0;
    int *seen = op_xcalloc((size_t)P, sizeof(int));
    for (int d = 0; d < P && n < MAX_ROWS - 1; d++) {
        if (seen[d]) continue;
        const int t = pr->dev_type ? pr->dev_type[d] : 0;
        const double lim = op_problem_dev_mem_limit(pr, d);
        row *r = &rows[n++];
        r->idx = op_xmalloc(sizeof(int) * (size_t)P);
        r->k = 0;
        for (int e = d; e < P; e++)
            if ((pr->dev_type ? pr->dev_type[e] : 0) == t && op_problem_dev_mem_limit(pr, e) == lim)
                seen[e] = 1, r->idx[r->k++] = e;
        char gib[32] = "";
        if (pr->dev_mem_limit) snprintf(gib, sizeof gib, " (limit %.3g GiB)", lim / GIB); /* not its memory */
        snprintf(r->label, sizeof r->label, "%d x %s%s", r->k, op_cli_dev_type(s, d) ? op_cli_dev_type(s, d) : s->dev.name, gib);
    }
    free(seen);
    row_first(&rows[n], P, "");
    snprintf(rows[n].label, sizeof rows[n].label, "all %d*", P);
    return n + 1;
}

int op_cli_device_sweep(const op_cli_setup *s, const op_tune_opts *o, FILE *f, op_plan *at_p,
                        op_tune_stats *at_p_st) {
    const op_problem *pr = &s->pr;
    const int P = pr->P, mixed = op_cli_mixed(s);
    const int kb = mixed ? P : op_problem_bound_devices(pr, 1e-3, NULL, NULL);
    row rows[MAX_ROWS];
    int no_fit = 0;
    const int n = mixed ? rows_mixed(s, rows) : rows_uniform(pr, kb, rows, &no_fit);
    int w = 8;
    for (int i = 0; i < n; i++) w = (int)strlen(rows[i].label) > w ? (int)strlen(rows[i].label) : w;
    if (mixed) w = -w; /* names: left-aligned */
    if (mixed)
        fprintf(f, "model %s on %d mixed devices, %d microbatches: makespan on each kind of device "
                   "alone and on all\n", s->model.name, P, pr->M);
    else
        fprintf(f, "model %s on up to %d x %s, %d microbatches: makespan against the number of "
                   "devices\n", s->model.name, P, s->dev.name, pr->M);
    fprintf(f, "%*s %12s %11s %10s %8s %7s %9s  %s\n", w, "devices", "makespan_ms", "tokens/s",
            "tok/s/dev", "bubble%", "gap%", "peak_GiB", "activations");
    if (no_fit)
        fprintf(f, "%*d %12s %11s %10s %8s %7s %9s  static memory does not fit (%.2f GiB on some device)\n",
                w, no_fit, "-", "-", "-", "-", "-", "-",
                op_problem_static_floor(pr->layers, pr->n_layers, no_fit) / GIB);
    /* --time-budget is the whole sweep's: each row an equal share of what is left */
    const double deadline = op_cli_sweep_deadline(o);
    int handed = 0;
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        op_problem q;
        void *own = op_problem_subset(pr, r->idx, r->k, &q);
        op_tune_stats st;
        op_tune_opts oo = op_cli_sweep_row(o, deadline, n - i, &st);
        /* a row can take a minute: the tuner's progress lines, named for the row, go to stderr
         * while the table goes to stdout (not when both would share stderr, --out -) */
        char label[96];
        snprintf(label, sizeof label, "octopipe plan --device-sweep (%.47s)", r->label);
        oo.label = label;
        oo.verbose = o->verbose && f == stdout;
        op_plan p;
        op_err e = {0};
        /* a kind of device alone, or P devices under a low limit, may not hold the model at
         * all: say so, without a search (P's row said only "no plan fits") */
        const int no_static = op_problem_static_need(&q, NULL) > 1;
        int rc = no_static ? OP_ENOMEM : op_tune(&q, &oo, &p, &e);
        free(own); /* a plan copies what it keeps */
        if (o->cancel && *o->cancel) { /* Ctrl-C: this row's search was cut short */
            if (rc == OP_OK) op_plan_free(&p);
            fprintf(f, "%*s  interrupted\n", w, r->label);
            break;
        }
        if (rc != OP_OK) {
            char why[64] = "static memory does not fit";
            if (no_static && !mixed) /* as the row above the table says it */
                snprintf(why, sizeof why, "static memory does not fit (%.2f GiB on some device)",
                         op_problem_static_floor(pr->layers, pr->n_layers, r->k) / GIB);
            fprintf(f, "%*s %12s %11s %10s %8s %7s %9s  %s\n", w, r->label, "-", "-", "-", "-", "-", "-",
                    no_static         ? why
                    : rc == OP_ETIMEOUT ? "none found within --time-budget"
                    : rc == OP_ENOMEM ? "no plan fits"
                                      : e.msg);
            fflush(f);
            continue;
        }
        const op_pred *pd = &p.pred;
        char pk[16] = "-";
        if (op_cli_mem_modelled(pr->layers, pr->n_layers))
            snprintf(pk, sizeof pk, "%.2f", (double)pd->peak_bytes_max / GIB);
        fprintf(f, "%*s %12.2f %11.0f %10.0f %8.2f %7.2f %9s  %s\n", w, r->label, pd->makespan_ms,
                pd->tokens_per_s, pd->tokens_per_s / r->k, 100 * pd->bubble_ratio,
                100 * op_gap(pd->makespan_ms, pd->lower_bound_ms), pk, st.policies);
        fflush(f);
        if (r->k == P && at_p) {
            *at_p = p;
            *at_p_st = st;
            handed = 1;
        } else {
            op_plan_free(&p);
        }
    }
    for (int j = 0; j < n; j++) free(rows[j].idx);
    fprintf(f, "* the devices `octopipe plan` tunes for and writes its plan for (--devices%s)\n",
            mixed ? ", --gpus, --cluster" : "");
    if (kb < P)
        fprintf(f, "= the fewest with the lower bound of all %d (within 0.1%%): the others cannot "
                   "lower it\n",
                P);
    return handed;
}
