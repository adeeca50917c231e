/* test_tune_mem.c: activation policies in the tuner and the baselines.  The layer view of a
 * policy follows its rule to the byte; the tuner chooses no recomputation where memory does not
 * bind and, where it does, a plan that fits with recomputation only where the simulator says
 * it is needed; baselines get Megatron's uniform choice; when nothing fits the advice is
 * computed (static memory named, more devices found by tuning). */
#include <signal.h>

#include "check.h"
#include "tune_fixtures.h"
#include "octopipe/sched_mem.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"


static int tune(const op_problem *pr, op_tune_recompute rc, op_plan *out, op_tune_stats *st,
                op_err *e) {
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.recompute = rc;
    o.stats = st;
    o.max_evals = 400;
    return op_tune(pr, &o, out, e);
}

TEST(layer_view_follows_each_policy_rule) {
    op_layer_cost in[3] = {0}, out[3];
    for (int i = 0; i < 3; i++) {
        in[i].f_ms = 2, in[i].i_ms = 3, in[i].w_ms = 1;
        in[i].act_bytes = 10 * MIB, in[i].act_i_bytes = 1 * MIB, in[i].act_w_bytes = 4 * MIB;
        in[i].out_bytes = (i + 1) * MIB;
    }
    /* keep: nothing changes, nothing saved */
    CHECK(op_act_layers(in, 3, OP_ACT_KEEP, out) == 0);
    CHECK(!memcmp(in, out, sizeof in));
    /* full: each layer keeps its input (the previous out; the first its own), I re-runs F, and
     * during I the activations are live again: act_i grows by what was dropped */
    CHECK(op_act_layers(in, 3, OP_ACT_FULL, out) == 1);
    int64_t kept[3] = {1 * MIB, 1 * MIB, 2 * MIB};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(out[i].act_bytes, kept[i]);
        CHECK_NEAR(out[i].i_ms, 5.0, 1e-12);
        CHECK_NEAR(out[i].f_ms, 2.0, 1e-12);
        CHECK_NEAR(out[i].w_ms, 1.0, 1e-12);
        CHECK_EQ_INT(out[i].act_i_bytes, 1 * MIB + 10 * MIB - kept[i]);
        CHECK_EQ_INT(out[i].act_w_bytes, 4 * MIB);
        CHECK_EQ_INT(out[i].act_bytes + out[i].act_i_bytes, in[i].act_bytes + in[i].act_i_bytes);
    }
    /* selective: the stash less the attention core, I grows by the core's F share */
    for (int i = 0; i < 3; i++) in[i].f_sel_ms = 0.5, in[i].act_sel_bytes = 6 * MIB;
    in[2].f_sel_ms = 0, in[2].act_sel_bytes = 0; /* no attention core: nothing changes */
    CHECK(op_act_layers(in, 3, OP_ACT_SELECTIVE, out) == 1);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(out[i].act_bytes, 6 * MIB);
        CHECK_NEAR(out[i].i_ms, 3.5, 1e-12);
        CHECK_EQ_INT(out[i].act_i_bytes, 1 * MIB + 4 * MIB);
    }
    CHECK_EQ_INT(out[2].act_bytes, 10 * MIB);
    CHECK_NEAR(out[2].i_ms, 3.0, 1e-12);
    CHECK_EQ_INT(out[2].act_i_bytes, 1 * MIB);
    CHECK(op_act_layers(in + 2, 1, OP_ACT_SELECTIVE, out) == 0);
    /* a layer whose input is bigger than its stash keeps the stash (never worse than keep) */
    in[1].out_bytes = 50 * MIB;
    op_act_layers(in, 3, OP_ACT_FULL, out);
    CHECK_EQ_INT(out[2].act_bytes, 10 * MIB);
    CHECK_NEAR(out[2].i_ms, 5.0, 1e-12);
}

TEST(parses_recompute_modes) {
    op_tune_recompute r;
    CHECK(op_tune_recompute_parse("auto", &r) == 0 && r == OP_TUNE_RC_AUTO);
    CHECK(op_tune_recompute_parse("none", &r) == 0 && r == OP_TUNE_RC_NONE);
    CHECK(op_tune_recompute_parse("selective", &r) == 0 && r == OP_TUNE_RC_SELECTIVE);
    CHECK(op_tune_recompute_parse("full", &r) == 0 && r == OP_TUNE_RC_FULL);
    CHECK(op_tune_recompute_parse("keep", &r) == -1);
    CHECK(op_tune_recompute_parse("", &r) == -1);
}

TEST(keep_where_memory_does_not_bind) {
    op_layer_cost *l = tf_layers(16, 8, 4);
    op_problem pr = tf_problem(l, 16, 4, 8, 0);
    op_plan a, b;
    op_tune_stats sa, sb;
    op_err e = {0};
    CHECK(tune(&pr, OP_TUNE_RC_AUTO, &a, &sa, &e) == OP_OK);
    CHECK(tune(&pr, OP_TUNE_RC_NONE, &b, &sb, &e) == OP_OK);
    for (int s = 0; s < a.S; s++) CHECK(a.stage_act[s] == OP_ACT_KEEP);
    CHECK(!strcmp(sa.policies, "keep"));
    CHECK(!sa.mem_binds && sa.n_recompute == 0);
    CHECK_NEAR(a.pred.makespan_ms, b.pred.makespan_ms, 1e-12);
    /* a limit far above the peak: still nothing to recompute, same plan */
    pr.mem_limit_bytes = 10.0 * (double)a.pred.peak_bytes_max;
    op_plan c;
    op_tune_stats sc;
    CHECK(tune(&pr, OP_TUNE_RC_AUTO, &c, &sc, &e) == OP_OK);
    CHECK(!sc.mem_binds && sc.n_recompute == 0);
    CHECK_NEAR(c.pred.makespan_ms, a.pred.makespan_ms, 1e-12);
    op_plan_free(&a);
    op_plan_free(&b);
    op_plan_free(&c);
    free(l);
}

TEST(no_policy_when_memory_is_not_modelled) {
    op_layer_cost *l = tf_layers(12, 0, 0);
    op_problem pr = tf_problem(l, 12, 4, 8, 1024);
    op_plan p;
    op_tune_stats st;
    op_err e = {0};
    CHECK(tune(&pr, OP_TUNE_RC_FULL, &p, &st, &e) == OP_OK); /* even when asked */
    CHECK(!strcmp(st.policies, "not modelled"));
    for (int s = 0; s < p.S; s++) CHECK(p.stage_act[s] == OP_ACT_KEEP);
    op_plan_free(&p);
    free(l);
}

/* Activations 64 MiB per layer and microbatch, static 4: keep needs at least 4 layers x 64 MiB
 * in flight on the first device; the limit leaves room for the static share and stage inputs
 * only, so keep cannot fit and recomputation must. */
TEST(recomputes_only_where_memory_binds) {
    int n = 16, P = 4, M = 8;
    op_layer_cost *l = tf_layers(n, 64, 4);
    op_problem pr = tf_problem(l, n, P, M, 0);
    op_plan free_p, p, keep;
    op_tune_stats st;
    op_err e = {0};
    CHECK(tune(&pr, OP_TUNE_RC_NONE, &free_p, NULL, &e) == OP_OK);
    pr.mem_limit_bytes = 200.0 * MIB; /* one stage's stash (4 x 64) does not fit once */
    CHECK(tune(&pr, OP_TUNE_RC_NONE, &keep, NULL, &e) == OP_ENOMEM);
    e = (op_err){0};
    CHECK_MSG(tune(&pr, OP_TUNE_RC_AUTO, &p, &st, &e) == OP_OK, "%s", e.msg);
    if (p.S > 0 && p.pred.valid) {
        CHECK((double)p.pred.peak_bytes_max <= pr.mem_limit_bytes);
        CHECK(st.mem_binds && st.n_recompute > 0);
        CHECK(p.pred.makespan_ms >= free_p.pred.makespan_ms * (1 - 1e-9));
        /* the choice is minimal: no recomputing stage can go back to keep and still fit */
        for (int s = 0; s < p.S; s++) {
            if (p.stage_act[s] == OP_ACT_KEEP) continue;
            op_plan q;
            op_plan_copy(&q, &p);
            q.stage_act[s] = OP_ACT_KEEP;
            CHECK(op_sim_replay(&q, NULL, &e) == OP_OK);
            CHECK(q.pred.peak_bytes_max > (int64_t)pr.mem_limit_bytes ||
                  q.pred.makespan_ms > p.pred.makespan_ms);
            op_plan_free(&q);
        }
        /* and the plan file keeps the policies */
        op_buf js = {0};
        CHECK(op_plan_to_json(&p, &js) == OP_OK);
        op_plan r;
        CHECK(op_plan_from_json(js.data, "mem", &r, &e) == OP_OK);
        for (int s = 0; s < p.S; s++) CHECK(r.stage_act[s] == p.stage_act[s]);
        op_plan_free(&r);
        op_buf_free(&js);
        op_plan_free(&p);
    }
    op_plan_free(&free_p);
    free(l);
}

/* Ctrl-C (opts.cancel set): the memory phases after the first search are skipped and a plan
 * that fits still comes back, after far fewer simulations than the whole search. */
TEST(cancel_returns_a_fitting_plan_early) {
    int n = 16, P = 4, M = 8;
    op_layer_cost *l = tf_layers(n, 64, 4);
    op_problem pr = tf_problem(l, n, P, M, 200);
    op_tune_opts o;
    op_tune_stats full, cut;
    op_plan a, b;
    op_err e = {0};
    op_tune_opts_default(&o);
    o.stats = &full;
    CHECK_MSG(op_tune(&pr, &o, &a, &e) == OP_OK, "%s", e.msg);
    volatile sig_atomic_t stop = 1;
    o.cancel = &stop;
    o.stats = &cut;
    CHECK_MSG(op_tune(&pr, &o, &b, &e) == OP_OK, "%s", e.msg);
    if (a.S > 0 && b.S > 0) {
        CHECK(full.mem_binds == 2); /* the case has memory phases to skip */
        /* the keep search and the first joint search, each stopped at its first check: 299
         * of the whole run's 234157 simulations; with every later trial, the wfree chain and
         * the polishes still running (each stopped at its first check) it was 1791 */
        CHECK_MSG(cut.evals * 300 < full.evals, "%ld simulations cancelled, %ld whole", cut.evals, full.evals);
        CHECK(op_plan_fits(&b));
        CHECK(b.pred.makespan_ms >= a.pred.makespan_ms * (1 - 1e-9) || cut.evals < full.evals);
        op_plan_free(&a);
        op_plan_free(&b);
    }
    free(l);
}

TEST(baselines_get_the_cheapest_recompute_that_fits) {
    int n = 16, P = 4, M = 8;
    op_layer_cost *l = tf_layers(n, 64, 4);
    op_problem pr = tf_problem(l, n, P, M, 0);
    op_plan g;
    op_sched_info info = {0};
    op_err e = {0};
    /* no limit: as it is */
    CHECK(op_sched_build_fit("1f1b", &pr, NULL, &g, &info, &e) == OP_OK);
    CHECK(!strstr(info.settings, "recompute="));
    for (int s = 0; s < g.S; s++) CHECK(g.stage_act[s] == OP_ACT_KEEP);
    op_plan_free(&g);
    /* 1F1B holds P - d microbatches of a 4-layer stage: 4 x 256 MiB on device 0; full keeps 4
     * inputs of 2 MiB per microbatch, and re-materialises one stage (256) during I */
    pr.mem_limit_bytes = 400.0 * MIB;
    CHECK(op_sched_build_fit("1f1b", &pr, NULL, &g, &info, &e) == OP_OK);
    CHECK_STR_CONTAINS(info.settings, "recompute=full");
    CHECK((double)g.pred.peak_bytes_max <= pr.mem_limit_bytes);
    for (int s = 0; s < g.S; s++) CHECK(g.stage_act[s] == OP_ACT_FULL);
    /* the recompute is paid on the compute timeline: slower than keep without a limit */
    op_plan k;
    op_problem nl = pr;
    nl.mem_limit_bytes = 0;
    CHECK(op_sched_build("1f1b", &nl, &k, &e) == OP_OK);
    CHECK(g.pred.makespan_ms > k.pred.makespan_ms);
    op_plan_free(&k);
    op_plan_free(&g);
    free(l);
}

static void note_trying(void *ctx, const char *what) {
    char *t = ctx;
    size_t k = strlen(t);
    snprintf(t + k, 1024 - k, "[%s]", what);
}

TEST(advice_when_nothing_fits) {
    char buf[2048];
    /* static 40 MiB per layer x 16 layers over 4 devices = 160 MiB per device at best */
    op_layer_cost *l = tf_layers(16, 1, 40);
    op_problem pr = tf_problem(l, 16, 4, 8, 100);
    op_plan p;
    op_err e = {0};
    CHECK(tune(&pr, OP_TUNE_RC_AUTO, &p, NULL, &e) == OP_ENOMEM);
    /* said at once, naming the cause, without a search that could only confirm it */
    CHECK_STR_CONTAINS(e.msg, "static memory");
    char tried[1024] = "";
    op_tune_advise_progress pg = {.trying = note_trying, .ctx = tried};
    int k = op_tune_advise_with(NULL, NULL, NULL, &pr, buf, sizeof buf, &pg);
    CHECK(k >= 2);
    /* each search is announced before it runs: 8 devices (the fix; 6 are not searched, their
     * static memory alone is over the limit), and no limit, then the limit ladder (the kinds
     * of change run on threads of their own: within a kind in order, one call at a time) */
    CHECK_STR_CONTAINS(tried, "[8 devices]");
    CHECK(!strstr(tried, "[6 devices]"));
    const char *nolim = strstr(tried, "[no memory limit]"), *rung = strstr(tried, "[--mem-limit ");
    CHECK(nolim && rung && nolim < rung);
    CHECK(!strstr(tried, "[10 devices]")); /* the first device count that fits ends that ladder */
    CHECK_STR_CONTAINS(buf, "static memory");
    CHECK_STR_CONTAINS(buf, "0.16 GiB");
    /* 8 devices hold 80 MiB of static each: more devices is a computed fix */
    CHECK_STR_CONTAINS(buf, "--devices 8");
    CHECK_STR_CONTAINS(buf, "--mem-limit");
    CHECK_MSG(!strstr(buf, "no plan fits with"), "%s", buf); /* every change searched fits */
    /* a layer of 400 MiB fits no device of 100 MiB, however many: the device counts searched
     * are named after the suggestions, uncounted (the limit that fits is still suggested) */
    op_layer_cost *big = tf_layers(16, 1, 400);
    op_problem pb = tf_problem(big, 16, 4, 8, 100);
    buf[0] = 0;
    k = op_tune_advise(NULL, NULL, NULL, &pb, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "\nno plan fits with: --devices 6 to 16\n"), "%s", buf);
    CHECK_STR_CONTAINS(buf, "--mem-limit");
    CHECK(k == 2); /* the static line and the limit */
    free(big);
    /* a limit above what the GPU has is no advice: a device of 0.15 GiB (static alone needs
     * 0.16 per device of 4) gets the device count, and no limit is searched or suggested */
    op_device small = {.mem_GiB = 0.15};
    tried[0] = 0;
    buf[0] = 0;
    op_tune_advise_with(NULL, NULL, &small, &pr, buf, sizeof buf, &pg);
    CHECK_STR_CONTAINS(buf, "--devices 8");
    CHECK(!strstr(buf, "--mem-limit"));
    CHECK(!strstr(tried, "no memory limit") && !strstr(tried, "--mem-limit"));
    /* with room to spare there is nothing to advise about static memory */
    pr.mem_limit_bytes = 1e12;
    buf[0] = 0;
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK(!strstr(buf, "static memory"));
    free(l);
}

TEST(advice_limit_without_static_memory) {
    /* activations only (a profile without weights): the limit ladder starts above 0, so the
     * advice names a limit the flag takes, never "--mem-limit 0.00" (0 is no limit) */
    char buf[2048] = "";
    op_layer_cost *l = tf_layers(8, 64, 0);
    op_problem pr = tf_problem(l, 8, 2, 8, 1);
    op_plan p;
    op_err e = {0};
    CHECK(tune(&pr, OP_TUNE_RC_AUTO, &p, NULL, &e) == OP_ENOMEM);
    op_tune_advise(NULL, NULL, NULL, &pr, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "--mem-limit ");
    CHECK_MSG(!strstr(buf, "--mem-limit 0.00:"), "%s", buf);
    free(l);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(layer_view_follows_each_policy_rule);
    RUN(parses_recompute_modes);
    RUN(keep_where_memory_does_not_bind);
    RUN(no_policy_when_memory_is_not_modelled);
    RUN(recomputes_only_where_memory_binds);
    RUN(cancel_returns_a_fitting_plan_early);
    RUN(baselines_get_the_cheapest_recompute_that_fits);
    RUN(advice_when_nothing_fits);
    RUN(advice_limit_without_static_memory);
    return check_report("tune_mem");
}
