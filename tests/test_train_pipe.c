/* test_train_pipe.c: pipelined training of the reference model through the executor (thread
 * transport, real compute) gives bitwise the losses and weights of the single-process run, for
 * P in {1, 2, 4}, the classic schedules and OctoPipe's tuned plan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/sched.h"
#include "octopipe/train.h"
#include "octopipe/tune.h"

#define MODEL "tiny:EM*-#M*-#M-L"
#define STEPS 3

static char dir[64];

static int slurp(const char *path, char **d, size_t *n) {
    op_err e;
    return op_read_file(path, d, n, &e);
}

/* single-process reference: losses and the checkpoint bytes after STEPS steps */
static void reference(int M, double *losses, char **ck, size_t *nck) {
    char sub[128], path[160];
    snprintf(sub, sizeof sub, "%s/ref%d", dir, M);
    op_train_opts o;
    op_train_opts_default(&o);
    o.model = MODEL, o.data = "copy", o.microbatches = M, o.steps = STEPS;
    o.ckpt_dir = sub, o.losses = losses;
    op_err e = {0};
    int rc = op_train_single(&o, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    snprintf(path, sizeof path, "%s/model.ckpt", sub);
    CHECK(slurp(path, ck, nck) == 0);
    unlink(path);
    rmdir(sub);
}

static void pipe_case(const char *sched, int P, int M, const double *ref_loss, const char *ref_ck,
                      size_t ref_n) {
    op_nn_model m;
    op_err e = {0};
    CHECK(op_nn_model_from_spec(&m, MODEL, &e) == OP_OK);
    op_layer_cost *costs = calloc((size_t)m.n_layers, sizeof *costs);
    op_layer_prof prof[8];
    memset(prof, 0, sizeof prof);
    const char *kinds = "EM*-#L";
    for (int k = 0; k < 6; k++) /* fixed costs: plans do not depend on timing noise */
        prof[k] = (op_layer_prof){kinds[k], 1.0, 1.0, 0.5, 1000, 500, 4000, 0};
    op_train_layer_costs(&m, prof, 6, costs);
    op_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.model = MODEL, pr.layers = costs, pr.n_layers = m.n_layers, pr.P = P, pr.M = M;
    pr.comm.none = 1;
    pr.tokens_per_mb = m.cfg.batch * m.cfg.seq;
    op_plan plan;
    int rc;
    if (!strcmp(sched, "tuned")) { /* OctoPipe's own plan: any placement, any order */
        op_tune_opts to;
        memset(&to, 0, sizeof to);
        to.max_evals = 400;
        to.seed = 3;
        rc = op_tune(&pr, &to, &plan, &e);
    } else {
        rc = op_sched_build(sched, &pr, &plan, &e);
    }
    if (rc) {
        printf("  %-10s P=%d M=%d: not applicable (%s)\n", sched, P, M, e.msg);
        free(costs);
        return;
    }
    op_train_pipe tp;
    rc = op_train_pipe_init(&tp, MODEL, "copy", 1, NULL, &plan, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    op_compute c = op_train_pipe_compute(&tp, 1);
    op_exec_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.fault.rank = -1;
    eo.quiet = 1;
    double loss[STEPS];
    int ok = 1;
    for (int s = 0; s < STEPS && ok; s++) {
        op_exec_result res;
        rc = op_exec_run_threads(&plan, &c, &eo, &res, &e);
        CHECK_MSG(rc == OP_OK, "%s P=%d: %s", sched, P, e.msg);
        ok = rc == OP_OK;
        op_exec_result_free(&res);
        loss[s] = op_train_pipe_step_end(&tp, -1);
    }
    if (ok) {
        CHECK_MSG(!memcmp(loss, ref_loss, sizeof loss), "%s P=%d: losses %.9g %.9g %.9g vs %.9g %.9g %.9g",
                  sched, P, loss[0], loss[1], loss[2], ref_loss[0], ref_loss[1], ref_loss[2]);
        char path[160];
        snprintf(path, sizeof path, "%s/pipe.ckpt", dir);
        op_nn_stage **sp = calloc((size_t)tp.S, sizeof *sp);
        for (int s = 0; s < tp.S; s++) sp[s] = &tp.st[s];
        CHECK(op_ckpt_save(path, &tp.m, sp, tp.S, tp.step, &e) == OP_OK);
        char *d = NULL;
        size_t n = 0;
        CHECK(slurp(path, &d, &n) == 0);
        CHECK_MSG(n == ref_n && !memcmp(d, ref_ck, n), "%s P=%d: weights differ", sched, P);
        printf("  %-10s P=%d M=%d S=%d: %d steps, losses and weights bitwise equal\n", sched, P,
               M, plan.S, STEPS);
        free(d), free(sp);
        unlink(path);
    }
    op_train_pipe_free(&tp);
    op_plan_free(&plan);
    free(costs);
}

TEST(pipelined_equals_single_process) {
    static const char *scheds[] = {"1f1b", "i1f1b", "zbh1", "zbv", "dualpipev", "balanced-1f1b", "tuned"};
    for (int P = 1; P <= 4; P *= 2) {
        int M = P == 4 ? 8 : 4;
        double ref[STEPS];
        char *ck = NULL;
        size_t nck = 0;
        reference(M, ref, &ck, &nck);
        for (size_t k = 0; k < sizeof scheds / sizeof *scheds; k++)
            pipe_case(scheds[k], P, M, ref, ck, nck);
        free(ck);
    }
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/octopipe-pipe-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(pipelined_equals_single_process);
    rmdir(dir);
    return check_report("train_pipe");
}
