/* test_tune_pol.c: per-stage activation policies inside the tuner's search.  The engine that
 * ranks candidates (tune_engine.c) must time and size a stage under keep, selective and full
 * exactly as the simulator does (plan.h's rules), or the search would chase plans that do not
 * fit or are not fast; and the joint search must find a plan that fits where keep cannot. */
#include "check.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"
#include "tune/tune_int.h"
#include "tune/tune_mem.h"
#include "tune_fixtures.h"

/* n layers of unequal cost; every third has an attention core (selective saves there). */
static op_layer_cost *layers(int n) {
    op_layer_cost *l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < n; i++) {
        snprintf(l[i].name, sizeof l[i].name, "l%d", i);
        l[i].sym = 'T';
        l[i].f_ms = 1 + 0.25 * (i % 4), l[i].i_ms = 1.5 + 0.1 * (i % 3), l[i].w_ms = 0.5;
        l[i].act_bytes = (40 + 8 * (i % 5)) * (int64_t)MIB;
        l[i].act_w_bytes = 10 * (int64_t)MIB;
        l[i].act_i_bytes = 4 * (int64_t)MIB;
        l[i].out_bytes = (2 + i % 2) * (int64_t)MIB;
        l[i].static_bytes = 100 * (int64_t)MIB;
        l[i].param_bytes = 12 * (int64_t)MIB;
        if (i % 3 == 0) l[i].f_sel_ms = 0.3, l[i].act_sel_bytes = 25 * (int64_t)MIB;
    }
    return l;
}

/* Random candidates (partition, placement, policies, split): the engine's makespan and per
 * device peak equal the simulator's on the plan built from the engine's own order. */
TEST(engine_times_policies_as_the_simulator) {
    int L = 12, P = 3, M = 6;
    op_layer_cost *ly = layers(L);
    op_problem pr = tf_problem(ly, L, P, M, 0);
    tn_prob pb;
    tn_prob_init(&pb, &pr);
    tn_eng *e = tn_eng_new(&pb);
    tn_res r;
    tn_res_alloc(&r, P);
    tn_cand c;
    tn_cand_alloc(&c, &pb);
    op_rng rng;
    op_rng_seed(&rng, 7);
    int n_pol[3] = {0};
    for (int trial = 0; trial < 40; trial++) {
        int S = P * (1 + op_rng_int(&rng, 2)); /* 3 or 6 stages */
        tn_place_loop(&c, P, S);
        tn_partition_balanced(&pb, &c, 0);
        c.split = op_rng_int(&rng, 2);
        /* admission only: the simulator replays the order */
        c.memres = (int)op_rng_int(&rng, 3) * TN_MEMRES_ONE + (int)op_rng_int(&rng, 2) * TN_MEMRES_OWED;
        if (S > P && op_rng_int(&rng, 2)) /* irregular: a device holds an early and a late stage */
            for (int s = 0; s < S; s++) c.dev[s] = (s * 2 + s / P) % P;
        for (int s = 0; s < S; s++) {
            c.pol[s] = (uint8_t)op_rng_int(&rng, 3);
            n_pol[c.pol[s]]++;
        }
        op_plan p;
        op_err err = {0};
        int ok = tn_cand_plan(e, &pb, &c, &r, "t", &p, &err) == OP_OK; /* valid, and it replays */
        CHECK_MSG(ok, "%s", err.msg);
        if (!ok) continue;
        double mk = r.makespan;
        CHECK_NEAR(p.pred.makespan_ms, mk, 1e-9 * mk);
        for (int d = 0; d < P; d++) CHECK_EQ_INT(p.pred.peak_bytes[d], r.peak[d]);
        op_plan_free(&p);
    }
    CHECK(n_pol[0] > 0 && n_pol[1] > 0 && n_pol[2] > 0); /* every policy was exercised */
    tn_cand_free(&c);
    tn_res_free(&r);
    tn_eng_free(e);
    tn_prob_free(&pb);
    free(ly);
}

/* Where keep cannot fit, the joint search starts from full everywhere, moves policies stage by
 * stage, and returns a plan that fits with a policy on some stage and keep where it can. */
/* The problem of the two tests below: 12 layers on 3 devices, 8 microbatches, a 560 MiB limit
 * (static 400 MiB per device; keep's 1F1B stage 0 holds 3 stashes of ~200 MiB), and a small
 * search budget. */
static op_problem keep_cannot_fit(op_layer_cost **ly, op_tune_opts *o) {
    const int L = 12, P = 3, M = 8;
    *ly = layers(L);
    op_tune_opts_default(o);
    o->max_evals = 600;
    return tf_problem(*ly, L, P, M, 560);
}

TEST(joint_search_fits_where_keep_cannot) {
    op_layer_cost *ly;
    op_tune_opts o;
    op_problem pr = keep_cannot_fit(&ly, &o);
    o.recompute = OP_TUNE_RC_NONE;
    op_plan keep, joint;
    op_err e = {0};
    int rc_keep = op_tune(&pr, &o, &keep, &e);
    CHECK_EQ_INT(rc_keep, OP_ENOMEM);
    if (rc_keep == OP_OK) op_plan_free(&keep);
    op_err e2 = {0};
    CHECK(tn_tune_core_pol(&pr, &o, OP_ACT_FULL, NULL, NULL, 0, &joint, &e2) == OP_OK);
    CHECK(op_plan_fits(&joint));
    int n_rc = 0;
    for (int s = 0; s < joint.S; s++) n_rc += joint.stage_act[s] != OP_ACT_KEEP;
    CHECK_MSG(n_rc > 0 && n_rc < joint.S, "%d of %d stages recompute (keep rc %d)", n_rc, joint.S, rc_keep);
    CHECK(joint.pred.makespan_ms >= op_problem_lower_bound(&pr) * (1 - 1e-9));
    op_plan_free(&joint);
    free(ly);
}

/* The hand case of the memres tests: device 0 holds stages 0 and 2 (an early and a late
 * stage) of 3 one-layer stages on 2 devices, 100 MiB stash each, fused B, room for exactly 3
 * stashes (a 300 MiB limit). */
typedef struct {
    op_layer_cost *ly; /* [3] */
    op_problem pr;
    tn_prob pb;
    tn_eng *e;
    tn_res r;
    tn_cand c;
} hand_fx;

static void hand_open(hand_fx *h, int M) {
    const int L = 3, P = 2;
    h->ly = layers(L);
    for (int l = 0; l < L; l++) {
        h->ly[l].act_bytes = 100 * (int64_t)MIB;
        h->ly[l].act_w_bytes = h->ly[l].act_i_bytes = 0;
        h->ly[l].static_bytes = 0;
        h->ly[l].f_sel_ms = 0, h->ly[l].act_sel_bytes = 0;
    }
    h->pr = tf_problem(h->ly, L, P, M, 300);
    tn_prob_init(&h->pb, &h->pr);
    h->e = tn_eng_new(&h->pb);
    tn_res_alloc(&h->r, P);
    tn_cand_alloc(&h->c, &h->pb);
    h->c.S = 3;
    h->c.first[0] = 0, h->c.first[1] = 1, h->c.first[2] = 2, h->c.first[3] = 3;
    h->c.dev[0] = 0, h->c.dev[1] = 1, h->c.dev[2] = 0;
    h->c.split = 0;
}

static void hand_close(hand_fx *h) {
    tn_cand_free(&h->c);
    tn_res_free(&h->r);
    tn_eng_free(h->e);
    tn_prob_free(&h->pb);
    free(h->ly);
}

/* Knob memres, by hand: device 0 holds stages 0 and 2 (an early and a late stage), 100 MiB
 * stash each, fused B, room for exactly 3 stashes.  Without the reserve stage 0 admits 3
 * microbatches, microbatch 0 comes back to stage 2 and finds no room, every device waits, and
 * the engine must force an F over the limit.  With it stage 0 admits only 2 (it leaves one
 * stash of room to stage 2), the pipeline drains microbatch by microbatch, and the plan fits:
 * peak exactly 3 stashes. */
TEST(memres_leaves_room_for_a_later_stage) {
    const int L = 3, P = 2, M = 6;
    hand_fx h;
    hand_open(&h, M);
    double mk0 = tn_eval(h.e, &h.pb, &h.c, &h.r, NULL, NULL, 0);
    CHECK(mk0 > 0);
    CHECK_MSG(!h.r.fits && h.r.peak[0] > 300 * (int64_t)MIB, "without the reserve: peak %.0f MiB",
              (double)h.r.peak[0] / MIB);
    h.c.memres = 1;
    double mk1 = tn_eval(h.e, &h.pb, &h.c, &h.r, NULL, NULL, 0);
    CHECK(mk1 > 0);
    CHECK(h.r.fits);
    CHECK_EQ_INT(h.r.peak[0], 300 * (int64_t)MIB);
    CHECK(h.r.max_inflight[0] <= 3);
    /* and the work is all there: device 0 runs F and B of two stages for every microbatch */
    double w0 = 0;
    for (int l = 0; l < L; l += 2) w0 += M * (h.ly[l].f_ms + h.ly[l].i_ms + h.ly[l].w_ms);
    CHECK_NEAR(h.r.busy[0], w0, 1e-9 * w0);
    CHECK(mk1 >= w0 * (1 - 1e-12));
    (void)L, (void)P;
    hand_close(&h);
}

/* Knobs memres QUOTA and OWED on the hand case above, M = 8: stage 0's need is its round trip
 * (F and B of stages 1 and 2, 7.05 ms) over the period (device 0's 6.7 ms per microbatch)
 * plus itself, just over two microbatches; stage 2's is one.  Room for three stashes gives
 * stage 2 its one and stage 0 the other two.  QUOTA: stage 0 never holds more than 2, stage 2
 * never more than 1; OWED: stage 0 never takes the slot stage 2's quota is owed.  Either way
 * the plan fits where first come first served does not, and device 0 runs all its work. */
TEST(memres_quotas_share_a_device_by_need) {
    const int L = 3, P = 2, M = 8;
    hand_fx h;
    hand_open(&h, M);
    CHECK(tn_eval(h.e, &h.pb, &h.c, &h.r, NULL, NULL, 0) > 0);
    CHECK_MSG(!h.r.fits, "first come first served: peak %.0f MiB", (double)h.r.peak[0] / MIB);
    double w0 = 0;
    for (int l = 0; l < L; l += 2) w0 += M * (h.ly[l].f_ms + h.ly[l].i_ms + h.ly[l].w_ms);
    int modes[] = {TN_MEMRES_QUOTA, TN_MEMRES_OWED};
    for (int k = 0; k < 2; k++) {
        h.c.memres = modes[k];
        size_t per = (size_t)h.c.S * (size_t)M * 3;
        op_op *buf = calloc(per * (size_t)P, sizeof(op_op));
        op_op *ops[2] = {buf, buf + per};
        int n[2] = {0, 0};
        double mk = tn_eval(h.e, &h.pb, &h.c, &h.r, ops, n, 0);
        CHECK(mk > 0);
        CHECK_MSG(h.r.fits, "memres %d: peak %.0f MiB", h.c.memres, (double)h.r.peak[0] / MIB);
        CHECK(h.r.peak[0] <= 300 * (int64_t)MIB);
        CHECK_NEAR(h.r.busy[0], w0, 1e-9 * w0);
        /* in flight per stage of device 0, walking its order */
        int fl[3] = {0, 0, 0}, most[3] = {0, 0, 0};
        for (int i = 0; i < n[0]; i++) {
            int s = ops[0][i].stage;
            fl[s] += ops[0][i].kind == OP_F ? 1 : -1;
            if (fl[s] > most[s]) most[s] = fl[s];
        }
        CHECK_EQ_INT(n[0], 4 * M);
        if (modes[k] == TN_MEMRES_QUOTA) {
            CHECK_EQ_INT(most[0], 2);
            CHECK_EQ_INT(most[2], 1);
        } else {
            CHECK(most[0] <= 2); /* the third stash stays owed to stage 2 */
        }
        free(buf);
    }
    /* without a limit no quota binds: the same order as no knob at all */
    h.pr.mem_limit_bytes = 0;
    tn_prob pb2;
    tn_prob_init(&pb2, &h.pr);
    tn_eng *e2 = tn_eng_new(&pb2);
    h.c.memres = 0;
    double free0 = tn_eval(e2, &pb2, &h.c, &h.r, NULL, NULL, 0);
    h.c.memres = TN_MEMRES_QUOTA | TN_MEMRES_OWED;
    CHECK_NEAR(tn_eval(e2, &pb2, &h.c, &h.r, NULL, NULL, 0), free0, 1e-12 * free0);
    tn_eng_free(e2);
    tn_prob_free(&pb2);
    (void)L, (void)P;
    hand_close(&h);
}

/* tn_prob.wfree, by hand: the memres case with split backward; device 0's stages 0 and 2 hold
 * 20 and 80 MiB from I to W, for a W of 2 and 0.5 ms.  After I of stage 0 for microbatches 0
 * and 1, F(0, 2) waits for memory and W of both stages are ready: the engine's default runs
 * the oldest microbatch's (stage 0's), wfree the one that frees the most bytes per ms (stage
 * 2's, 160 MiB/ms against 10), and F(0, 2) follows it.  Without knob memres wfree changes
 * nothing. */
static int first_w_then_f(const tn_prob *pb, int memres, int *w_stage, unsigned long *order) {
    tn_eng *e = tn_eng_new(pb);
    tn_res r;
    tn_cand c;
    tn_res_alloc(&r, 2);
    tn_cand_alloc(&c, pb);
    c.S = 3;
    c.first[0] = 0, c.first[1] = 1, c.first[2] = 2, c.first[3] = 3;
    c.dev[0] = 0, c.dev[1] = 1, c.dev[2] = 0;
    c.split = 1;
    c.memres = memres;
    size_t per = (size_t)3 * (size_t)pb->M * 3;
    op_op *buf = calloc(per * 2, sizeof(op_op));
    op_op *ops[2] = {buf, buf + per};
    int n[2] = {0, 0}, fits;
    CHECK(tn_eval(e, pb, &c, &r, ops, n, 0) > 0);
    fits = r.fits;
    *w_stage = -1;
    *order = 0; /* device 0's order, as one number */
    for (int i = 0; i < n[0]; i++)
        *order = *order * 31 + (unsigned long)(ops[0][i].kind * 7 + ops[0][i].stage * 3 + ops[0][i].mb);
    for (int i = 0; i + 1 < n[0]; i++) /* the W just before F(0, 2) */
        if (ops[0][i + 1].kind == OP_F && ops[0][i + 1].stage == 0 && ops[0][i + 1].mb == 2 &&
            ops[0][i].kind == OP_W)
            *w_stage = ops[0][i].stage;
    free(buf);
    tn_cand_free(&c);
    tn_res_free(&r);
    tn_eng_free(e);
    return fits;
}

TEST(wfree_runs_the_w_that_frees_most_per_ms) {
    const int L = 3, M = 6;
    op_layer_cost *ly = layers(L);
    const double w_ms[3] = {2.0, 0.5, 0.5};
    const int held[3] = {20, 20, 80};
    for (int l = 0; l < L; l++) {
        ly[l].f_ms = 1, ly[l].i_ms = 1.5, ly[l].w_ms = w_ms[l];
        ly[l].act_bytes = 100 * (int64_t)MIB;
        ly[l].act_w_bytes = held[l] * (int64_t)MIB;
        ly[l].act_i_bytes = ly[l].static_bytes = 0;
        ly[l].f_sel_ms = 0, ly[l].act_sel_bytes = 0;
    }
    op_problem pr = tf_problem(ly, L, 2, M, 300);
    tn_prob pb;
    tn_prob_init(&pb, &pr);
    int ws = -1;
    unsigned long o0, o1, p0, p1;
    CHECK(first_w_then_f(&pb, TN_MEMRES_ONE, &ws, &o0));
    CHECK_EQ_INT(ws, 0);
    first_w_then_f(&pb, 0, &ws, &p0);
    pb.wfree = 1;
    CHECK(first_w_then_f(&pb, TN_MEMRES_ONE, &ws, &o1));
    CHECK_EQ_INT(ws, 2);
    CHECK(o1 != o0);
    first_w_then_f(&pb, 0, &ws, &p1);
    CHECK(p1 == p0);
    tn_prob_free(&pb);
    free(ly);
}

/* Refining level 3 starts from the given seeds alone (no standard placements).  A seed the
 * search cannot take (here: as many stages as layers, which seed_plan refuses) must not leave
 * it with nothing to start from: with no baselines either, it falls back to the standard
 * placements and still finds a plan that fits where keep cannot (the problem above). */
TEST(refine_alone_starts_from_its_seeds) {
    op_layer_cost *ly;
    op_tune_opts o;
    op_problem pr = keep_cannot_fit(&ly, &o);
    const int L = pr.n_layers;
    o.no_baselines = 1;
    op_plan joint, alone = {0}, fallback = {0};
    op_err e = {0};
    CHECK(tn_tune_core_pol(&pr, &o, OP_ACT_FULL, NULL, NULL, 0, &joint, &e) == OP_OK);
    CHECK(op_plan_fits(&joint));
    const op_plan *seed = &joint;
    const int cut = 0;
    CHECK_MSG(tn_tune_core_refine(&pr, &o, OP_ACT_KEEP, &seed, &cut, 1, 3, &alone, &e) == OP_OK, "%s", e.msg);
    CHECK(op_plan_fits(&alone));
    CHECK(alone.pred.makespan_ms >= op_problem_lower_bound(&pr) * (1 - 1e-9));
    op_plan refused = joint; /* only S differs: seed_plan refuses it before reading more */
    refused.S = L;
    seed = &refused;
    op_err e2 = {0};
    CHECK_MSG(tn_tune_core_refine(&pr, &o, OP_ACT_KEEP, &seed, &cut, 1, 3, &fallback, &e2) == OP_OK, "%s", e2.msg);
    CHECK(op_plan_fits(&fallback));
    op_plan_free(&fallback);
    op_plan_free(&alone);
    op_plan_free(&joint);
    free(ly);
}

/* The summary of a plan's policies names each policy with its count, under one "of S
 * stages" when there are several: every one of them with its own ran to 79 characters and
 * the 64 of op_tune_stats.policies cut it mid-word ("..., offload o"). */
TEST(describe_names_every_policy_whole) {
    op_plan p;
    memset(&p, 0, sizeof p);
    uint8_t act[9999];
    p.S = 9999;
    p.stage_act = act;
    op_tune_stats st;
    memset(act, OP_ACT_KEEP, sizeof act);
    tn_describe(&p, &st);
    CHECK_MSG(!strcmp(st.policies, "keep"), "%s", st.policies);
    CHECK(st.n_recompute == 0);
    act[3] = OP_ACT_FULL;
    tn_describe(&p, &st);
    CHECK_MSG(!strcmp(st.policies, "full on 1 of 9999 stages"), "%s", st.policies);
    for (int s = 0; s < 9999; s++) act[s] = (uint8_t)(1 + s % 3); /* 3333 of each */
    tn_describe(&p, &st);
    CHECK_MSG(!strcmp(st.policies, "selective on 3333, full on 3333, offload on 3333 of 9999 stages"),
              "%s", st.policies);
    CHECK(st.n_recompute == 9999);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(engine_times_policies_as_the_simulator);
    RUN(joint_search_fits_where_keep_cannot);
    RUN(memres_leaves_room_for_a_later_stage);
    RUN(memres_quotas_share_a_device_by_need);
    RUN(wfree_runs_the_w_that_frees_most_per_ms);
    RUN(refine_alone_starts_from_its_seeds);
    RUN(describe_names_every_policy_whole);
    return check_report("tune_pol");
}
