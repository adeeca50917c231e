/* test_mixed_run.c: mixed clusters past the planner: the exports name each device's GPU type
 * (torch stage map, Megatron notes, Chrome trace, SVG) and a uniform plan's exports do not
 * change; the reference model's slow-down (--slowdown parsing, a mixed plan's speed ratios,
 * the slowed plan's prediction, the slowed compute's measured makespan, hand-computed; costs
 * per device kind; a slowed session's executor cost without its spins). */
#include <unistd.h>

#include "check.h"
#include "octopipe/export.h"
#include "octopipe/ptrain.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "test_exec_plans.h"

/* P = 4 devices, 2 h100-80gb then 2 a100-80gb (2x slower), 8 layers of kind '-', 1F1B. */
static void mixed_plan(op_plan *p, int mixed) {
    op_layer_cost L[16];
    xp_layers(L, 8, 1.0, 1000);
    xp_layers(L + 8, 8, 2.0, 1000);
    char names[2][32] = {"h100-80gb", "a100-80gb"};
    int dt[4] = {0, 0, 1, 1};
    op_problem pr = {0};
    pr.model = "m8";
    pr.layers = L;
    pr.n_layers = 8;
    pr.P = 4;
    pr.M = 4;
    pr.comm.none = 1;
    pr.tokens_per_mb = 1;
    if (mixed) {
        pr.n_types = 2;
        pr.type_layers = L;
        pr.dev_type = dt;
        pr.type_name = (const char(*)[32])names;
    }
    op_err e = {0};
    CHECK(op_sched_build("1f1b", &pr, p, &e) == OP_OK);
}

TEST(exports_name_device_types) {
    op_plan p;
    mixed_plan(&p, 1);
    CHECK(op_plan_is_mixed(&p));
    CHECK(op_export_dev_type(&p, 3) && !strcmp(op_export_dev_type(&p, 3), "a100-80gb"));
    op_buf b = {0}, notes = {0};
    op_err e = {0};
    op_export_type_counts(&p, &b);
    CHECK_STR_CONTAINS(b.data, "2 h100-80gb + 2 a100-80gb");
    op_buf_free(&b);
    CHECK(op_export_torch_stage_map(&p, &b, &e) == OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"rank_types\": [\"h100-80gb\", \"h100-80gb\", \"a100-80gb\", \"a100-80gb\"]");
    op_buf_free(&b);
    op_megatron_kind k;
    CHECK(op_export_megatron(&p, &b, &k, &notes, &e) == OP_OK);
    CHECK_STR_CONTAINS(notes.data, "mixed cluster (2 h100-80gb + 2 a100-80gb)");
    char want[64];
    snprintf(want, sizeof want, "pipeline rank 3: a100-80gb, stages 3 (layers %d-%d)", p.stage_first[3],
             p.stage_first[4] - 1);
    CHECK_STR_CONTAINS(notes.data, want);
    op_buf_free(&b);
    op_buf_free(&notes);
    CHECK(op_export_chrome_trace(&p, &b, &e) == OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"name\":\"device 2 (a100-80gb)\"");
    CHECK_STR_CONTAINS(b.data, "\"name\":\"device 0 (h100-80gb)\"");
    op_buf_free(&b);
    CHECK(op_export_svg(&p, &b, &e) == OP_OK);
    CHECK_STR_CONTAINS(b.data, "4 devices (2 h100-80gb + 2 a100-80gb)");
    CHECK_STR_CONTAINS(b.data, "device 3<tspan font-size=\"11\" fill=\"#56606e\" x=\"78\" dy=\"1.15em\">a100-80gb</tspan>");
    op_buf_free(&b);
    op_plan_free(&p);
    /* the same plan on a uniform cluster: no type anywhere */
    mixed_plan(&p, 0);
    CHECK(!op_export_dev_type(&p, 0));
    CHECK_EQ_INT(op_export_type_counts(&p, &b), 0);
    CHECK(op_export_torch_stage_map(&p, &b, &e) == OP_OK);
    CHECK(!strstr(b.data, "rank_types"));
    op_buf_free(&b);
    CHECK(op_export_megatron(&p, &b, &k, &notes, &e) == OP_OK);
    CHECK(!notes.data || !strstr(notes.data, "mixed"));
    op_buf_free(&b);
    op_buf_free(&notes);
    CHECK(op_export_svg(&p, &b, &e) == OP_OK);
    CHECK(!strstr(b.data, "devtype"));
    CHECK_STR_CONTAINS(b.data, ">device 3</text>");
    op_buf_free(&b);
    op_plan_free(&p);
}

TEST(slowdown_parse) {
    double k[4];
    op_err e = {0};
    CHECK(op_ptrain_slowdown_parse("1,1,2,2.5", 4, k, &e) == OP_OK);
    CHECK(k[0] == 1 && k[1] == 1 && k[2] == 2 && k[3] == 2.5);
    const char *bad[] = {"1,1,2", "1,1,2,2,2", "1,0.5,1,1", "a,b,c,d", "1;1;1;1", "", "1,1,2,2x", "1,1,1,nan",
                         "0x2,1,1,1", "1,1,1,0X1p1"}; /* decimal only: strtod reads hex */
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(op_ptrain_slowdown_parse(bad[i], 4, k, &e) == OP_EINVAL, "'%s' accepted", bad[i]);
        CHECK_STR_CONTAINS(e.msg, "--slowdown");
    }
}

/* A mixed plan's ratios: a100 rows 2x the h100's -> k = 1, 1, 2, 2; then on this machine's
 * costs (f = i = w = 50 ms, 2 devices, one slowed x2, 1F1B M = 2) the prediction is the
 * hand-computed 15 f = 750 ms of test_exec's mixed case, and the slowed compute measures it
 * within 2%. */
TEST(slowdown_from_plan_and_measured) {
    op_plan p;
    mixed_plan(&p, 1);
    double k[4];
    CHECK_EQ_INT(op_ptrain_plan_slowdown(&p, k), 1);
    CHECK(k[0] == 1 && k[1] == 1 && k[2] == 2 && k[3] == 2);
    op_plan_free(&p);
    mixed_plan(&p, 0);
    CHECK_EQ_INT(op_ptrain_plan_slowdown(&p, k), 0);
    op_plan_free(&p);
    /* types 2000x apart: more than --slowdown emulates, refused (k left at 1) */
    mixed_plan(&p, 1);
    for (int l = 0; l < 8; l++) {
        op_layer_cost *c = &p.type_layers[8 + l];
        c->f_ms *= 1000, c->i_ms *= 1000, c->w_ms *= 1000;
    }
    CHECK_EQ_INT(op_ptrain_plan_slowdown(&p, k), -1);
    CHECK(k[2] == 1 && k[3] == 1);
    op_plan_free(&p);

    xp_1f1b(&p, 2, 2, 50, 64);
    op_layer_cost machine[2];
    memcpy(machine, p.layers, sizeof machine);
    double k2[2] = {1, 2};
    op_err e = {0};
    op_plan slowp;
    op_plan_copy(&slowp, &p);
    CHECK(op_ptrain_slowdown_plan(&slowp, machine, k2, &e) == OP_OK);
    CHECK_NEAR(slowp.pred.makespan_ms, 750, 1e-9);
    CHECK_NEAR(op_stage_ms(&slowp, 1, OP_F), 100, 1e-12);
    /* the wrapper: the plain plan's ops (50 ms each) on rank 1 stretched x2 by waiting */
    double best = 1e30;
    for (int att = 0; att < 5 && !(fabs(best - 750) <= 15); att++) { /* best of up to 5: load only delays */
        op_ptrain_slow s = {.inner = op_compute_emulate(), .p = &p, .k = k2};
        op_compute c = op_ptrain_slow_compute(&s);
        op_exec_result r;
        CHECK(op_exec_run_threads(&p, &c, NULL, &r, &e) == OP_OK);
        if (fabs(r.makespan_ms - 750) < fabs(best - 750)) best = r.makespan_ms;
        op_exec_result_free(&r);
    }
    printf("  slowed compute (x1, x2): makespan %.2f ms, hand-computed 750.00 (%+.2f%%)\n", best,
           100 * (best - 750) / 750);
    CHECK_MSG(fabs(best - 750) <= 0.02 * 750, "makespan %.2f vs 750", best);
    op_plan_free(&slowp);
    op_plan_free(&p);
}

/* Costs per device kind (op_ptrain_slowdown_plan_kinds): rank 1's own costs 1.1 x the
 * machine's, slowed x2, is the machine's costs slowed x2.2 (f = i = w, so the same plan
 * either way), and the same costs pointer everywhere is op_ptrain_slowdown_plan. */
TEST(slowdown_plan_per_kind_costs) {
    op_plan p, a, b, c;
    xp_1f1b(&p, 2, 2, 50, 64);
    op_layer_cost machine[2], kind2[2];
    memcpy(machine, p.layers, sizeof machine);
    memcpy(kind2, machine, sizeof kind2);
    for (int l = 0; l < 2; l++) kind2[l].f_ms *= 1.1, kind2[l].i_ms *= 1.1, kind2[l].w_ms *= 1.1;
    const op_layer_cost *dc[2] = {machine, kind2}, *same[2] = {machine, machine};
    double k[2] = {1, 2}, k22[2] = {1, 2.2};
    op_err e = {0};
    op_plan_copy(&a, &p), op_plan_copy(&b, &p), op_plan_copy(&c, &p);
    CHECK(op_ptrain_slowdown_plan_kinds(&a, dc, k, &e) == OP_OK);
    CHECK(op_ptrain_slowdown_plan(&b, machine, k22, &e) == OP_OK);
    CHECK_NEAR(op_stage_ms(&a, 0, OP_F), 50, 1e-12);
    CHECK_NEAR(op_stage_ms(&a, 1, OP_F), 110, 1e-9);
    CHECK_EQ_INT(a.n_types, 2);
    CHECK_NEAR(a.pred.makespan_ms, b.pred.makespan_ms, 1e-9);
    CHECK(a.pred.makespan_ms > 750 + 1); /* 750: both kinds at the machine's costs */
    CHECK(op_ptrain_slowdown_plan_kinds(&c, same, k, &e) == OP_OK);
    CHECK_NEAR(c.pred.makespan_ms, 750, 1e-9);
    op_plan_free(&a), op_plan_free(&b), op_plan_free(&c), op_plan_free(&p);
}

/* The executor's own cost in a slowed session's records (op_record_excess_ms, what a
 * calibration on slowed runs adds to every op) leaves a slowed rank's spins out: they are
 * the op's modelled time.  Counted in, it would be at least rank 1's compute per op. */
TEST(slowed_session_record_excess) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return; /* one core: the wrapper naps, no spin */
    op_nn_model m;
    op_nn_cfg cfg;
    op_nn_cfg_preset("tiny", &cfg);
    op_err e = {0};
    CHECK(op_nn_model_init(&m, "EM*-#L", &cfg, &e) == OP_OK);
    snprintf(m.name, sizeof m.name, "EM*-#L");
    op_layer_prof prof[6];
    for (int i = 0; i < 6; i++) {
        memset(&prof[i], 0, sizeof prof[i]);
        prof[i].sym = "EM*-#L"[i], prof[i].f_ms = prof[i].i_ms = prof[i].w_ms = 1;
    }
    op_layer_cost costs[6];
    CHECK(op_ptrain_layer_costs(&m, prof, 6, costs, &e) == OP_OK);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    op_plan p;
    CHECK(op_ptrain_make_plan(&m, costs, 2, 4, &comm, 0, "1f1b", &p, &e) == OP_OK);
    const double k[2] = {1, 2};
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy", o.steps = 4, o.eo.quiet = 1, o.slowdown = k;
    op_ptrain_session *s;
    CHECK(op_ptrain_session_new(&m, &p, &o, &s, &e) == OP_OK);
    for (int t = 0; t < 4; t++) CHECK(op_ptrain_session_step(s, &e) == OP_OK);
    op_ptrain_report rep;
    op_ptrain_session_report(s, &rep);
    int n_ops = p.n_ops[0] + p.n_ops[1];
    double spin_per_op = rep.cpu_ms_step[1] / n_ops; /* rank 1 spins at least its compute */
    printf("  slowed session: executor cost %.4f ms per op, rank 1's compute %.4f ms per op of the step\n",
           rep.op_record_excess_ms, spin_per_op);
    CHECK_MSG(rep.op_record_excess_ms < 0.5 * spin_per_op, "excess %.4f ms per op, spins %.4f",
              rep.op_record_excess_ms, spin_per_op);
    op_ptrain_report_free(&rep);
    op_ptrain_session_free(s);
    op_plan_free(&p);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(exports_name_device_types);
    RUN(slowdown_parse);
    RUN(slowdown_from_plan_and_measured);
    RUN(slowdown_plan_per_kind_costs);
    RUN(slowed_session_record_excess);
    return check_report("mixed_run");
}
