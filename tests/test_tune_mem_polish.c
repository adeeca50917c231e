/* test_tune_mem_polish.c: the last step where memory binds (tn_mem_polish).  Its longer polish
 * is the standard one continued (never a slower plan than tn_polish_plan's from the same
 * start), nothing it returns is over the limit, and offload appears only on a busiest
 * device's first stage, and only when it is faster. */
#include "check.h"
#include "tune_fixtures.h"
#include "octopipe/tune.h"
#include "octopipe/sim.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"

/* The tuner's search (policies searched per stage, from full everywhere) at P=4, M=16 under a
 * limit that binds (a 4-layer stage's stash is 256 MiB): a memory-bound plan, its orders the
 * engine's, not yet polished.  A host link of host_gbps GB/s (0: none). */
static int plan_at(op_layer_cost *l, double host_gbps, double lim_mib, op_plan *out, op_err *e) {
    op_problem pr = {0};
    pr.model = "t";
    pr.layers = l;
    pr.n_layers = 16;
    pr.P = 4;
    pr.M = 16;
    pr.tokens_per_mb = 4096;
    op_comm_default(&pr.comm, 8);
    pr.comm.host_bw_GBps = host_gbps;
    pr.mem_limit_bytes = lim_mib * MIB;
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.max_evals = 300;
    return tn_tune_core_pol(&pr, &o, OP_ACT_FULL, NULL, NULL, 0, out, e);
}

static int plan(op_layer_cost *l, double host_gbps, op_plan *out, op_err *e) { /* at 600 MiB */
    return plan_at(l, host_gbps, 600, out, e);
}

static int n_offload(const op_plan *p) {
    int n = 0;
    for (int s = 0; s < p->S; s++) n += p->stage_act[s] == OP_ACT_OFFLOAD;
    return n;
}

TEST(longer_polish_continues_the_standard_one) {
    op_layer_cost *l = tf_layers(16, 64, 4);
    op_plan g, a, b;
    op_err e = {0};
    CHECK_MSG(plan(l, 0, &g, &e) == OP_OK, "%s", e.msg);
    CHECK(op_plan_fits(&g));
    op_plan_copy(&a, &g);
    op_plan_copy(&b, &g);
    tn_polish_plan(&a);
    tn_mem_polish(&b, 1, 0);
    CHECK(op_plan_fits(&b));
    CHECK(b.pred.makespan_ms <= a.pred.makespan_ms * (1 + 1e-12));
    CHECK(b.pred.makespan_ms < g.pred.makespan_ms); /* the greedy order leaves moves to find */
    CHECK(n_offload(&b) == 0);                      /* not asked for */
    /* what it returns is a valid plan that simulates to what it says */
    double ms = b.pred.makespan_ms;
    CHECK(op_plan_validate(&b, &e) == OP_OK);
    CHECK(op_sim_replay(&b, NULL, &e) == OP_OK);
    CHECK_NEAR(b.pred.makespan_ms, ms, 1e-9);
    op_plan_free(&a);
    op_plan_free(&b);
    op_plan_free(&g);
    free(l);
}

TEST(offload_only_on_a_first_stage_and_only_faster) {
    op_layer_cost *l = tf_layers(16, 64, 4);
    op_plan g, b, c;
    op_err e = {0};
    CHECK_MSG(plan(l, 200, &g, &e) == OP_OK, "%s", e.msg);
    op_plan_copy(&b, &g);
    op_plan_copy(&c, &g);
    tn_mem_polish(&b, 1, 0);
    tn_mem_polish(&c, 0, 0);
    CHECK(op_plan_fits(&c));
    CHECK(c.pred.makespan_ms <= b.pred.makespan_ms * (1 + 1e-12));
    CHECK(n_offload(&c) <= 2);
    for (int s = 0; s < c.S; s++) {
        if (c.stage_act[s] != OP_ACT_OFFLOAD) continue;
        int first = 0; /* s runs first on its device in the plan before the step */
        for (int d = 0; d < g.P; d++) first |= g.n_ops[d] > 0 && g.ops[d][0].stage == s;
        CHECK(first);
        CHECK(c.pred.makespan_ms < b.pred.makespan_ms);
    }
    op_plan_free(&b);
    op_plan_free(&c);
    op_plan_free(&g);
    free(l);
}

TEST(repair_keeps_a_full_stage_only_when_it_fits_and_gains) {
    op_layer_cost *l = tf_layers(16, 64, 4);
    /* 400 MiB: one stage back at keep (256 MiB a microbatch) gains over 2% once its orders
     * are repaired, more than keep on the orders as they were (relax's try) gives; at 600
     * nothing gains and the plan stays as it was */
    for (int lim = 400; lim <= 600; lim += 200) {
        op_plan g, r;
        op_err e = {0};
        CHECK_MSG(plan_at(l, 0, lim, &g, &e) == OP_OK, "%s", e.msg);
        op_plan_copy(&r, &g);
        tn_mem_repair(&r, 0);
        CHECK(op_plan_fits(&r));
        CHECK(r.pred.makespan_ms <= g.pred.makespan_ms);
        int changed = 0;
        for (int s = 0; s < r.S; s++) {
            if (r.stage_act[s] == g.stage_act[s]) continue;
            changed++;
            CHECK(g.stage_act[s] == OP_ACT_FULL && r.stage_act[s] == OP_ACT_KEEP);
            op_plan k; /* what relax sees: keep on the orders as they were */
            op_plan_copy(&k, &g);
            k.stage_act[s] = OP_ACT_KEEP;
            CHECK(op_sim_replay(&k, NULL, &e) == OP_OK);
            CHECK(!op_plan_fits(&k) || k.pred.makespan_ms > r.pred.makespan_ms * (1 + 1e-9));
            op_plan_free(&k);
        }
        if (lim == 400) CHECK(changed == 1 && r.pred.makespan_ms < g.pred.makespan_ms * 0.98);
        if (lim == 600) CHECK(changed == 0); /* no gain: the plan as it was */
        double ms = r.pred.makespan_ms;
        CHECK(op_sim_replay(&r, NULL, &e) == OP_OK);
        CHECK_NEAR(r.pred.makespan_ms, ms, 1e-9);
        op_plan_free(&r);
        op_plan_free(&g);
    }
    free(l);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(longer_polish_continues_the_standard_one);
    RUN(offload_only_on_a_first_stage_and_only_faster);
    RUN(repair_keeps_a_full_stage_only_when_it_fits_and_gains);
    return check_report("tune_mem_polish");
}
