/* pipe_slow.c: a mixed cluster measured on one machine.  Rank d of a training run computes
 * k[d] >= 1 times slower than this machine: after each of its ops it waits (k[d] - 1) times
 * what the op just took, progressing its messages meanwhile (op_exec_sleep_until), so a rank
 * with k = 2 behaves like a device of half the speed.  While every rank has a core of its own
 * it spins (progressing messages): a core that naps comes back cold, and the op after a nap
 * ran 5-15% slower than calibrated (bench_model_mixed: worst error 14.9% napping, 3.4%
 * spinning).  With more ranks than cores it naps instead, since a spin would take the core of
 * another rank.  The model's arithmetic is untouched, so weights stay bitwise those of
 * the uniform run; only time changes.  The prediction is the simulator's on the plan made
 * mixed by op_ptrain_slowdown_plan (each device's costs x its k). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

int op_ptrain_slowdown_parse(const char *spec, int P, double *k, op_err *err) {
    const char *s = spec;
    for (int d = 0; d < P; d++) {
        size_t n = strcspn(s, ","); /* decimal only, like every numeric flag ("0x2" is not 2) */
        double v = 0;
        if (op_parse_decimal(s, n, &v) || !(v >= 1 && v <= 1000))
            return op_errf(err, OP_EINVAL, "--slowdown '%s': factor %d must be a number in [1, 1000]",
                           spec, d + 1);
        k[d] = v;
        s += n;
        if (d < P - 1 && *s++ != ',')
            return op_errf(err, OP_EINVAL, "--slowdown '%s': needs %d comma-separated factors (one per rank)",
                           spec, P);
    }
    if (*s)
        return op_errf(err, OP_EINVAL, "--slowdown '%s': needs %d comma-separated factors (one per rank)",
                       spec, P);
    return OP_OK;
}

/* Time of one microbatch through every layer on device d (F + I + W). */
static double dev_work(const op_plan *p, int d) {
    const op_layer_cost *l = op_plan_dev_layers(p, d);
    double w = 0;
    for (int i = 0; i < p->n_layers; i++) w += l[i].f_ms + l[i].i_ms + l[i].w_ms;
    return w;
}

int op_ptrain_plan_slowdown(const op_plan *p, double *k) {
    double lo = 0;
    for (int d = 0; d < p->P; d++) {
        k[d] = dev_work(p, d);
        if (d == 0 || k[d] < lo) lo = k[d];
    }
    int slow = 0;
    for (int d = 0; d < p->P; d++) {
        k[d] = lo > 0 ? k[d] / lo : 1;
        slow |= k[d] > 1;
        if (!(k[d] <= 1000)) slow = -1; /* beyond what --slowdown takes */
    }
    if (slow < 0)
        for (int d = 0; d < p->P; d++) k[d] = 1;
    return slow;
}

int op_ptrain_slowdown_plan_kinds(op_plan *p, const op_layer_cost *const *dev_costs,
                                  const double *k, op_err *err) {
    /* new type of device d: the distinct (old type, costs) pairs in device order, at most P;
     * each keeps its old type's name, then op_exec_slow_plan scales device d's by k[d] */
    const int P = p->P;
    for (int d = 0; d < P; d++)
        if (!(k[d] > 0 && k[d] <= 1e6)) /* before p changes */
            return op_errf(err, OP_EINVAL, "slow-down of device %d: %g (want > 0 and <= 1e6)", d, k[d]);
    size_t L = (size_t)p->n_layers;
    int *nty = op_xcalloc((size_t)P, sizeof *nty), *first = op_xcalloc((size_t)P, sizeof *first), nt = 0;
    for (int d = 0; d < P; d++) {
        int t = 0;
        while (t < nt && !(p->dev_type[first[t]] == p->dev_type[d] && dev_costs[first[t]] == dev_costs[d])) t++;
        if (t == nt) first[nt++] = d;
        nty[d] = t;
    }
    op_layer_cost *rows = op_xcalloc((size_t)nt * L, sizeof *rows);
    char(*names)[32] = op_xcalloc((size_t)nt, 32);
    for (int t = 0; t < nt; t++) {
        memcpy(rows + (size_t)t * L, dev_costs[first[t]], sizeof *rows * L);
        if (p->type_name) memcpy(names[t], p->type_name[p->n_types > 1 ? p->dev_type[first[t]] : 0], 32);
    }
    op_plan_set_types(p, nt, (const char(*)[32])names, rows, nty, p->dev_mem_limit);
    free(rows), free(names), free(nty), free(first);
    op_exec_slow_plan(p, k); /* k checked above */
    return op_sim_replay(p, NULL, err);
}

int op_ptrain_slowdown_plan(op_plan *p, const op_layer_cost *machine, const double *k,
                            op_err *err) {
    const op_layer_cost **dc = op_xcalloc((size_t)p->P, sizeof *dc);
    for (int d = 0; d < p->P; d++) dc[d] = machine;
    int rc = op_ptrain_slowdown_plan_kinds(p, dc, k, err);
    free(dc);
    return rc;
}

int op_ptrain_tune_slow(const op_nn_model *m, const op_layer_cost *machine, int P, int M,
                        const op_comm *comm, double overhead_ms, const double *k, op_plan *out,
                        op_err *err) {
    /* a mixed problem: one type per distinct k, its costs machine x k */
    size_t L = (size_t)m->n_layers;
    op_layer_cost *rows = op_xcalloc((size_t)P * L, sizeof *rows);
    int *dt = op_xcalloc((size_t)P, sizeof *dt), nt = 0;
    double *kt = op_xcalloc((size_t)P, sizeof *kt);
    char(*names)[32] = op_xcalloc((size_t)P, 32);
    for (int d = 0; d < P; d++) {
        int t = 0;
        while (t < nt && kt[t] != k[d]) t++;
        if (t == nt) {
            kt[nt] = k[d];
            snprintf(names[nt], 32, "x%g", k[d]);
            for (size_t l = 0; l < L; l++) {
                op_layer_cost c = machine[l];
                c.f_ms *= k[d], c.i_ms *= k[d], c.w_ms *= k[d], c.f_sel_ms *= k[d];
                rows[(size_t)nt * L + l] = c;
            }
            nt++;
        }
        dt[d] = t;
    }
    op_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.model = m->name, pr.layers = rows, pr.n_layers = m->n_layers, pr.P = P, pr.M = M;
    pr.comm = *comm, pr.tokens_per_mb = (double)m->cfg.batch * m->cfg.seq;
    pr.op_overhead_ms = overhead_ms;
    pr.n_types = nt, pr.type_layers = rows, pr.dev_type = dt;
    pr.type_name = (const char(*)[32])names;
    op_tune_opts to;
    op_tune_opts_default(&to);
    int rc = op_tune(&pr, &to, out, err);
    free(rows), free(dt), free(kt), free(names);
    return rc;
}

/* ---- the compute wrapper */

static int slow_setup(void *ctx, const op_plan *p, int rank, op_err *err) {
    op_ptrain_slow *s = ctx;
    return s->inner.setup ? s->inner.setup(s->inner.ctx, p, rank, err) : OP_OK;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int slow_run(void *ctx, const op_compute_call *c, op_err *err) {
    op_ptrain_slow *s = ctx;
    double t0 = op_now_s();
    int rc = s->inner.run(s->inner.ctx, c, err);
    if (rc) return rc;
    int r = s->p->stage_dev[c->stage];
    double k = s->k[r];
    if (k <= 1) return OP_OK;
    double t1 = op_now_s(), want = t1 + (k - 1) * (t1 - t0);
    if (s->p->P <= s->cores) {
        /* spin, progressing messages: it ends within a microsecond of `want` unless the thread
         * lost its core meanwhile, and then the step was disturbed: the spin's own CPU share
         * says so (op_ptrain_slow.spin_cpu), no later wait makes up for it */
        double c0 = thread_cpu_s();
        do
            if (op_exec_sleep_until(c->rt, op_now_s()) != OP_OK)
                return op_errf(err, OP_ETIMEOUT, "stopped while slowed down");
        while (op_now_s() < want);
        if (r < 64) s->spin_cpu[r] += thread_cpu_s() - c0, s->spin_wall[r] += op_now_s() - t1;
        return OP_OK;
    }
    /* napping wakes up late by the timer's slack and the scheduler's delay: aim early by the
     * running mean of how late this rank's naps woke up (as emulation does), so a stretched op
     * lasts k times the op on average */
    double aim = r < 64 && s->n[r] > 0 ? want - s->late[r] / s->n[r] : want;
    if (op_exec_sleep_until(c->rt, aim > t1 ? aim : t1) != OP_OK)
        return op_errf(err, OP_ETIMEOUT, "stopped while slowed down");
    if (r < 64) {
        double late = op_now_s() - aim;
        s->late[r] += late > 0 ? late : 0, s->n[r]++;
    }
    return OP_OK;
}

static void slow_teardown(void *ctx) {
    op_ptrain_slow *s = ctx;
    if (s->inner.teardown) s->inner.teardown(s->inner.ctx);
}

static int64_t slow_bytes(void *ctx, int stage) {
    op_ptrain_slow *s = ctx;
    return s->inner.boundary_bytes(s->inner.ctx, stage);
}

op_compute op_ptrain_slow_compute(op_ptrain_slow *s) {
    long n = sysconf(_SC_NPROCESSORS_ONLN); /* once, before any rank runs */
    s->cores = n > 0 ? (int)n : 1;
    op_compute c = s->inner;
    c.ctx = s;
    c.setup = slow_setup;
    c.run = slow_run;
    c.teardown = slow_teardown;
    c.boundary_bytes = s->inner.boundary_bytes ? slow_bytes : NULL;
    return c;
}
