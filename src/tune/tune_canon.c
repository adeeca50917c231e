/* tune_canon.c: op_tune, the tuner's entry: a mixed cluster is tuned in one canonical device
 * order, so the plan does not depend on how the user listed the devices.
 *
 * Why: a cluster's devices can be listed in many orders that describe the same machine: the
 * devices inside a node are interchangeable (one NVLink domain), and so are whole nodes of the
 * same size (one fabric between them).  The search is not blind to the order (its seeds place
 * stages by rank, its first type is row 0 of the costs), and before this file it gave plans up
 * to 10% apart for one machine: Jamba on two nodes, 8 H100 + 8 A100, M=32, 2729.5 ms listed
 * `h100-80gb:8,a100-80gb:8` and 2990.3 ms listed `a100-80gb:8,h100-80gb:8`; gemma2-9b on one
 * node, 1604.6 ms as `h100-80gb:4,a100-80gb:4` and 1672.4 as `h100-80gb:2,a100-80gb:4,h100-80gb:2`.
 *
 * So (tune_mem.c's tn_tune_mem does the work):
 *   1. the canonical order: inside each node, the fastest device first (the type whose layers
 *      take least time in all, then more memory, then the faster host link, then the type's
 *      name); whole nodes of the full size ordered the same way by their sorted devices (a
 *      shorter last node stays last); types renumbered by first appearance, so row 0 is the
 *      first canonical device's type, as for a cluster listed that way;
 *   2. the search runs on the problem relabelled to that order, and its plan is relabelled
 *      back (stage placement and per-device orders) and re-simulated on the problem as given:
 *      the same makespan, on the user's device numbers;
 *   3. the classic schedules are built on the order as given (what a user's Megatron run
 *      places by rank) and stay the bar: a faster one that fits is returned instead.
 * Only where it is a true symmetry: free placement (--placement loop|v fix stage s to rank
 * s % P), no per-pair link matrix (measured links tie devices to their numbers). */
#include <stdlib.h>
#include <string.h>

#include "octopipe/sim.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"

/* The canonical order's sort key of one device. */
typedef struct {
    double work;  /* the type's total per-microbatch time over all layers (smaller: faster) */
    double lim;   /* memory limit (larger first; 0 = none counts as largest) */
    double host;  /* host link GB/s (larger first) */
    const char *name;
    int type;
} dev_key;

static int key_cmp(const dev_key *a, const dev_key *b) {
    if (a->work != b->work) return a->work < b->work ? -1 : 1;
    double la = a->lim > 0 ? a->lim : 1e300, lb = b->lim > 0 ? b->lim : 1e300;
    if (la != lb) return la > lb ? -1 : 1;
    if (a->host != b->host) return a->host > b->host ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c) return c;
    return a->type - b->type;
}

/* qsort context: the keys of every device (qsort_r is not C11); per thread, as the rest of a
 * tune's state (tune_progress.c): op_tune may run on several threads at once */
static _Thread_local const dev_key *g_keys;
static int dev_cmp(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    int c = key_cmp(&g_keys[a], &g_keys[b]);
    return c ? c : a - b;
}

/* Nodes compared by their (already sorted) devices' keys; n devices each. */
static _Thread_local int g_node_n;
static _Thread_local const int *g_order;
static int node_cmp(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    for (int i = 0; i < g_node_n; i++) {
        int c = key_cmp(&g_keys[g_order[a * g_node_n + i]], &g_keys[g_order[b * g_node_n + i]]);
        if (c) return c;
    }
    return a - b;
}

/* perm[c] = the device (as given) at canonical position c.  Returns 1 when the problem has a
 * canonical order other than its own, 0 when it is already canonical or has none. */
static int canon_perm(const op_problem *pr, const op_tune_opts *o, int *perm) {
    const int P = pr->P;
    if (pr->n_types <= 1 || !pr->dev_type || pr->comm.pair_n > 0) return 0;
    if (o && o->placement != OP_TUNE_PLACE_ANY) return 0;
    dev_key *k = op_xcalloc((size_t)P, sizeof *k);
    for (int d = 0; d < P; d++) {
        int t = pr->dev_type[d];
        const op_layer_cost *row = pr->type_layers + (size_t)t * (size_t)pr->n_layers;
        for (int l = 0; l < pr->n_layers; l++) k[d].work += row[l].f_ms + row[l].i_ms + row[l].w_ms;
        k[d].lim = op_problem_dev_mem_limit(pr, d);
        k[d].host = op_comm_host_bw(&pr->comm, d);
        k[d].name = pr->type_name ? pr->type_name[t] : "";
        k[d].type = t;
    }
    /* nodes: free links make the cluster one node */
    int N = pr->comm.none || pr->comm.nodes_of <= 0 || pr->comm.nodes_of >= P ? P : pr->comm.nodes_of;
    int nfull = P / N;
    int *order = op_xmalloc(sizeof(int) * (size_t)P), *node = op_xmalloc(sizeof(int) * (size_t)(nfull + 1));
    for (int d = 0; d < P; d++) order[d] = d;
    g_keys = k;
    for (int b = 0; b < P; b += N) qsort(order + b, (size_t)(P - b < N ? P - b : N), sizeof(int), dev_cmp);
    for (int i = 0; i < nfull; i++) node[i] = i;
    g_node_n = N;
    g_order = order;
    qsort(node, (size_t)nfull, sizeof(int), node_cmp);
    int c = 0;
    for (int i = 0; i < nfull; i++)
        for (int j = 0; j < N; j++) perm[c++] = order[node[i] * N + j];
    for (; c < P; c++) perm[c] = order[c]; /* the shorter last node */
    g_keys = NULL;
    g_order = NULL;
    free(order);
    free(node);
    free(k);
    int moved = 0;
    for (int d = 0; d < P; d++) moved |= perm[d] != d;
    return moved;
}

/* The problem relabelled: canonical device c is device perm[c] as given; types renumbered by
 * first appearance.  Storage: one block the caller frees (*mem). */
static void canon_problem(const op_problem *pr, const int *perm, op_problem *q, void **mem) {
    const int P = pr->P, T = pr->n_types, L = pr->n_layers;
    size_t need = sizeof(int) * (size_t)(P + 2 * T) + sizeof(double) * (size_t)(2 * P) +
                  sizeof(op_layer_cost) * (size_t)T * (size_t)L + (size_t)32 * (size_t)T;
    char *b = op_xcalloc(1, need);
    *mem = b;
    op_layer_cost *tl = (op_layer_cost *)b;
    double *lim = (double *)(tl + (size_t)T * (size_t)L);
    double *host = lim + P;
    int *dt = (int *)(host + P), *newt = dt + P, *oldt = newt + T;
    char(*names)[32] = (char(*)[32])(oldt + T);
    for (int t = 0; t < T; t++) newt[t] = -1;
    int nt = 0;
    for (int c = 0; c < P; c++) {
        int t = pr->dev_type[perm[c]];
        if (newt[t] < 0) oldt[nt] = t, newt[t] = nt++;
        dt[c] = newt[t];
        lim[c] = pr->dev_mem_limit ? pr->dev_mem_limit[perm[c]] : 0;
        host[c] = op_comm_host_bw(&pr->comm, perm[c]);
    }
    for (int t = nt; t < T; t++) /* types no device has keep their relative order */
        for (int u = 0; u < T; u++)
            if (newt[u] < 0) { oldt[t] = u, newt[u] = t; break; }
    for (int t = 0; t < T; t++) {
        memcpy(tl + (size_t)t * (size_t)L, pr->type_layers + (size_t)oldt[t] * (size_t)L,
               sizeof(op_layer_cost) * (size_t)L);
        if (pr->type_name) memcpy(names[t], pr->type_name[oldt[t]], 32);
    }
    *q = *pr;
    q->layers = tl; /* row 0: the first canonical device's type */
    q->type_layers = tl;
    q->dev_type = dt;
    q->type_name = pr->type_name ? (const char(*)[32])names : NULL;
    q->dev_mem_limit = pr->dev_mem_limit ? lim : NULL;
    if (pr->comm.host_n > 0) {
        q->comm.host_n = P;
        q->comm.host_bw_dev_GBps = host;
    }
}

/* c (a plan of the canonical problem) on pr's own devices, re-simulated, into *out. */
static int relabel(const op_problem *pr, const int *perm, const op_plan *c, op_plan *out,
                   op_err *err) {
    op_plan_init_problem(out, c->name, pr, c->S);
    out->mem_limit_bytes = c->mem_limit_bytes;
    memcpy(out->stage_first, c->stage_first, sizeof(int) * (size_t)(c->S + 1));
    memcpy(out->stage_split, c->stage_split, (size_t)c->S);
    memcpy(out->stage_act, c->stage_act, (size_t)c->S);
    for (int s = 0; s < c->S; s++) out->stage_dev[s] = perm[c->stage_dev[s]];
    for (int d = 0; d < c->P; d++) op_plan_set_ops(out, perm[d], c->ops[d], c->n_ops[d]);
    int rc = op_sim_replay(out, NULL, err);
    if (rc != OP_OK) op_plan_free(out);
    return rc;
}

static int tune_run(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err);

/* --effort N: the run at the default budget first, then one at N times it, and the faster plan
 * of the two.  Why both: a longer search is not a superset of a shorter one (its restarts
 * split another budget), and the longer one alone came out slower on some problems
 * (deepseek-v2-lite P=4 M=8 at the 72 GiB limit: 477.6 ms at 10x, 468.2 at 1x), while where
 * the landscape is wide it pays (nemotron-h-8b on 8 H100 + 8 A100, M=32: 1317.2 ms at 30x,
 * 1364.9 at 1x).  So an effort never gives a slower plan than effort 1, and stays
 * deterministic; two efforts above 1 are two long searches, either may win. */
static int tune_effort(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err) {
    int rc = op_tune_check(pr, o, err); /* the effort itself too: the runs below use 1 and N */
    if (rc != OP_OK) return rc;
    op_tune_opts o1 = *o;
    o1.effort = 1;
    op_tune_stats st1;
    memset(&st1, 0, sizeof st1);
    o1.stats = &st1;
    if (o1.started_s <= 0) o1.started_s = op_now_s(); /* one time budget over both runs */
    rc = tune_run(pr, &o1, out, err);
    if (rc != OP_OK || tn_stopped(&o1)) { /* Ctrl-C or the time budget: that plan */
        if (o->stats) *o->stats = st1;
        return rc;
    }
    op_tune_opts on = o1;
    on.effort = o->effort;
    op_tune_stats stn;
    memset(&stn, 0, sizeof stn);
    on.stats = &stn;
    op_plan pn;
    op_err en = {0};
    int rcn = tune_run(pr, &on, &pn, &en); /* an error (the time budget) leaves the first */
    int better = rcn == OP_OK && op_plan_fits(&pn) && pn.pred.makespan_ms < out->pred.makespan_ms;
    if (better) {
        op_plan_free(out);
        *out = pn;
    } else if (rcn == OP_OK) {
        op_plan_free(&pn);
    }
    op_tune_stats *keep = better ? &stn : &st1;
    keep->evals = st1.evals + stn.evals;
    keep->seconds = st1.seconds + stn.seconds;
    if (o->stats) *o->stats = *keep;
    return OP_OK;
}

int op_tune(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err) {
    tn_run run; /* one progress line a second over all the searches below */
    tn_run_begin(&run, pr, o, op_now_s());
    int rc = o && o->effort > 1 ? tune_effort(pr, o, out, err) : tune_run(pr, o, out, err);
    tn_run_end(&run);
    return rc;
}

static int tune_run(const op_problem *pr, const op_tune_opts *o, op_plan *out, op_err *err) {
    /* the problem and the options, before the static check: a bad input is exit 2 at once, not
     * "no plan fits" and a search for what would (whose every search it refuses) */
    int rc = op_tune_check(pr, o, err);
    if (rc != OP_OK) return rc;
    /* Static memory that no plan can fit (problem_static.c's bound) ends here: the search would
     * only confirm it, and on a large model it took minutes (DeepSeek-V3 at tp 1 on 32
     * devices: 9.6 min of "no plan fits yet" before the same answer). */
    if (op_problem_static_need(pr, NULL) > 1) {
        char lim_text[96];
        op_problem_limit_text(pr, lim_text, sizeof lim_text);
        return op_errf(err, OP_ENOMEM,
                       "no plan fits %s: static memory (weights, gradients, optimizer state) alone "
                       "does not, whatever the schedule, recomputation or offload",
                       lim_text);
    }
    const double t0 = op_now_s();
    int *perm = op_xmalloc(sizeof(int) * (size_t)pr->P);
    if (!canon_perm(pr, o, perm)) {
        free(perm);
        return tn_tune_mem(pr, o, out, err);
    }
    op_problem q;
    void *mem;
    canon_problem(pr, perm, &q, &mem);
    op_tune_opts oo;
    if (o) oo = *o;
    else op_tune_opts_default(&oo);
    if (oo.started_s <= 0) oo.started_s = t0;
    op_tune_stats st;
    memset(&st, 0, sizeof st);
    oo.stats = &st;
    op_plan c;
    rc = tn_tune_mem(&q, &oo, &c, err);
    if (rc == OP_OK) {
        rc = relabel(pr, perm, &c, out, err);
        op_plan_free(&c);
    }
    free(mem);
    free(perm);
    if (rc != OP_OK) return rc;
    if (!oo.no_baselines) { /* step 3: the classic schedules on the ranks as given */
        int have = 1;
        char was[sizeof st.source];
        snprintf(was, sizeof was, "%s", st.source);
        tn_baseline_bar(pr, &oo, out, &have, &st);
        if (strcmp(was, st.source) && strcmp(st.policies, "not modelled")) tn_describe(out, &st);
    }
    st.seconds = op_now_s() - t0;
    if (o && o->stats) *o->stats = st;
    return OP_OK;
}
