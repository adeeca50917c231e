/* pipe_plan.c: from a profile of the reference model to a plan the executor runs: per-layer
 * costs (times from op_train_profile, memory probed from the stage arenas), the link model,
 * and the plan itself (tuner, classic schedule, or a plan file checked against the model). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "octopipe/ptrain.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

/* Activation bytes of one layer of kind sym, one microbatch, as the stage arenas count them. */
typedef struct {
    int64_t after_f, peak_i, after_i;
    int64_t after_f_sel; /* held after F under selective recomputation */
} mem_probe;

static mem_probe probe(const op_nn_model *m, int li) {
    size_t nx = op_nn_io_floats(m);
    int N = m->cfg.batch * m->cfg.seq;
    float *x = op_xcalloc(nx, sizeof(float)), *y = op_xcalloc(nx, sizeof(float));
    float *dy = op_xcalloc(nx, sizeof(float)), *dx = op_xcalloc(nx, sizeof(float));
    int32_t *tok = op_xcalloc((size_t)N, sizeof(int32_t));
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f, dy[i] = 1e-3f;
    for (int i = 0; i < N; i++) tok[i] = (i * 7) % m->cfg.vocab;
    op_nn_batch b = {tok, tok, 1.0f};
    char sym = m->pattern[li];
    op_nn_stage s;
    op_nn_stage_init(&s, m, li, li + 1, 1);
    mem_probe r;
    op_nn_stage_zero_grad(&s);
    op_nn_stage_forward(&s, 0, &b, sym == 'E' ? NULL : x, sym == 'L' ? NULL : y);
    r.after_f = (int64_t)s.act_bytes;
    s.peak_act_bytes = s.act_bytes;
    op_nn_stage_backward_input(&s, 0, sym == 'L' ? NULL : dy, sym == 'E' ? NULL : dx);
    r.after_i = (int64_t)s.act_bytes;
    r.peak_i = (int64_t)s.peak_act_bytes;
    op_nn_stage_backward_weight(&s, 0);
    op_nn_stage_set_policy(&s, OP_ACT_SELECTIVE);
    op_nn_stage_zero_grad(&s);
    op_nn_stage_forward(&s, 0, &b, sym == 'E' ? NULL : x, sym == 'L' ? NULL : y);
    r.after_f_sel = (int64_t)s.act_bytes;
    op_nn_stage_backward(&s, 0, sym == 'L' ? NULL : dy, sym == 'E' ? NULL : dx);
    op_nn_stage_free(&s);
    free(x), free(y), free(dy), free(dx), free(tok);
    return r;
}

int op_ptrain_profile_cpu(const op_nn_model *m, int repeats, op_layer_prof *out) {
    return op_train_profile_clock(m, repeats, 1, out);
}

typedef struct {
    const op_nn_model *m;
    int repeats, cpu_clock, n;
    op_layer_prof prof[8];
} pjob;

static void *pmain(void *a) {
    pjob *j = a;
    j->n = op_train_profile_clock(j->m, j->repeats, j->cpu_clock, j->prof);
    return NULL;
}

int op_ptrain_profile_ranks(const op_nn_model *m, int repeats, int ranks, int cpu_clock,
                            op_layer_prof *out, op_err *err) {
    if (ranks < 1) ranks = 1;
    pjob *j = op_xcalloc((size_t)ranks, sizeof *j);
    pthread_t *th = op_xcalloc((size_t)ranks, sizeof *th);
    op_nn_blas_single_thread(); /* before the threads exist */
    int started = 0, terr = 0;
    for (; started < ranks; started++) {
        j[started].m = m, j[started].repeats = repeats, j[started].cpu_clock = cpu_clock;
        if ((terr = pthread_create(&th[started], NULL, pmain, &j[started]))) break; /* out of threads */
    }
    for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
    if (terr) {
        free(j), free(th);
        return op_errf(err, OP_EIO, "profile: cannot start profiler %d of %d as a thread: %s",
                       started + 1, ranks, strerror(terr));
    }
    int n = j[0].n;
    for (int k = 0; k < n; k++) {
        out[k] = j[0].prof[k];
        for (int r = 1; r < ranks; r++) {
            out[k].f_ms += j[r].prof[k].f_ms;
            out[k].i_ms += j[r].prof[k].i_ms;
            out[k].w_ms += j[r].prof[k].w_ms;
            out[k].f_sel_ms += j[r].prof[k].f_sel_ms;
        }
        out[k].f_ms /= ranks, out[k].i_ms /= ranks, out[k].w_ms /= ranks, out[k].f_sel_ms /= ranks;
    }
    free(j), free(th);
    return n;
}

int op_ptrain_layer_costs(const op_nn_model *m, const op_layer_prof *prof, int n_prof,
                          op_layer_cost *out, op_err *err) {
    mem_probe seen[128];
    char seen_sym[128];
    int n_seen = 0;
    int64_t io = (int64_t)(op_nn_io_floats(m) * sizeof(float));
    for (int li = 0; li < m->n_layers; li++) {
        char sym = m->pattern[li];
        const op_layer_prof *p = NULL;
        for (int k = 0; k < n_prof; k++)
            if (prof[k].sym == sym) p = &prof[k];
        if (!p) return op_errf(err, OP_EINVAL, "profile: no measurement for layer kind '%c' of %s", sym, m->name);
        int k = 0;
        while (k < n_seen && seen_sym[k] != sym) k++;
        if (k == n_seen) seen_sym[n_seen] = sym, seen[n_seen++] = probe(m, li);
        op_layer_cost *c = &out[li];
        memset(c, 0, sizeof *c);
        int kind = op_layer_kind_from_sym(sym);
        snprintf(c->name, sizeof c->name, "%s.%d", kind >= 0 ? op_layer_kind_name((op_layer_kind)kind) : "layer", li);
        c->sym = sym;
        c->f_ms = p->f_ms, c->i_ms = p->i_ms, c->w_ms = p->w_ms;
        c->out_bytes = sym == 'L' ? 0 : io;
        /* the planner's rule (cost.h): F allocates act; I peaks at held + act_i and leaves
         * act_w (more than act for some kinds: I stashes output gradients for W); W frees
         * act_w.  So the simulator's walk is op_ptrain_pred_act_peak's, exactly. */
        c->act_bytes = seen[k].after_f;
        c->act_w_bytes = seen[k].after_i;
        c->act_i_bytes = seen[k].peak_i - seen[k].after_f;
        c->act_sel_bytes = seen[k].after_f_sel; /* selective: what stays after F */
        c->f_sel_ms = p->f_sel_ms;              /* and the attention core redone in I */
        c->param_bytes = (int64_t)(op_nn_layer_nparams(sym, &m->cfg) * sizeof(float));
        c->static_bytes = 4 * c->param_bytes;
        c->params = (int64_t)op_nn_layer_nparams(sym, &m->cfg);
    }
    return OP_OK;
}

int op_ptrain_pred_act_peak(const op_nn_model *m, const op_plan *p, int64_t *peak) {
    if (p->n_layers != m->n_layers) return OP_EINVAL;
    mem_probe kinds[128];
    char sy[128];
    int ns = 0;
    /* per stage: AF held after F (keep), SF after F (selective), AI after I, EX I's transient,
     * IN the input full keeps */
    int64_t *A = op_xcalloc((size_t)p->S * 5, sizeof(int64_t));
    for (int s = 0; s < p->S; s++) {
        int64_t *a = A + 5 * s;
        a[4] = (int64_t)op_nn_stage_in_bytes(m, p->stage_first[s]);
        for (int li = p->stage_first[s]; li < p->stage_first[s + 1]; li++) {
            int k = 0;
            while (k < ns && sy[k] != m->pattern[li]) k++;
            if (k == ns) sy[ns] = m->pattern[li], kinds[ns++] = probe(m, li);
            a[0] += kinds[k].after_f, a[1] += kinds[k].after_f_sel, a[2] += kinds[k].after_i;
            a[3] += kinds[k].peak_i - kinds[k].after_f;
        }
    }
    for (int d = 0; d < p->P; d++) {
        int64_t cur = 0, pk = 0;
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            int s = o->stage, pol = p->stage_act[s];
            const int64_t *a = A + 5 * s;
            int64_t AF = a[0], SF = a[1], AI = a[2], EX = a[3], IN = a[4];
            int64_t kept = pol == OP_ACT_SELECTIVE ? SF : pol == OP_ACT_FULL ? IN
                         : pol == OP_ACT_OFFLOAD ? 0 : AF;
            switch ((op_kind)o->kind) {
            case OP_F:
                pk = cur + AF > pk && pol == OP_ACT_OFFLOAD ? cur + AF : pk; /* before the copy */
                cur += kept;
                break;
            case OP_I:
            case OP_B:
                /* the stash is whole again before I: reloaded, recomputed (full holds its input
                 * until the forward is redone) */
                if (pol == OP_ACT_FULL && cur + AF > pk) pk = cur + AF;
                cur += AF - kept;
                pk = cur + EX > pk ? cur + EX : pk;
                cur += o->kind == OP_I ? AI - AF : -AF;
                break;
            case OP_W: cur -= AI; break;
            }
            pk = cur > pk ? cur : pk;
        }
        peak[d] = pk;
    }
    free(A);
    return OP_OK;
}

void op_ptrain_default_comm(op_comm *c) {
    memset(c, 0, sizeof *c);
    /* boundary messages are copies within this machine's memory: a few microseconds of
     * latency (polling) and memcpy bandwidth; `octopipe profile comm` measures the MPI link */
    c->intra_lat_ms = c->inter_lat_ms = 0.01;
    c->intra_bw_GBps = c->inter_bw_GBps = 5.0;
    c->host_lat_ms = 0.01, c->host_bw_GBps = 5.0; /* offload: a copy into another arena */
}

static int check_file_plan(const op_nn_model *m, const op_plan *p, int P, int M, const char *spec,
                           op_err *err) {
    if (p->n_layers != m->n_layers)
        return op_errf(err, OP_EINVAL, "%s: plan has %d layers, model %s has %d", spec, p->n_layers,
                       m->name, m->n_layers);
    for (int i = 0; i < m->n_layers; i++)
        if (p->layers[i].sym && p->layers[i].sym != m->pattern[i])
            return op_errf(err, OP_EINVAL, "%s: layer %d is '%c' in the plan, '%c' in model %s", spec,
                           i, p->layers[i].sym, m->pattern[i], m->name);
    if ((P > 0 && p->P != P) || (M > 0 && p->M != M))
        return op_errf(err, OP_EINVAL, "%s: plan is for %d devices x %d microbatches, asked %d x %d",
                       spec, p->P, p->M, P, M);
    return OP_OK;
}

/* What a --plan spec names: the tuner, a plan file, or (anything else) a schedule. */
typedef enum { SPEC_TUNE, SPEC_FILE, SPEC_SCHED } spec_kind;

static spec_kind kind_of(const char *spec) {
    if (!spec || !strcmp(spec, "auto") || !strcmp(spec, "tuned") || !strcmp(spec, "octopipe"))
        return SPEC_TUNE;
    if (strchr(spec, '/') || strstr(spec, ".json") || access(spec, R_OK) == 0) return SPEC_FILE;
    return SPEC_SCHED;
}

int op_ptrain_plan_spec_check(const char *spec, op_err *err) {
    if (kind_of(spec) != SPEC_SCHED) return OP_OK;
    const char *const *nm = op_sched_names();
    for (int i = 0; nm[i]; i++)
        if (!strcmp(nm[i], spec)) return OP_OK;
    op_buf b = {0};
    for (int i = 0; nm[i]; i++) op_buf_printf(&b, "%s %s", i ? "," : "", nm[i]);
    op_errf(err, OP_EINVAL, "--plan '%s': not auto, a plan file or a schedule (known:%s)", spec,
            b.data ? b.data : "");
    op_buf_free(&b);
    return OP_EINVAL;
}

int op_ptrain_plan_file_check(const op_nn_model *m, int P, int M, const char *spec, op_err *err) {
    if (kind_of(spec) != SPEC_FILE) return OP_OK;
    op_plan p;
    int rc = op_plan_read(spec, &p, err);
    if (rc) return rc;
    rc = check_file_plan(m, &p, P, M, spec, err);
    op_plan_free(&p);
    return rc;
}

int op_ptrain_make_plan(const op_nn_model *m, const op_layer_cost *layers, int P, int M,
                        const op_comm *comm, double overhead_ms, const char *spec, op_plan *out,
                        op_err *err) {
    memset(out, 0, sizeof *out);
    op_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.model = m->name;
    pr.layers = layers;
    pr.n_layers = m->n_layers;
    pr.P = P, pr.M = M;
    pr.comm = *comm;
    pr.tokens_per_mb = (double)m->cfg.batch * m->cfg.seq;
    pr.op_overhead_ms = overhead_ms;
    int rc;
    spec_kind kind = kind_of(spec);
    if (kind == SPEC_TUNE) {
        op_tune_opts to;
        op_tune_opts_default(&to);
        rc = op_tune(&pr, &to, out, err);
    } else if (kind == SPEC_FILE) {
        rc = op_plan_read(spec, out, err);
        if (rc == OP_OK) rc = check_file_plan(m, out, P, M, spec, err);
        if (rc == OP_OK) {
            /* the file's costs are what it was built from; re-predict with this machine's */
            for (int i = 0; i < m->n_layers; i++) out->layers[i] = layers[i];
            out->comm = *comm;
            out->op_overhead_ms = overhead_ms;
            out->tokens_per_mb = pr.tokens_per_mb;
            rc = op_sim_replay(out, NULL, err);
        }
        if (rc) {
            op_plan_free(out);
            return rc;
        }
        return OP_OK;
    } else {
        rc = op_sched_build(spec, &pr, out, err);
    }
    if (rc) {
        op_err_prefix(err, "plan '%s'", spec);
        return rc;
    }
    return OP_OK;
}

