/* pipe_session.c: pipelined training on in-process ranks (thread transport), one step per call.
 * One step = one executor iteration of the plan (op_exec_run_threads), then AdamW on every
 * stage, then the step loss (outside the timed region).  Checkpoints save the stages directly.
 * op_ptrain_run_threads is a session run to o->steps. */
#include <stdlib.h>
#include <string.h>

#include "train/pipe_internal.h"

struct op_ptrain_session {
    const op_nn_model *m;
    const op_plan *p;
    op_ptrain_opts o;
    op_adamw opt;
    op_train_data d;
    op_ptrain *t;
    op_compute comp;
    op_ptrain_slow slow;
    op_nn_stage **sp;
    int ns, n_ops;
    char path[600];
    int64_t step;
    op_pstats st;
    double c0[64], w0[64]; /* per-rank CPU / wall totals at the last step's end */
    double sc0[64], sw0[64]; /* the same of a slowed rank's spins (pipe_slow.c) */
    double exc;            /* sum over timed steps of the executor's per-op cost in the records */
    int n_exc;
    op_ptrain_report acc;  /* what the steps add up: losses, quiet per-op stats, last result */
};

int op_ptrain_session_new(const op_nn_model *m, const op_plan *p, const op_ptrain_opts *o,
                          op_ptrain_session **out, op_err *err) {
    *out = NULL;
    int rc = op_ptrain_check_plan(m, p, err);
    if (rc) return rc;
    op_ptrain_session *s = op_xcalloc(1, sizeof *s);
    rc = op_train_data_open(&s->d, o->data, &m->cfg, o->seed, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->m = m, s->p = p, s->o = *o;
    s->opt = o->opt;
    if (s->opt.lr <= 0) op_adamw_default(&s->opt);
    s->t = op_ptrain_new(m, &s->d, p, -1);
    op_ptrain_set_pin(s->t, o->pin_cores);
    s->comp = op_ptrain_compute(s->t);
    s->comp.progress_thread = o->progress_thread;
    s->slow = (op_ptrain_slow){.inner = s->comp, .p = p, .k = o->slowdown}; /* a mixed cluster: pipe_slow.c */
    if (o->slowdown) s->comp = op_ptrain_slow_compute(&s->slow);
    s->sp = op_xcalloc((size_t)p->S, sizeof *s->sp);
    s->ns = op_ptrain_stages(s->t, s->sp, p->S);
    for (int r = 0; r < p->P; r++) s->n_ops += p->n_ops[r];
    rc = op_ptrain_ckpt_path(o, s->path, sizeof s->path, err);
    if (rc == OP_OK && o->resume) rc = op_ckpt_load(s->path, m, s->sp, s->ns, &s->step, err);
    if (rc) {
        op_ptrain_session_free(s);
        return rc;
    }
    op_pstats_init(&s->st, o, s->step);
    s->acc.first_step = s->step;
    *out = s;
    return OP_OK;
}

/* Adds the per-(stage, kind) op stats since `prev` to the quiet totals. */
static void add_quiet(op_ptrain_session *s, const op_ptrain_opstat *prev) {
    for (int st = 0; st < s->p->S && st < 64; st++)
        for (int k = 0; k < 4; k++) {
            op_ptrain_opstat a = op_ptrain_op_stat(s->t, st, (op_kind)k), *q = &s->acc.ops_quiet[st * 4 + k];
            const op_ptrain_opstat *b = &prev[st * 4 + k];
            q->cpu_ms += a.cpu_ms - b->cpu_ms, q->wall_ms += a.wall_ms - b->wall_ms;
            q->faults += a.faults - b->faults, q->n += a.n - b->n;
        }
}

/* The lowest share of a rank's compute wall time spent on a CPU over the step just run.  A
 * slowed rank's spins count as compute: a spin that lost its core stretched the op beyond k
 * times its compute, so that step is not quiet either. */
static double step_share(op_ptrain_session *s) {
    double lo = 1;
    for (int r = 0; r < s->p->P && r < 64; r++) {
        double c = op_ptrain_cpu_s(s->t, r), w = op_ptrain_wall_s(s->t, r);
        double sc = s->slow.spin_cpu[r], sw = s->slow.spin_wall[r];
        double dc = c - s->c0[r] + sc - s->sc0[r], dw = w - s->w0[r] + sw - s->sw0[r];
        if (dw > 0 && dc / dw < lo) lo = dc / dw;
        s->c0[r] = c, s->w0[r] = w, s->sc0[r] = sc, s->sw0[r] = sw;
    }
    return lo;
}

int op_ptrain_session_step(op_ptrain_session *s, op_err *err) {
    const op_plan *p = s->p;
    if (s->st.n == 1) op_ptrain_reset_op_stats(s->t); /* per-op stats leave out the first step */
    op_ptrain_opstat prev[64 * 4];
    for (int st = 0; st < p->S && st < 64; st++)
        for (int k = 0; k < 4; k++) prev[st * 4 + k] = op_ptrain_op_stat(s->t, st, (op_kind)k);
    op_ptrain_begin_step(s->t, s->step);
    op_exec_result res;
    int rc = op_exec_run_threads(p, &s->comp, &s->o.eo, &res, err);
    if (rc) {
        if (res.wait_report[0] && !s->o.eo.quiet) fputs(res.wait_report, stderr);
        op_exec_result_free(&res);
        return rc;
    }
    op_ptrain_end_step(s->t, &s->opt);
    double loss = op_ptrain_step_loss(op_ptrain_loss_terms(s->t), p->S, p->M);
    if (s->o.losses) s->o.losses[s->step] = loss;
    if (s->acc.steps_run++ == 0) s->acc.first_loss = loss;
    s->acc.last_loss = loss;
    /* the executor's own cost in the records: a slowed rank's spins are the op's modelled time
     * (k x its compute, pipe_slow.c), not executor cost, so they count with the compute */
    double busy = 0, wall = 0;
    for (int r = 0; r < p->P && r < 64; r++)
        busy += res.busy_ms ? res.busy_ms[r] : 0,
        wall += 1e3 * (op_ptrain_wall_s(s->t, r) - s->w0[r] + s->slow.spin_wall[r] - s->sw0[r]);
    if (s->st.n >= 1 && s->n_ops > 0) s->exc += (busy - wall) / s->n_ops, s->n_exc++; /* timed steps */
    op_pstats_note(&s->st, &res, step_share(s));
    if (s->st.n > 1 && s->st.cpu[s->st.n - 1] >= s->st.quiet) add_quiet(s, prev); /* quiet timed step */
    op_pstats_log(&s->st, s->m, p, &s->o, s->step, loss, res.makespan_ms);
    if (s->o.keep_result) {
        if (s->acc.have_last) op_exec_result_free(&s->acc.last);
        s->acc.last = res;
        s->acc.have_last = 1;
    } else {
        op_exec_result_free(&res);
    }
    if (s->path[0] && op_ptrain_want_ckpt(&s->o, s->step)) {
        op_ckpt_run run;
        op_ckpt_run_set(&run, s->p->M, &s->opt, s->o.data);
        rc = op_ckpt_save_run(s->path, s->m, s->sp, s->ns, s->step + 1, &run, err);
    }
    s->step++;
    return rc;
}

const op_exec_result *op_ptrain_session_last(const op_ptrain_session *s) {
    return s->acc.have_last ? &s->acc.last : NULL;
}

void op_ptrain_session_report(op_ptrain_session *s, op_ptrain_report *rep) {
    *rep = s->acc;
    s->acc.have_last = 0; /* the last result moves to rep */
    for (int r = 0; r < s->p->P && r < 64; r++) {
        rep->peak_act[r] = op_ptrain_peak_act(s->t, r);
        rep->cpu_share[r] = op_ptrain_cpu_share(s->t, r);
        op_ptrain_copy_stats(s->t, r, &rep->copy_xfers[r], &rep->copy_busy_ms[r]);
        rep->copy_cpu_ms[r] = op_ptrain_copy_cpu_ms(s->t, r);
        rep->cpu_ms_step[r] = rep->steps_run ? 1e3 * op_ptrain_cpu_s(s->t, r) / (double)rep->steps_run : 0;
    }
    op_pstats_finish(&s->st, rep, s->m, s->p);
    rep->op_record_excess_ms = s->n_exc ? s->exc / s->n_exc : 0;
    for (int st = 0; st < s->p->S && st < 64; st++)
        for (int k = 0; k < 4; k++) rep->ops[st * 4 + k] = op_ptrain_op_stat(s->t, st, (op_kind)k);
}

void op_ptrain_session_free(op_ptrain_session *s) {
    if (!s) return;
    op_ptrain_report_free(&s->acc);
    op_pstats_free(&s->st);
    free(s->sp);
    op_ptrain_free(s->t);
    op_train_data_free(&s->d);
    free(s);
}

int op_ptrain_run_threads(const op_nn_model *m, const op_plan *p, const op_ptrain_opts *o,
                          op_ptrain_report *rep, op_err *err) {
    memset(rep, 0, sizeof *rep);
    op_ptrain_session *s;
    int rc = op_ptrain_session_new(m, p, o, &s, err);
    if (rc) return rc;
    while (rc == OP_OK && s->step < o->steps) rc = op_ptrain_session_step(s, err);
    op_ptrain_session_report(s, rep);
    if (!o->keep_result || s->step != o->steps) op_ptrain_report_free(rep); /* only a finished run's last step */
    op_ptrain_session_free(s);
    return rc;
}
