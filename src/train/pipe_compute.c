/* pipe_compute.c: the executor's pluggable compute (op_compute) backed by the reference model's
 * stages.  Each call maps to one stage function: F -> op_nn_stage_forward, I ->
 * backward_input, W -> backward_weight, B -> backward.  Boundary messages are the (N, d) float
 * activations and their gradients.  The stage holding E makes its batch from (step, mb); the
 * stage holding L makes the targets the same way, so no rank ships tokens.
 *
 * In-process ranks share one op_ptrain (rank < 0): every stage is built up front, and a rank's
 * thread only ever touches its own stages and its own per-rank counters, so no locks but two:
 * a rank's activation meter (nn.h), which its copy engine (pipe_copy.c) changes too when
 * stages offload, and that engine's queue. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#include "train/pipe_internal.h"

struct op_ptrain {
    const op_nn_model *m;
    const op_train_data *d;
    const op_plan *p;
    int rank, S, M, P;
    op_nn_stage **st;  /* [S]; NULL where another rank holds the stage */
    int32_t **tok;     /* [S*M] batch tokens, for stages 0 and S-1 only */
    int32_t **tgt;     /* [S*M] targets */
    double *lt;        /* [S*M] loss terms of the current step */
    int64_t step;
    op_nn_meter *meter;  /* [P] live and peak activation bytes of each rank's stages */
    op_pcopy **ce;       /* [P] copy engine of a rank with offload stages, else NULL */
    int *opi;            /* [P] index in the rank's order of its next op (copy prefetch) */
    double *cpu, *wall;  /* [P] seconds of thread CPU time and wall time inside run() */
    op_ptrain_opstat *os; /* [S*4] per (stage, kind): CPU and wall time, faults, count */
    int pin;              /* op_ptrain_set_pin: bind each rank's thread to core rank % ncpu */
};

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Minor page faults of this thread so far (first touch of fresh memory). */
static long thread_faults(void) {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) ? 0 : ru.ru_minflt + ru.ru_majflt;
}

int op_ptrain_check_plan(const op_nn_model *m, const op_plan *p, op_err *err) {
    if (p->n_layers != m->n_layers)
        return op_errf(err, OP_EINVAL, "train: plan '%s' has %d layers, model %s has %d", p->name,
                       p->n_layers, m->name, m->n_layers);
    return OP_OK;
}

op_ptrain *op_ptrain_new(const op_nn_model *m, const op_train_data *d, const op_plan *p, int rank) {
    if (op_ptrain_check_plan(m, p, NULL)) return NULL;
    op_ptrain *t = op_xcalloc(1, sizeof *t);
    t->m = m, t->d = d, t->p = p, t->rank = rank;
    t->S = p->S, t->M = p->M, t->P = p->P;
    t->st = op_xcalloc((size_t)t->S, sizeof *t->st);
    t->tok = op_xcalloc((size_t)t->S * t->M, sizeof *t->tok);
    t->tgt = op_xcalloc((size_t)t->S * t->M, sizeof *t->tgt);
    t->lt = op_xcalloc((size_t)t->S * t->M, sizeof *t->lt);
    t->meter = op_xcalloc((size_t)t->P, sizeof *t->meter);
    for (int r = 0; r < t->P; r++) op_nn_meter_init(&t->meter[r]);
    t->ce = op_xcalloc((size_t)t->P, sizeof *t->ce);
    t->opi = op_xcalloc((size_t)t->P, sizeof *t->opi);
    t->cpu = op_xcalloc((size_t)t->P, sizeof *t->cpu);
    t->wall = op_xcalloc((size_t)t->P, sizeof *t->wall);
    t->os = op_xcalloc((size_t)t->S * 4, sizeof *t->os);
    size_t N = (size_t)m->cfg.batch * m->cfg.seq;
    for (int s = 0; s < t->S; s++) {
        if (rank >= 0 && p->stage_dev[s] != rank) continue;
        t->st[s] = op_xcalloc(1, sizeof(op_nn_stage));
        op_nn_stage_init(t->st[s], m, p->stage_first[s], p->stage_first[s + 1], t->M);
        if (p->stage_act[s] < OP_ACT_N) /* the plan's activation policy (setup refuses others) */
            op_nn_stage_set_policy(t->st[s], p->stage_act[s]);
        op_nn_stage_set_meter(t->st[s], &t->meter[p->stage_dev[s]]);
        if (s != 0 && s != t->S - 1) continue;
        for (int mb = 0; mb < t->M; mb++) {
            t->tok[s * t->M + mb] = op_xcalloc(N, sizeof(int32_t));
            t->tgt[s * t->M + mb] = op_xcalloc(N, sizeof(int32_t));
        }
    }
    return t; /* copy engines start in setup, where a failure has an error to return */
}

void op_ptrain_free(op_ptrain *t) {
    if (!t) return;
    for (int r = 0; r < t->P; r++) op_pcopy_free(t->ce[r]); /* before the stages it copies */
    for (int s = 0; s < t->S; s++) {
        if (t->st[s]) op_nn_stage_free(t->st[s]);
        free(t->st[s]);
    }
    for (int i = 0; i < t->S * t->M; i++) free(t->tok[i]), free(t->tgt[i]);
    free(t->st), free(t->tok), free(t->tgt), free(t->lt), free(t->ce), free(t->opi);
    for (int r = 0; r < t->P; r++) op_nn_meter_destroy(&t->meter[r]);
    free(t->meter);
    free(t->cpu), free(t->wall), free(t->os);
    free(t);
}

static int setup(void *ctx, const op_plan *p, int rank, op_err *err) {
    op_ptrain *t = ctx;
    if (t->pin) { /* setup runs on the rank's own thread; a failure only costs the pinning */
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        cpu_set_t cs;
        CPU_ZERO(&cs);
        CPU_SET((int)(rank % (nc > 0 ? nc : 1)), &cs);
        (void)pthread_setaffinity_np(pthread_self(), sizeof cs, &cs);
    }
    if (p->S != t->S || p->M != t->M || p->P != t->P)
        return op_errf(err, OP_EINVAL, "train: the executor's plan is not the one the stages were built for");
    for (int s = 0; s < t->S; s++)
        if (p->stage_act[s] >= OP_ACT_N)
            return op_errf(err, OP_EINVAL, "train: stage %d has activation policy %d (keep, selective, full, offload)",
                           s, p->stage_act[s]);
    for (int s = 0; s < t->S; s++)
        if (p->stage_dev[s] == rank && !t->st[s])
            return op_errf(err, OP_EINVAL, "train: rank %d runs stage %d but does not hold it", rank, s);
    /* the rank's copy engine, on its first step: this rank's thread is the only one that
     * touches ce[rank] while ranks run */
    if (rank >= 0 && rank < t->P && !t->ce[rank]) return op_pcopy_new(t->p, t->st, rank, &t->ce[rank], err);
    return OP_OK;
}

static int64_t boundary_bytes(void *ctx, int stage) {
    const op_ptrain *t = ctx;
    return (int64_t)(op_nn_io_floats(t->m) * sizeof(float));
}

static int run(void *ctx, const op_compute_call *c, op_err *err) {
    op_ptrain *t = ctx;
    int s = c->stage, mb = c->mb, S = t->S, M = t->M;
    if (s < 0 || s >= S || mb < 0 || mb >= M || !t->st[s])
        return op_errf(err, OP_EINVAL, "train: %s(s%d,mb%d) is not held by this rank",
                       op_kind_name(c->kind), s, mb);
    op_nn_stage *st = t->st[s];
    int64_t io = boundary_bytes(t, s);
    if ((c->in && c->in_bytes != io) || (c->out && c->out_bytes != io))
        return op_errf(err, OP_EINVAL, "train: %s(s%d,mb%d): message of %lld bytes, the model's is %lld",
                       op_kind_name(c->kind), s, mb,
                       (long long)(c->in ? c->in_bytes : c->out_bytes), (long long)io);
    int r = t->p->stage_dev[s];
    /* offload: queue the next op's reload; an I|B waits for its own here, outside the op's
     * timing (the simulator starts I when the reload has ended) */
    op_pcopy_before(t->ce[r], t->opi[r]++, c);
    long f0 = thread_faults();
    double c0 = thread_cpu_s(), w0 = op_now_s();
    switch (c->kind) {
    case OP_F: {
        int32_t *tok = NULL, *tgt = NULL;
        int i = s * M + mb;
        if (s == 0 || s == S - 1) {
            tok = t->tok[i], tgt = t->tgt[i];
            op_train_data_batch(t->d, t->step, mb, tok, tgt);
        }
        op_nn_batch b = {tok, tgt, 1.0f / (float)M};
        t->lt[i] = op_nn_stage_forward(st, mb, &b, s == 0 ? NULL : c->in, s == S - 1 ? NULL : c->out);
        break;
    }
    case OP_I:
        op_nn_stage_backward_input(st, mb, s == S - 1 ? NULL : c->in, s == 0 ? NULL : c->out);
        break;
    case OP_W:
        op_nn_stage_backward_weight(st, mb);
        break;
    case OP_B:
        op_nn_stage_backward(st, mb, s == S - 1 ? NULL : c->in, s == 0 ? NULL : c->out);
        break;
    }
    double dc = thread_cpu_s() - c0, dw = op_now_s() - w0;
    t->cpu[r] += dc;
    t->wall[r] += dw;
    op_ptrain_opstat *o = &t->os[s * 4 + c->kind];
    o->cpu_ms += 1e3 * dc, o->wall_ms += 1e3 * dw, o->n++;
    o->faults += thread_faults() - f0;
    op_pcopy_after(t->ce[r], c); /* F of an offload stage: its stash leaves */
    return OP_OK;
}

op_compute op_ptrain_compute(op_ptrain *t) {
    op_compute c;
    memset(&c, 0, sizeof c);
    c.ctx = t;
    c.setup = setup;
    c.run = run;
    c.boundary_bytes = boundary_bytes;
    c.progress_thread = 1;
    return c;
}

void op_ptrain_begin_step(op_ptrain *t, int64_t step) {
    t->step = step;
    for (int r = 0; r < t->P; r++) op_pcopy_begin_step(t->ce[r]), t->opi[r] = 0;
    for (int s = 0; s < t->S; s++)
        if (t->st[s]) op_nn_stage_zero_grad(t->st[s]);
    memset(t->lt, 0, sizeof(double) * (size_t)t->S * t->M);
}

void op_ptrain_end_step(op_ptrain *t, const op_adamw *o) {
    for (int s = 0; s < t->S; s++)
        if (t->st[s]) op_adamw_stage(o, t->step, t->st[s]);
}

const double *op_ptrain_loss_terms(const op_ptrain *t) { return t->lt; }

double op_ptrain_step_loss(const double *lt, int S, int M) {
    double ce = 0;
    for (int mb = 0; mb < M; mb++) {
        double l = 0;
        for (int s = 0; s < S; s++) l += lt[s * M + mb];
        ce += l;
    }
    return ce / M;
}

int64_t op_ptrain_peak_act(const op_ptrain *t, int rank) {
    if (rank < 0 || rank >= t->P) return 0;
    op_nn_meter *mt = &t->meter[rank];
    pthread_mutex_lock(&mt->mu);
    int64_t v = mt->peak;
    pthread_mutex_unlock(&mt->mu);
    return v;
}

void op_ptrain_copy_stats(const op_ptrain *t, int rank, int *n_xfers, double *busy_ms) {
    *n_xfers = 0, *busy_ms = 0;
    if (rank >= 0 && rank < t->P) op_pcopy_stats(t->ce[rank], n_xfers, busy_ms, NULL);
}

double op_ptrain_copy_cpu_ms(const op_ptrain *t, int rank) {
    int n = 0;
    double busy = 0, cpu = 0;
    if (rank >= 0 && rank < t->P) op_pcopy_stats(t->ce[rank], &n, &busy, &cpu);
    return cpu;
}

double op_ptrain_cpu_share(const op_ptrain *t, int rank) {
    if (rank < 0 || rank >= t->P || t->wall[rank] <= 0) return 0;
    return t->cpu[rank] / t->wall[rank];
}

double op_ptrain_cpu_s(const op_ptrain *t, int rank) {
    return rank >= 0 && rank < t->P ? t->cpu[rank] : 0;
}

double op_ptrain_wall_s(const op_ptrain *t, int rank) {
    return rank >= 0 && rank < t->P ? t->wall[rank] : 0;
}

void op_ptrain_set_pin(op_ptrain *t, int pin) { t->pin = pin; }

void op_ptrain_reset_peak(op_ptrain *t) {
    for (int r = 0; r < t->P; r++) {
        op_nn_meter *mt = &t->meter[r];
        pthread_mutex_lock(&mt->mu);
        mt->peak = mt->live;
        pthread_mutex_unlock(&mt->mu);
    }
}

int op_ptrain_stages(op_ptrain *t, op_nn_stage **st, int cap) {
    int n = 0;
    for (int s = 0; s < t->S && n < cap; s++)
        if (t->st[s]) st[n++] = t->st[s];
    return n;
}

op_ptrain_opstat op_ptrain_op_stat(const op_ptrain *t, int stage, op_kind kind) {
    op_ptrain_opstat z;
    memset(&z, 0, sizeof z);
    if (stage < 0 || stage >= t->S || (int)kind < 0 || (int)kind > 3) return z;
    return t->os[stage * 4 + kind];
}

void op_ptrain_reset_op_stats(op_ptrain *t) {
    memset(t->os, 0, sizeof *t->os * (size_t)t->S * 4);
}
