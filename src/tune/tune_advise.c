/* tune_advise.c: when no plan fits, the smallest change that would (op_tune_advise).
 *
 * Each suggestion is computed, not guessed: the model is re-costed with the change (a TP
 * degree, an expert-parallel degree, ZeRO-1 over a data-parallel group) or the problem widened (more devices, a higher
 * limit) and tuned briefly with recomputation allowed; a change is suggested only if that tune
 * returns a plan that fits.  Static memory is checked first with a bound every plan obeys
 * (plan/problem_static.c), per device on a mixed cluster: each device's own type and limit. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/tune.h"

#define GIB 1073741824.0

/* A brief tune of pr; returns the makespan of a plan that fits, else 0 (and *peak the
 * smallest peak found, when the tune reports one). */
static double quick(const op_problem *pr, double *peak, const op_tune_advise_progress *pg,
                    const char *what) {
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.max_evals = 300;
    if (pg && pg->base) {
        o.placement = pg->base->placement;
        o.recompute = pg->base->recompute;
        o.no_offload = pg->base->no_offload;
        o.seed = pg->base->seed;
    }
    if (pg && pg->deadline > 0) {
        double now = op_now_s();
        if (now >= pg->deadline) return 0;
        o.started_s = now;
        o.time_budget_s = pg->deadline - now;
    }
    if (pg && pg->trying) pg->trying(pg->ctx, what);
    op_plan p;
    op_err e = {0};
    if (op_tune(pr, &o, &p, &e) != OP_OK) return 0;
    double mk = p.pred.makespan_ms;
    if (peak) *peak = (double)p.pred.peak_bytes_max;
    op_plan_free(&p);
    return mk;
}

/* f scaled by what the change does to the layer on the reference device: new / old there. */
static double rescale(double f, double on_new, double on_old) {
    return on_old > 0 ? f * on_new / on_old : f;
}

/* q = pr with m re-costed under tt.  rows (freed by the caller) holds one row per device type:
 * each type's analytic costs on its own preset; a measured layer keeps its time on that type
 * (measured or scaled, as the problem had it) times what the change does to it on d (the
 * device t0's costs came from).  0 when a type's preset is unknown or costing fails. */
static int recost(const op_model *m, const op_train_cfg *t0, const op_train_cfg *tt,
                  const op_device *d, const op_problem *pr, op_problem *q, op_layer_cost **rows) {
    const int L = m->n_layers, T = pr->n_types > 1 ? pr->n_types : 1;
    op_layer_cost *r = op_xcalloc((size_t)T * (size_t)L + 2 * (size_t)L, sizeof *r);
    op_layer_cost *old_d = r + (size_t)T * L, *new_d = old_d + L;
    op_err e = {0};
    int ok = L == pr->n_layers && op_cost_layers(m, tt, d, r, &e) == OP_OK;
    if (ok && T > 1) {
        ok = op_cost_layers(m, t0, d, old_d, &e) == OP_OK && op_cost_layers(m, tt, d, new_d, &e) == OP_OK;
        for (int t = 0; t < T && ok; t++) {
            op_device dt;
            op_layer_cost *row = r + (size_t)t * L;
            const op_layer_cost *was = pr->type_layers + (size_t)t * L;
            ok = pr->type_name && op_device_preset(pr->type_name[t], &dt, &e) == OP_OK &&
                 op_cost_layers(m, tt, &dt, row, &e) == OP_OK;
            for (int l = 0; l < L && ok; l++) {
                if (!m->layers[l].has_measured) continue;
                row[l].f_ms = rescale(was[l].f_ms, new_d[l].f_ms, old_d[l].f_ms);
                row[l].i_ms = rescale(was[l].i_ms, new_d[l].i_ms, old_d[l].i_ms);
                row[l].w_ms = rescale(was[l].w_ms, new_d[l].w_ms, old_d[l].w_ms);
                row[l].f_sel_ms = rescale(was[l].f_sel_ms, new_d[l].f_sel_ms, old_d[l].f_sel_ms);
            }
        }
    }
    *q = *pr;
    q->layers = r;
    q->n_layers = L;
    if (T > 1) q->type_layers = r;
    *rows = r;
    return ok;
}

/* quick() of q at a limit of gib on every device, announced as that flag. */
static double at_limit(op_problem *q, double gib, const op_tune_advise_progress *pg) {
    char what[48];
    snprintf(what, sizeof what, "--mem-limit %.2f", gib);
    q->mem_limit_bytes = gib * GIB;
    return quick(q, NULL, pg, what);
}

/* Re-costs m under tt and tunes; makespan if a plan fits, else 0. */
static double with_cfg(const op_model *m, const op_train_cfg *t0, const op_train_cfg *tt,
                       const op_device *d, const op_problem *pr, const op_tune_advise_progress *pg,
                       const char *what) {
    op_problem q;
    op_layer_cost *rows;
    double mk = 0;
    if (recost(m, t0, tt, d, pr, &q, &rows) && op_problem_static_need(&q, NULL) <= 1)
        mk = quick(&q, NULL, pg, what);
    free(rows);
    return mk;
}

/* pr on P2 >= P devices: the added ones are copies of device `like` (type, limit, host link);
 * measured per-pair links end at the old devices, so the extended problem takes the
 * intra/inter model.  *dt, *lim and *host (freed by the caller) hold the new per-device arrays. */
static op_problem widen(const op_problem *pr, int P2, int like, int **dt, double **lim, double **host) {
    op_problem q = *pr;
    q.P = P2;
    *dt = NULL, *lim = NULL, *host = NULL;
    if (pr->comm.host_n > 0) {
        *host = op_xcalloc((size_t)P2, sizeof **host);
        for (int d = 0; d < P2; d++) (*host)[d] = op_comm_host_bw(&pr->comm, d < pr->P ? d : like);
        q.comm.host_n = P2;
        q.comm.host_bw_dev_GBps = *host;
    }
    if (pr->n_types > 1 && pr->dev_type) {
        *dt = op_xcalloc((size_t)P2, sizeof **dt);
        for (int d = 0; d < P2; d++) (*dt)[d] = pr->dev_type[d < pr->P ? d : like];
        q.dev_type = *dt;
    }
    if (pr->dev_mem_limit) {
        *lim = op_xcalloc((size_t)P2, sizeof **lim);
        for (int d = 0; d < P2; d++) (*lim)[d] = pr->dev_mem_limit[d < pr->P ? d : like];
        q.dev_mem_limit = *lim;
    }
    if (q.comm.pair_n > 0) q.comm.pair_n = 0, q.comm.pair_lat_ms = q.comm.pair_bw_GBps = NULL;
    return q;
}

/* Name of device d's type for messages. */
static const char *type_of(const op_problem *pr, int d) {
    if (pr->n_types <= 1 || !pr->dev_type || !pr->type_name) return "";
    return pr->type_name[pr->dev_type[d]];
}

/* Static memory: one line when it alone cannot fit; on a mixed cluster, one line per group
 * of consecutive devices that cannot hold their even share or the heaviest layer, so the user
 * sees that the others must take it (not an error: a plan may still fit). */
static void say_static(const op_problem *pr, char *buf, size_t n, size_t *k, int *count) {
#define SAY(...)                                                                                   \
    do {                                                                                           \
        if (*k < n) *k += (size_t)snprintf(buf + *k, n - *k, __VA_ARGS__);                         \
        (*count)++;                                                                                \
    } while (0)
    const int mixed = pr->n_types > 1 || pr->dev_mem_limit;
    double lim = pr->mem_limit_bytes;
    if (!mixed) {
        double sf = op_problem_static_floor(pr->layers, pr->n_layers, pr->P);
        char lt[32];
        if (sf > lim)
            SAY("static memory (weights, gradients, optimizer state) alone needs at least %.2f GiB "
                "on some device of %d, over the %s GiB limit: no recomputation or schedule helps\n",
                sf / GIB, pr->P, op_gib_text(lim, lt, sizeof lt));
        return;
    }
    int wl = -1;
    double need = op_problem_static_need(pr, &wl);
    double tot = 0, sum_lim = 0, max_lim = 0, mx = 0;
    int heavy = 0;
    for (int l = 0; l < pr->n_layers; l++) {
        double s = INFINITY;
        for (int d = 0; d < pr->P; d++) s = fmin(s, (double)op_problem_dev_layers(pr, d)[l].static_bytes);
        tot += s;
        if (s > mx) mx = s, heavy = l;
    }
    for (int d = 0; d < pr->P; d++) {
        double x = op_problem_dev_mem_limit(pr, d);
        sum_lim += x;
        max_lim = fmax(max_lim, x);
    }
    if (need > 1 && wl >= 0) {
        SAY("layer %d (%s) alone needs %.2f GiB of static memory (weights, gradients, optimizer "
            "state), more than any device's limit (at most %.2f GiB): no recomputation or schedule "
            "helps\n", wl, pr->layers[wl].name, mx / GIB, max_lim / GIB);
        return;
    }
    if (need > 1) {
        SAY("static memory (weights, gradients, optimizer state) alone needs at least %.2f GiB, "
            "over the %.2f GiB the %d devices' limits add up to: no recomputation or schedule "
            "helps\n", tot / GIB, sum_lim / GIB, pr->P);
        return;
    }
    /* groups of consecutive devices of one type and limit */
    for (int a = 0, b; a < pr->P; a = b) {
        double la = op_problem_dev_mem_limit(pr, a);
        for (b = a + 1; b < pr->P && op_problem_dev_mem_limit(pr, b) == la &&
                        !strcmp(type_of(pr, b), type_of(pr, a));
             b++) {
        }
        if (!(la > 0)) continue; /* no limit: holds anything */
        double hs = (double)op_problem_dev_layers(pr, a)[heavy].static_bytes;
        char who[96], range[32];
        if (b - a > 1) snprintf(range, sizeof range, "devices %d-%d", a, b - 1);
        else snprintf(range, sizeof range, "device %d", a);
        snprintf(who, sizeof who, "%s (%s%slimit %.2f GiB)", range, type_of(pr, a),
                 *type_of(pr, a) ? ", " : "", la / GIB);
        if (hs > la)
            SAY("%s cannot hold layer %d (%s, %.2f GiB of static memory) alone: the devices with "
                "more memory must take it\n", who, heavy, pr->layers[heavy].name, hs / GIB);
        else if (tot / pr->P > la)
            SAY("%s %s less than an even share of static memory (%.2f of %.2f GiB): the devices "
                "with more memory must take more layers\n", who, b - a > 1 ? "hold" : "holds",
                la / GIB, tot / pr->P / GIB);
    }
#undef SAY
}

int op_tune_advise(const op_model *m, const op_train_cfg *t, const op_device *d,
                   const op_problem *pr, char *buf, size_t n) {
    return op_tune_advise_with(m, t, d, pr, buf, n, NULL);
}

/* One kind of change, searched on a thread of its own (op_tune_advise_with): its suggestion
 * lines, and what it searched without a fit (said after them, not counted). */
typedef struct adv_job {
    const op_model *m;
    const op_train_cfg *t;
    const op_device *d;
    const op_problem *pr;
    const op_tune_advise_progress *pg;
    void (*run)(struct adv_job *j);
    char say[1024];
    size_t k;
    int count;
    char none[128];
} adv_job;

#define SAY(...)                                                                                   \
    do {                                                                                           \
        if (j->k < sizeof j->say)                                                                  \
            j->k += (size_t)snprintf(j->say + j->k, sizeof j->say - j->k, __VA_ARGS__);            \
        j->count++;                                                                                \
    } while (0)
#define NONE(...) snprintf(j->none, sizeof j->none, __VA_ARGS__)

/* A TP degree: the smallest that fits, up to 8 (TP stays inside a node of 8). */
static void job_tp(adv_job *j) {
    const op_train_cfg *t = j->t;
    char what[96];
    for (int tp = t->tp * 2; tp <= 8; tp *= 2) {
        op_train_cfg tt = *t;
        tt.tp = tp;
        snprintf(what, sizeof what, "--tp %d", tp);
        double mk = with_cfg(j->m, t, &tt, j->d, j->pr, j->pg, what);
        if (mk > 0) {
            SAY("--tp %d: a plan fits (%.1f ms per iteration; each pipeline rank becomes %d GPUs)\n",
                tp, mk, tp);
            return;
        }
    }
    if (t->tp * 2 == 8) NONE("--tp 8");
    else if (t->tp * 2 < 8) NONE("--tp %d to 8", t->tp * 2);
}

/* ZeRO-1 over the data-parallel group (of 2 when none was given, or of the EP degree). */
static void job_zero1(adv_job *j) {
    const op_train_cfg *t = j->t;
    op_train_cfg tt = *t;
    tt.dp = t->dp > 1 ? t->dp : t->ep > 2 ? t->ep : 2;
    tt.zero1 = 1;
    char what[96];
    snprintf(what, sizeof what, "--dp %d --zero1", tt.dp);
    double mk = with_cfg(j->m, t, &tt, j->d, j->pr, j->pg, what);
    if (mk > 0)
        SAY("--dp %d --zero1: optimizer state sharded over the data-parallel group, a plan "
            "fits (%.1f ms)\n", tt.dp, mk);
    else NONE("--dp %d --zero1", tt.dp);
}

/* The next expert-parallel degree e (doubling, each dividing every MoE layer's experts, up to
 * the 8 GPUs of a node, where the all-to-all is priced) that fits; the data-parallel degree
 * grows to a multiple of e where it is not one (the EP ranks are DP ranks). */
static int next_ep(const op_model *m, int ep) {
    int g = op_model_expert_gcd(m), e = (ep > 1 ? ep : 1) * 2;
    return g > 0 && e <= 8 && g % e == 0 ? e : 0;
}

static void job_ep(adv_job *j) {
    const op_train_cfg *t = j->t;
    char what[96];
    int first = 0, last = 0;
    for (int e = next_ep(j->m, t->ep); e; e = next_ep(j->m, e)) {
        op_train_cfg tt = *t;
        int dp = t->dp > 1 ? t->dp : 1;
        tt.ep = e;
        for (tt.dp = dp; tt.dp % e; tt.dp += dp) { /* the least multiple of dp that e divides */
        }
        if (tt.dp == dp) snprintf(what, sizeof what, "--ep %d", e);
        else snprintf(what, sizeof what, "--ep %d --dp %d", e, tt.dp);
        if (!first) first = e;
        last = e;
        double mk = with_cfg(j->m, t, &tt, j->d, j->pr, j->pg, what);
        if (mk > 0) {
            SAY("%s: each MoE layer's routed experts split over %d data-parallel ranks, a plan "
                "fits (%.1f ms)\n", what, e, mk);
            return;
        }
    }
    if (first == last) NONE("--ep %d", first);
    else NONE("--ep %d to %d", first, last);
}

/* More devices; on a mixed cluster copies of the device with the most memory (the first such),
 * appended after the others. */
static void job_devices(adv_job *j) {
    const op_problem *pr = j->pr;
    int like = 0;
    for (int dd = 1; dd < pr->P; dd++)
        if (op_problem_dev_mem_limit(pr, dd) > op_problem_dev_mem_limit(pr, like)) like = dd;
    const int mixed = pr->n_types > 1 || pr->dev_mem_limit;
    int p_first = 0, p_last = 0;
    char what[96];
    for (int P2 = pr->P + (pr->P + 1) / 2; P2 <= 4 * pr->P; P2 += (pr->P + 1) / 2) {
        if (P2 > pr->n_layers) break;
        if (!p_first) p_first = P2;
        p_last = P2;
        int *dt;
        double *lim, *host, mk = 0;
        op_problem q = widen(pr, P2, like, &dt, &lim, &host);
        snprintf(what, sizeof what, "%d devices", P2);
        if (op_problem_static_need(&q, NULL) <= 1) mk = quick(&q, NULL, j->pg, what);
        free(dt);
        free(lim);
        free(host);
        if (mk > 0 && !mixed) SAY("--devices %d: a plan fits (%.1f ms)\n", P2, mk);
        else if (mk > 0)
            SAY("%d more device%s like device %d (%s, limit %.2f GiB), %d in all: a plan fits (%.1f ms)\n",
                P2 - pr->P, P2 - pr->P > 1 ? "s" : "", like, type_of(pr, like),
                op_problem_dev_mem_limit(pr, like) / GIB, P2, mk);
        if (mk > 0) return;
    }
    if (!p_first) return;
    if (mixed) NONE("up to %d more devices like device %d", p_last - pr->P, like);
    else if (p_first == p_last) NONE("--devices %d", p_first);
    else NONE("--devices %d to %d", p_first, p_last);
}

/* The lowest limit, the same on every device, on a ladder from the static floor up (x1.1 a
 * step) at which a plan with recomputation fits; capped by the peak of the best plan without
 * any limit.  The first three rungs in turn (where the answer usually is), the rest bisected
 * (more memory never makes a plan stop fitting): a scan took one tune per rung, 73 of them
 * (98 s) on llama2-7b at --seq 16777216 */
static void job_limit(adv_job *j) {
    const op_problem *pr = j->pr;
    const op_tune_advise_progress *pg = j->pg;
    const double sf = op_problem_static_floor_any(pr); /* one limit for all: the least it can be */
    op_problem q = *pr;
    q.mem_limit_bytes = 0;
    q.dev_mem_limit = NULL;
    /* a limit above what the GPU has is no advice: where static memory alone needs more than
     * the device's memory, no rung is tried (DeepSeek-V3 at tp 1 on 32 H100s was told
     * "--mem-limit 414.18" after minutes of searching).  The limit is one for every device,
     * so on a mixed cluster the caller's d carries the smallest device's memory (12 GiB
     * A100s next to 40 GiB H100s were told "--mem-limit 32.63") */
    const double cap = j->d && j->d->mem_GiB > 0 ? j->d->mem_GiB : INFINITY;
    /* at least 0.01 GiB: without static memory (a profile that lists only activations) the
     * ladder started at 0, whose rungs never grew, and 0 (no limit) was suggested as
     * "--mem-limit 0.00", a value the flag refuses */
    const double g0 = fmax(ceil(sf * 1.05 / GIB * 100) / 100, 0.01);
    double peak = 0, mk = g0 <= cap ? quick(&q, &peak, pg, "no memory limit") : 0;
    enum { RUNGS = 512 };
    double rung[RUNGS];
    int nr = 0;
    /* The caller found no plan within pr's limits, so a rung no higher than every device's
     * limit (one limit that is tighter everywhere) is no advice and costs a tune each: on
     * gemma2-9b at --seq 131072 on two H200s (118.18 GiB) five rungs from 37.26 to 106.39 GiB
     * were tried before the one above the limit.  The ladder keeps its rungs; those are
     * skipped. */
    double lim_now = INFINITY;
    for (int dd = 0; dd < pr->P; dd++) {
        double x = op_problem_dev_mem_limit(pr, dd);
        lim_now = fmin(lim_now, x > 0 ? x : INFINITY);
    }
    for (double g = g0; mk > 0 && g * GIB < peak && g <= cap && nr < RUNGS; g = ceil(g * 110) / 100)
        if (!(g * GIB <= lim_now)) rung[nr++] = g;
    int lo = 0, hi = nr, best = -1;
    double best_mk = 0;
    for (; lo < 3 && lo < nr && best < 0; lo++)
        if ((best_mk = at_limit(&q, rung[lo], pg)) > 0) best = lo;
    if (best < 0) /* bisected to the end: the first fitting rung is in [lo, hi) */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            double m2 = at_limit(&q, rung[mid], pg);
            if (m2 > 0) best = mid, best_mk = m2, hi = mid;
            else lo = mid + 1;
        }
    if (best >= 0) {
        SAY("--mem-limit %.2f: a plan fits (%.1f ms)\n", rung[best], best_mk);
        mk = 0;
    }
    if (mk > 0 && peak > 0 && peak / GIB <= cap)
        SAY("--mem-limit %.2f: the best plan found without a limit peaks there (%.1f ms)\n",
            ceil(peak / GIB * 100) / 100, mk);
    else if (best < 0 && nr > 0)
        NONE("--mem-limit %.2f to %.2f", rung[0], rung[nr - 1]);
}
#undef SAY
#undef NONE

static void *job_main(void *arg) {
    adv_job *j = arg;
    j->run(j);
    return NULL;
}

/* The caller's pg->trying, one call at a time: the kinds of change announce their searches from
 * their own threads, and a caller's callback need not be thread-safe. */
typedef struct {
    const op_tune_advise_progress *pg;
    pthread_mutex_t mu;
} adv_say;

static void say_trying(void *ctx, const char *what) {
    adv_say *a = ctx;
    pthread_mutex_lock(&a->mu);
    a->pg->trying(a->pg->ctx, what);
    pthread_mutex_unlock(&a->mu);
}

int op_tune_advise_with(const op_model *m, const op_train_cfg *t, const op_device *d,
                        const op_problem *pr, char *buf, size_t n, const op_tune_advise_progress *pg) {
    size_t k = 0;
    int count = 0;
    buf[0] = 0;
    if (pr->mem_limit_bytes <= 0 && !pr->dev_mem_limit) return 0;
    say_static(pr, buf, n, &k, &count);
    /* The kinds of change are independent searches: each runs on a thread of its own (each
     * search is deterministic, and the lines are put together in this order afterwards, so
     * the answer is the one a single thread gives, in the time of the longest kind where the
     * cores allow: Nemotron-H 8B at 5 devices, 232 microbatches and 30 GiB spent 5, 7 and 8 s
     * on --zero1, more devices and the limit one after another).  A thread that cannot start
     * runs its kind here. */
    adv_say said = {.pg = pg, .mu = PTHREAD_MUTEX_INITIALIZER};
    op_tune_advise_progress pg_locked;
    if (pg && pg->trying) {
        pg_locked = *pg;
        pg_locked.trying = say_trying;
        pg_locked.ctx = &said;
        pg = &pg_locked;
    }
    enum { NJ = 5 };
    adv_job *jobs = op_xcalloc(NJ, sizeof *jobs);
    void (*const run[NJ])(adv_job *) = {job_tp, job_ep, job_zero1, job_devices, job_limit};
    const int want[NJ] = {m && t && d && t->tp * 2 <= 8, m && t && d && next_ep(m, t->ep),
                          m && t && d && !t->zero1, 1, 1};
    pthread_t th[NJ];
    int started[NJ] = {0};
    for (int i = 0; i < NJ; i++) {
        jobs[i] = (adv_job){.m = m, .t = t, .d = d, .pr = pr, .pg = pg, .run = run[i]};
        if (want[i]) started[i] = pthread_create(&th[i], NULL, job_main, &jobs[i]) == 0;
    }
    for (int i = 0; i < NJ; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else if (want[i]) jobs[i].run(&jobs[i]);
    }
    /* what was searched and did not fit, said after the suggestions (not counted): "what
     * would fit: --tp 8" alone left a user asking whether 16 devices would */
    char none[512] = "";
    size_t nk = 0;
    for (int i = 0; i < NJ; i++) {
        if (k < n) k += (size_t)snprintf(buf + k, n - k, "%s", jobs[i].say);
        count += jobs[i].count;
        if (jobs[i].none[0] && nk < sizeof none)
            nk += (size_t)snprintf(none + nk, sizeof none - nk, "%s%s", nk ? ", " : "", jobs[i].none);
    }
    free(jobs);
    /* a search the caller's time budget cut proves nothing: then the caller says so instead */
    const int cut = pg && pg->deadline > 0 && op_now_s() >= pg->deadline;
    if (nk && !cut && k < n) k += (size_t)snprintf(buf + k, n - k, "no plan fits with: %s\n", none);
    return count;
}
