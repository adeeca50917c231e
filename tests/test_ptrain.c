/* test_ptrain.c: pipelined training of the reference model through the executor (in-process
 * ranks): for P in {1, 2, 4} and every schedule that fits the model, losses and final weights
 * (the checkpoint file, bit for bit) equal the single-process loop's; measured activation
 * peaks equal the arena-rule prediction; resume is bitwise; bad plans are refused.  The real
 * mpirun case is tests/sh_train.sh. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/ptrain.h"
#include "octopipe/sched.h"

#define STEPS 3
#define MB 8 /* dualpipev needs M >= 2P */

static char tmpdir[64];

static void mktmp(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/octopipe-ptrain-XXXXXX");
    OP_ASSERT(mkdtemp(tmpdir), "mkdtemp");
}

static void rmtmp(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static char *slurp(const char *path, size_t *n) {
    char *d = NULL;
    op_err e;
    if (op_read_file(path, &d, n, &e)) return NULL;
    return d;
}

/* Synthetic costs (no profiling: fast and deterministic plans). */
static void fake_costs(const op_nn_model *m, op_layer_cost *c) {
    op_layer_prof prof[6];
    const char syms[] = "EM*-#L";
    for (int k = 0; k < 6; k++) {
        memset(&prof[k], 0, sizeof prof[k]);
        prof[k].sym = syms[k];
        prof[k].f_ms = 1 + k, prof[k].i_ms = 1 + k, prof[k].w_ms = 0.5 + k;
    }
    op_err e;
    OP_ASSERT(op_ptrain_layer_costs(m, prof, 6, c, &e) == OP_OK, "%s", e.msg);
}

/* tiny dimensions over any pattern */
static void tiny_model(op_nn_model *m, const char *pattern) {
    op_nn_cfg c;
    op_nn_cfg_preset("tiny", &c);
    op_err e;
    OP_ASSERT(op_nn_model_init(m, pattern, &c, &e) == OP_OK, "%s", e.msg);
    snprintf(m->name, sizeof m->name, "%s", pattern);
}

static int pipelined(const op_nn_model *m, int P, const char *sched, const char *dir, double *losses,
                     op_ptrain_report *rep, int resume, int steps) {
    op_layer_cost costs[64];
    fake_costs(m, costs);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    op_plan p;
    op_err e = {0};
    int rc = op_ptrain_make_plan(m, costs, P, MB, &comm, 0, sched, &p, &e);
    if (rc) return rc;
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy";
    o.steps = steps;
    o.ckpt_dir = dir;
    o.resume = resume;
    o.losses = losses;
    o.eo.quiet = 1;
    op_ptrain_report r;
    rc = op_ptrain_run_threads(m, &p, &o, rep ? rep : &r, &e);
    if (rc) fprintf(stderr, "%s P=%d: %s\n", sched, P, e.msg);
    if (rep && rc == OP_OK) {
        int64_t pk[64];
        OP_ASSERT(op_ptrain_pred_act_peak(m, &p, pk) == OP_OK, "pred peak");
        /* MoE buffers follow the routing (data), so bytes differ by alignment padding only */
        for (int d = 0; d < P; d++) CHECK_NEAR((double)rep->peak_act[d], (double)pk[d], 1e-3);
    }
    if (!rep) op_ptrain_report_free(&r);
    op_plan_free(&p);
    return rc;
}

static void single(const char *dir, double *losses) {
    op_train_opts o;
    op_train_opts_default(&o);
    o.model = "tiny";
    o.data = "copy";
    o.microbatches = MB;
    o.steps = STEPS;
    o.ckpt_dir = dir;
    o.losses = losses;
    o.log_every = 0;
    op_err e;
    OP_ASSERT(op_train_single(&o, &e) == OP_OK, "%s", e.msg);
}

/* Every schedule for P in {1, 2, 4} on `tiny`; the ones needing more stages than tiny's 6
 * layers (i1f1b, zbv, dualpipev at P=4) on a 12-layer tiny-width model against its P=1 run,
 * which the first half shows equal to the single-process loop. */
TEST(equivalence_every_schedule) {
    const char *sch[] = {"1f1b", "i1f1b", "zbh1", "zbv", "dualpipev", "auto"};
    char ref[128], dir[128];
    snprintf(ref, sizeof ref, "%s/single", tmpdir);
    double lref[STEPS], l[STEPS];
    single(ref, lref);
    strcat(ref, "/model.ckpt");
    size_t nref, n;
    char *cref = slurp(ref, &nref);
    CHECK(cref != NULL);
    op_nn_model tiny, big;
    tiny_model(&tiny, "EM*-#L");
    tiny_model(&big, "EM*-M*-M*-#L");
    char *cbig = NULL;
    size_t nbig = 0;
    double lbig[STEPS];
    int ran = 0;
    for (int P = 1; P <= 4; P *= 2)
        for (size_t k = 0; k < sizeof sch / sizeof *sch; k++) {
            if (P == 1 && k > 0) continue; /* every schedule is the same one stage */
            op_plan probe;
            op_layer_cost c[64];
            fake_costs(&tiny, c);
            op_comm comm;
            op_ptrain_default_comm(&comm);
            op_err e;
            int fits = op_ptrain_make_plan(&tiny, c, P, MB, &comm, 0, sch[k], &probe, &e) == OP_OK;
            if (fits) op_plan_free(&probe);
            const op_nn_model *m = fits ? &tiny : &big;
            snprintf(dir, sizeof dir, "%s/%s-%d", tmpdir, sch[k], P);
            memset(l, 0, sizeof l);
            int rc = pipelined(m, P, sch[k], dir, l, NULL, 0, STEPS);
            CHECK_MSG(rc == OP_OK, "%s P=%d", sch[k], P);
            strcat(dir, "/model.ckpt");
            char *c2 = slurp(dir, &n);
            if (fits) {
                CHECK_MSG(c2 && n == nref && !memcmp(c2, cref, n), "%s P=%d: weights differ from single", sch[k], P);
                CHECK_MSG(!memcmp(l, lref, sizeof l), "%s P=%d: losses %.17g vs %.17g", sch[k], P, l[STEPS - 1], lref[STEPS - 1]);
            } else {
                if (!cbig) { /* the reference: big's one-stage run */
                    char d1[128];
                    snprintf(d1, sizeof d1, "%s/big-1", tmpdir);
                    CHECK(pipelined(&big, 1, "1f1b", d1, lbig, NULL, 0, STEPS) == OP_OK);
                    strcat(d1, "/model.ckpt");
                    cbig = slurp(d1, &nbig);
                }
                CHECK_MSG(c2 && cbig && n == nbig && !memcmp(c2, cbig, n), "%s P=%d (12 layers): weights differ", sch[k], P);
                CHECK_MSG(!memcmp(l, lbig, sizeof l), "%s P=%d (12 layers): losses differ", sch[k], P);
            }
            free(c2);
            ran++;
        }
    CHECK_EQ_INT(ran, 13);
    free(cref), free(cbig);
}

/* Measured per-rank activation peaks equal the arena-rule prediction (checked inside
 * pipelined), and the loss goes down on the copy task. */
TEST(memory_and_loss) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    const char *sch[] = {"1f1b", "zbh1", "zbv"};
    for (int k = 0; k < 3; k++) {
        op_ptrain_report r;
        CHECK(pipelined(&m, 2, sch[k], NULL, NULL, &r, 0, k == 0 ? 60 : 2) == OP_OK);
        for (int d = 0; d < 2; d++) CHECK(r.peak_act[d] > 0);
        if (k == 0) CHECK_MSG(r.last_loss < 0.75 * r.first_loss, "loss %.3f -> %.3f", r.first_loss, r.last_loss);
        CHECK(r.meas_ms_median > 0 && r.pred_ms > 0);
        op_ptrain_report_free(&r);
    }
}

/* 2 steps, checkpoint, resume to 4 = 4 uninterrupted (losses and file). */
TEST(resume_bitwise) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/ra", tmpdir);
    snprintf(b, sizeof b, "%s/rb", tmpdir);
    double la[4] = {0}, lb[4] = {0};
    CHECK(pipelined(&m, 2, "zbv", a, la, NULL, 0, 4) == OP_OK);
    CHECK(pipelined(&m, 2, "1f1b", b, lb, NULL, 0, 2) == OP_OK);
    CHECK(pipelined(&m, 2, "zbh1", b, lb, NULL, 1, 4) == OP_OK); /* another plan resumes */
    CHECK(!memcmp(la, lb, sizeof la));
    strcat(a, "/model.ckpt"), strcat(b, "/model.ckpt");
    size_t na, nb;
    char *ca = slurp(a, &na), *cb = slurp(b, &nb);
    CHECK(ca && cb && na == nb && !memcmp(ca, cb, na));
    free(ca), free(cb);
}

TEST(bad_plans_refused) {
    op_nn_model m, other;
    tiny_model(&m, "EM*-#L");
    tiny_model(&other, "EMM*-#L");
    op_layer_cost c[64];
    fake_costs(&m, c);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    op_plan p;
    op_err e = {0};
    CHECK(op_ptrain_make_plan(&m, c, 2, MB, &comm, 0, "nosuchschedule", &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "nosuchschedule");
    /* a plan file for another model */
    char path[128];
    snprintf(path, sizeof path, "%s/other.json", tmpdir);
    op_layer_cost c2[64];
    fake_costs(&other, c2);
    CHECK(op_ptrain_make_plan(&other, c2, 2, MB, &comm, 0, "1f1b", &p, &e) == OP_OK);
    CHECK(op_plan_write(&p, path, &e) == OP_OK);
    op_plan_free(&p);
    CHECK(op_ptrain_make_plan(&m, c, 2, MB, &comm, 0, path, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layers");
    /* ... and the same file for its own model loads, re-predicted with the given costs */
    CHECK(op_ptrain_make_plan(&other, c2, 2, MB, &comm, 0.5, path, &p, &e) == OP_OK);
    CHECK(p.pred.valid && p.op_overhead_ms == 0.5);
    op_plan_free(&p);
    /* a profile without a kind the model has */
    op_layer_prof pr[1] = {{.sym = 'E'}};
    CHECK(op_ptrain_layer_costs(&m, pr, 1, c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "'M'");
}

/* The calibration finds the overhead a plan was predicted with. */
TEST(fit_overhead_round_trip) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_layer_cost c[64];
    fake_costs(&m, c);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    op_plan p, q;
    op_err e;
    CHECK(op_ptrain_make_plan(&m, c, 2, MB, &comm, 0, "1f1b", &p, &e) == OP_OK);
    CHECK(op_ptrain_make_plan(&m, c, 2, MB, &comm, 0.25, "1f1b", &q, &e) == OP_OK);
    CHECK(q.pred.makespan_ms > p.pred.makespan_ms);
    CHECK_NEAR(op_ptrain_fit_overhead(&p, q.pred.makespan_ms), 0.25, 1e-6);
    op_plan_free(&p), op_plan_free(&q);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    mktmp();
    RUN(equivalence_every_schedule);
    RUN(memory_and_loss);
    RUN(resume_bitwise);
    RUN(bad_plans_refused);
    RUN(fit_overhead_round_trip);
    rmtmp();
    return check_report("ptrain");
}
