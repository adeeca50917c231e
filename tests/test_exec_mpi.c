/* test_exec_mpi.c: the executor over real MPI ranks (mpirun started by op_exec_launch, as
 * `octopipe run` does): plans run in order, a killed rank and a stuck rank end the job with the
 * right message within seconds.  The binary is its own rank program: under mpirun
 * (OMPI_COMM_WORLD_SIZE set) it runs `child SPEC --emulate ...`, building the plan in memory. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec/exec_cli.h"
#include "octopipe/exec.h"
#include "octopipe/sched.h"
#include "test_exec_plans.h"

/* SPEC: "1f1b:P:M", "sched:NAME:P:M" or "random:SEED:P" */
static int build(const char *spec, op_plan *p, op_err *e) {
    char name[32];
    int P = 0, M = 0;
    if (sscanf(spec, "1f1b:%d:%d", &P, &M) == 2) {
        xp_1f1b(p, P, M, 2.0, 1 << 16);
        return OP_OK;
    }
    if (sscanf(spec, "random:%d:%d", &M, &P) == 2) {
        op_rng r;
        op_rng_seed(&r, (uint64_t)M);
        xp_random(p, &r, P, 2 * P, 6, 1.0, 1 << 14);
        return OP_OK;
    }
    if (sscanf(spec, "sched:%31[^:]:%d:%d", name, &P, &M) == 3) {
        op_layer_cost L[32];
        xp_layers(L, 32, 0.25, 1 << 16);
        op_problem pr = {0};
        pr.model = "uniform";
        pr.layers = L;
        pr.n_layers = 32;
        pr.P = P;
        pr.M = M;
        pr.comm.none = 1;
        return op_sched_build(name, &pr, p, e);
    }
    return op_errf(e, OP_EINVAL, "bad spec %s", spec);
}

/* Real-compute stand-in: busy-loops for a tenth of the op's modelled time while the runtime's
 * progress thread moves messages (exercises MPI_THREAD_SERIALIZED + the per-rank lock). */
static const op_plan *spin_plan;
static int spin_setup(void *ctx, const op_plan *p, int rank, op_err *err) {
    spin_plan = p;
    return OP_OK;
}
static int spin_run(void *ctx, const op_compute_call *c, op_err *err) {
    double end = op_now_s() + op_stage_ms(spin_plan, c->stage, c->kind) * 1e-4;
    while (op_now_s() < end) {
    }
    if (c->out) memset(c->out, c->mb, (size_t)c->out_bytes); /* payload travels: check it */
    if (c->in && ((const unsigned char *)c->in)[c->in_bytes - 1] != (unsigned char)c->mb)
        return op_errf(err, OP_EINVAL, "%s(s%d,mb%d): input holds the wrong microbatch",
                       op_kind_name(c->kind), c->stage, c->mb);
    return OP_OK;
}

static int child(int argc, char **argv) {
    op_exec_cli c;
    if (op_exec_cli_parse(&c, argc, argv, "child", 0)) return 2;
    op_xport x;
    op_err e = {0};
    if (op_xport_mpi_init(&x, &argc, &argv, &e)) return 1;
    op_plan p, emu;
    if (build(c.plan_path, &p, &e)) {
        fprintf(stderr, "child: %s\n", e.msg);
        x.hard_abort(&x, 2);
    }
    op_exec_emulated_plan(&emu, &p, 1.0, 1.0, NULL, 0);
    op_exec_result res = {0};
    if (getenv("XP_SPIN")) { /* real-compute path: callback + progress thread */
        op_compute sc = {0};
        sc.setup = spin_setup;
        sc.run = spin_run;
        sc.progress_thread = 1;
        op_lowered l;
        int rc = op_exec_lower(&emu, NULL, &l, &e);
        if (!rc) rc = op_exec_rank_run(&emu, &l, &x, &sc, &c.eo, &res, &e);
        if (rc) {
            fprintf(stderr, "child rank %d: %s\n", x.rank, e.msg);
            x.hard_abort(&x, 1);
        }
        op_lowered_free(&l);
    } else {
        op_exec_cli_run_rank(&c, &x, &emu, &res);
    }
    int rc = 0;
    if (x.rank == 0) {
        rc = op_exec_check_order(&res, &p, &e);
        printf("child %s: %s, makespan %.2f ms\n", c.plan_path, rc ? e.msg : "order ok",
               res.makespan_ms);
    }
    op_exec_result_free(&res);
    op_plan_free(&p);
    op_plan_free(&emu);
    op_xport_mpi_finalize(&x);
    return rc ? 1 : 0;
}

static int launch(int P, const char *spec, const char *f1, const char *f2, op_buf *log,
                  op_err *e, double *secs) {
    char *args[8] = {"child", (char *)spec, "--emulate", "--watchdog", "1.5"};
    int n = 5;
    if (f1) args[n++] = (char *)f1, args[n++] = (char *)f2;
    double t = op_now_s();
    int code = op_exec_launch(P, args, n, 30, log, e);
    *secs = op_now_s() - t;
    return code;
}

TEST(plans_run_under_mpirun) {
    const char *specs[] = {"1f1b:4:8", "random:3:4", "sched:zbv:4:8", "sched:i1f1b:8:16"};
    int Ps[] = {4, 4, 4, 8};
    for (int i = 0; i < 4; i++) {
        op_buf log = {0};
        op_err e = {0};
        double s;
        int code = launch(Ps[i], specs[i], NULL, NULL, &log, &e, &s);
        CHECK_MSG(code == 0, "%s: exit %d: %s\n%s", specs[i], code, e.msg, log.data ? log.data : "");
        op_buf_free(&log);
    }
}

TEST(progress_thread_under_mpirun) {
    setenv("XP_SPIN", "1", 1);
    op_buf log = {0};
    op_err e = {0};
    double s;
    int code = launch(4, "sched:zbv:4:8", NULL, NULL, &log, &e, &s);
    CHECK_MSG(code == 0, "exit %d: %s\n%s", code, e.msg, log.data ? log.data : "");
    unsetenv("XP_SPIN");
    op_buf_free(&log);
}

TEST(killed_rank_named) {
    op_buf log = {0};
    op_err e = {0};
    double s;
    int code = launch(4, "1f1b:4:8", "--inject-crash", "2:3", &log, &e, &s);
    CHECK(code != 0);
    CHECK_STR_CONTAINS(e.msg, "rank 2 killed by signal 9");
    CHECK_MSG(s < 10, "took %.1f s", s);
    op_buf_free(&log);
}

TEST(stuck_rank_watchdog) {
    op_buf log = {0};
    op_err e = {0};
    double s;
    int code = launch(4, "1f1b:4:8", "--inject-hang", "1:2", &log, &e, &s);
    CHECK_EQ_INT(code, 3);
    CHECK_STR_CONTAINS(e.msg, "watchdog");
    CHECK_STR_CONTAINS(log.data, "rank 1: stuck in compute F(s1,mb2)");
    CHECK_STR_CONTAINS(log.data, "rank 0: waiting");
    CHECK_STR_CONTAINS(log.data, "rank 2: waiting");
    CHECK_STR_CONTAINS(log.data, "rank 3: waiting");
    CHECK_MSG(s < 10, "took %.1f s", s);
    if (code != 3) fputs(log.data ? log.data : "", stderr);
    op_buf_free(&log);
}

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return child(argc - 1, argv + 1);
    CHECK_INIT(argc, argv);
    RUN(plans_run_under_mpirun);
    RUN(progress_thread_under_mpirun);
    RUN(killed_rank_named);
    RUN(stuck_rank_watchdog);
    return check_report("exec_mpi");
}
