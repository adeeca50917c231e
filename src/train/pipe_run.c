/* pipe_run.c: the pipelined training loop.  One step = one executor iteration of the plan
 * (op_exec_run_threads, or op_exec_rank_run on an MPI rank), then AdamW on every rank's stages,
 * then the loss terms to rank 0 (outside the timed region).  Checkpoints: in-process ranks
 * save their stages directly; MPI ranks gather parameters and AdamW state to rank 0, which
 * writes one file (op_ckpt_save), and a resume broadcasts it back. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"

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

/* What rank 0 keeps across steps. */
typedef struct {
    double *ms; /* [steps] measured makespans */
    double *cpu; /* [steps] lowest per-rank CPU share of the step's compute */
    double quiet;
    int n;
    double excess;
    double t0;
    int64_t first;
} stats;

static void log_step(const op_nn_model *m, const op_plan *p, const op_ptrain_opts *o, stats *st,
                     int64_t step, double loss, double ms) {
    FILE *log = o->log ? o->log : stdout;
    int last = step + 1 == o->steps;
    if (o->log_every <= 0 || !((step + 1) % o->log_every == 0 || last || step == st->first)) return;
    double dt = op_now_s() - st->t0;
    double tok = (double)(step + 1 - st->first) * p->M * m->cfg.batch * m->cfg.seq;
    double pred = p->pred.makespan_ms;
    fprintf(log, "step %5lld  loss %.4f  tokens/s %7.0f  iteration %7.2f ms (predicted %7.2f, %+5.1f%%)\n",
            (long long)step + 1, loss, dt > 0 ? tok / dt : 0.0, ms, pred,
            pred > 0 ? 100 * (ms - pred) / pred : 0.0);
    fflush(log);
}

static void finish_report(op_ptrain_report *rep, stats *st, const op_nn_model *m, const op_plan *p) {
    rep->wall_s = op_now_s() - st->t0;
    rep->pred_ms = p->pred.makespan_ms;
    /* the first step pays page faults for the activation pools: leave it out when there are more */
    int skip = st->n > 1 ? 1 : 0, n = st->n - skip;
    if (n > 0) {
        double *v = op_xmalloc(sizeof(double) * (size_t)n), sum = 0;
        memcpy(v, st->ms + skip, sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) sum += v[i];
        qsort(v, (size_t)n, sizeof *v, cmp_d);
        rep->meas_ms_median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        rep->meas_ms_mean = sum / n;
        rep->meas_ms_min = v[0];
        rep->op_excess_ms = st->excess / n;
        int nq = 0;
        for (int i = skip; i < st->n; i++)
            if (st->cpu[i] >= st->quiet) v[nq++] = st->ms[i];
        qsort(v, (size_t)nq, sizeof *v, cmp_d);
        rep->n_quiet = nq;
        rep->meas_ms_quiet = nq == 0 ? 0 : nq % 2 ? v[nq / 2] : 0.5 * (v[nq / 2 - 1] + v[nq / 2]);
        free(v);
    }
    rep->n_step = st->n < 64 ? st->n : 64;
    for (int i = 0; i < rep->n_step; i++) rep->step_ms[i] = st->ms[i], rep->step_cpu[i] = st->cpu[i];
    rep->tokens_per_s = rep->wall_s > 0 ? (double)rep->steps_run * p->M * m->cfg.batch * m->cfg.seq / rep->wall_s : 0;
}

/* The lowest share of a rank's compute wall time spent on a CPU over one step: cpu/wall are the
 * per-rank totals now, c0/w0 before the step (updated). */
static double step_share(const double *cpu, const double *wall, double *c0, double *w0, int P) {
    double lo = 1;
    for (int r = 0; r < P && r < 64; r++) {
        double dc = cpu[r] - c0[r], dw = wall[r] - w0[r];
        if (dw > 0 && dc / dw < lo) lo = dc / dw;
        c0[r] = cpu[r], w0[r] = wall[r];
    }
    return lo;
}

static void note_step(stats *st, const op_exec_result *res, double share) {
    st->cpu[st->n] = share;
    st->ms[st->n++] = res->makespan_ms;
    if (st->n > 1) st->excess += res->overhead_ms; /* same steps as the median: not the first */
}

static int ckpt_path(const op_ptrain_opts *o, char *path, size_t cap, op_err *err) {
    path[0] = 0;
    if (!o->ckpt_dir) return o->resume ? op_errf(err, OP_EINVAL, "--resume needs a checkpoint directory") : OP_OK;
    mkdir(o->ckpt_dir, 0777);
    snprintf(path, cap, "%s/model.ckpt", o->ckpt_dir);
    return OP_OK;
}

static int want_ckpt(const op_ptrain_opts *o, int64_t step) {
    return step + 1 == o->steps || (o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0);
}

int op_ptrain_run_threads(const op_nn_model *m, const op_plan *p, const op_ptrain_opts *o,
                          op_ptrain_report *rep, op_err *err) {
    memset(rep, 0, sizeof *rep);
    op_train_data d;
    int rc = op_train_data_open(&d, o->data, &m->cfg, o->seed, err);
    if (rc) return rc;
    op_adamw opt = o->opt;
    if (opt.lr <= 0) op_adamw_default(&opt);
    op_ptrain *t = op_ptrain_new(m, &d, p, -1);
    op_ptrain_set_pin(t, o->pin_cores);
    op_compute comp = op_ptrain_compute(t);
    comp.progress_thread = o->progress_thread;
    op_nn_stage **sp = op_xcalloc((size_t)p->S, sizeof *sp);
    int ns = op_ptrain_stages(t, sp, p->S);
    char path[600];
    int64_t step = 0;
    rc = ckpt_path(o, path, sizeof path, err);
    if (rc == OP_OK && o->resume) rc = op_ckpt_load(path, m, sp, ns, &step, err);
    size_t cap = (size_t)(o->steps > 0 ? o->steps : 1) + 1;
    stats st = {op_xcalloc(cap, sizeof(double)), op_xcalloc(cap, sizeof(double)),
                o->quiet_share > 0 ? o->quiet_share : 0.97, 0, 0, op_now_s(), step};
    double c0[64] = {0}, w0[64] = {0}, cn[64], wn[64], exc = 0;
    int n_exc = 0, n_ops = 0;
    for (int r = 0; r < p->P; r++) n_ops += p->n_ops[r];
    rep->first_step = step;
    op_ptrain_opstat prev[64 * 4];
    for (; rc == OP_OK && step < o->steps; step++) {
        if (st.n == 1) op_ptrain_reset_op_stats(t); /* per-op stats leave out the first step */
        for (int s = 0; s < p->S && s < 64; s++)
            for (int k = 0; k < 4; k++) prev[s * 4 + k] = op_ptrain_op_stat(t, s, (op_kind)k);
        op_ptrain_begin_step(t, step);
        op_exec_result res;
        rc = op_exec_run_threads(p, &comp, &o->eo, &res, err);
        if (rc) {
            if (res.wait_report[0] && !o->eo.quiet) fputs(res.wait_report, stderr);
            op_exec_result_free(&res);
            break;
        }
        op_ptrain_end_step(t, &opt);
        double loss = op_ptrain_step_loss(op_ptrain_loss_terms(t), p->S, p->M);
        if (o->losses) o->losses[step] = loss;
        if (rep->steps_run++ == 0) rep->first_loss = loss;
        rep->last_loss = loss;
        double busy = 0, wall = 0;
        for (int r = 0; r < p->P && r < 64; r++) {
            cn[r] = op_ptrain_cpu_s(t, r), wn[r] = op_ptrain_wall_s(t, r);
            busy += res.busy_ms ? res.busy_ms[r] : 0, wall += 1e3 * (wn[r] - w0[r]);
        }
        if (st.n >= 1 && n_ops > 0) exc += (busy - wall) / n_ops, n_exc++; /* timed steps */
        note_step(&st, &res, step_share(cn, wn, c0, w0, p->P));
        if (st.n > 1 && st.cpu[st.n - 1] >= st.quiet) /* a quiet timed step: keep its op times */
            for (int s = 0; s < p->S && s < 64; s++)
                for (int k = 0; k < 4; k++) {
                    op_ptrain_opstat a = op_ptrain_op_stat(t, s, (op_kind)k), *q = &rep->ops_quiet[s * 4 + k];
                    q->cpu_ms += a.cpu_ms - prev[s * 4 + k].cpu_ms;
                    q->wall_ms += a.wall_ms - prev[s * 4 + k].wall_ms;
                    q->faults += a.faults - prev[s * 4 + k].faults;
                    q->n += a.n - prev[s * 4 + k].n;
                }
        log_step(m, p, o, &st, step, loss, res.makespan_ms);
        if (o->keep_result && step + 1 == o->steps) {
            rep->last = res;
            rep->have_last = 1;
        } else {
            op_exec_result_free(&res);
        }
        if (path[0] && want_ckpt(o, step)) rc = op_ckpt_save(path, m, sp, ns, step + 1, err);
    }
    for (int r = 0; r < p->P && r < 64; r++) {
        rep->peak_act[r] = op_ptrain_peak_act(t, r);
        rep->cpu_share[r] = op_ptrain_cpu_share(t, r);
        rep->cpu_ms_step[r] = rep->steps_run ? 1e3 * op_ptrain_cpu_s(t, r) / (double)rep->steps_run : 0;
    }
    finish_report(rep, &st, m, p);
    rep->op_record_excess_ms = n_exc ? exc / n_exc : 0;
    for (int s = 0; s < p->S && s < 64; s++)
        for (int k = 0; k < 4; k++) rep->ops[s * 4 + k] = op_ptrain_op_stat(t, s, (op_kind)k);
    free(st.ms), free(st.cpu);
    free(sp);
    op_ptrain_free(t);
    op_train_data_free(&d);
    return rc;
}

/* ---- MPI ranks ---- */

/* This rank's stages' params | adam_m | adam_v, stage by stage. */
static size_t pack(op_ptrain *t, const op_plan *p, float *buf) {
    op_nn_stage *sp[OP_EXEC_MAX_STAGES];
    int n = op_ptrain_stages(t, sp, OP_EXEC_MAX_STAGES);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t np = sp[i]->n_params;
        if (buf) {
            memcpy(buf + k, sp[i]->params, np * sizeof(float));
            memcpy(buf + k + np, sp[i]->adam_m, np * sizeof(float));
            memcpy(buf + k + 2 * np, sp[i]->adam_v, np * sizeof(float));
        }
        k += 3 * np;
    }
    return k;
}

static void unpack_stage(op_nn_stage *s, const float *src) {
    size_t np = s->n_params;
    memcpy(s->params, src, np * sizeof(float));
    memcpy(s->adam_m, src + np, np * sizeof(float));
    memcpy(s->adam_v, src + 2 * np, np * sizeof(float));
}

static int mpi_save(op_ptrain *t, op_ptrain **full, const op_nn_model *m, const op_train_data *d,
                    const op_plan *p, op_xport *x, const char *path, int64_t next, op_err *err) {
    size_t n = pack(t, p, NULL);
    float *mine = op_xmalloc((n ? n : 1) * sizeof(float));
    pack(t, p, mine);
    void **all = NULL;
    int64_t *lens = NULL;
    if (x->rank == 0) {
        all = op_xcalloc((size_t)x->size, sizeof(void *));
        lens = op_xcalloc((size_t)x->size, sizeof(int64_t));
    }
    int rc = x->gather(x, mine, (int64_t)(n * sizeof(float)), all, lens);
    free(mine);
    if (rc == OP_OK && x->rank == 0) {
        if (!*full) *full = op_ptrain_new(m, d, p, -1);
        op_nn_stage *sp[OP_EXEC_MAX_STAGES];
        int ns = op_ptrain_stages(*full, sp, OP_EXEC_MAX_STAGES);
        size_t *off = op_xcalloc((size_t)x->size, sizeof(size_t));
        for (int s = 0; s < ns; s++) {
            int r = p->stage_dev[s];
            OP_ASSERT((off[r] + 3 * sp[s]->n_params) * sizeof(float) <= (size_t)lens[r], "checkpoint gather short");
            unpack_stage(sp[s], (const float *)all[r] + off[r]);
            off[r] += 3 * sp[s]->n_params;
        }
        free(off);
        rc = op_ckpt_save(path, m, sp, ns, next, err);
    }
    if (all)
        for (int r = 0; r < x->size; r++) free(all[r]);
    free(all), free(lens);
    int32_t code = rc;
    x->bcast(x, &code, sizeof code); /* everyone learns whether the file was written */
    if (code && x->rank != 0) return op_errf(err, code, "rank 0 could not write the checkpoint");
    return code;
}

static int mpi_load(op_ptrain *t, const op_nn_model *m, const op_train_data *d, const op_plan *p,
                    op_xport *x, const char *path, int64_t *step, op_err *err) {
    size_t total = 3 * m->off[m->n_layers];
    float *buf = op_xmalloc(total * sizeof(float));
    int64_t hdr[2] = {0, 0}; /* rc, next step */
    if (x->rank == 0) {
        op_ptrain *full = op_ptrain_new(m, d, p, -1);
        op_nn_stage *sp[OP_EXEC_MAX_STAGES];
        int ns = op_ptrain_stages(full, sp, OP_EXEC_MAX_STAGES);
        hdr[0] = op_ckpt_load(path, m, sp, ns, &hdr[1], err);
        pack(full, p, buf);
        op_ptrain_free(full);
    }
    x->bcast(x, hdr, sizeof hdr);
    if (hdr[0]) {
        free(buf);
        return x->rank == 0 ? (int)hdr[0] : op_errf(err, (int)hdr[0], "rank 0 could not load %s", path);
    }
    x->bcast(x, buf, (int64_t)(total * sizeof(float)));
    /* buf holds every stage in order; take ours */
    size_t k = 0;
    for (int s = 0; s < p->S; s++) {
        size_t np = m->off[p->stage_first[s + 1]] - m->off[p->stage_first[s]];
        if (p->stage_dev[s] == x->rank) {
            op_nn_stage *sp[OP_EXEC_MAX_STAGES];
            int ns = op_ptrain_stages(t, sp, OP_EXEC_MAX_STAGES);
            for (int i = 0; i < ns; i++)
                if (sp[i]->first == p->stage_first[s]) unpack_stage(sp[i], buf + k);
        }
        k += 3 * np;
    }
    free(buf);
    *step = hdr[1];
    return OP_OK;
}

int op_ptrain_run_rank(const op_nn_model *m, const op_plan *p, op_xport *x,
                       const op_ptrain_opts *o, op_ptrain_report *rep, op_err *err) {
    op_ptrain_report dummy;
    if (!rep) rep = &dummy;
    memset(rep, 0, sizeof *rep);
    op_train_data d;
    int rc = op_train_data_open(&d, o->data, &m->cfg, o->seed, err);
    int32_t ok = rc;
    x->bcast(x, &ok, sizeof ok); /* rank 0's verdict on the data, so all stop together */
    if (rc || ok) {
        if (rc == OP_OK) op_train_data_free(&d);
        return rc ? rc : op_errf(err, ok, "rank 0 could not open the data");
    }
    op_adamw opt = o->opt;
    if (opt.lr <= 0) op_adamw_default(&opt);
    op_ptrain *t = op_ptrain_new(m, &d, p, x->rank), *full = NULL;
    op_ptrain_set_pin(t, o->pin_cores);
    op_compute comp = op_ptrain_compute(t);
    comp.progress_thread = o->progress_thread;
    op_lowered l;
    rc = op_exec_lower(p, &o->eo.lower, &l, err);
    if (rc) {
        op_ptrain_free(t);
        op_train_data_free(&d);
        return rc;
    }
    char path[600];
    int64_t step = 0;
    rc = ckpt_path(o, path, sizeof path, err);
    if (rc == OP_OK && o->resume) rc = mpi_load(t, m, &d, p, x, path, &step, err);
    int SM = p->S * p->M;
    double *msg = op_xcalloc((size_t)SM + 4, sizeof(double));
    size_t cap = (size_t)(o->steps > 0 ? o->steps : 1) + 1;
    stats st = {op_xcalloc(cap, sizeof(double)), op_xcalloc(cap, sizeof(double)),
                o->quiet_share > 0 ? o->quiet_share : 0.97, 0, 0, op_now_s(), step};
    double c_prev = 0, w_prev = 0;
    rep->first_step = step;
    for (; rc == OP_OK && step < o->steps; step++) {
        op_ptrain_begin_step(t, step);
        op_exec_result res;
        memset(&res, 0, sizeof res);
        rc = op_exec_rank_run(p, &l, x, &comp, &o->eo, x->rank == 0 ? &res : NULL, err);
        if (rc) break;
        op_ptrain_end_step(t, &opt);
        /* loss terms of our stages and our activation peak to rank 0 */
        memcpy(msg, op_ptrain_loss_terms(t), sizeof(double) * (size_t)SM);
        msg[SM] = (double)op_ptrain_peak_act(t, x->rank);
        msg[SM + 1] = op_ptrain_cpu_share(t, x->rank);
        msg[SM + 2] = 1e3 * op_ptrain_cpu_s(t, x->rank) / (double)(step + 1 - st.first);
        {   /* this step's CPU share of compute wall time */
            double cn = op_ptrain_cpu_s(t, x->rank), wn = op_ptrain_wall_s(t, x->rank);
            msg[SM + 3] = wn > w_prev ? (cn - c_prev) / (wn - w_prev) : 1;
            c_prev = cn, w_prev = wn;
        }
        void **all = NULL;
        int64_t *lens = NULL;
        if (x->rank == 0) {
            all = op_xcalloc((size_t)x->size, sizeof(void *));
            lens = op_xcalloc((size_t)x->size, sizeof(int64_t));
        }
        rc = x->gather(x, msg, (int64_t)(sizeof(double) * ((size_t)SM + 4)), all, lens);
        if (rc == OP_OK && x->rank == 0) {
            double *lt = op_xcalloc((size_t)SM, sizeof(double));
            for (int s = 0; s < p->S; s++)
                memcpy(lt + s * p->M, (double *)all[p->stage_dev[s]] + s * p->M, sizeof(double) * (size_t)p->M);
            for (int r = 0; r < x->size && r < 64; r++) {
                rep->peak_act[r] = (int64_t)((double *)all[r])[SM];
                rep->cpu_share[r] = ((double *)all[r])[SM + 1];
                rep->cpu_ms_step[r] = ((double *)all[r])[SM + 2];
            }
            double loss = op_ptrain_step_loss(lt, p->S, p->M), share = 1;
            for (int r = 0; r < x->size; r++)
                if (((double *)all[r])[SM + 3] < share) share = ((double *)all[r])[SM + 3];
            free(lt);
            if (o->losses) o->losses[step] = loss;
            if (rep->steps_run++ == 0) rep->first_loss = loss;
            rep->last_loss = loss;
            note_step(&st, &res, share);
            log_step(m, p, o, &st, step, loss, res.makespan_ms);
        }
        if (all)
            for (int r = 0; r < x->size; r++) free(all[r]);
        free(all), free(lens);
        if (x->rank == 0) {
            if (o->keep_result && step + 1 == o->steps) {
                rep->last = res;
                rep->have_last = 1;
            } else {
                op_exec_result_free(&res);
            }
        }
        if (rc == OP_OK && path[0] && want_ckpt(o, step)) rc = mpi_save(t, &full, m, &d, p, x, path, step + 1, err);
    }
    if (x->rank == 0) finish_report(rep, &st, m, p);
    free(st.ms), free(st.cpu);
    free(msg);
    op_lowered_free(&l);
    op_ptrain_free(full);
    op_ptrain_free(t);
    op_train_data_free(&d);
    if (rep == &dummy) op_ptrain_report_free(rep);
    return rc;
}

double op_ptrain_fit_overhead(const op_plan *p, double measured_ms) {
    op_plan q;
    op_plan_copy(&q, p);
    double lo = 0, hi = 10;
    for (int it = 0; it < 40; it++) {
        double mid = 0.5 * (lo + hi);
        q.op_overhead_ms = mid;
        if (op_sim_replay(&q, NULL, NULL)) break;
        if (q.pred.makespan_ms < measured_ms) lo = mid;
        else hi = mid;
    }
    op_plan_free(&q);
    return 0.5 * (lo + hi);
}
