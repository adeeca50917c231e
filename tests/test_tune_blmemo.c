/* test_tune_blmemo.c: the memo of a problem's classic schedules (tune_blmemo.c) that the
 * searches of one tn_tune_mem share.  It answers only for the problem it was begun with, only
 * once a search tried every schedule (a search stopped early leaves it unused), with the plans
 * that search built, and an inner begin/end (an op_tune inside another) leaves the outer memo
 * as it was.  End to end, a tune where memory binds (several searches of one problem) returns
 * the same plan every time. */
#include "check.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"
#include "tune/tune_int.h"
#include "tune_fixtures.h"

static int n_names(void) {
    int n = 0;
    for (const char *const *s = op_sched_names(); *s; s++) n++;
    return n;
}

/* Fills m as a search does: every schedule built and put, then done(all). */
static void fill(tn_blmemo *m, const op_problem *pr, int all) {
    int i = 0;
    for (const char *const *s = op_sched_names(); *s; s++, i++) {
        op_plan p;
        op_err e = {0};
        if (op_sched_build(*s, pr, &p, &e) == OP_OK) tn_blmemo_put(m, i, &p);
    }
    tn_blmemo_done(m, all);
}

TEST(answers_for_its_problem_once_complete) {
    op_layer_cost *l = tf_layers(12, 0, 0);
    op_problem a = tf_problem(l, 12, 4, 8, 0), b = a;
    CHECK(tn_blmemo_for(&a) == NULL); /* outside any tn_tune_mem */
    tn_blmemo_begin(&a);
    tn_blmemo *m = tn_blmemo_for(&a);
    CHECK(m != NULL);
    CHECK(tn_blmemo_for(&b) == NULL); /* same contents, another problem: never */
    CHECK(!tn_blmemo_complete(m));
    fill(m, &a, 1);
    CHECK(tn_blmemo_complete(tn_blmemo_for(&a)));
    int i = 0;
    for (const char *const *s = op_sched_names(); *s; s++, i++) {
        op_plan p;
        op_err e = {0};
        const op_plan *q = tn_blmemo_plan(m, i);
        if (op_sched_build(*s, &a, &p, &e) != OP_OK) { /* dualpipev: M < 2P */
            CHECK_MSG(q == NULL, "%s", *s);
            continue;
        }
        CHECK_MSG(q && q->S == p.S && q->pred.makespan_ms == p.pred.makespan_ms &&
                      q->pred.peak_bytes_max == p.pred.peak_bytes_max,
                  "%s", *s);
        for (int s2 = 0; q && s2 < p.S; s2++)
            CHECK(q->stage_first[s2] == p.stage_first[s2] && q->stage_dev[s2] == p.stage_dev[s2]);
        op_plan_free(&p);
    }
    CHECK(i == n_names());
    CHECK(tn_blmemo_plan(m, -1) == NULL && tn_blmemo_plan(m, i) == NULL);
    tn_blmemo_end();
    CHECK(tn_blmemo_for(&a) == NULL);
    free(l);
}

TEST(a_search_stopped_early_leaves_it_unused) {
    op_layer_cost *l = tf_layers(12, 0, 0);
    op_problem a = tf_problem(l, 12, 4, 8, 0);
    tn_blmemo_begin(&a);
    fill(tn_blmemo_for(&a), &a, 0);
    CHECK(tn_blmemo_for(&a) == NULL); /* the next search builds its own */
    tn_blmemo_end();
    free(l);
}

TEST(nested_begin_keeps_the_outer) {
    op_layer_cost *l = tf_layers(12, 0, 0);
    op_problem a = tf_problem(l, 12, 4, 8, 0), b = tf_problem(l, 12, 3, 6, 0);
    tn_blmemo_begin(&a);
    fill(tn_blmemo_for(&a), &a, 1);
    tn_blmemo_begin(&b);
    CHECK(tn_blmemo_for(&a) == NULL); /* the inner run's problem is b */
    CHECK(tn_blmemo_for(&b) != NULL && !tn_blmemo_complete(tn_blmemo_for(&b)));
    tn_blmemo_end();
    CHECK(tn_blmemo_complete(tn_blmemo_for(&a)));
    tn_blmemo_end();
    CHECK(tn_blmemo_for(&a) == NULL);
    free(l);
}

/* 64 MiB of activations per layer and microbatch against 200 MiB per device: keep cannot fit,
 * so tn_tune_mem runs its policy searches, all but the layer views on the same problem (the
 * memo serves them); the plan is the same on every run and fits. */
TEST(tune_where_memory_binds_is_repeatable) {
    const int L = 16, P = 4, M = 8;
    op_layer_cost *l = tf_layers(L, 64, 4);
    op_problem pr = tf_problem(l, L, P, M, 200);
    op_plan a, b;
    op_tune_stats sa, sb;
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.stats = &sa;
    op_err e = {0};
    CHECK_MSG(op_tune(&pr, &o, &a, &e) == OP_OK, "%s", e.msg);
    o.stats = &sb;
    CHECK_MSG(op_tune(&pr, &o, &b, &e) == OP_OK, "%s", e.msg);
    CHECK(sa.mem_binds == 2 && sb.mem_binds == 2);
    CHECK(op_plan_fits(&a));
    CHECK(a.pred.makespan_ms == b.pred.makespan_ms && a.S == b.S && sa.evals == sb.evals);
    for (int d = 0; d < P; d++) {
        CHECK(a.n_ops[d] == b.n_ops[d]);
        for (int k = 0; k < a.n_ops[d] && k < b.n_ops[d]; k++)
            CHECK(a.ops[d][k].stage == b.ops[d][k].stage && a.ops[d][k].mb == b.ops[d][k].mb &&
                  a.ops[d][k].kind == b.ops[d][k].kind);
    }
    CHECK(tn_blmemo_for(&pr) == NULL); /* op_tune ended it */
    op_plan_free(&a);
    op_plan_free(&b);
    free(l);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(answers_for_its_problem_once_complete);
    RUN(a_search_stopped_early_leaves_it_unused);
    RUN(nested_begin_keeps_the_outer);
    RUN(tune_where_memory_binds_is_repeatable);
    return check_report("tune_blmemo");
}
