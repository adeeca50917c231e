/* loop.c: single-process training of the reference model: the sequential baseline every
 * pipelined run must match bitwise.  The model may be cut into several in-process stages;
 * each microbatch then runs F through the stages and I, W back, exactly as an executor
 * would, with boundary activations copied between stage buffers. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "octopipe/train.h"

void op_train_opts_default(op_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->data = "text";
    o->microbatches = 4;
    o->steps = 100;
    o->n_stages = 1;
    o->seed = 1;
    op_adamw_default(&o->opt);
    o->log = stdout;
}

typedef struct {
    op_nn_model m;
    int S;
    op_nn_stage *st;
    op_nn_stage **sp;
    float **io; /* [S+1] boundary buffers; io[0], io[S] unused (tokens / loss) */
    float **gio;
} trainer;

static void trainer_init(trainer *t, int S, int M, int policy) {
    t->S = S;
    t->st = op_xcalloc((size_t)S, sizeof *t->st);
    t->sp = op_xcalloc((size_t)S, sizeof *t->sp);
    t->io = op_xcalloc((size_t)S + 1, sizeof *t->io);
    t->gio = op_xcalloc((size_t)S + 1, sizeof *t->gio);
    int L = t->m.n_layers;
    for (int s = 0; s < S; s++) {
        /* even split by layer count; the pipelined path takes stages from the plan */
        op_nn_stage_init(&t->st[s], &t->m, s * L / S, (s + 1) * L / S, M);
        op_nn_stage_set_policy(&t->st[s], policy);
        t->sp[s] = &t->st[s];
    }
    for (int s = 1; s < S; s++) {
        t->io[s] = op_xcalloc(op_nn_io_floats(&t->m), sizeof(float));
        t->gio[s] = op_xcalloc(op_nn_io_floats(&t->m), sizeof(float));
    }
}

static void trainer_free(trainer *t) {
    for (int s = 0; s < t->S; s++) op_nn_stage_free(&t->st[s]);
    for (int s = 0; s <= t->S; s++) free(t->io[s]), free(t->gio[s]);
    free(t->st), free(t->sp), free(t->io), free(t->gio);
}

/* One step: all microbatches F then B (I then W), grads folded in microbatch order. */
static double train_step(trainer *t, const op_train_data *d, const op_adamw *opt, int64_t step,
                         int M, int32_t *tok, int32_t *tgt) {
    for (int s = 0; s < t->S; s++) op_nn_stage_zero_grad(&t->st[s]);
    double ce = 0;
    for (int mb = 0; mb < M; mb++) {
        op_train_data_batch(d, step, mb, tok, tgt);
        op_nn_batch b = {tok, tgt, 1.0f / (float)M};
        for (int s = 0; s < t->S; s++) {
            double l = op_nn_stage_forward(&t->st[s], mb, &b, t->io[s], t->io[s + 1]);
            if (s == t->S - 1) ce += l; /* the head's CE; MoE balance terms: stage aux_loss */
        }
        for (int s = t->S - 1; s >= 0; s--) op_nn_stage_backward(&t->st[s], mb, t->gio[s + 1], t->gio[s]);
    }
    for (int s = 0; s < t->S; s++) op_adamw_stage(opt, step, &t->st[s]);
    return ce / M;
}

int op_train_single(const op_train_opts *o, op_err *err) {
    trainer t;
    memset(&t, 0, sizeof t);
    int rc = op_nn_model_from_spec(&t.m, o->model ? o->model : "tiny", err);
    if (rc) return rc;
    t.m.cfg.seed = o->seed;
    int M = o->microbatches > 0 ? o->microbatches : 1;
    int S = o->n_stages > 0 ? o->n_stages : 1;
    if (S > t.m.n_layers)
        return op_errf(err, OP_EINVAL, "%d stages for %d layers", S, t.m.n_layers);
    /* the stages may hold only E or only L when the pattern is short: that is fine */
    op_train_data d;
    rc = op_train_data_open(&d, o->data, &t.m.cfg, o->seed, err);
    if (rc) return rc;
    op_adamw opt = o->opt;
    if (opt.lr <= 0) op_adamw_default(&opt);
    if (o->recompute < 0 || o->recompute > 3) {
        op_train_data_free(&d);
        return op_errf(err, OP_EINVAL, "activation policy %d (keep 0, selective 1, full 2, offload 3)",
                       o->recompute);
    }
    trainer_init(&t, S, M, o->recompute);
    char path[512] = "";
    int64_t step = 0;
    if (o->ckpt_dir) {
        mkdir(o->ckpt_dir, 0777);
        snprintf(path, sizeof path, "%s/model.ckpt", o->ckpt_dir);
        if (o->resume) {
            rc = op_ckpt_load(path, &t.m, t.sp, S, &step, err);
            if (rc) goto done;
        }
    } else if (o->resume) {
        rc = op_errf(err, OP_EINVAL, "--resume needs a checkpoint directory");
        goto done;
    }
    FILE *log = o->log ? o->log : stdout;
    size_t N = (size_t)t.m.cfg.batch * t.m.cfg.seq;
    int32_t *tok = op_xmalloc(N * sizeof *tok), *tgt = op_xmalloc(N * sizeof *tgt);
    double t0 = op_now_s();
    int64_t first = step;
    for (; step < o->steps; step++) {
        double loss = train_step(&t, &d, &opt, step, M, tok, tgt);
        if (o->losses) o->losses[step] = loss;
        int last = step + 1 == o->steps;
        if (o->log_every > 0 && ((step + 1) % o->log_every == 0 || last)) {
            double dt = op_now_s() - t0;
            fprintf(log, "step %5lld  loss %.4f  tokens/s %.0f\n", (long long)step + 1, op_shown(loss),
                    dt > 0 ? (double)(step + 1 - first) * M * N / dt : 0.0);
            fflush(log);
        }
        if (path[0] && (last || (o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0))) {
            op_ckpt_run run;
            op_ckpt_run_set(&run, M, &opt, o->data);
            rc = op_ckpt_save_run(path, &t.m, t.sp, S, step + 1, &run, err);
            if (rc) break;
        }
    }
    free(tok), free(tgt);
    if (o->peak_act) {
        *o->peak_act = 0;
        for (int s = 0; s < S; s++)
            if (t.st[s].peak_act_bytes > *o->peak_act) *o->peak_act = t.st[s].peak_act_bytes;
    }
done:
    trainer_free(&t);
    op_train_data_free(&d);
    return rc;
}
