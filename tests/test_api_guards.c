/* test_api_guards.c: the library's public entry points refuse a caller's plan or problem that
 * is out of range, with an error code, instead of aborting, hanging or reading past an array
 * (each case here once did one of those under ASan+UBSan, or returned OP_OK on nonsense). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/exec.h"
#include "octopipe/export.h"
#include "octopipe/out.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"

enum { L = 4, P = 4, M = 8 };
static op_layer_cost layers[L];

/* F = I = W = 1 ms per layer, 1 MB boundaries, small bytes: a problem every schedule fits. */
static void problem(op_problem *pr) {
    memset(layers, 0, sizeof layers);
    for (int l = 0; l < L; l++) {
        snprintf(layers[l].name, sizeof layers[l].name, "l%d", l);
        layers[l].sym = '-';
        layers[l].f_ms = layers[l].i_ms = layers[l].w_ms = 1;
        layers[l].out_bytes = 1000000;
        layers[l].act_bytes = 1000;
        layers[l].act_w_bytes = 500;
        layers[l].static_bytes = 10000;
    }
    memset(pr, 0, sizeof *pr);
    pr->model = "guards";
    pr->layers = layers;
    pr->n_layers = L;
    pr->P = P;
    pr->M = M;
    pr->tokens_per_mb = 4096;
    op_comm_default(&pr->comm, 8);
}

/* A valid 1F1B plan, simulated. */
static void plan(op_plan *p) {
    op_problem pr;
    problem(&pr);
    op_err e = {0};
    OP_ASSERT(op_sched_build("1f1b", &pr, p, &e) == OP_OK, "%s", e.msg);
    OP_ASSERT(op_sim_replay(p, NULL, &e) == OP_OK, "%s", e.msg);
}

/* The list scheduler took the costs and links unchecked: an infinite W or a zero bandwidth
 * stalled it, which it reported as its own bug (abort). */
TEST(dynamic_refuses_bad_numbers) {
    op_plan p;
    op_err e = {0};
    plan(&p);
    p.layers[0].w_ms = INFINITY;
    CHECK_EQ_INT(op_sim_dynamic(&p, NULL, NULL, &e), OP_EINVAL);
    op_plan_free(&p);
    plan(&p);
    p.comm.none = 0;
    p.comm.intra_bw_GBps = 0;
    CHECK_EQ_INT(op_sim_dynamic(&p, NULL, NULL, &e), OP_EINVAL);
    op_plan_free(&p);
}

/* A stage on device 7 of 4: the replay, the prediction's walks and the speed samples indexed
 * per-device arrays by it. */
TEST(layout_out_of_range) {
    op_plan p;
    op_err e = {0};
    plan(&p);
    p.stage_dev[1] = 7;
    CHECK(op_sim_makespan(&p, NULL) < 0);
    op_sim_fill_pred(&p);
    CHECK_EQ_INT(p.pred.valid, 0);
    CHECK(op_sim_peak_max(&p) == INT64_MAX);
    double speed[P] = {1, 1, 1, 1}, mk = 0;
    CHECK_EQ_INT(op_sim_speed_samples(&p, speed, 1, &mk, &e), OP_EINVAL);
    CHECK_EQ_INT(op_exec_check_deadlock(&p, &e), OP_EINVAL);
    op_mem_point *pts = (op_mem_point *)&e; /* set to NULL on refusal */
    CHECK_EQ_INT(op_export_mem_timeline(&p, 1, &pts), -1);
    CHECK(pts == NULL);
    CHECK(op_export_peak_bytes(&p, 1) == -1);
    /* written, it did not read back: now not written */
    char path[] = "/tmp/op_guards_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd), unlink(path);
    CHECK_EQ_INT(op_plan_write(&p, path, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "not written");
    CHECK(access(path, F_OK) != 0);
    op_plan_free(&p);
    /* the same checks pass a valid plan */
    plan(&p);
    CHECK(op_sim_makespan(&p, NULL) > 0);
    CHECK(op_sim_peak_max(&p) == p.pred.peak_bytes_max);
    CHECK_EQ_INT(op_exec_check_deadlock(&p, &e), OP_OK);
    CHECK(op_export_mem_timeline(&p, 1, &pts) > 1);
    free(pts);
    op_plan_free(&p);
}

/* An op of stage 9 or microbatch 100: the deadlock walk wrote past its arrays, the memory
 * timeline too; a NaN start never advanced the timeline's netting loop. */
TEST(ops_out_of_range) {
    op_plan p;
    op_err e = {0};
    op_mem_point *pts;
    plan(&p);
    p.ops[0][0].stage = 9;
    CHECK_EQ_INT(op_exec_check_deadlock(&p, &e), OP_EINVAL);
    op_sim_fill_pred(&p);
    CHECK_EQ_INT(p.pred.valid, 0);
    CHECK_EQ_INT(op_export_mem_timeline(&p, 0, &pts), -1);
    op_plan_free(&p);
    plan(&p);
    p.ops[0][0].start = NAN;
    CHECK_EQ_INT(op_export_mem_timeline(&p, 0, &pts), -1);
    CHECK_EQ_INT(op_export_mem_timeline(&p, P, &pts), -1); /* a device out of range */
    op_plan_free(&p);
}

/* Counts: S = INT_MAX overflowed S + 1. */
TEST(plan_init_counts) {
    op_plan p;
    CHECK_EQ_INT(op_plan_init(&p, "x", layers, L, 1, 1, 2147483647, NULL), OP_EINVAL);
    op_plan_free(&p);
    CHECK_EQ_INT(op_plan_init(&p, "x", layers, L, 1, 1, OP_PLAN_MAX_COUNT + 1, NULL), OP_EINVAL);
    op_plan_free(&p);
}

/* The balanced split's packing: a NaN cost hung it, an infinite one hit its own assert. */
TEST(balanced_split_costs) {
    op_problem pr;
    problem(&pr);
    int first[L + 1];
    op_err e = {0};
    layers[2].i_ms = NAN;
    CHECK_EQ_INT(op_sched_balanced_split(layers, L, 2, first, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layers[2]");
    layers[2].i_ms = INFINITY;
    CHECK_EQ_INT(op_sched_balanced_split(layers, L, 2, first, &e), OP_EINVAL);
    layers[2].i_ms = 1e308, layers[3].i_ms = 1e308; /* finite, the sum is not */
    CHECK_EQ_INT(op_sched_balanced_split(layers, L, 2, first, &e), OP_EINVAL);
    problem(&pr);
    CHECK_EQ_INT(op_sched_balanced_split(layers, L, 2, first, &e), OP_OK);
    CHECK_EQ_INT(first[2], L);
}

/* A mixed problem's type row 0 is checked as every other row: a negative out_bytes there
 * passed op_problem_validate and aborted the baselines. */
TEST(mixed_row0_checked) {
    op_problem pr;
    problem(&pr);
    op_layer_cost tl[2 * L];
    memcpy(tl, layers, sizeof layers);
    memcpy(tl + L, layers, sizeof layers);
    tl[0].out_bytes = -5;
    int dt[P] = {0, 1, 0, 1};
    pr.n_types = 2, pr.type_layers = tl, pr.dev_type = dt;
    op_err e = {0};
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "device type 0");
    tl[0].out_bytes = layers[0].out_bytes;
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_OK);
}

/* Two outputs naming one file: the second rename found the first's temp gone, reported a
 * failure, and had replaced the file all the same. */
TEST(write_n_same_path) {
    char path[] = "/tmp/op_guards_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, "old", 3) == 3);
    close(fd);
    const char *paths[2] = {path, path};
    const void *data[2] = {"one", "two"};
    size_t lens[2] = {3, 3};
    op_err e = {0};
    CHECK(op_out_write_n(2, paths, data, lens, &e) != OP_OK);
    CHECK_STR_CONTAINS(e.msg, "same file");
    char buf[8] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 3 && !strcmp(buf, "old"));
    if (f) fclose(f);
    unlink(path);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(dynamic_refuses_bad_numbers);
    RUN(layout_out_of_range);
    RUN(ops_out_of_range);
    RUN(plan_init_counts);
    RUN(balanced_split_costs);
    RUN(mixed_row0_checked);
    RUN(write_n_same_path);
    return check_report("api_guards");
}
