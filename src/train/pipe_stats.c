/* pipe_stats.c: rank 0's per-step record of a training run and the report made of it (shared
 * by the in-process and MPI loops), options defaults, checkpoint naming. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/pipe_internal.h"

void op_ptrain_opts_default(op_ptrain_opts *o) {
    memset(o, 0, sizeof *o);
    o->data = "text";
    o->steps = 100;
    o->seed = 1;
    op_adamw_default(&o->opt);
    o->log = stdout;
    o->progress_thread = 0;
    o->eo.fault.rank = -1;
    o->quiet_share = 0.97;
}

void op_ptrain_report_free(op_ptrain_report *r) {
    if (r->have_last) op_exec_result_free(&r->last);
    r->have_last = 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_sorted(const double *v, int n) {
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void op_pstats_init(op_pstats *st, const op_ptrain_opts *o, int64_t first_step) {
    memset(st, 0, sizeof *st);
    st->cap = 16;
    st->ms = op_xcalloc((size_t)st->cap, sizeof(double));
    st->cpu = op_xcalloc((size_t)st->cap, sizeof(double));
    st->quiet = o->quiet_share > 0 ? o->quiet_share : 0.97;
    st->t0 = op_now_s();
    st->first = first_step;
    st->pred = o->pred_ms;
}

void op_pstats_free(op_pstats *st) {
    free(st->ms), free(st->cpu);
    memset(st, 0, sizeof *st);
}

void op_pstats_note(op_pstats *st, const op_exec_result *res, double share) {
    if (st->n == st->cap) {
        st->cap *= 2;
        st->ms = op_xrealloc(st->ms, sizeof(double) * (size_t)st->cap);
        st->cpu = op_xrealloc(st->cpu, sizeof(double) * (size_t)st->cap);
    }
    st->cpu[st->n] = share;
    st->ms[st->n++] = res->makespan_ms;
    if (st->n > 1) st->excess += res->overhead_ms; /* same steps as the median: not the first */
}

void op_pstats_log(const op_pstats *st, const op_nn_model *m, const op_plan *p,
                   const op_ptrain_opts *o, int64_t step, double loss, double ms) {
    FILE *log = o->log ? o->log : stdout;
    int last = step + 1 == o->steps;
    if (o->log_every <= 0 || !((step + 1) % o->log_every == 0 || last || step == st->first)) return;
    double dt = op_now_s() - st->t0;
    double tok = (double)(step + 1 - st->first) * p->M * m->cfg.batch * m->cfg.seq;
    double pred = st->pred > 0 ? st->pred : p->pred.makespan_ms;
    /* done/total and the time left at the rate so far, so a long run says when it ends */
    double left = dt / (double)(step + 1 - st->first) * (double)(o->steps - step - 1);
    fprintf(log, "step %5lld/%lld  loss %.4f  tokens/s %7.0f  iteration %7.2f ms (predicted %7.2f, "
            "%+5.1f%%)  %.0f s left\n",
            (long long)step + 1, (long long)o->steps, op_shown(loss), dt > 0 ? tok / dt : 0.0, ms, pred,
            pred > 0 ? 100 * (ms - pred) / pred : 0.0, left > 0 ? left : 0.0);
    fflush(log);
}

void op_pstats_finish(const op_pstats *st, op_ptrain_report *rep, const op_nn_model *m,
                      const op_plan *p) {
    rep->wall_s = op_now_s() - st->t0;
    rep->pred_ms = st->pred > 0 ? st->pred : p->pred.makespan_ms;
    /* the first step pays page faults for the activation pools: leave it out when there are more */
    int skip = st->n > 1 ? 1 : 0, n = st->n - skip;
    if (n > 0) {
        double *v = op_xmalloc(sizeof(double) * (size_t)n), sum = 0;
        memcpy(v, st->ms + skip, sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) sum += v[i];
        qsort(v, (size_t)n, sizeof *v, cmp_d);
        rep->meas_ms_median = median_sorted(v, n);
        rep->meas_ms_mean = sum / n;
        rep->meas_ms_min = v[0];
        rep->meas_ms_trimmed = op_ptrain_trimmed_mean(v, n);
        rep->op_excess_ms = st->excess / n;
        int nq = 0;
        for (int i = skip; i < st->n; i++)
            if (st->cpu[i] >= st->quiet) v[nq++] = st->ms[i];
        rep->n_quiet = nq;
        rep->meas_ms_quiet = op_ptrain_trimmed_mean(v, nq);
        free(v);
    }
    rep->n_step = st->n < OP_PTRAIN_MAX_STEPS ? st->n : OP_PTRAIN_MAX_STEPS;
    for (int i = 0; i < rep->n_step; i++) rep->step_ms[i] = st->ms[i], rep->step_cpu[i] = st->cpu[i];
    rep->tokens_per_s = rep->wall_s > 0 ? (double)rep->steps_run * p->M * m->cfg.batch * m->cfg.seq / rep->wall_s : 0;
}

int op_ptrain_ckpt_path(const op_ptrain_opts *o, char *path, size_t cap, op_err *err) {
    path[0] = 0;
    if (!o->ckpt_dir) return o->resume ? op_errf(err, OP_EINVAL, "--resume needs a checkpoint directory") : OP_OK;
    mkdir(o->ckpt_dir, 0777);
    snprintf(path, cap, "%s/model.ckpt", o->ckpt_dir);
    return OP_OK;
}

int op_ptrain_want_ckpt(const op_ptrain_opts *o, int64_t step) {
    return step + 1 == o->steps || (o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0);
}
