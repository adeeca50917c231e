/* pipe_calib.c: calibration on short real runs.  Several plans take turns step by step (one
 * session each), then per-kind op times are fitted to what their ops cost (pipe_fit.c) and the
 * cores' speed variation is read off their steps; a plan's expected iteration time is its
 * makespan averaged over those speeds (op_sim_speed_samples).
 *
 * Why turns: a machine's cores drift in speed for seconds at a time (docs/training.md
 * measured 10-20% on a shared VM); plans run one after the other would each see another
 * speed.  Why speed samples: a pipeline waits for whichever rank is slow at the moment, so the
 * mean makespan is above the makespan at the mean speed; on that VM by 1-7%. */
#include <stdlib.h>
#include <string.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"

int op_ptrain_run_turns(const op_nn_model *m, const op_plan *const *plans, int n,
                        const op_ptrain_opts *o, int rounds, op_ptrain_turns *out, op_err *err) {
    memset(out, 0, sizeof *out);
    if (n < 1 || rounds < 1)
        return op_errf(err, OP_EINVAL, "turns: %d plans and %d rounds (want at least one of each)", n, rounds);
    const int P = plans[0]->P;
    for (int i = 1; i < n; i++)
        if (plans[i]->P != P)
            return op_errf(err, OP_EINVAL, "plans for turns need the same devices (%d vs %d)", plans[i]->P, P);
    out->n = n, out->rounds = rounds, out->P = P;
    out->quiet = o->quiet_share > 0 ? o->quiet_share : 0.97;
    out->rep = op_xcalloc((size_t)n, sizeof *out->rep);
    out->busy = op_xcalloc((size_t)n * rounds * P, sizeof(double));
    op_ptrain_session **ss = op_xcalloc((size_t)n, sizeof *ss);
    op_ptrain_opts so = *o;
    so.steps = rounds + 1;
    so.keep_result = 1;
    so.losses = NULL;
    so.ckpt_dir = NULL, so.resume = 0;
    int rc = OP_OK;
    /* a warm-up step each: the activation pools fault in (not timed) */
    for (int i = 0; i < n && rc == OP_OK; i++) {
        rc = op_ptrain_session_new(m, plans[i], &so, &ss[i], err);
        if (rc == OP_OK) rc = op_ptrain_session_step(ss[i], err);
    }
    for (int k = 0; k < rounds && rc == OP_OK; k++)
        for (int j = 0; j < n && rc == OP_OK; j++) {
            const int i = (k + (k % 2 ? n - 1 - j : j)) % n; /* rotated, every other round reversed */
            rc = op_ptrain_session_step(ss[i], err);
            const op_exec_result *r = rc == OP_OK ? op_ptrain_session_last(ss[i]) : NULL;
            for (int d = 0; r && d < P; d++) out->busy[((size_t)i * rounds + k) * P + d] = r->busy_ms[d];
        }
    for (int i = 0; i < n; i++)
        if (ss[i]) {
            if (rc == OP_OK) op_ptrain_session_report(ss[i], &out->rep[i]);
            op_ptrain_session_free(ss[i]);
        }
    free(ss);
    if (rc) op_ptrain_turns_free(out);
    return rc;
}

void op_ptrain_turns_free(op_ptrain_turns *t) {
    if (t->rep)
        for (int i = 0; i < t->n; i++) op_ptrain_report_free(&t->rep[i]);
    free(t->rep), free(t->busy);
    memset(t, 0, sizeof *t);
}

int op_ptrain_repredict(const op_plan *src, const op_layer_cost *costs, double overhead_ms,
                        op_plan *dst, op_err *err) {
    op_plan_copy(dst, src);
    memcpy(dst->layers, costs, sizeof(op_layer_cost) * (size_t)dst->n_layers);
    dst->op_overhead_ms = overhead_ms;
    return op_sim_replay(dst, NULL, err);
}

int op_ptrain_speed_samples(const op_ptrain_turns *t, int i, const op_plan *pred, double *out) {
    double busy[64];
    if (i < 0 || i >= t->n || pred->P != t->P || t->P > 64) return 0; /* not plan i's: no samples */
    op_exec_pred_bubble(pred, busy);
    int n = 0;
    const op_ptrain_report *r = &t->rep[i];
    for (int k = 0; k < t->rounds && k + 1 < r->n_step; k++) {
        if (r->step_cpu[k + 1] < t->quiet) continue; /* step k + 1 of the session: 0 is the warm-up */
        for (int d = 0; d < t->P; d++)
            out[(size_t)n * t->P + d] = busy[d] > 0 ? t->busy[((size_t)i * t->rounds + k) * t->P + d] / busy[d] : 1;
        n++;
    }
    return n;
}

double op_ptrain_calibrate(const op_nn_model *m, const op_plan *const *plans,
                           const op_ptrain_turns *t, int skip, const op_layer_prof *prior,
                           int n_prior, op_layer_prof *fit, op_layer_cost *costs,
                           double *overhead_ms, double *speed, int *ns) {
    const op_plan **pp = op_xcalloc((size_t)t->n, sizeof *pp);
    const op_ptrain_report **rr = op_xcalloc((size_t)t->n, sizeof *rr);
    int k = 0;
    double rec = 0, call_ms = 0;
    for (int i = 0; i < t->n; i++)
        if (i != skip) pp[k] = plans[i], rr[k] = &t->rep[i], rec += t->rep[i].op_record_excess_ms, k++;
    double rms = k ? op_ptrain_fit_costs(m, pp, rr, k, prior, n_prior, 0.05, fit, &call_ms) : -1;
    if (rms >= 0 && op_ptrain_layer_costs(m, fit, n_prior, costs, NULL) != OP_OK) rms = -1;
    if (rms >= 0) {
        *overhead_ms = call_ms + (rec > 0 ? rec / k : 0);
        if (speed) {
            *ns = 0;
            for (int i = 0; i < t->n; i++) {
                if (i == skip) continue;
                op_plan q;
                if (op_ptrain_repredict(plans[i], costs, *overhead_ms, &q, NULL) == OP_OK)
                    *ns += op_ptrain_speed_samples(t, i, &q, speed + (size_t)*ns * t->P);
                op_plan_free(&q);
            }
        }
    }
    free(pp), free(rr);
    return rms;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double op_ptrain_trimmed_mean(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int lo = n / 5, hi = n - n / 5;
    double s = 0;
    for (int k = lo; k < hi; k++) s += v[k];
    return s / (hi - lo);
}

double op_ptrain_expected_ms(const op_plan *p, const double *speed, int n) {
    if (n <= 0) return p->pred.makespan_ms;
    double *mk = op_xmalloc(sizeof(double) * (size_t)n);
    double r = p->pred.makespan_ms;
    if (op_sim_speed_samples(p, speed, n, mk, NULL) == OP_OK) r = op_ptrain_trimmed_mean(mk, n);
    free(mk);
    return r;
}
