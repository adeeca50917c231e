/* test_plan_json.c: the plan file: exact round trips, and every kind of bad input rejected
 * with one line naming file and position; atomic writes leave nothing behind on failure. */
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/plan_io.h"
#include "octopipe/sim.h"

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* P devices, one layer per stage, 1F1B order (fused B unless split), simulated. */
static void plan_1f1b(op_plan *p, int P, int M, int split, double lat_ms) {
    op_layer_cost L[16];
    memset(L, 0, sizeof L);
    for (int l = 0; l < P; l++) {
        snprintf(L[l].name, sizeof L[l].name, "layers.%d \"q\"", l);
        L[l].sym = l == 0 ? 'E' : l == P - 1 ? 'L' : 'M';
        L[l].f_ms = 1.0;
        L[l].i_ms = 0.5 + 0.1 * l; /* 0.1 is not a binary fraction: exercises round trips */
        L[l].w_ms = 0.5 - 0.1 * l / P;
        L[l].out_bytes = 3 << 20;
        L[l].act_bytes = 1000 + l;
        L[l].act_w_bytes = 300;
        L[l].param_bytes = 12345;
        L[l].static_bytes = 12345 * 9;
    }
    op_comm c = {0};
    c.none = lat_ms == 0;
    c.nodes_of = 2;
    c.intra_lat_ms = lat_ms;
    c.intra_bw_GBps = 300;
    c.inter_lat_ms = 3 * lat_ms;
    c.inter_bw_GBps = 12.5;
    op_plan_init(p, "1f1b", L, P, P, M, P, &c);
    snprintf(p->model, sizeof p->model, "toy");
    p->tokens_per_mb = 4096;
    p->op_overhead_ms = 0.01;
    p->mem_limit_bytes = 8e9;
    for (int s = 0; s <= P; s++) p->stage_first[s] = s;
    for (int s = 0; s < P; s++) p->stage_dev[s] = s, p->stage_split[s] = (uint8_t)split;
    int warm[16], cap[16];
    for (int d = 0; d < P; d++) warm[d] = P - 1 - d, cap[d] = P - d;
    op_sim_policy pol = {0};
    pol.warmup = warm;
    pol.max_inflight = cap;
    op_err e = {0};
    CHECK_EQ_INT(op_sim_dynamic(p, &pol, NULL, &e), OP_OK);
}

static void same_plan(const op_plan *a, const op_plan *b) {
    CHECK(!strcmp(a->name, b->name) && !strcmp(a->model, b->model));
    CHECK(a->P == b->P && a->M == b->M && a->S == b->S && a->n_layers == b->n_layers);
    CHECK(!memcmp(&a->comm, &b->comm, sizeof a->comm));
    CHECK(a->tokens_per_mb == b->tokens_per_mb && a->op_overhead_ms == b->op_overhead_ms &&
          a->mem_limit_bytes == b->mem_limit_bytes);
    CHECK(!memcmp(a->layers, b->layers, sizeof(op_layer_cost) * (size_t)a->n_layers));
    CHECK(!memcmp(a->stage_first, b->stage_first, sizeof(int) * (size_t)(a->S + 1)));
    CHECK(!memcmp(a->stage_dev, b->stage_dev, sizeof(int) * (size_t)a->S));
    CHECK(!memcmp(a->stage_split, b->stage_split, (size_t)a->S));
    CHECK(!memcmp(a->stage_act, b->stage_act, (size_t)a->S));
    for (int d = 0; d < a->P; d++) {
        CHECK(a->n_ops[d] == b->n_ops[d]);
        for (int i = 0; i < a->n_ops[d] && i < b->n_ops[d]; i++) {
            const op_op *x = &a->ops[d][i], *y = &b->ops[d][i];
            CHECK(x->kind == y->kind && x->stage == y->stage && x->mb == y->mb);
            CHECK(x->start == y->start && x->end == y->end);
        }
    }
    CHECK(a->pred.makespan_ms == b->pred.makespan_ms);
    CHECK(a->pred.bubble_ratio == b->pred.bubble_ratio);
    CHECK(a->pred.peak_bytes_max == b->pred.peak_bytes_max);
    CHECK(!memcmp(a->pred.warmup_ms, b->pred.warmup_ms, sizeof(double) * (size_t)a->P));
}

TEST(round_trip_exact) {
    for (int split = 0; split <= 1; split++) {
        op_plan p, q;
        plan_1f1b(&p, 4, 8, split, 0.013);
        const char *path = tmp_path("rt.json");
        op_err e = {0};
        CHECK_EQ_INT(op_plan_write(&p, path, &e), OP_OK);
        op_plan_file_info info;
        int rc = op_plan_read_ex(path, &q, &info, &e);
        CHECK_MSG(rc == OP_OK, "%s", e.msg);
        if (rc) continue;
        CHECK(info.exact && info.has_times && info.has_pred);
        same_plan(&p, &q);
        /* and the text itself is stable */
        op_buf a = {0}, b = {0};
        CHECK_EQ_INT(op_plan_to_json(&p, &a), OP_OK);
        CHECK_EQ_INT(op_plan_to_json(&q, &b), OP_OK);
        CHECK(a.len == b.len && !memcmp(a.data, b.data, a.len));
        CHECK_STR_CONTAINS(a.data, "\"I\": 0.6,"); /* shortest form, not 0.59999999999999998 */
        op_buf_free(&a);
        op_buf_free(&b);
        op_plan_free(&q);
        op_plan_free(&p);
    }
}

/* A link no device pair uses may be anything op_comm_validate allows (0 on one device, or
 * between nodes when all devices share one): such a plan was written, then refused on read. */
TEST(unused_links_round_trip) {
    for (int P = 1; P <= 2; P++) { /* nodes_of 2: one node either way */
        op_plan p, q;
        plan_1f1b(&p, P, 4, 0, 0.013);
        p.comm.inter_bw_GBps = 0;
        if (P == 1) p.comm.intra_bw_GBps = 0;
        op_err e = {0};
        CHECK_EQ_INT(op_comm_validate(&p.comm, P, &e), OP_OK);
        op_buf b = {0};
        CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
        op_buf_put(&b, "", 1);
        int rc = op_plan_from_json(b.data, "p.json", &q, &e);
        CHECK_MSG(rc == OP_OK, "P=%d: %s", P, e.msg);
        if (rc == OP_OK) op_plan_free(&q);
        op_buf_free(&b);
        op_plan_free(&p);
    }
}

/* A file written by a version with a looser lower bound still loads: the bound is not a
 * prediction of the plan, and the one in memory is recomputed. */
TEST(older_lower_bound_loads) {
    op_plan p, q;
    plan_1f1b(&p, 4, 8, 1, 0.013);
    double lb = p.pred.lower_bound_ms;
    p.pred.lower_bound_ms = lb * 0.97;
    const char *path = tmp_path("oldlb.json");
    op_err e = {0};
    CHECK_EQ_INT(op_plan_write(&p, path, &e), OP_OK);
    int rc = op_plan_read(path, &q, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK_NEAR(q.pred.lower_bound_ms, lb, 1e-9 * lb);
        op_plan_free(&q);
    }
    op_plan_free(&p);
}

/* Activation policies round-trip by name; files without the key load as keep everywhere; an
 * unknown name is refused with its position. */
TEST(activation_policy_round_trip) {
    op_plan p, q;
    plan_1f1b(&p, 4, 8, 1, 0.013);
    p.stage_act[1] = OP_ACT_SELECTIVE, p.stage_act[2] = OP_ACT_FULL, p.stage_act[3] = OP_ACT_OFFLOAD;
    p.comm.host_lat_ms = 0.02, p.comm.host_bw_GBps = 50, p.comm.host_mem_bytes = 1e9;
    for (int l = 0; l < p.n_layers; l++)
        p.layers[l].f_sel_ms = 0.125, p.layers[l].act_sel_bytes = p.layers[l].act_bytes / 2;
    op_err e = {0};
    /* policies change I's duration (recompute) and memory: the stored times must follow */
    CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_OK);
    const char *path = tmp_path("act.json");
    CHECK_EQ_INT(op_plan_write(&p, path, &e), OP_OK);
    op_plan_file_info info;
    int rc = op_plan_read_ex(path, &q, &info, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        same_plan(&p, &q);
        op_plan_free(&q);
    }
    op_buf b = {0};
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"activation\": [\"keep\", \"selective\", \"full\", \"offload\"]");
    CHECK_STR_CONTAINS(b.data, "\"host_bw_GBps\": 50");
    CHECK_STR_CONTAINS(b.data, "\"F_sel\": 0.125");
    char *bad = strdup(b.data), *at = strstr(bad, "\"offload\"");
    memcpy(at, "\"offlxad\"", 9);
    CHECK(op_plan_from_json(bad, "bad.json", &q, &e) != OP_OK);
    CHECK_STR_CONTAINS(e.msg, "activation[3]");
    free(bad);
    op_buf_free(&b);
    op_plan_free(&p);
    plan_1f1b(&p, 4, 8, 1, 0.013); /* keep-only plans do not write the key */
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK(!strstr(b.data, "activation"));
    op_buf_free(&b);
    op_plan_free(&p);
}

static void expect_bad(const op_plan *p, const char *from, const char *to, int code,
                       const char *want);

/* The TP and EP degrees the costs assume round-trip under "parallel", written only where one is
 * above 1 (older files and plain plans load as 1 and 1, with DP 1, no ZeRO-1 and no batch);
 * bad values are refused by path. */
TEST(parallel_degrees_round_trip) {
    op_plan p, q, c;
    plan_1f1b(&p, 4, 8, 1, 0.013);
    op_err e = {0};
    op_buf b = {0};
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK(!strstr(b.data, "parallel"));
    CHECK(!strstr(b.data, "\"batch\""));
    CHECK_EQ_INT(op_plan_from_json(b.data, "plain.json", &q, &e), OP_OK);
    CHECK(q.tp == 1 && q.ep == 1 && q.dp == 1 && q.zero1 == 0 && q.seq == 0 && q.mbs == 0);
    op_plan_free(&q);
    op_buf_free(&b);
    p.tp = 2, p.ep = 4;
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"parallel\": {\"tp\": 2, \"ep\": 4}");
    int rc = op_plan_from_json(b.data, "par.json", &q, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(q.tp == 2 && q.ep == 4);
        op_plan_copy(&c, &q);
        CHECK(c.tp == 2 && c.ep == 4);
        op_plan_free(&c);
        op_plan_free(&q);
    }
    static const struct { const char *to, *want; } bad[] = {
        {"\"parallel\": {\"tp\": 0, \"ep\": 4}", "bad.json: parallel.tp: "},
        {"\"parallel\": {\"tp\": 2, \"ep\": 2048}", "bad.json: parallel.ep: "},
        {"\"parallel\": {\"tp\": 2, \"pp\": 4}", "bad.json: parallel: unknown key \"pp\""},
        {"\"parallel\": 2", "bad.json: parallel: expected an object"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad(&p, "\"parallel\": {\"tp\": 2, \"ep\": 4}", bad[i].to, OP_EINVAL, bad[i].want);
    op_buf_free(&b);
    op_plan_free(&p);
}

/* The batch (seq, mbs) and the DP degree with ZeRO-1 round-trip under "batch" and "parallel"
 * (files without them load as unknown / 1 / off: parallel_degrees_round_trip); inconsistent or
 * bad values are refused. */
TEST(batch_and_dp_round_trip) {
    op_plan p, q, c;
    plan_1f1b(&p, 4, 8, 1, 0.013);
    op_err e = {0};
    op_buf b = {0};
    p.seq = 2048, p.mbs = 2 /* tokens_per_mb 4096 */, p.dp = 8, p.zero1 = 1;
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"batch\": {\"seq\": 2048, \"mbs\": 2}");
    CHECK_STR_CONTAINS(b.data, "\"parallel\": {\"tp\": 1, \"ep\": 1, \"dp\": 8, \"zero1\": true}");
    int rc = op_plan_from_json(b.data, "bd.json", &q, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(q.seq == 2048 && q.mbs == 2 && q.dp == 8 && q.zero1 == 1);
        op_plan_copy(&c, &q);
        CHECK(c.seq == 2048 && c.mbs == 2 && c.dp == 8 && c.zero1 == 1);
        op_plan_free(&c);
        op_plan_free(&q);
    }
    const char *from = "\"batch\": {\"seq\": 2048, \"mbs\": 2}";
    static const struct { const char *to, *want; } bad[] = {
        {"\"batch\": {\"seq\": 2048, \"mbs\": 1}",
         "bad.json: batch: seq 2048 x mbs 1 is 2048 tokens, but tokens_per_mb is 4096"},
        {"\"batch\": {\"seq\": 8192}", "bad.json: batch: "},
        {"\"batch\": {\"seq\": 0, \"mbs\": 2}", "bad.json: batch.seq: "},
        {"\"batch\": {\"seq\": 2048, \"mbs\": 2, \"gbs\": 4}", "bad.json: batch: unknown key \"gbs\""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_bad(&p, from, bad[i].to, OP_EINVAL, bad[i].want);
    const char *pf = "\"dp\": 8, \"zero1\": true}";
    static const struct { const char *to, *want; } badp[] = {
        {"\"dp\": 1, \"zero1\": true}", "bad.json: parallel.zero1: ZeRO-1 shards over the data-parallel group"},
        {"\"dp\": 8, \"zero1\": 1}", "bad.json: parallel.zero1: expected true or false"},
        {"\"dp\": 0, \"zero1\": true}", "bad.json: parallel.dp: "}};
    for (size_t i = 0; i < sizeof badp / sizeof badp[0]; i++)
        expect_bad(&p, pf, badp[i].to, OP_EINVAL, badp[i].want);
    op_buf_free(&b);
    op_plan_free(&p);
}

/* act_i_bytes round-trips (with act_w > act, now legal); files without it load as 0. */
TEST(act_i_bytes_round_trip_and_optional) {
    op_plan p, q;
    plan_1f1b(&p, 4, 8, 1, 0.013);
    for (int l = 0; l < p.n_layers; l++)
        p.layers[l].act_i_bytes = 777 + l, p.layers[l].act_w_bytes = 5000; /* > act_bytes */
    op_err e = {0};
    CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_OK);
    const char *path = tmp_path("acti.json");
    CHECK_EQ_INT(op_plan_write(&p, path, &e), OP_OK);
    op_plan_file_info info;
    int rc = op_plan_read_ex(path, &q, &info, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(info.exact);
        for (int l = 0; l < q.n_layers; l++) {
            CHECK_EQ_INT(q.layers[l].act_i_bytes, 777 + l);
            CHECK_EQ_INT(q.layers[l].act_w_bytes, 5000);
        }
        same_plan(&p, &q);
        op_plan_free(&q);
    }
    op_plan_free(&p);
    /* a checked-in file written before act_i_bytes existed */
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(op_read_file("tests/data/plans/1f1b-p4-m8.json", &text, &len, &e), OP_OK);
    CHECK(text && !strstr(text, "act_i_bytes"));
    free(text);
    rc = op_plan_read("tests/data/plans/1f1b-p4-m8.json", &q, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        for (int l = 0; l < q.n_layers; l++) CHECK_EQ_INT(q.layers[l].act_i_bytes, 0);
        op_plan_free(&q);
    }
}

TEST(plan_without_times_is_simulated) {
    op_plan p, q;
    plan_1f1b(&p, 3, 5, 1, 0);
    double T = p.pred.makespan_ms;
    p.pred.valid = 0; /* written without start/end and without "predicted" */
    op_buf b = {0};
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    CHECK(!strstr(b.data, "\"start\"") && !strstr(b.data, "predicted"));
    op_err e = {0};
    op_plan_file_info info;
    CHECK_EQ_INT(op_plan_from_json_ex(b.data, "t.json", &q, &info, &e), OP_OK);
    CHECK(!info.has_times && !info.has_pred);
    CHECK(q.pred.valid && q.pred.makespan_ms == T);
    op_plan_free(&q);
    /* split inferred from the op kinds when absent */
    char *s = strstr(b.data, "  \"split\"");
    char *nl = strchr(s, '\n');
    memmove(s, nl + 1, strlen(nl + 1) + 1);
    CHECK_EQ_INT(op_plan_from_json_ex(b.data, "t.json", &q, NULL, &e), OP_OK);
    CHECK(q.stage_split[0] == 1 && q.stage_split[2] == 1);
    op_plan_free(&q);
    op_buf_free(&b);
    op_plan_free(&p);
}

/* Writes p as JSON, applies a text substitution (if from != NULL), reads it back: expects
 * OP_EINVAL (or code) with `want` in the message. */
static void expect_bad(const op_plan *p, const char *from, const char *to, int code,
                       const char *want) {
    op_buf b = {0};
    op_plan_to_json(p, &b);
    op_buf t = {0};
    if (from) {
        char *at = strstr(b.data, from);
        CHECK_MSG(at != NULL, "mutation text not found: %s", from);
        if (!at) return;
        op_buf_put(&t, b.data, (size_t)(at - b.data));
        op_buf_put(&t, to, strlen(to));
        op_buf_put(&t, at + strlen(from), strlen(at + strlen(from)));
    } else {
        op_buf_put(&t, b.data, b.len);
    }
    op_plan q;
    op_err e = {0};
    int rc = op_plan_from_json(t.data, "bad.json", &q, &e);
    CHECK_MSG(rc == code, "expected %d, got %d (%s) for: %s", code, rc, e.msg, want);
    CHECK_STR_CONTAINS(e.msg, want);
    CHECK(!strchr(e.msg, '\n'));
    if (rc == OP_OK) op_plan_free(&q);
    op_buf_free(&t);
    op_buf_free(&b);
}

TEST(bad_text_rejected) {
    op_plan p;
    plan_1f1b(&p, 2, 2, 0, 0);
    expect_bad(&p, "\"schedule\": [", "\"schedule\": [[", OP_EINVAL, "bad.json:");
    expect_bad(&p, "\n}\n", "\n", OP_EINVAL, "bad.json:");
    {
        op_err e = {0};
        op_plan q;
        CHECK_EQ_INT(op_plan_from_json("{\n  \"format\": 1,,\n}", "x.json", &q, &e), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, "x.json:2:");
    }
    expect_bad(&p, "octopipe.plan/1", "octopipe.plan/2", OP_EINVAL,
               "bad.json: format: expected \"octopipe.plan/1\", got \"octopipe.plan/2\"");
    expect_bad(&p, "\"mb\": 0,", "\"mbx\": 0,", OP_EINVAL,
               "bad.json: schedule[0][0]: unknown key \"mbx\"");
    expect_bad(&p, "\"devices\": 2,", "", OP_EINVAL, "bad.json: top level: missing key \"devices\"");
    expect_bad(&p, "\"devices\": 2,", "\"devices\": 2, \"devices\": 2,", OP_EINVAL, "duplicate");
    expect_bad(&p, "\"F\": 1,", "\"F\": -1,", OP_EINVAL, "bad.json: layers[0].F: -1 must be");
    expect_bad(&p, "\"kind\": \"E\"", "\"kind\": \"EE\"", OP_EINVAL, "bad.json: layers[0]: kind:");
    expect_bad(&p, "\"kind\": \"E\"", "\"kind\": \"Q\"", OP_EINVAL,
               "bad.json: layers[0]: kind: unknown layer symbol 'Q'");
    expect_bad(&p, "\"placement\": [[0], [1]]", "\"placement\": [[0], []]", OP_EINVAL,
               "bad.json: placement: stage 1 is on no device");
    expect_bad(&p, "\"placement\": [[0], [1]]", "\"placement\": [[0, 1], [1]]", OP_EINVAL,
               "bad.json: placement[1][0]: stage 1 is already placed on device 0");
    expect_bad(&p, "\"placement\": [[0], [1]]", "\"placement\": [[0], [2]]", OP_EINVAL,
               "bad.json: placement[1][0]: stage 2 does not exist");
    expect_bad(&p, "\"stages\": [[0, 1], [1, 2]]", "\"stages\": [[0, 1], [0, 2]]", OP_EINVAL,
               "bad.json: stages[1]: [0, 2) does not start where stages[0] ends (1)");
    expect_bad(&p, "\"stages\": [[0, 1], [1, 2]]", "\"stages\": [[0, 1], [1, 1]]", OP_EINVAL,
               "bad.json: stages[1]: [1, 1) is empty");
    expect_bad(&p, "\"stages\": [[0, 1], [1, 2]]", "\"stages\": [[1, 2], [2, 2]]", OP_EINVAL,
               "bad.json: stages[0]: starts at layer 1, not 0");
    expect_bad(&p, "\"op\": \"F\"", "\"op\": \"X\"", OP_EINVAL, "bad.json: schedule[0][0]: op:");
    expect_bad(&p, "\"split\": [false, false]", "\"split\": [true, false]", OP_EINVAL,
               "bad.json: schedule[0][2]: B(s0,mb0) but stage 0 uses I+W");
    expect_bad(&p, "\"start\": 0,", "", OP_EINVAL, "bad.json: schedule[0][0]: needs both start and end");
    op_plan_free(&p);
}

/* Mutates a copy of a simulated plan through the API, writes it and expects `want`. */
TEST(bad_schedule_rejected) {
    op_plan p, q;
    plan_1f1b(&p, 2, 2, 0, 0.5);
    /* device 0 runs F0 F1 B0 B1; device 1 runs F0 B0 F1 B1 */
    CHECK(p.ops[0][1].kind == OP_F && p.ops[0][1].mb == 1);

    op_plan_copy(&q, &p);
    q.ops[0][1].mb = 0;
    expect_bad(&q, NULL, NULL, OP_EINVAL,
               "bad.json: schedule[0][1]: duplicate op F(s0,mb0) (first at schedule[0][0])");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    q.n_ops[1]--;
    expect_bad(&q, NULL, NULL, OP_EINVAL, "bad.json: schedule[1]: missing op B(s1,mb1)");
    op_plan_free(&q);

    /* a duplicate in a list that is also short: the same error as with a full list */
    op_plan_copy(&q, &p);
    q.ops[0][1].mb = 0;
    q.n_ops[0]--;
    expect_bad(&q, NULL, NULL, OP_EINVAL,
               "bad.json: schedule[0][1]: duplicate op F(s0,mb0) (first at schedule[0][0])");
    op_plan_free(&q);

    /* "microbatches" raised to 2^20 over 16 stages: the reader names the first missing op
     * without a table of S*M slots (400 MB before), so the peak memory barely moves */
    op_plan big;
    plan_1f1b(&big, 16, 2, 0, 0);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    expect_bad(&big, "\"microbatches\": 2,", "\"microbatches\": 1048576,", OP_EINVAL,
               "bad.json: schedule[0]: missing op F(s0,mb2) (stage 0 is placed on device 0)");
    getrusage(RUSAGE_SELF, &ru1);
    CHECK_MSG(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024, "peak grew by %ld KiB",
              ru1.ru_maxrss - ru0.ru_maxrss);
    op_plan_free(&big);

    op_plan_copy(&q, &p);
    q.ops[0][0].stage = 1;
    expect_bad(&q, NULL, NULL, OP_EINVAL,
               "bad.json: schedule[0][0]: F(s1,mb0) is on device 0 but stage 1 is placed on device 1");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    q.ops[0][0].end += 0.25;
    expect_bad(&q, NULL, NULL, OP_EINVAL, "bad.json: schedule[0][0]: F(s0,mb0) lasts 1.26 ms (start 0, end 1.26) "
                                     "but stage 0's F costs 1.01 ms");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    q.ops[1][0].start -= 0.75; /* F(s1,mb0) before its input arrived (end 1.01 + transfer) */
    q.ops[1][0].end -= 0.75;
    expect_bad(&q, NULL, NULL, OP_EINVAL,
               "bad.json: schedule[1][0]: F(s1,mb0) starts at 0.77");
    expect_bad(&q, NULL, NULL, OP_EINVAL, "before its input from F(s0,mb0) (schedule[0][0])");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    q.ops[0][1].start -= 0.5;
    q.ops[0][1].end -= 0.5;
    expect_bad(&q, NULL, NULL, OP_EINVAL, "before the previous op on device 0 ends");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    int n = q.n_ops[0];
    q.ops[0][n - 1].start += 1;
    q.ops[0][n - 1].end += 1; /* feasible, but not what the simulator predicts */
    expect_bad(&q, NULL, NULL, OP_EINVAL, "but a re-simulation runs it at");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    q.pred.makespan_ms += 1;
    expect_bad(&q, NULL, NULL, OP_EINVAL,
               "bad.json: predicted.makespan_ms: the file says");
    op_plan_free(&q);

    op_plan_copy(&q, &p);
    q.pred.peak_bytes[1] += 1;
    expect_bad(&q, NULL, NULL, OP_EINVAL, "bad.json: predicted.peak_bytes[1]: the file says");
    op_plan_free(&q);

    /* a deadlocking order (no times recorded) */
    op_plan_copy(&q, &p);
    q.pred.valid = 0;
    op_op t = q.ops[0][0];
    q.ops[0][0] = q.ops[0][2];
    q.ops[0][2] = t; /* device 0: B0 F1 F0 B1 */
    expect_bad(&q, NULL, NULL, OP_EDEADLOCK,
               "bad.json: schedule: deadlock: B(s0,mb0)@dev0 waits for B(s1,mb0)@dev1");
    op_plan_free(&q);
    op_plan_free(&p);
}

TEST(write_to_missing_dir_leaves_nothing) {
    op_plan p;
    plan_1f1b(&p, 2, 2, 0, 0);
    op_err e = {0};
    char path[256];
    snprintf(path, sizeof path, "%s/nodir/plan.json", tmpdir);
    CHECK_EQ_INT(op_plan_write(&p, path, &e), OP_EIO);
    CHECK_STR_CONTAINS(e.msg, "nodir/plan.json");
    struct stat st;
    CHECK(stat(path, &st) != 0);
    /* overwriting an existing file with a plan that cannot be written keeps the old one */
    const char *ok = tmp_path("keep.json");
    CHECK_EQ_INT(op_plan_write(&p, ok, &e), OP_OK);
    p.pred.makespan_ms = NAN;
    CHECK_EQ_INT(op_plan_write(&p, ok, &e), OP_EINVAL);
    op_plan q;
    CHECK_EQ_INT(op_plan_read(ok, &q, &e), OP_OK);
    op_plan_free(&q);
    /* no temp files left in the directory */
    DIR *dir = opendir(tmpdir);
    struct dirent *de;
    int others = 0;
    while ((de = readdir(dir)))
        if (strstr(de->d_name, ".tmp")) others++;
    closedir(dir);
    CHECK_EQ_INT(others, 0);
    CHECK_EQ_INT(op_plan_read(path, &q, &e), OP_EIO);
    op_plan_free(&p);
}

TEST(checked_in_plans) {
    /* tests/data/plans: a 1F1B plan with uniform costs (F=1, B=2) reproduces 33 exactly */
    op_plan q;
    op_err e = {0};
    op_plan_file_info info;
    int rc = op_plan_read_ex("tests/data/plans/1f1b-p4-m8.json", &q, &info, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(q.pred.makespan_ms == 33.0 && info.exact);
        op_plan_free(&q);
    }
    /* V placement, I+W split (fused B on the head stage), links between two nodes */
    rc = op_plan_read_ex("tests/data/plans/v-split-comm-p4-m8.json", &q, &info, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    if (rc == OP_OK) {
        CHECK(info.exact && q.S == 8 && q.stage_dev[7] == 0 && q.stage_split[0] && !q.stage_split[7]);
        CHECK(!q.comm.none && q.comm.nodes_of == 2);
        CHECK_NEAR(q.pred.makespan_ms, 128.34956970666667, 1e-15);
        op_plan_free(&q);
    }
    rc = op_plan_read_ex("tests/data/plans/bad-duplicate-op.json", &q, &info, &e);
    CHECK_EQ_INT(rc, OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "tests/data/plans/bad-duplicate-op.json: schedule[2][3]: duplicate op F(s2,mb1)");
    rc = op_plan_read_ex("tests/data/plans/bad-cycle.json", &q, &info, &e);
    CHECK_EQ_INT(rc, OP_EDEADLOCK);
    CHECK_STR_CONTAINS(e.msg, "deadlock: ");
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/octopipe-plan-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(round_trip_exact);
    RUN(parallel_degrees_round_trip);
    RUN(batch_and_dp_round_trip);
    RUN(unused_links_round_trip);
    RUN(older_lower_bound_loads);
    RUN(act_i_bytes_round_trip_and_optional);
    RUN(activation_policy_round_trip);
    RUN(plan_without_times_is_simulated);
    RUN(bad_text_rejected);
    RUN(bad_schedule_rejected);
    RUN(write_to_missing_dir_leaves_nothing);
    RUN(checked_in_plans);
    unlink(tmp_path("rt.json"));
    unlink(tmp_path("keep.json"));
    rmdir(tmpdir);
    return check_report("plan_json");
}
