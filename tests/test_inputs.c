/* test_inputs.c: bad inputs become one error (code + message) in the library, never an abort
 * or a silently wrong number: profile figures that are not finite or beyond any device, HF
 * numbers echoed in full, TP degrees that do not divide the heads, problems no schedule can
 * take (too few layers, no time at all, zero link bandwidth), cluster files of the wrong
 * shape, plan files with figures beyond the bounds, corrupt checkpoints and the temp files of
 * killed checkpoint writers.  Each case was an abort, a hang or a wrong figure once. */
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/cluster.h"
#include "octopipe/export.h"
#include "octopipe/plan.h"
#include "octopipe/problem.h"
#include "octopipe/sched.h"
#include "octopipe/train.h"
#include "octopipe/tune.h"

static op_err e;

/* A valid profile with one replaceable value: the forward time of 'M' (VAL). */
static const char *profile_with(const char *fwd_m, const char *act_m) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"pattern\": \"M-M-\",\n"
             " \"forward_ms\": {\"E\": 0.5, \"M\": %s, \"-\": 0.75, \"L\": 3},\n"
             " \"backward_ms\": {\"E\": 0, \"M\": 2, \"-\": 0.5, \"L\": 2.5},\n"
             " \"act_bytes\": {\"M\": %s}}\n",
             fwd_m, act_m);
    return buf;
}

static int load_profile(const char *text, op_model *m) {
    memset(&e, 0, sizeof e);
    return op_model_from_profile_json(text, "p.json", m, &e);
}

TEST(profile_nonfinite_refused_with_position) {
    op_model m;
    CHECK_EQ_INT(load_profile(profile_with("1.0", "1024"), &m), OP_OK);
    op_model_free(&m);
    CHECK_EQ_INT(load_profile(profile_with("NaN", "1024"), &m), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json:2:32: NaN is not allowed here");
    CHECK_EQ_INT(load_profile(profile_with("Infinity", "1024"), &m), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json:2:32: Infinity is not allowed");
    CHECK_EQ_INT(load_profile(profile_with("1.0", "-Infinity"), &m), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "-Infinity is not allowed");
}

TEST(profile_figures_beyond_any_device) {
    op_model m;
    CHECK_EQ_INT(load_profile(profile_with("1e308", "1024"), &m), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "forward_ms['M']: 1e+308 is beyond any device");
    CHECK_EQ_INT(load_profile(profile_with("1.0", "1e19"), &m), OP_EINVAL); /* was silently 0 */
    CHECK_STR_CONTAINS(e.msg, "act_bytes['M']: 1e+19 is beyond any device");
    CHECK_EQ_INT(load_profile(profile_with("1.0", "9223372036854775807"), &m), OP_EINVAL);
    /* the largest accepted figures convert exactly */
    CHECK_EQ_INT(load_profile(profile_with("1e9", "9007199254740992"), &m), OP_OK);
    CHECK_EQ_INT(m.layers[1].act_bytes_measured, (int64_t)1 << 53);
    CHECK_NEAR(m.layers[1].f_ms, 1e9, 0);
    op_model_free(&m);
}

TEST(hf_huge_number_not_echoed) {
    char cfg[2048], digits[320];
    memset(digits, '9', 308); /* 1e308: a double, beyond any dimension */
    digits[308] = 0;
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"llama\", \"hidden_size\": %s.0, \"num_hidden_layers\": 2,"
             " \"intermediate_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 100}",
             digits);
    op_model m;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_model_from_hf_json(cfg, "c.json", &m, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "hidden_size");
    CHECK_STR_CONTAINS(e.msg, "is out of range");
    CHECK_MSG(strlen(e.msg) < 120, "message of %zu chars: %s", strlen(e.msg), e.msg);
}

/* op_cost_layers of an inline HF config at --tp tp (e.msg holds a refusal) */
static int cost_cfg_tp(const char *cfg, int tp) {
    op_model m;
    memset(&e, 0, sizeof e);
    if (op_model_from_hf_json(cfg, "c.json", &m, &e) != OP_OK) return -100;
    op_train_cfg t;
    op_train_cfg_default(&t);
    t.tp = tp;
    op_device d;
    op_device_preset("h100-80gb", &d, &e);
    op_layer_cost *c = calloc((size_t)m.n_layers, sizeof *c);
    int rc = op_cost_layers(&m, &t, &d, c, &e);
    free(c);
    op_model_free(&m);
    return rc;
}

TEST(tp_must_divide_heads) {
    /* llama-like decoder layers with 32 heads and 8 KV heads */
    const char *cfg = "{\"model_type\": \"llama\", \"hidden_size\": 4096, \"num_hidden_layers\": 2,"
                      " \"intermediate_size\": 11008, \"num_attention_heads\": 32,"
                      " \"num_key_value_heads\": 8, \"vocab_size\": 32000}";
    CHECK_EQ_INT(cost_cfg_tp(cfg, 8), OP_OK);
    CHECK_EQ_INT(cost_cfg_tp(cfg, 3), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "--tp 3 does not divide its 32 attention heads");
    CHECK_EQ_INT(cost_cfg_tp(cfg, 16), OP_EINVAL); /* 32 heads but 8 KV heads */
    CHECK_STR_CONTAINS(e.msg, "--tp 16 does not divide its 8 KV heads");
    CHECK_EQ_INT(cost_cfg_tp(cfg, 1024), OP_EINVAL);
}

/* Megatron also splits the FFN widths and Mamba-2's groups over TP and asserts they divide:
 * per config the tp that passes, the one refused, and what the refusal names */
TEST(tp_must_divide_widths_and_groups) {
    static const struct { const char *cfg; int ok, bad; const char *want; } cases[] = {
        {"{\"model_type\": \"llama\", \"hidden_size\": 4096, \"num_hidden_layers\": 2,"
         " \"intermediate_size\": 11004, \"num_attention_heads\": 32, \"vocab_size\": 32000}",
         4, 8, "--tp 8 does not divide its 11004 MLP width (ffn_dim)"},
        {"{\"model_type\": \"qwen2_moe\", \"hidden_size\": 256, \"num_hidden_layers\": 2,"
         " \"intermediate_size\": 1024, \"moe_intermediate_size\": 100,"
         " \"num_attention_heads\": 8, \"num_key_value_heads\": 8, \"num_experts\": 8,"
         " \"num_experts_per_tok\": 2, \"shared_expert_intermediate_size\": 512,"
         " \"vocab_size\": 1000}",
         2, 8, "--tp 8 does not divide its 100 expert FFN width"},
        /* falcon_h1 with one Mamba group: no TP split of B and C in Megatron's mixer */
        {"{\"model_type\": \"falcon_h1\", \"hidden_size\": 256, \"intermediate_size\": 768,"
         " \"head_dim\": 64, \"mamba_d_head\": 32, \"mamba_d_ssm\": 512,"
         " \"mamba_d_state\": 64, \"mamba_n_groups\": 1, \"mamba_n_heads\": 16,"
         " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
         " \"num_hidden_layers\": 2, \"vocab_size\": 1000}",
         1, 2, "--tp 2 does not divide its 1 Mamba groups"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        CHECK_EQ_INT(cost_cfg_tp(cases[k].cfg, cases[k].ok), OP_OK);
        CHECK_EQ_INT(cost_cfg_tp(cases[k].cfg, cases[k].bad), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, cases[k].want);
    }
}

TEST(cost_figures_beyond_int64_refused) {
    const char *cfg = "{\"model_type\": \"llama\", \"hidden_size\": 16777216, \"num_hidden_layers\": 1,"
                      " \"intermediate_size\": 16777216, \"num_attention_heads\": 1, \"vocab_size\": 16777216}";
    op_model m;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_model_from_hf_json(cfg, "c.json", &m, &e), OP_OK);
    op_train_cfg t;
    op_train_cfg_default(&t);
    t.seq = 16777216;
    t.mbs = 65536;
    op_device d;
    op_device_preset("h100-80gb", &d, &e);
    op_layer_cost c[3];
    CHECK_EQ_INT(op_cost_layers(&m, &t, &d, c, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "beyond any device");
    op_model_free(&m);
}

/* n uniform layers of 1 ms each way, 1 MiB messages */
static void uniform(op_layer_cost *L, int n) {
    memset(L, 0, sizeof *L * (size_t)n);
    for (int l = 0; l < n; l++) {
        snprintf(L[l].name, sizeof L[l].name, "l%d", l);
        L[l].sym = 'T';
        L[l].f_ms = L[l].i_ms = L[l].w_ms = 1;
        L[l].out_bytes = 1 << 20;
        L[l].act_bytes = 1 << 20;
    }
}

static op_problem problem(op_layer_cost *L, int n, int P, int M) {
    op_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.model = "u";
    pr.layers = L;
    pr.n_layers = n;
    pr.P = P;
    pr.M = M;
    op_comm_default(&pr.comm, 8);
    return pr;
}

/* Every problem-level rule refuses through op_problem_validate, op_sched_build and op_tune alike. */
/* A 1F1B plan of pr written and read back into *q: 1 when it reads (q to free), else 0. */
static int round_trip(const op_problem *pr, op_plan *q) {
    op_plan p;
    CHECK_EQ_INT(op_sched_build("1f1b", pr, &p, &e), OP_OK);
    op_buf b = {0};
    CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
    op_buf_put(&b, "", 1);
    int rc = op_plan_from_json(b.data, "p.json", q, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    op_buf_free(&b);
    op_plan_free(&p);
    return rc == OP_OK;
}

static void refused_everywhere(const op_problem *pr, const char *what) {
    op_plan p;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_problem_validate(pr, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, what);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_sched_build("1f1b", pr, &p, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, what);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_tune(pr, NULL, &p, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, what);
    /* with progress lines asked for too: the run's bound is taken only once the problem passed */
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.verbose = 1;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_tune(pr, &o, &p, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, what);
}

TEST(problem_rules_in_one_place) {
    op_layer_cost L[8];
    uniform(L, 8);
    op_problem pr = problem(L, 8, 4, 8);
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_OK);
    refused_everywhere(NULL, "no problem given"); /* op_tune with progress read it first */

    pr.P = 9; /* more devices than layers: every schedule would be n/a */
    refused_everywhere(&pr, "8 layers cannot fill 9 devices");
    pr.P = 4;

    pr.comm.intra_bw_GBps = 0; /* aborted inside op_comm_ms once */
    refused_everywhere(&pr, "intra-node bandwidth 0 GB/s must be at least 1e-06");
    /* a denormal or 1e-300 GB/s made a transfer's time infinite, and a baseline then built a
     * schedule the simulator refused (an internal error, found by fuzzing a cluster file) */
    pr.comm.intra_bw_GBps = 4.9e-324;
    refused_everywhere(&pr, "intra-node bandwidth 4.94066e-324 GB/s must be at least 1e-06");
    pr.comm.intra_bw_GBps = 1e-300;
    refused_everywhere(&pr, "must be at least 1e-06");
    op_comm_default(&pr.comm, 8);
    pr.comm.host_bw_GBps = 1e-300; /* the host link (offload) is a link like the others */
    refused_everywhere(&pr, "host link 1e-300 GB/s must be at least 1e-06");
    pr.comm.host_bw_GBps = 0; /* none: no offload */
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_OK);
    /* NaN and -inf passed as "none" and gave plans op_plan_write refused as non-finite; a host
     * budget that is negative, NaN or beyond 2^53 bytes was taken as it came */
    pr.comm.host_bw_GBps = NAN;
    refused_everywhere(&pr, "host link nan GB/s");
    pr.comm.host_bw_GBps = -INFINITY;
    refused_everywhere(&pr, "host link -inf GB/s");
    pr.comm.host_bw_GBps = 25;
    const double budgets[] = {-1, NAN, INFINITY, 1e300};
    for (int k = 0; k < 4; k++) {
        pr.comm.host_mem_bytes = budgets[k];
        refused_everywhere(&pr, "host memory");
    }
    pr.comm.host_mem_bytes = 0;
    /* a negative host link is documented as none: its plan is written with 0 and reads back */
    pr.comm.host_bw_GBps = -1;
    {
        op_plan p, q;
        CHECK_EQ_INT(op_sched_build("1f1b", &pr, &p, &e), OP_OK);
        op_buf b = {0};
        CHECK_EQ_INT(op_plan_to_json(&p, &b), OP_OK);
        op_buf_put(&b, "", 1);
        CHECK_EQ_INT(op_plan_from_json(b.data, "p.json", &q, &e), OP_OK);
        CHECK(q.comm.host_bw_GBps == 0);
        op_plan_free(&q);
        op_buf_free(&b);
        op_plan_free(&p);
    }
    pr.comm.host_bw_GBps = 0;
    pr.comm.intra_bw_GBps = 0;
    pr.comm.none = 1; /* free links need no bandwidth */
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_OK);
    /* but a plan records the unused figures: NaN, inf or negative ones made plans that could
     * not be written, and the same with a per-pair matrix of the wrong size or a NaN diagonal */
    pr.comm.intra_lat_ms = NAN;
    refused_everywhere(&pr, "intra-node latency nan must be finite and >= 0");
    pr.comm.intra_lat_ms = 0.01;
    pr.comm.inter_bw_GBps = -INFINITY;
    refused_everywhere(&pr, "inter-node bandwidth -inf must be finite and >= 0");
    pr.comm.inter_bw_GBps = 10;
    double lat[16] = {0}, bw[16];
    for (int k = 0; k < 16; k++) bw[k] = 10;
    pr.comm.pair_n = 3, pr.comm.pair_lat_ms = lat, pr.comm.pair_bw_GBps = bw;
    refused_everywhere(&pr, "per-pair matrix is 3 x 3 but there are 4 devices");
    pr.comm.pair_n = 4;
    lat[5] = NAN; /* device 1 -> 1 */
    refused_everywhere(&pr, "pair 1 -> 1 (the device itself) latency nan");
    lat[5] = 0;
    CHECK_EQ_INT(op_problem_validate(&pr, &e), OP_OK);
    pr.comm.pair_n = 0, pr.comm.pair_lat_ms = pr.comm.pair_bw_GBps = NULL;
    /* and a plan of free links, one node of more devices than the reader allowed, reads back */
    pr.comm.nodes_of = 1 << 24;
    op_plan q;
    if (round_trip(&pr, &q)) op_plan_free(&q);
    op_comm_default(&pr.comm, 2);
    pr.comm.inter_bw_GBps = 0; /* 4 devices, 2 a node: the inter-node link is used */
    refused_everywhere(&pr, "inter-node bandwidth");
    op_comm_default(&pr.comm, 8);

    for (int l = 0; l < 8; l++) L[l].f_ms = L[l].i_ms = L[l].w_ms = 0; /* tuner "deadlocked" once */
    refused_everywhere(&pr, "nothing to schedule");
    uniform(L, 8);

    L[3].w_ms = 1e308; /* balanced split "found no partition" once */
    refused_everywhere(&pr, "layer 3 'l3': W time 1e+308 ms");
    L[3].w_ms = NAN;
    refused_everywhere(&pr, "W time nan");
    uniform(L, 8);

    /* selective's figures: a NaN or negative core time made I's time NaN or negative */
    L[1].f_sel_ms = NAN;
    refused_everywhere(&pr, "layer 1 'l1': attention core time (f_sel_ms) nan ms");
    L[1].f_sel_ms = -1;
    refused_everywhere(&pr, "attention core time (f_sel_ms) -1 ms");
    L[1].f_sel_ms = 0.5;
    L[1].act_sel_bytes = INT64_MAX;
    refused_everywhere(&pr, "act_sel_bytes 9223372036854775807 is beyond 2^53");
    /* <= 0 is documented as act_bytes: accepted, and written as 0 so that it reads back */
    L[1].act_sel_bytes = -5;
    if (round_trip(&pr, &q)) {
        CHECK(q.layers[1].act_sel_bytes == 0);
        op_plan_free(&q);
    }
    uniform(L, 8);

    /* a finite but huge token count made tokens/s infinite: a plan op_plan_write refused */
    pr.tokens_per_mb = 1e308;
    refused_everywhere(&pr, "tokens per microbatch 1e+308 is not in [0, 2^53]");
    pr.tokens_per_mb = 4096;

    L[2].act_bytes = -1;
    refused_everywhere(&pr, "act_bytes -1");
    L[2].act_bytes = (int64_t)1 << 52; /* in range alone, but M of them overflow a sum */
    pr.M = 4096;
    refused_everywhere(&pr, "beyond what any device");
}

TEST(validated_problems_build) {
    /* the edges of what validation accepts build and simulate without aborting */
    op_layer_cost L[4];
    uniform(L, 4);
    L[0].f_ms = OP_MAX_MS;
    L[1].f_ms = L[1].i_ms = L[1].w_ms = 0;
    L[2].out_bytes = (int64_t)1 << 50;
    op_problem pr = problem(L, 4, 4, 4);
    pr.comm.intra_bw_GBps = OP_MIN_GBPS; /* the slowest link, and the largest message */
    L[3].out_bytes = (int64_t)1 << 53;
    op_plan p;
    const char *names[] = {"gpipe", "1f1b", "zbh1", "balanced-1f1b"};
    for (int i = 0; i < 4; i++) {
        memset(&e, 0, sizeof e);
        int rc = op_sched_build(names[i], &pr, &p, &e);
        CHECK_MSG(rc == OP_OK, "%s: %s", names[i], e.msg);
        if (rc == OP_OK) {
            CHECK(p.pred.valid && isfinite(p.pred.makespan_ms) && p.pred.makespan_ms > 0);
            op_plan_free(&p);
        }
    }
}

static char tmpdir[] = "/tmp/octopipe-test-inputs-XXXXXX";

static const char *tmp(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

TEST(cluster_file_errors_name_field) {
    op_comm c;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_cluster_read(tmp("missing.json"), &c, &e), OP_EIO);
    CHECK_STR_CONTAINS(e.msg, "missing.json: cannot open: No such file");
    CHECK(!strstr(e.msg, "-1:-1"));
    const struct { const char *text, *want; } cases[] = {
        {"[1, 2", "c.json:1:5: not valid JSON"},
        {"[1, 2]", "expected a JSON object"},
        {"{\"pattern\": \"M-\"}", "missing field \"format\": not an octopipe.cluster/1 file"},
        {"{\"format\": \"octopipe.plan/1\"}", "format is not \"octopipe.cluster/1\""},
        {"{\"format\": \"octopipe.cluster/1\", \"nodes_of\": 8}", "missing field \"intra_lat_ms\""},
        {"{\"format\": \"octopipe.cluster/1\", \"nodes_of\": 8, \"intra_lat_ms\": 0.01, \"intra_bw_GBps\": 0,"
         " \"inter_lat_ms\": 0.02, \"inter_bw_GBps\": 10}", "intra_bw_GBps: 0 must be a bandwidth of at least 1e-06 GB/s"},
        {"{\"format\": \"octopipe.cluster/1\", \"nodes_of\": 8, \"intra_lat_ms\": 0.01, \"intra_bw_GBps\": 1e-300,"
         " \"inter_lat_ms\": 0.02, \"inter_bw_GBps\": 10}", "intra_bw_GBps: 1e-300 must be a bandwidth of at least"},
        {"{\"format\": \"octopipe.cluster/1\", \"nodes_of\": 8, \"intra_lat_ms\": 1e300, \"intra_bw_GBps\": 1,"
         " \"inter_lat_ms\": 0.02, \"inter_bw_GBps\": 10}", "intra_lat_ms: 1e+300 is not in [0, 1e+09]"},
        {"{\"format\": \"octopipe.cluster/1\", \"nodes_of\": -1}", "nodes_of: expected an integer"},
        {"{\"format\": \"octopipe.cluster/1\", \"nodes\": 8}", "unknown field \"nodes\""},
        /* the list names every field the reader takes, the mixed-cluster ones too */
        {"{\"format\": \"octopipe.cluster/1\", \"device\": []}",
         "source, gpus, devices, pair_lat_ms, pair_bw_GBps)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(tmp("c.json"), cases[i].text);
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(op_cluster_read(tmp("c.json"), &c, &e), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, cases[i].want);
    }
    op_comm w;
    op_comm_default(&w, 4);
    CHECK_EQ_INT(op_cluster_write(tmp("ok.json"), &w, "test", &e), OP_OK);
    CHECK_EQ_INT(op_cluster_read(tmp("ok.json"), &c, &e), OP_OK);
    CHECK_EQ_INT(c.nodes_of, 4);
    /* a source that is not UTF-8 (Latin-1 "caf\xe9", a cut sequence) is written as UTF-8: jansson
     * refused it, and that was an abort */
    CHECK_EQ_INT(op_cluster_write(tmp("latin1.json"), &w, "host caf\xe9 \xc3", &e), OP_OK);
    CHECK_EQ_INT(op_cluster_read(tmp("latin1.json"), &c, &e), OP_OK);
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(op_read_file(tmp("latin1.json"), &text, &len, &e), OP_OK);
    if (text) CHECK_STR_CONTAINS(text, "\"source\": \"host caf? ?\"");
    free(text);
    CHECK_NEAR(c.inter_bw_GBps, w.inter_bw_GBps, 1e-9);
    /* a node size the reader refuses is not written (it was, and could not be read back) */
    const int nodes[] = {-1, (1 << 20) + 1};
    for (int k = 0; k < 2; k++) {
        w.nodes_of = nodes[k];
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(op_cluster_write(tmp("bad-nodes.json"), &w, "test", &e), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, "nodes_of:");
        CHECK(access(tmp("bad-nodes.json"), F_OK) != 0);
    }
}

/* b's text with the value after `key` (up to the next , newline or }) replaced by `value`
 * (malloc'd; "" where b has no such key, so the caller's check fails instead of crashing). */
static char *with_value(const op_buf *b, const char *key, const char *value) {
    const char *at = strstr(b->data, key);
    size_t n = b->len + strlen(value) + 1;
    char *text = op_xmalloc(n);
    if (!at) {
        text[0] = 0;
        return text;
    }
    at += strlen(key);
    size_t keep = strcspn(at, ",\n}");
    snprintf(text, n, "%.*s%s%s", (int)(at - b->data), b->data, value, at + keep);
    return text;
}

TEST(plan_file_figures_bounded) {
    op_layer_cost L[2];
    uniform(L, 2);
    op_problem pr = problem(L, 2, 2, 2);
    op_plan p, q;
    CHECK_EQ_INT(op_sched_build("1f1b", &pr, &p, &e), OP_OK);
    op_buf b = {0};
    op_plan_to_json(&p, &b);
    op_plan_free(&p);
    char *at = strstr(b.data, "\"F\": 1");
    CHECK(at != NULL);
    if (!at) return;
    char *text = op_xmalloc(b.len + 8); /* layer 0's F = 9e99 ms */
    snprintf(text, b.len + 8, "%.*s\"F\": 9e99%s", (int)(at - b.data), b.data, at + 6);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_plan_from_json(text, "p.json", &q, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: layer 0");
    CHECK_STR_CONTAINS(e.msg, "F time 9e+99 ms is not in [0, 1e+09]");
    free(text);
    /* the per-op overhead is a time too, named as itself; a denormal one is refused as a
     * denormal profile time is (0 or at least 1 ns) */
    static const char *const ovh[][2] = {
        {"1e300", "p.json: op_overhead_ms: 1e+300 ms is not in [0, 1e+09]"},
        {"1e-300", "p.json: op_overhead_ms: 1e-300 ms is neither 0 nor at least 1e-06 ms"}};
    for (int k = 0; k < 2; k++) {
        text = with_value(&b, "\"op_overhead_ms\": ", ovh[k][0]);
        CHECK(text[0] != 0);
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(op_plan_from_json(text, "p.json", &q, &e), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, ovh[k][1]);
        free(text);
    }
    /* tokens per microbatch as a problem takes them: 1e308 read and simulated to infinite
     * tokens/s */
    text = with_value(&b, "\"tokens_per_mb\": ", "1e308");
    CHECK(text[0] != 0);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_plan_from_json(text, "p.json", &q, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "p.json: tokens per microbatch 1e+308 is not in [0, 2^53]");
    free(text);
    /* links slower than 1 kB/s: a denormal made `sim` print "makespan inf ms" */
    const char *keys[] = {"\"intra_bw_GBps\": ", "\"host_bw_GBps\": "};
    for (int k = 0; k < 2; k++) {
        text = with_value(&b, keys[k], "5e-324");
        CHECK(text[0] != 0);
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(op_plan_from_json(text, "p.json", &q, &e), OP_EINVAL);
        CHECK_STR_CONTAINS(e.msg, "must be at least 1e-06 GB/s (1 kB/s)");
        free(text);
    }
    op_buf_free(&b);
}

TEST(torch_csv_huge_indices_refused) {
    /* stage 999999 of microbatch 99999 asked for a 100 GB table once (found by fuzzing) */
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_export_torch_csv_check("999999F999992\n", 1, 0, 0, NULL, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "more than a schedule may hold");
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_export_torch_csv_check("0F0,0I0,0W0\n", 1, 0, 0, NULL, &e), OP_OK);
}

/* A child that has exited: its pid names no live process until reused. */
static pid_t dead_pid(void) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, NULL, 0);
    return c;
}

/* A profile that lost "pattern" (or "forward_ms") was read as an HF config and refused for
 * lacking 'model_type', which no profile has: the message names what the profile lacks. */
TEST(profile_without_pattern_named) {
    const char *path = tmp("nopattern.json");
    write_text(path, "{\"forward_ms\": {\"E\": 0.5, \"L\": 3}, \"backward_ms\": {\"E\": 0, \"L\": 2.5}}\n");
    op_model m;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_model_load(path, &m, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "nopattern.json: a profile (it has \"forward_ms\") needs \"pattern\" too");
    write_text(path, "{\"pattern\": \"M-\", \"backward_ms\": {\"E\": 0}}\n");
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_model_load(path, &m, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "needs \"forward_ms\" too");
}

/* Rewrites the checksum (FNV-1a, as ckpt.c) of a checkpoint image of len bytes. */
static void seal_ckpt(char *img, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i + 8 < len; i++) h = (h ^ (unsigned char)img[i]) * 1099511628211ull;
    memcpy(img + len - 8, &h, 8);
}

/* The tiny model as one stage holding every layer (what a one-process run saves). */
static void tiny_one_stage(op_nn_model *m, op_nn_stage *s) {
    CHECK_EQ_INT(op_nn_model_from_spec(m, "tiny", &e), OP_OK);
    op_nn_stage_init(s, m, 0, m->n_layers, 1);
}

TEST(checkpoint_checked_and_temps_cleaned) {
    op_nn_model m;
    op_nn_stage s, *sp[1] = {&s};
    tiny_one_stage(&m, &s);
    const char *path = tmp("model.ckpt");
    char stale[300], live[300];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", path, (long)dead_pid());
    snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
    write_text(stale, "half a checkpoint");
    write_text(live, "a live writer's");
    CHECK_EQ_INT(op_ckpt_save(path, &m, sp, 1, 7, &e), OP_OK);
    struct stat st;
    CHECK_MSG(stat(stale, &st) != 0, "%s survived", stale);
    CHECK_MSG(stat(live, &st) == 0, "%s was removed", live);
    unlink(live);

    int64_t next = -1;
    CHECK_EQ_INT(op_ckpt_check(path, &m, &next, &e), OP_OK);
    CHECK_EQ_INT(next, 7);
    char *data = NULL;
    size_t len = 0;
    CHECK_EQ_INT(op_read_file(path, &data, &len, &e), OP_OK);
    /* a flipped byte anywhere: the checksum names it, load and check agree */
    data[len / 2] ^= 0x55;
    CHECK_EQ_INT(op_write_file_atomic(path, data, len, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_check(path, &m, &next, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "checksum mismatch");
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_load(path, &m, sp, 1, &next, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "checksum mismatch");
    data[len / 2] ^= 0x55;
    /* the checksum right but the size not: said "holds 51424 parameters, the model has 51424" */
    char *big = malloc(len + 8);
    memcpy(big, data, len - 8), memset(big + len - 8, 0, 8);
    seal_ckpt(big, len + 8);
    CHECK_EQ_INT(op_write_file_atomic(path, big, len + 8, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_check(path, &m, &next, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "bytes, but");
    /* a NaN weight under a right checksum (a diverged run's save): resumed with OP_OK, and one
     * in a row the data never reads trained on with a finite loss */
    memcpy(big, data, len);
    float nan = NAN;
    /* parameter 0: before the three arrays and the (empty) run block of 32 bytes */
    memcpy(big + len - 8 - 32 - 3 * m.off[m.n_layers] * sizeof(float), &nan, sizeof nan);
    seal_ckpt(big, len);
    CHECK_EQ_INT(op_write_file_atomic(path, big, len, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_load(path, &m, sp, 1, &next, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "model.ckpt: parameter 0 is nan");
    free(big);
    /* another init seed (train --seed) with the same pattern: said the two equal patterns
     * "or dimensions differ"; the field that differs is named */
    op_nn_cfg c7 = m.cfg;
    c7.seed = 7;
    op_nn_model m7;
    CHECK_EQ_INT(op_nn_model_init(&m7, m.pattern, &c7, &e), OP_OK);
    CHECK_EQ_INT(op_write_file_atomic(path, data, len, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_check(path, &m7, &next, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "init seed (--seed) 1, this model's is 7");
    /* truncated to the header */
    CHECK_EQ_INT(op_write_file_atomic(path, data, 20, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_check(path, &m, &next, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "not an OctoPipe checkpoint");
    free(data);
    op_nn_stage_free(&s);
}

/* The run's settings round-trip (version 2); a version-1 file (no run block) still checks and
 * loads, with nothing recorded; a run block whose data length overruns the file is refused. */
TEST(checkpoint_records_run_settings) {
    op_nn_model m;
    op_nn_stage s, *sp[1] = {&s};
    tiny_one_stage(&m, &s);
    const char *path = tmp("run.ckpt");
    op_adamw opt;
    op_adamw_default(&opt);
    opt.lr = 1e-3f;
    op_ckpt_run run, got;
    op_ckpt_run_set(&run, 8, &opt, "copy");
    CHECK_EQ_INT(op_ckpt_save_run(path, &m, sp, 1, 5, &run, &e), OP_OK);
    int64_t next = -1;
    CHECK_EQ_INT(op_ckpt_check_run(path, &m, &next, &got, &e), OP_OK);
    CHECK(next == 5 && got.microbatches == 8 && got.opt.lr == 1e-3f && got.opt.wd == opt.wd &&
          got.opt.warmup == opt.warmup && !strcmp(got.data, "copy"));
    CHECK_EQ_INT(op_ckpt_load(path, &m, sp, 1, &next, &e), OP_OK);
    /* version 1: the same image without the run block */
    char *data = NULL;
    size_t len = 0, blk = 32 + 4; /* the run block with "copy" */
    CHECK_EQ_INT(op_read_file(path, &data, &len, &e), OP_OK);
    char *v1 = malloc(len - blk);
    memcpy(v1, data, len - 8 - blk);
    uint32_t one = 1;
    memcpy(v1 + 8, &one, 4);
    seal_ckpt(v1, len - blk);
    CHECK_EQ_INT(op_write_file_atomic(path, v1, len - blk, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_MSG(op_ckpt_check_run(path, &m, &next, &got, &e) == OP_OK, "%s", e.msg);
    CHECK(next == 5 && got.microbatches == 0 && got.data[0] == 0);
    CHECK_EQ_INT(op_ckpt_load(path, &m, sp, 1, &next, &e), OP_OK);
    /* the data length says 1000 bytes where 4 are */
    uint32_t dl = 1000;
    memcpy(data + len - 8 - 4 - 4, &dl, 4);
    seal_ckpt(data, len);
    CHECK_EQ_INT(op_write_file_atomic(path, data, len, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_check_run(path, &m, &next, &got, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "a run block of 1000 data bytes");
    /* a negative microbatch count (the length right again) */
    dl = 4;
    int32_t neg = -1;
    memcpy(data + len - 8 - 4 - 4, &dl, 4);
    memcpy(data + len - 8 - blk, &neg, 4);
    seal_ckpt(data, len);
    CHECK_EQ_INT(op_write_file_atomic(path, data, len, &e), OP_OK);
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(op_ckpt_check_run(path, &m, &next, &got, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "run.ckpt: the run block has a negative microbatch count");
    free(v1), free(data);
    op_nn_stage_free(&s);
}

/* A problem from a profile is costed and recorded at the batch the profile says its times were
 * measured at, whatever the options say; one of only measured layers that says none records
 * none; an analytic model records the options' batch. */
TEST(profile_batch_in_problem) {
    const char *base = "{\"pattern\": \"M\", \"forward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1},"
                       " \"backward_ms\": {\"E\": 1, \"M\": 1, \"L\": 1}";
    char js[512];
    op_device d;
    CHECK_EQ_INT(op_device_preset("h100-80gb", &d, &e), OP_OK);
    op_problem_opts o;
    op_problem_opts_default(&o);
    o.train.seq = 8192, o.train.mbs = 1;
    for (int said = 1; said >= 0; said--) {
        snprintf(js, sizeof js, "%s%s}", base, said ? ", \"seq\": 2048, \"mbs\": 2" : "");
        op_model m;
        CHECK_EQ_INT(op_model_from_profile_json(js, "p.json", &m, &e), OP_OK);
        op_problem pr;
        op_layer_cost c[3];
        int rc = op_problem_from_model(&pr, &m, &d, 2, 4, &o, c, &e);
        CHECK_MSG(rc == OP_OK, "%s", e.msg);
        if (said) CHECK(pr.seq == 2048 && pr.mbs == 2 && pr.tokens_per_mb == 4096);
        else CHECK(pr.seq == 0 && pr.mbs == 0 && pr.tokens_per_mb == 8192);
        op_model_free(&m);
    }
    op_model m;
    CHECK_EQ_INT(op_model_load("llama2-7b", &m, &e), OP_OK);
    op_layer_cost *c = calloc((size_t)m.n_layers, sizeof *c);
    op_problem pr;
    CHECK_EQ_INT(op_problem_from_model(&pr, &m, &d, 2, 4, &o, c, &e), OP_OK);
    CHECK(pr.seq == 8192 && pr.mbs == 1);
    free(c);
    op_model_free(&m);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    if (!mkdtemp(tmpdir)) return 1;
    RUN(profile_nonfinite_refused_with_position);
    RUN(profile_figures_beyond_any_device);
    RUN(profile_without_pattern_named);
    RUN(hf_huge_number_not_echoed);
    RUN(tp_must_divide_heads);
    RUN(tp_must_divide_widths_and_groups);
    RUN(cost_figures_beyond_int64_refused);
    RUN(problem_rules_in_one_place);
    RUN(validated_problems_build);
    RUN(cluster_file_errors_name_field);
    RUN(plan_file_figures_bounded);
    RUN(torch_csv_huge_indices_refused);
    RUN(checkpoint_checked_and_temps_cleaned);
    RUN(checkpoint_records_run_settings);
    RUN(profile_batch_in_problem);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report("test_inputs");
}
