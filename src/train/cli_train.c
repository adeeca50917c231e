/* cli_train.c: `octopipe train`: the reference model trained through a plan.  --devices 1
 * without --plan runs the single-process loop; otherwise the model is profiled, a plan is
 * made (auto = the tuner, a schedule name, or a plan file) and every step runs through the
 * executor on the thread transport, printing measured against predicted iteration time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "octopipe/sched.h"
#include "octopipe/train.h"
#include "octopipe/tune.h"

typedef struct {
    const char *model, *plan, *data, *ckdir, *trace;
    int P, M, steps, ck_every, resume, log_every;
    long seed;
    double lr;
} targs;

static void help(void) {
    printf("usage: octopipe train --model PRESET|PATTERN [--devices P] [--microbatches M]\n"
           "                      [--plan auto|SCHEDULE|FILE] [--steps N] [--data SPEC]\n"
           "                      [--checkpoint DIR [--checkpoint-every N] [--resume]]\n"
           "                      [--lr X] [--seed N] [--log-every N] [--trace FILE]\n\n"
           "Trains the reference hybrid model (FP32, one thread per rank).  With --devices 1 and\n"
           "no --plan it is the single-process loop; otherwise the layers are profiled, a plan is\n"
           "made and each step runs through the executor, ranks as threads of this process.  Any\n"
           "plan gives bitwise the losses and weights of the single-process run.\n\n"
           "options:\n"
           "  --model SPEC          tiny, small, a pattern of E M * - # L, or PRESET:PATTERN\n"
           "  --devices P           pipeline ranks (default 1)\n"
           "  --microbatches M      per step (default 4)\n"
           "  --plan WHAT           auto (the tuner, default), a schedule (1f1b, i1f1b, zbh1, zbv,\n"
           "                        dualpipev, ...), or a plan file made for this model\n"
           "  --steps N             train until step N (default 100)\n"
           "  --data SPEC           text (the Jargon File, default), copy, reverse, or a text file\n"
           "  --checkpoint DIR      write DIR/model.ckpt at the end (and every --checkpoint-every)\n"
           "  --resume              continue from DIR/model.ckpt (bitwise as if never stopped)\n"
           "  --lr X                AdamW learning rate (default 3e-3)\n"
           "  --seed N              init and data seed (default 1)\n"
           "  --log-every N         progress line every N steps (default 10)\n"
           "  --trace FILE          Chrome trace of the last step, measured and predicted\n\n"
           "example:\n  octopipe train --model small --devices 2 --microbatches 8 --steps 200\n");
}

static int parse_int(const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, targs *a) {
    memset(a, 0, sizeof *a);
    a->P = 1, a->M = 4, a->steps = 100, a->log_every = 10, a->seed = 1, a->data = "text";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            help();
            return 1;
        }
        if (!strcmp(f, "--resume")) {
            a->resume = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "octopipe train: unknown or incomplete flag '%s' (octopipe train --help)\n", f);
            return 2;
        }
        i++;
        if (!strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "--plan")) a->plan = v;
        else if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--checkpoint")) a->ckdir = v;
        else if (!strcmp(f, "--trace")) a->trace = v;
        else if (!strcmp(f, "--lr")) {
            char *end = NULL;
            a->lr = strtod(v, &end);
            if (*end || !(a->lr > 0 && a->lr < 1)) {
                fprintf(stderr, "octopipe train: --lr needs a number in (0, 1) (got '%s')\n", v);
                return 2;
            }
        } else {
            static const char *ints[] = {"--devices", "--microbatches", "--steps",
                                         "--checkpoint-every", "--seed", "--log-every"};
            static const long hi[] = {64, 4096, 100000000, 100000000, 1L << 30, 100000000};
            int k = -1;
            for (int j = 0; j < 6; j++)
                if (!strcmp(f, ints[j])) k = j;
            if (k < 0) {
                fprintf(stderr, "octopipe train: unknown flag '%s' (octopipe train --help)\n", f);
                return 2;
            }
            if (parse_int(v, k == 3 || k == 5 ? 0 : 1, hi[k], &x)) {
                fprintf(stderr, "octopipe train: %s needs an integer in [%d, %ld] (got '%s')\n", f,
                        k == 3 || k == 5 ? 0 : 1, hi[k], v);
                return 2;
            }
            if (k == 0) a->P = (int)x;
            if (k == 1) a->M = (int)x;
            if (k == 2) a->steps = (int)x;
            if (k == 3) a->ck_every = (int)x;
            if (k == 4) a->seed = x;
            if (k == 5) a->log_every = (int)x;
        }
    }
    if (!a->model) {
        fprintf(stderr, "octopipe train: --model PRESET|PATTERN is required (octopipe train --help)\n");
        return 2;
    }
    if (a->resume && !a->ckdir) {
        fprintf(stderr, "octopipe train: --resume needs --checkpoint DIR\n");
        return 2;
    }
    return 0;
}

static int make_plan(const targs *a, const op_nn_model *m, op_plan *plan, op_err *e) {
    if (a->plan && strcmp(a->plan, "auto") && strchr(a->plan, '.')) { /* a file */
        int rc = op_plan_read(a->plan, plan, e);
        if (rc) return rc;
        if (plan->n_layers != m->n_layers || plan->P != a->P || plan->M != a->M) {
            op_plan_free(plan);
            return op_errf(e, OP_EINVAL, "%s: made for %d layers, P=%d, M=%d; this run has %d, %d, %d",
                           a->plan, plan->n_layers, plan->P, plan->M, m->n_layers, a->P, a->M);
        }
        return OP_OK;
    }
    op_layer_prof prof[8];
    int n = op_train_profile(m, 5, prof);
    op_layer_cost *costs = op_xcalloc((size_t)m->n_layers, sizeof *costs);
    op_train_layer_costs(m, prof, n, costs);
    op_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.model = m->name, pr.layers = costs, pr.n_layers = m->n_layers, pr.P = a->P, pr.M = a->M;
    pr.comm.none = 1; /* thread transport: a message is a memcpy */
    pr.tokens_per_mb = (double)m->cfg.batch * m->cfg.seq;
    int rc;
    if (!a->plan || !strcmp(a->plan, "auto")) {
        op_tune_opts to;
        memset(&to, 0, sizeof to);
        to.seed = 1;
        rc = op_tune(&pr, &to, plan, e);
    } else {
        rc = op_sched_build(a->plan, &pr, plan, e);
    }
    free(costs);
    return rc;
}

static int run_pipe(const targs *a, op_err *e) {
    op_nn_model m;
    int rc = op_nn_model_from_spec(&m, a->model, e);
    if (rc) return rc;
    op_plan plan;
    rc = make_plan(a, &m, &plan, e);
    if (rc) return rc;
    op_adamw opt;
    op_adamw_default(&opt);
    if (a->lr > 0) opt.lr = (float)a->lr;
    op_train_pipe tp;
    rc = op_train_pipe_init(&tp, a->model, a->data, (uint64_t)a->seed, &opt, &plan, e);
    if (rc) {
        op_plan_free(&plan);
        return rc;
    }
    op_train_pipe_build(&tp, -1);
    op_nn_stage **sp = op_xcalloc((size_t)tp.S, sizeof *sp);
    for (int s = 0; s < tp.S; s++) sp[s] = &tp.st[s];
    char path[512] = "";
    if (a->ckdir) {
        mkdir(a->ckdir, 0777);
        snprintf(path, sizeof path, "%s/model.ckpt", a->ckdir);
        if (a->resume && (rc = op_ckpt_load(path, &tp.m, sp, tp.S, &tp.step, e))) goto out;
    }
    printf("model %s (%s, %zu parameters), plan %s: %d stages on %d devices, %d microbatches, "
           "predicted %.2f ms/step\n", m.name, m.pattern, m.off[m.n_layers], plan.name, plan.S,
           plan.P, plan.M, plan.pred.makespan_ms);
    op_compute c = op_train_pipe_compute(&tp, 1);
    op_exec_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.fault.rank = -1;
    double tok = (double)m.cfg.batch * m.cfg.seq * a->M;
    while (tp.step < a->steps) {
        op_exec_result res;
        double t0 = op_now_s();
        rc = op_exec_run_threads(&plan, &c, &eo, &res, e);
        double wall = op_now_s() - t0;
        if (rc) break;
        int64_t step = tp.step;
        double loss = op_train_pipe_step_end(&tp, -1);
        int last = tp.step == a->steps;
        if (a->log_every > 0 && ((step + 1) % a->log_every == 0 || last || step == 0))
            printf("step %5lld  loss %.4f  tokens/s %.0f  iteration %.2f ms measured, %.2f predicted (%+.1f%%)\n",
                   (long long)step + 1, loss, tok / wall, res.makespan_ms, plan.pred.makespan_ms,
                   100.0 * (res.makespan_ms - plan.pred.makespan_ms) / plan.pred.makespan_ms);
        fflush(stdout);
        if (last && a->trace) {
            op_buf b = {0};
            op_exec_chrome_trace(&res, &plan, &b);
            rc = op_write_file_atomic(a->trace, b.data, b.len, e);
            op_buf_free(&b);
        }
        op_exec_result_free(&res);
        if (!rc && path[0] && (last || (a->ck_every > 0 && tp.step % a->ck_every == 0)))
            rc = op_ckpt_save(path, &tp.m, sp, tp.S, tp.step, e);
        if (rc) break;
    }
out:
    free(sp);
    op_train_pipe_free(&tp);
    op_plan_free(&plan);
    return rc;
}

int op_cli_train(int argc, char **argv) {
    targs a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    op_err e = {0};
    if (a.P == 1 && !a.plan) {
        op_train_opts o;
        op_train_opts_default(&o);
        o.model = a.model, o.data = a.data, o.microbatches = a.M, o.steps = a.steps;
        o.seed = (uint64_t)a.seed, o.ckpt_dir = a.ckdir, o.ckpt_every = a.ck_every;
        o.resume = a.resume, o.log_every = a.log_every;
        if (a.lr > 0) o.opt.lr = (float)a.lr;
        rc = op_train_single(&o, &e);
    } else {
        rc = run_pipe(&a, &e);
    }
    if (rc) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return rc == OP_EINVAL ? 2 : 1;
    }
    return 0;
}
