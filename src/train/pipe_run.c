/* pipe_run.c: the pipelined training loop on an MPI rank.  One step = one executor iteration
 * of the plan (op_exec_rank_run), then AdamW on the rank's stages, then the loss terms to rank
 * 0 (outside the timed region).  Checkpoints: ranks gather parameters and AdamW state to rank
 * 0, which writes one file (op_ckpt_save), and a resume broadcasts it back.  The in-process
 * loop is pipe_session.c. */
#include <stdlib.h>
#include <string.h>
#include "octopipe/sim.h"
#include "train/pipe_internal.h"

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

/* A checkpoint rank 0 failed to read or write: every rank returns rank 0's message.  The
 * first rank to report stops the job (hard_abort), and that was often a rank that only said
 * "rank 0 could not load PATH", killing rank 0 before it said why (a checksum, a size). */
static int rank0_error(op_xport *x, int code, const char *what, op_err *err) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err && x->rank == 0 ? err->msg : "");
    x->bcast(x, msg, sizeof msg);
    if (x->rank == 0) return code;
    return op_errf(err, code, "rank 0 %s: %s", what, msg);
}

static int mpi_save(op_ptrain *t, op_ptrain **full, const op_nn_model *m, const op_train_data *d,
                    const op_plan *p, op_xport *x, const char *path, int64_t next,
                    const op_ckpt_run *run, op_err *err) {
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
            /* rank r sent its stages of this plan, 3 x n_params floats each, in stage order */
            OP_ASSERT((off[r] + 3 * sp[s]->n_params) * sizeof(float) <= (size_t)lens[r], "checkpoint gather short");
            unpack_stage(sp[s], (const float *)all[r] + off[r]);
            off[r] += 3 * sp[s]->n_params;
        }
        free(off);
        rc = op_ckpt_save_run(path, m, sp, ns, next, run, err);
    }
    if (all)
        for (int r = 0; r < x->size; r++) free(all[r]);
    free(all), free(lens);
    int32_t code = rc;
    x->bcast(x, &code, sizeof code); /* everyone learns whether the file was written */
    if (code) return rank0_error(x, code, "could not write the checkpoint", err);
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
        return rank0_error(x, (int)hdr[0], "could not load the checkpoint", err);
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
    int rc = op_ptrain_check_plan(m, p, err); /* every rank has the same plan and model */
    if (rc == OP_OK) rc = op_train_data_open(&d, o->data, &m->cfg, o->seed, err);
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
    op_ptrain_slow slow = {.inner = comp, .p = p, .k = o->slowdown}; /* a mixed cluster: pipe_slow.c */
    if (o->slowdown) comp = op_ptrain_slow_compute(&slow);
    op_lowered l;
    rc = op_exec_lower(p, &o->eo.lower, &l, err);
    if (rc) {
        op_ptrain_free(t);
        op_train_data_free(&d);
        return rc;
    }
    char path[600];
    int64_t step = 0;
    rc = op_ptrain_ckpt_path(o, path, sizeof path, err);
    if (rc == OP_OK && o->resume) rc = mpi_load(t, m, &d, p, x, path, &step, err);
    int SM = p->S * p->M;
    double *msg = op_xcalloc((size_t)SM + 4, sizeof(double));
    op_pstats st;
    op_pstats_init(&st, o, step);
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
        {   /* this step's CPU share of compute wall time (a slowed rank's spins count) */
            double cn = op_ptrain_cpu_s(t, x->rank), wn = op_ptrain_wall_s(t, x->rank);
            if (o->slowdown && x->rank < 64) cn += slow.spin_cpu[x->rank], wn += slow.spin_wall[x->rank];
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
            op_pstats_note(&st, &res, share);
            op_pstats_log(&st, m, p, o, step, loss, res.makespan_ms);
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
        if (rc == OP_OK && path[0] && op_ptrain_want_ckpt(o, step)) {
            op_ckpt_run run;
            op_ckpt_run_set(&run, p->M, &opt, o->data);
            rc = mpi_save(t, &full, m, &d, p, x, path, step + 1, &run, err);
        }
    }
    if (x->rank == 0) op_pstats_finish(&st, rep, m, p);
    op_pstats_free(&st);
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
