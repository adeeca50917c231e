/* test_tune_canon.c: a mixed cluster listed in different orders is the same machine, and the
 * tuner gives it the same plan (tune_canon.c): the same makespan, each stage on a device of the
 * same type, on the device numbers as given; --placement loop keeps rank order; the bar is the
 * classic schedules on the devices as given. */
#include <pthread.h>

#include "check.h"
#include "octopipe/sched.h"
#include "octopipe/sched_mem.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

enum { L = 8, P = 4, M = 8 };

/* Two types over L uneven layers, type 1 (the slow one) 2.5x slower; devices' types dt[]. */
typedef struct mixed4 {
    op_layer_cost rows[2 * L];
    int dt[P];
    op_problem pr;
} mixed4;

static void mixed4_init(mixed4 *x, const int *dt, int nodes_of) {
    memset(x, 0, sizeof *x);
    static const double f[L] = {1.0, 2.0, 1.5, 3.0, 1.0, 2.5, 1.5, 4.0};
    for (int t = 0; t < 2; t++)
        for (int l = 0; l < L; l++) {
            op_layer_cost *c = &x->rows[t * L + l];
            snprintf(c->name, sizeof c->name, "l%d", l);
            c->sym = 'T';
            c->f_ms = f[l] * (t ? 2.5 : 1.0);
            c->i_ms = c->f_ms;
            c->w_ms = 0.5 * c->f_ms;
            c->out_bytes = 64 << 20;
        }
    memcpy(x->dt, dt, sizeof x->dt);
    x->pr.model = "mixed4";
    x->pr.layers = x->rows;
    x->pr.n_layers = L;
    x->pr.P = P;
    x->pr.M = M;
    x->pr.tokens_per_mb = 1;
    op_comm_default(&x->pr.comm, nodes_of);
    x->pr.n_types = 2;
    x->pr.type_layers = x->rows;
    x->pr.dev_type = x->dt;
}

/* Type rows are the same for every order here (type 0 fast), so a stage's device type is
 * comparable across orders. */
static void stage_types(const op_plan *p, const mixed4 *x, int *out) {
    for (int s = 0; s < p->S; s++) out[s] = x->dt[p->stage_dev[s]];
}

static int tune(const mixed4 *x, op_tune_placement pl, op_plan *p, op_tune_stats *st) {
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.placement = pl;
    o.stats = st;
    op_err e = {0};
    int rc = op_tune(&x->pr, &o, p, &e);
    if (rc != OP_OK) fprintf(stderr, "op_tune: %s\n", e.msg);
    return rc;
}

/* One node of four (fast, fast, slow, slow) listed three ways. */
TEST(one_node_listed_three_ways_gets_one_plan) {
    static const int orders[3][P] = {{0, 0, 1, 1}, {1, 1, 0, 0}, {1, 0, 0, 1}};
    double ms0 = 0;
    int S0 = 0, ty0[64];
    for (int k = 0; k < 3; k++) {
        mixed4 x;
        mixed4_init(&x, orders[k], 8);
        op_plan p;
        op_tune_stats st;
        CHECK_EQ_INT(tune(&x, OP_TUNE_PLACE_ANY, &p, &st), OP_OK);
        op_err e = {0};
        CHECK_EQ_INT(op_plan_validate(&p, &e), OP_OK);
        for (int d = 0; d < P; d++) CHECK_EQ_INT(p.dev_type[d], orders[k][d]); /* as given */
        op_plan q;
        op_plan_copy(&q, &p);
        CHECK_EQ_INT(op_sim_replay(&q, NULL, &e), OP_OK); /* the file's times are its own */
        CHECK_NEAR(q.pred.makespan_ms, p.pred.makespan_ms, 1e-9);
        op_plan_free(&q);
        int ty[64];
        CHECK(p.S <= 64);
        stage_types(&p, &x, ty);
        if (k == 0) {
            ms0 = p.pred.makespan_ms, S0 = p.S;
            memcpy(ty0, ty, sizeof ty);
        } else {
            CHECK_NEAR(p.pred.makespan_ms, ms0, 1e-9);
            CHECK_EQ_INT(p.S, S0);
            for (int s = 0; s < p.S && s < S0; s++) CHECK_EQ_INT(ty[s], ty0[s]);
        }
        op_plan_free(&p);
    }
}

/* Two nodes of two over a slow fabric: (slow, slow | fast, fast) is (fast, fast | slow, slow)
 * with the nodes swapped. */
TEST(two_nodes_swapped_get_one_plan) {
    mixed4 a, b;
    mixed4_init(&a, (const int[]){0, 0, 1, 1}, 2);
    mixed4_init(&b, (const int[]){1, 1, 0, 0}, 2);
    a.pr.comm.inter_bw_GBps = b.pr.comm.inter_bw_GBps = 1; /* 64 MiB: 67 ms across nodes */
    op_plan pa, pb;
    op_tune_stats sa, sb;
    CHECK_EQ_INT(tune(&a, OP_TUNE_PLACE_ANY, &pa, &sa), OP_OK);
    CHECK_EQ_INT(tune(&b, OP_TUNE_PLACE_ANY, &pb, &sb), OP_OK);
    CHECK_NEAR(pb.pred.makespan_ms, pa.pred.makespan_ms, 1e-9);
    CHECK_EQ_INT(pb.S, pa.S);
    for (int s = 0; s < pa.S && s < pb.S; s++) {
        CHECK_EQ_INT(b.dt[pb.stage_dev[s]], a.dt[pa.stage_dev[s]]);
        /* node crossings are the same: device d's node is d / 2 in both */
        if (s + 1 < pa.S && s + 1 < pb.S)
            CHECK_EQ_INT(pb.stage_dev[s] / 2 == pb.stage_dev[s + 1] / 2,
                         pa.stage_dev[s] / 2 == pa.stage_dev[s + 1] / 2);
    }
    op_plan_free(&pa);
    op_plan_free(&pb);
}

/* The bar is the classic schedules on the devices as the user listed them, and the plan is
 * never slower than the best of them. */
TEST(bar_is_the_baselines_on_the_order_as_given) {
    mixed4 x;
    mixed4_init(&x, (const int[]){1, 0, 1, 0}, 8);
    double best = 0;
    for (const char *const *n = op_sched_names(); *n; n++) {
        op_plan b;
        op_err e = {0};
        op_sched_info info = {0};
        if (op_sched_build_fit(*n, &x.pr, NULL, &b, &info, &e) != OP_OK) continue;
        if (best <= 0 || b.pred.makespan_ms < best) best = b.pred.makespan_ms;
        op_plan_free(&b);
    }
    CHECK(best > 0);
    op_plan p;
    op_tune_stats st;
    CHECK_EQ_INT(tune(&x, OP_TUNE_PLACE_ANY, &p, &st), OP_OK);
    CHECK_NEAR(st.best_baseline_ms, best, 1e-9);
    CHECK(p.pred.makespan_ms <= best * (1 + 1e-9));
    op_plan_free(&p);
}

/* --placement loop is torchtitan's map by rank (stage s on device s % P): not relabelled. */
TEST(loop_placement_keeps_rank_order) {
    mixed4 x;
    mixed4_init(&x, (const int[]){1, 1, 0, 0}, 8);
    op_plan p;
    op_tune_stats st;
    CHECK_EQ_INT(tune(&x, OP_TUNE_PLACE_LOOP, &p, &st), OP_OK);
    for (int s = 0; s < p.S; s++) CHECK_EQ_INT(p.stage_dev[s], s % P);
    op_plan_free(&p);
}

/* Two tunes of differently ordered clusters at once, one per thread, give the plans each gives
 * alone: the canonical order's sort context is per thread (under `make SAN=thread` a shared
 * one is a race report). */
typedef struct tune_job {
    mixed4 x;
    op_plan p;
    int rc;
} tune_job;

static void *tune_main(void *a) {
    tune_job *j = a;
    op_tune_stats st;
    j->rc = tune(&j->x, OP_TUNE_PLACE_ANY, &j->p, &st);
    return NULL;
}

TEST(two_tunes_at_once_get_their_own_plans) {
    static const int orders[2][P] = {{0, 1, 0, 1}, {1, 1, 0, 0}};
    double alone[2];
    int S_alone[2];
    for (int k = 0; k < 2; k++) {
        tune_job j;
        mixed4_init(&j.x, orders[k], 8);
        tune_main(&j);
        CHECK_EQ_INT(j.rc, OP_OK);
        alone[k] = j.rc == OP_OK ? j.p.pred.makespan_ms : 0, S_alone[k] = j.rc == OP_OK ? j.p.S : 0;
        if (j.rc == OP_OK) op_plan_free(&j.p);
    }
    tune_job *j = op_xcalloc(2, sizeof *j);
    pthread_t th[2];
    for (int k = 0; k < 2; k++) mixed4_init(&j[k].x, orders[k], 8);
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&th[k], NULL, tune_main, &j[k]) == 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_INT(j[k].rc, OP_OK);
        if (j[k].rc != OP_OK) continue;
        CHECK_NEAR(j[k].p.pred.makespan_ms, alone[k], 1e-9);
        CHECK_EQ_INT(j[k].p.S, S_alone[k]);
        for (int d = 0; d < P; d++) CHECK_EQ_INT(j[k].p.dev_type[d], orders[k][d]);
        op_plan_free(&j[k].p);
    }
    free(j);
}

int main(int argc, char **argv) {
    RUN(one_node_listed_three_ways_gets_one_plan);
    RUN(two_nodes_swapped_get_one_plan);
    RUN(bar_is_the_baselines_on_the_order_as_given);
    RUN(loop_placement_keeps_rank_order);
    RUN(two_tunes_at_once_get_their_own_plans);
    return check_report("tune_canon");
}
