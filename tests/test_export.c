/* test_export.c: plan exports: torch CSV (golden text, torch's rules ported as a checker, bad
 * schedules rejected), torchtitan FQNs, Megatron layout / hybrid pattern (golden strings and
 * refusals), Chrome trace (valid JSON, event counts, memory peak by hand) and SVG (well-formed,
 * one rect per op).  Plans are built by hand in memory; times come from a tiny replay here
 * (free communication), so every expected number can be checked with pencil and paper.
 *
 * OCTOPIPE_EXPORT_DUMP=DIR writes the SVGs it builds into DIR (tests/sh_svg_render.sh renders
 * them in headless Chromium). */
#include <ctype.h>
#include <jansson.h>

#include "check.h"
#include "octopipe/export.h"
#include "octopipe/sched.h"

/* ---- helpers -------------------------------------------------------------------------- */

/* n layers with symbols syms[l]; layer l: F=I=W=1 ms, act 100(l+1), act_w 40(l+1), static 1000 */
static op_layer_cost *mk_layers(const char *syms) {
    int n = (int)strlen(syms);
    op_layer_cost *L = calloc((size_t)n, sizeof *L);
    for (int l = 0; l < n; l++) {
        snprintf(L[l].name, sizeof L[l].name, "layer%d", l);
        L[l].sym = syms[l];
        L[l].f_ms = L[l].i_ms = L[l].w_ms = 1;
        L[l].act_bytes = 100 * (l + 1);
        L[l].act_w_bytes = 40 * (l + 1);
        L[l].static_bytes = 1000;
        L[l].out_bytes = 10;
    }
    return L;
}

/* Parses "0F0,0F1,2I0" into ops (no times). */
static int parse_ops(const char *s, op_op *ops) {
    int n = 0;
    while (*s) {
        op_op o = {0};
        o.stage = (int32_t)strtol(s, (char **)&s, 10);
        o.kind = *s == 'F' ? OP_F : *s == 'I' ? OP_I : *s == 'W' ? OP_W : OP_B;
        s++;
        o.mb = (int32_t)strtol(s, (char **)&s, 10);
        ops[n++] = o;
        if (*s == ',') s++;
    }
    return n;
}

/* Replays the per-device orders with free communication; fills start/end.  -1 on deadlock. */
static int replay(op_plan *p) {
    int S = p->S, M = p->M;
    double *end = malloc(sizeof(double) * (size_t)S * M * 3); /* F, I|B, W */
    for (int i = 0; i < S * M * 3; i++) end[i] = -1;
    int *head = calloc((size_t)p->P, sizeof(int));
    double *free_at = calloc((size_t)p->P, sizeof(double));
    int left = 0;
    for (int d = 0; d < p->P; d++) left += p->n_ops[d];
    while (left) {
        int progress = 0;
        for (int d = 0; d < p->P; d++) {
            if (head[d] == p->n_ops[d]) continue;
            op_op *o = &p->ops[d][head[d]];
            int s = o->stage, m = o->mb;
            double dep = 0;
            if (o->kind == OP_F) dep = s ? end[((s - 1) * M + m) * 3] : 0;
            else if (o->kind == OP_W) dep = end[(s * M + m) * 3 + 1];
            else dep = s == S - 1 ? end[(s * M + m) * 3] : end[((s + 1) * M + m) * 3 + 1];
            if (dep < 0) continue;
            o->start = dep > free_at[d] ? dep : free_at[d];
            o->end = o->start + op_stage_ms(p, s, (op_kind)o->kind);
            free_at[d] = o->end;
            end[(s * M + m) * 3 + (o->kind == OP_F ? 0 : o->kind == OP_W ? 2 : 1)] = o->end;
            head[d]++, left--, progress = 1;
        }
        if (!progress) break;
    }
    free(end), free(head), free(free_at);
    return left ? -1 : 0;
}

/* A plan over `syms` layers: stages from first[], placement dev[], split (1 = I+W), orders
 * rows[d] in the "0F0,1I0" form; replayed. */
static void mk_plan(op_plan *p, const char *syms, int P, int M, int S, const int *first,
                    const int *dev, int split, const char *const *rows) {
    op_layer_cost *L = mk_layers(syms);
    op_plan_init(p, "test", L, (int)strlen(syms), P, M, S, NULL);
    free(L);
    snprintf(p->model, sizeof p->model, "toy");
    for (int s = 0; s <= S; s++) p->stage_first[s] = first[s];
    for (int s = 0; s < S; s++) p->stage_dev[s] = dev[s], p->stage_split[s] = (uint8_t)split;
    if (!rows) return;
    op_op *ops = malloc(sizeof(op_op) * (size_t)S * M * 3);
    for (int d = 0; d < P; d++) op_plan_set_ops(p, d, ops, parse_ops(rows[d], ops));
    free(ops);
    OP_ASSERT(replay(p) == 0, "test plan deadlocks");
}

/* P=2, 4 stages in a loop, M=2, ZB-style I/W: the compute_only CSV shape torch's
 * _PipelineScheduleRuntime loads (one row per rank, actions as "<stage><F|I|W><mb>"). */
static const char *const loop_rows[2] = {
    "0F0,0F1,2F0,2F1,2I0,2W0,2I1,2W1,0I0,0I1,0W0,0W1",
    "1F0,1F1,3F0,3F1,3I0,3W0,3I1,3W1,1I0,1I1,1W0,1W1"};
static const int first4[5] = {0, 1, 2, 3, 4}, loop4[4] = {0, 1, 0, 1};

static void loop_plan(op_plan *p) { mk_plan(p, "TTTT", 2, 2, 4, first4, loop4, 1, loop_rows); }

/* Plain 1F1B with fused B, one stage per device. */
static void onef1b_plan(op_plan *p, int P, int M) {
    char syms[256];
    int first[129], dev[128];
    for (int s = 0; s < P; s++) syms[s] = 'T', first[s] = s, dev[s] = s;
    syms[P] = 0, first[P] = P;
    op_layer_cost *L = mk_layers(syms);
    op_plan_init(p, "1f1b", L, P, P, M, P, NULL);
    free(L);
    for (int s = 0; s <= P; s++) p->stage_first[s] = first[s];
    for (int s = 0; s < P; s++) p->stage_dev[s] = dev[s];
    op_op *ops = malloc(sizeof(op_op) * (size_t)M * 2);
    for (int d = 0; d < P; d++) {
        int n = 0, f = 0, b = 0, warm = P - 1 - d < M ? P - 1 - d : M;
        for (; f < warm; f++) ops[n++] = (op_op){OP_F, d, f, 0, 0};
        while (b < M) {
            if (f < M) ops[n++] = (op_op){OP_F, d, f++, 0, 0};
            ops[n++] = (op_op){OP_B, d, b++, 0, 0};
        }
        op_plan_set_ops(p, d, ops, n);
    }
    free(ops);
    OP_ASSERT(replay(p) == 0, "1f1b deadlocks");
}

static void dump(const char *name, const op_buf *b) {
    const char *dir = getenv("OCTOPIPE_EXPORT_DUMP");
    if (!dir || !*dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    op_err e = {0};
    if (op_write_file_atomic(path, b->data, b->len, &e)) fprintf(stderr, "%s\n", e.msg);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle)) n++;
    return n;
}

/* ---- torch CSV -------------------------------------------------------------------------- */

TEST(csv_loop_golden) {
    op_plan p;
    loop_plan(&p);
    CHECK_NEAR(p.ops[0][4].start, 6, 1e-12); /* 2I0 waits for 3I0 on device 1 */
    CHECK_EQ_INT(op_export_torch_style(&p, NULL), OP_TORCH_LOOP);
    op_buf b = {0};
    op_err e = {0};
    CHECK(op_export_torch_csv(&p, &b, &e) == OP_OK);
    CHECK(b.data && !strcmp(b.data, "0F0,0F1,2F0,2F1,2I0,2W0,2I1,2W1,0I0,0I1,0W0,0W1\n"
                                    "1F0,1F1,3F0,3F1,3I0,3W0,3I1,3W1,1I0,1I1,1W0,1W1\n"));
    op_torch_check_info info;
    CHECK(op_export_torch_csv_check(b.data, 2, 4, 2, &info, &e) == OP_OK);
    CHECK_EQ_INT(info.n_compute, 24);
    CHECK_EQ_INT(info.n_comms, 24); /* 6 F edges + 6 I edges, each a SEND and a RECV */
    CHECK(info.sim_steps >= 14);
    /* inferred S and M */
    CHECK(op_export_torch_csv_check(b.data, 2, 0, 0, &info, &e) == OP_OK);
    CHECK_EQ_INT(info.S, 4);
    CHECK_EQ_INT(info.M, 2);
    op_buf_free(&b);
    op_plan_free(&p);
}

TEST(csv_checker_accepts_torch_forms) {
    op_err e = {0};
    /* empty cells (idle slots), CRLF, spaces, no final newline, an OVERLAP_F_B cell */
    const char *csv = "0F0, ,0F1,0B0,,0B1\r\n1F0,1B0,(1F1;1B1)OVERLAP_F_B";
    CHECK_MSG(op_export_torch_csv_check(csv, 2, 2, 2, NULL, &e) == OP_OK, "%s", e.msg);
}

static void expect_bad(const char *csv, int P, int S, int M, const char *msg) {
    op_err e = {0};
    int rc = op_export_torch_csv_check(csv, P, S, M, NULL, &e);
    CHECK_MSG(rc == OP_EINVAL, "accepted: %s", csv);
    CHECK_STR_CONTAINS(e.msg, msg);
}

TEST(csv_checker_rejects) {
    /* W before its I */
    expect_bad("0F0,0W0,0I0\n1F0,1I0,1W0\n", 2, 2, 1, "backward weight for stage 0, microbatch 0");
    /* I before its F */
    expect_bad("0F0,0I0,0W0\n1I0,1F0,1W0\n", 2, 2, 1, "without first running forward");
    /* a stage on two ranks */
    expect_bad("0F0,1F1,0B0,1B1\n1F0,0F1,1B0,0B1\n", 2, 2, 2,
               "stage 1 is assigned to both rank 1 and rank 0");
    /* a missing F */
    expect_bad("0F0,0B0\n1F0,1B0\n", 2, 2, 2, "got 1 F microbatches for stage 0, expected 2");
    /* I without W */
    expect_bad("0F0,0I0\n1F0,1B0\n", 2, 2, 1, "I=1, W=0");
    /* a stage never scheduled */
    expect_bad("0F0,0B0\n2F0,2B0\n", 2, 3, 1, "stage 1 never appears");
    /* row count */
    expect_bad("0F0,1F0,1B0,0B0\n", 2, 2, 1, "has 1 rows but the pipeline has 2 ranks");
    /* comms in a compute_only file, junk cells */
    expect_bad("0F0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0\n", 2, 2, 1, "SEND_F is inserted");
    expect_bad("0F0,0X0\n1F0,1B0\n", 2, 2, 1, "row 0 cell 2: invalid action '0X0'");
    expect_bad("0F0,0B0x\n1F0,1B0\n", 2, 2, 1, "invalid action '0B0x'");
    expect_bad("0F,0B0\n1F0,1B0\n", 2, 2, 1, "invalid action '0F'");
    expect_bad("0F0,0F0,0B0\n1F0,1B0\n", 2, 2, 1, "duplicate action 0F0");
    expect_bad("0F0,0B0\n1F5,1B5\n", 2, 2, 1, "microbatch 5 out of range");
    /* valid by the counting rules but deadlocks in the lowering: rank 0 needs 1B0 before it
     * sends 0F1, rank 1 needs 0F1 before it can run 1B0 */
    expect_bad("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", 2, 2, 2, "Malformed compute schedule");
}

TEST(csv_v_and_irregular) {
    /* V: stages 0,3 on rank 0 and 1,2 on rank 1, M=2 */
    static const int vdev[4] = {0, 1, 1, 0};
    static const char *const vrows[2] = {"0F0,0F1,3F0,3I0,3W0,3F1,3I1,3W1,0I0,0W0,0I1,0W1",
                                         "1F0,2F0,1F1,2F1,2I0,2W0,1I0,2I1,2W1,1I1,1W0,1W1"};
    op_plan p;
    mk_plan(&p, "TTTT", 2, 2, 4, first4, vdev, 1, vrows);
    CHECK_EQ_INT(op_export_torch_style(&p, NULL), OP_TORCH_V);
    op_buf b = {0};
    op_err e = {0};
    CHECK_MSG(op_export_torch_csv(&p, &b, &e) == OP_OK, "%s", e.msg);
    CHECK(b.data && !strncmp(b.data, "0F0,0F1,3F0,3I0,", 16));
    op_torch_check_info info;
    CHECK(op_export_torch_csv_check(b.data, 2, 4, 2, &info, &e) == OP_OK);
    CHECK_EQ_INT(info.n_comms, 16); /* edges 0->1 and 2->3 cross (x2 mb x F/I), 1->2 does not */
    op_buf_free(&b);
    op_buf h = {0};
    op_export_torch_hint(&p, &h);
    CHECK_STR_CONTAINS(h.data, "ZBVZeroBubble");
    op_buf_free(&h);
    op_plan_free(&p);

    /* sequential placement, 2 stages per device: torchtitan's maps do not fit, torch's runtime
     * takes the map from the rows, so it exports (no force) with the map in the stage JSON */
    static const int sdev[4] = {0, 0, 1, 1};
    static const char *const srows[2] = {"0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1",
                                         "2F0,3F0,3B0,2B0,2F1,3F1,3B1,2B1"};
    mk_plan(&p, "TTTT", 2, 2, 4, first4, sdev, 0, srows);
    CHECK_EQ_INT(op_export_torch_style(&p, NULL), OP_TORCH_IRREGULAR);
    CHECK_MSG(op_export_torch_csv(&p, &b, &e) == OP_OK, "%s", e.msg);
    CHECK(b.data && !strcmp(b.data, "0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1\n"
                                    "2F0,3F0,3B0,2B0,2F1,3F1,3B1,2B1\n"));
    b.len = 0;
    p.stage_act[1] = OP_ACT_FULL, p.stage_act[2] = OP_ACT_OFFLOAD;
    CHECK(op_export_torch_stage_map(&p, &b, &e) == OP_OK);
    CHECK_STR_CONTAINS(b.data, "\"stage_to_rank\": [0, 0, 1, 1]");
    CHECK_STR_CONTAINS(b.data, "\"style\": \"irregular\"");
    CHECK_STR_CONTAINS(b.data, "\"activation\": [\"keep\", \"full\", \"offload\", \"keep\"]");
    op_buf_free(&b);
    /* the compute_comms lowering torch itself makes (torch 2.15 defaults; the rows were
     * compared with torch's _dump_csv by tests/torch): one send each way per microbatch */
    CHECK(op_export_torch_comms_csv(&p, &b, &e) == OP_OK);
    CHECK(b.data && !strcmp(b.data,
          "0UNSHARD,1UNSHARD,0F0,1F0,1SEND_F0,0F1,1F1,1SEND_F1,1RECV_B0,1B0,1WAIT_SEND_F0,0B0,"
          "1RECV_B1,1B1,1WAIT_SEND_F1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1RESHARD,0B1,0REDUCE_GRAD,"
          "0WAIT_REDUCE_GRAD,0RESHARD\n"
          "2UNSHARD,3UNSHARD,2RECV_F0,2F0,3F0,2RECV_F1,3B0,2B0,2SEND_B0,2F1,3F1,3B1,3REDUCE_GRAD,"
          "3WAIT_REDUCE_GRAD,3RESHARD,2B1,2SEND_B1,2REDUCE_GRAD,2WAIT_REDUCE_GRAD,2RESHARD,"
          "2WAIT_SEND_B0,2WAIT_SEND_B1\n"));
    op_buf_free(&b);
    op_plan_free(&p);

    /* unequal stages per device: also fine for torch's runtime */
    static const int f3[4] = {0, 1, 2, 4}, d3[3] = {0, 1, 0};
    static const char *const r3[2] = {"0F0,2F0,2B0,0B0", "1F0,1B0"};
    mk_plan(&p, "TTTT", 2, 1, 3, f3, d3, 0, r3);
    CHECK_MSG(op_export_torch_csv(&p, &b, &e) == OP_OK, "%s", e.msg);
    op_buf_free(&b);
    /* a rank without stages: torch's lowering asserts on an empty row, so it is refused */
    CHECK(op_export_torch_csv_check("0F0,1F0,1B0,0B0\n\n", 2, 2, 1, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "row 1 has no actions");
    op_plan_free(&p);
}

TEST(torch_fqns) {
    static const int f[3] = {0, 3, 6}, dv[2] = {0, 1};
    op_plan p;
    mk_plan(&p, "ETTTTL", 2, 1, 2, f, dv, 0, NULL);
    op_buf b = {0};
    op_err e = {0};
    CHECK(op_export_torch_fqns(&p, &b, &e) == OP_OK);
    CHECK(b.data && !strcmp(b.data, "[\n  [\"tok_embeddings\", \"layers.0\", \"layers.1\"],\n"
                                    "  [\"layers.2\", \"layers.3\", \"norm\", \"output\"]\n]\n"));
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    CHECK(j && json_array_size(j) == 2);
    json_decref(j);
    op_buf_free(&b);
    op_plan_free(&p);
    mk_plan(&p, "EM-M*L", 2, 1, 2, f, dv, 0, NULL);
    CHECK(op_export_torch_fqns(&p, &b, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layer 1 (layer1, kind 'M') has no torchtitan module");
    op_plan_free(&p);
}

/* ---- Megatron --------------------------------------------------------------------------- */

static void expect_layout(const char *syms, int P, int S, const int *first, const int *dev,
                          const char *want, op_megatron_kind want_kind) {
    op_plan p;
    mk_plan(&p, syms, P, 1, S, first, dev, 0, NULL);
    op_buf b = {0};
    op_err e = {0};
    op_megatron_kind k = 0;
    int rc = op_export_megatron(&p, &b, &k, NULL, &e);
    CHECK_MSG(rc == OP_OK, "%s", e.msg);
    CHECK_MSG(b.data && !strcmp(b.data, want), "got '%s' want '%s'", b.data ? b.data : "", want);
    CHECK_EQ_INT(k, want_kind);
    op_buf_free(&b);
    op_plan_free(&p);
}

/* p's Megatron settings are exactly `want`, with no note. */
static void expect_settings(const op_plan *p, const char *want) {
    op_buf b = {0}, n = {0};
    op_export_megatron_settings(p, OP_MEGATRON_LAYOUT, &b, &n);
    op_buf_put(&b, "", 0);
    CHECK_MSG(!strcmp(b.data, want), "got '%s' want '%s'", b.data, want);
    CHECK_MSG(n.len == 0, "notes: %.*s", (int)n.len, n.data ? n.data : "");
    op_buf_free(&b), op_buf_free(&n);
}

/* The training settings: batch flags from seq/mbs/dp, the distributed optimizer for ZeRO-1,
 * and the strongest stage policy as Megatron's one recompute setting, with notes where the
 * plan's stages differ (hand-written expectations). */
TEST(megatron_settings) {
    static const int f4[5] = {0, 3, 6, 8, 10}, d4[4] = {0, 1, 0, 1};
    op_plan p;
    mk_plan(&p, "ETTTTTTTTL", 2, 8, 4, f4, d4, 0, NULL);
    op_buf b = {0}, n = {0};
    op_export_megatron_settings(&p, OP_MEGATRON_LAYOUT, &b, &n);
    CHECK(b.len == 0); /* nothing recorded, all keep: no flags */
    CHECK_STR_CONTAINS(n.data, "does not record its sequence length");
    CHECK_STR_CONTAINS(n.data, "--global-batch-size = 8 x --micro-batch-size");
    op_buf_free(&b), op_buf_free(&n);

    p.seq = 2048, p.mbs = 2, p.dp = 4, p.zero1 = 1;
    expect_settings(&p, " --seq-length 2048 --micro-batch-size 2 --global-batch-size 64 "
                        "--use-distributed-optimizer");
    /* every stage selective: Megatron's selective (core_attn), no note */
    p.zero1 = 0, p.dp = 1;
    for (int s = 0; s < 4; s++) p.stage_act[s] = OP_ACT_SELECTIVE;
    expect_settings(&p, " --seq-length 2048 --micro-batch-size 2 --global-batch-size 16 "
                        "--recompute-granularity selective");

    /* stage 1 full, stage 2 offload, the rest keep: full everywhere; the stages hold 2, 3, 2
     * and 1 decoder layers (E and L are not counted), so one checkpoint per layer, said */
    for (int s = 0; s < 4; s++) p.stage_act[s] = OP_ACT_KEEP;
    p.stage_act[1] = OP_ACT_FULL, p.stage_act[2] = OP_ACT_OFFLOAD;
    op_export_megatron_settings(&p, OP_MEGATRON_LAYOUT, &b, &n);
    op_buf_put(&b, "", 0);
    op_buf_put(&n, "", 0);
    CHECK_STR_CONTAINS(b.data, " --recompute-granularity full --recompute-method uniform "
                               "--recompute-num-layers 1");
    CHECK_STR_CONTAINS(n.data, "--recompute-num-layers 1 divides them all: Megatron keeps the "
                               "input of every layer where the plan keeps one per stage");
    CHECK_STR_CONTAINS(n.data, "note: stage 2 offloads its stash to host memory");
    CHECK_STR_CONTAINS(n.data, "give every stage full recomputation");
    op_buf_free(&b), op_buf_free(&n);

    /* torchtitan: local batch M x mbs, full checkpointing, the same notes */
    op_export_torchtitan_settings(&p, &b, &n);
    op_buf_put(&b, "", 0);
    op_buf_put(&n, "", 0);
    CHECK_MSG(!strcmp(b.data, "training.seq_len=2048, training.local_batch_size=16, "
                              "parallelism.pipeline_parallel_microbatch_size=2, "
                              "activation_checkpoint.mode=full, "), "got '%s'", b.data);
    CHECK_STR_CONTAINS(n.data, "torchtitan takes one setting for all");
    op_buf_free(&b), op_buf_free(&n);
    int mixed = 0;
    CHECK_EQ_INT(op_export_act_strongest(&p, &mixed), OP_ACT_FULL);
    CHECK(mixed);
    op_plan_free(&p);
    /* every stage full, 4 and 2 decoder layers: groups of 2 (divides both), said; equal
     * stages of 3: one group per stage, nothing said */
    static const int f2[3] = {0, 5, 8}, d2[2] = {0, 1}, f3[3] = {0, 4, 8};
    mk_plan(&p, "ETTTTTTL", 2, 8, 2, f2, d2, 0, NULL);
    p.stage_act[0] = p.stage_act[1] = OP_ACT_FULL;
    op_export_megatron_settings(&p, OP_MEGATRON_LAYOUT, &b, &n);
    op_buf_put(&b, "", 0), op_buf_put(&n, "", 0);
    CHECK_STR_CONTAINS(b.data, "--recompute-num-layers 2");
    CHECK_STR_CONTAINS(n.data, "Megatron keeps the input of every 2 layers");
    op_buf_free(&b), op_buf_free(&n);
    op_plan_free(&p);
    mk_plan(&p, "ETTTTTTL", 2, 8, 2, f3, d2, 0, NULL);
    p.stage_act[0] = p.stage_act[1] = OP_ACT_FULL;
    op_export_megatron_settings(&p, OP_MEGATRON_LAYOUT, &b, &n);
    op_buf_put(&b, "", 0), op_buf_put(&n, "", 0);
    CHECK_STR_CONTAINS(b.data, "--recompute-num-layers 3");
    CHECK_MSG(!strstr(n.data, "divides them all"), "%s", n.data);
    op_buf_free(&b), op_buf_free(&n);
    op_plan_free(&p);
    /* a hybrid plan: Megatron's hybrid stack has no full-layer recomputation, so full and
     * offload stages get its attention layers' selective and a note that memory will not hold */
    static const int fh[3] = {0, 4, 7};
    mk_plan(&p, "EM*-M-L", 2, 4, 2, fh, d2, 0, NULL);
    p.seq = 4096, p.mbs = 1;
    p.stage_act[1] = OP_ACT_OFFLOAD;
    op_export_megatron_settings(&p, OP_MEGATRON_HYBRID, &b, &n);
    op_buf_put(&b, "", 0), op_buf_put(&n, "", 0);
    CHECK_MSG(!strcmp(b.data, " --seq-length 4096 --micro-batch-size 1 --global-batch-size 4 "
                              "--recompute-granularity selective"), "got '%s'", b.data);
    CHECK_STR_CONTAINS(n.data, "note: the plan recomputes in full or offloads on stage(s) 1, "
                               "which Megatron's hybrid stack (--hybrid-layer-pattern) cannot run");
    CHECK_MSG(!strstr(n.data, "recompute them in full instead"), "%s", n.data);
    op_buf_free(&b), op_buf_free(&n);
    op_plan_free(&p);
}

TEST(megatron_layout_golden) {
    static const int f4[5] = {0, 3, 6, 8, 10}, d4[4] = {0, 1, 0, 1};
    expect_layout("ETTTTTTTTL", 2, 4, f4, d4, "Ett|t*3|tt|tL", OP_MEGATRON_LAYOUT);
    /* DeepSeek-V3-like, PP16 VPP2 (Megatron's own example): E t*3 | (tt|)*29 | m | L */
    char syms[70];
    int f[33], d[32], n = 0;
    syms[n++] = 'E';
    for (int i = 0; i < 61; i++) syms[n++] = 'T';
    syms[n++] = 'm', syms[n++] = 'L', syms[n] = 0;
    f[0] = 0, f[1] = 4;
    for (int s = 2; s <= 30; s++) f[s] = f[s - 1] + 2;
    f[31] = f[30] + 1, f[32] = f[31] + 1;
    for (int s = 0; s < 32; s++) d[s] = s % 16;
    CHECK_EQ_INT(f[32], 64);
    expect_layout(syms, 16, 32, f, d, "Et*3|(tt|)*29,m|L", OP_MEGATRON_LAYOUT);
    /* one stage per device, even split */
    static const int f2[3] = {0, 3, 6}, d2[2] = {0, 1};
    expect_layout("ETTTTL", 2, 2, f2, d2, "Ett|ttL", OP_MEGATRON_LAYOUT);
}

TEST(megatron_compress) {
    op_buf b = {0};
    op_megatron_compress("t|t|t|t|tL", &b);
    CHECK(!strcmp(b.data, "(t|)*4,tL"));
    b.len = 0;
    op_megatron_compress("Et|ttt|tt|ttt|tt|ttt|tt|tL", &b); /* a 2-stage block, 3 times */
    CHECK_MSG(!strcmp(b.data, "Et|(t*3|tt|)*3,tL"), "%s", b.data);
    b.len = 0;
    op_megatron_compress("Et|tt|tt|tL", &b); /* "(tt|)*2," is longer than "tt|tt|" */
    CHECK(!strcmp(b.data, "Et|tt|tt|tL"));
    op_buf_free(&b);
}

TEST(megatron_refusals) {
    op_plan p;
    op_buf b = {0};
    op_err e = {0};
    static const int f4[5] = {0, 2, 3, 4, 6};
    /* V placement */
    static const int v[4] = {0, 1, 1, 0};
    mk_plan(&p, "ETTTTL", 2, 1, 4, f4, v, 0, NULL);
    CHECK(op_export_megatron(&p, &b, NULL, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "V placement");
    CHECK_STR_CONTAINS(e.msg, "v*P + r");
    CHECK_STR_CONTAINS(e.msg, "(a plan made with --placement loop has the shape Megatron runs)");
    op_plan_free(&p);
    /* sequential (irregular for Megatron) */
    static const int sq[4] = {0, 0, 1, 1};
    mk_plan(&p, "ETTTTL", 2, 1, 4, f4, sq, 0, NULL);
    CHECK(op_export_megatron(&p, &b, NULL, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "stage 1 is on device 0, but Megatron would run it on device 1");
    CHECK_STR_CONTAINS(e.msg, "(a plan made with --placement loop has the shape Megatron runs)");
    op_plan_free(&p);
    /* unequal */
    static const int f3[4] = {0, 2, 4, 6}, u[3] = {0, 1, 0};
    mk_plan(&p, "ETTTTL", 2, 1, 3, f3, u, 0, NULL);
    CHECK(op_export_megatron(&p, &b, NULL, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "device 0 holds 2 stages but device 1 holds 1");
    CHECK_STR_CONTAINS(e.msg, "(a plan made with --placement loop has the shape Megatron runs)");
    op_plan_free(&p);
    /* MTP on pipeline rank 0 */
    static const int fm2[5] = {0, 2, 3, 4, 6}, dm2[4] = {0, 1, 0, 1};
    mk_plan(&p, "ETTTmL", 2, 1, 4, fm2, dm2, 0, NULL);
    CHECK(op_export_megatron(&p, &b, NULL, NULL, &e) == OP_OK); /* m in stage 3: rank 1, vpp 1 */
    op_plan_free(&p);
    static const int fm3[5] = {0, 2, 3, 5, 6};
    mk_plan(&p, "ETTTmL", 2, 1, 4, fm3, dm2, 0, NULL);
    b.len = 0;
    CHECK(op_export_megatron(&p, &b, NULL, NULL, &e) == OP_EINVAL); /* m in stage 2: rank 0 */
    CHECK_STR_CONTAINS(e.msg, "MTP layer 4 is in stage 2 (rank 0");
    op_plan_free(&p);
    /* a vision encoder has no layout token */
    static const int fv[3] = {0, 3, 6}, dv[2] = {0, 1};
    mk_plan(&p, "VVETTL", 2, 1, 2, fv, dv, 0, NULL);
    CHECK(op_export_megatron(&p, &b, NULL, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "vision encoder");
    op_plan_free(&p);
    op_buf_free(&b);
}

TEST(megatron_hybrid_pattern) {
    static const int f2[3] = {0, 5, 9}, d2[2] = {0, 1};
    expect_layout("EM-M*-M#L", 2, 2, f2, d2, "M-M*|-ME", OP_MEGATRON_HYBRID);
    /* embedding alone in stage 0: an empty first segment, with a note */
    static const int f4[5] = {0, 1, 5, 7, 9}, d4[4] = {0, 1, 0, 1};
    op_plan p;
    mk_plan(&p, "EM-M*-M#L", 2, 1, 4, f4, d4, 0, NULL);
    op_buf b = {0}, notes = {0};
    op_err e = {0};
    op_megatron_kind k;
    CHECK(op_export_megatron(&p, &b, &k, &notes, &e) == OP_OK);
    CHECK(b.data && !strcmp(b.data, "|M-M*|-M|E"));
    CHECK_STR_CONTAINS(notes.data, "segment 0 is empty");
    CHECK(!strcmp(op_megatron_flag(k), "--hybrid-layer-pattern"));
    op_buf_free(&b), op_buf_free(&notes);
    op_plan_free(&p);
    /* a whole transformer block inside a hybrid model has no hybrid symbol */
    mk_plan(&p, "EM-MT-M#L", 2, 1, 2, f2, d2, 0, NULL);
    CHECK(op_export_megatron(&p, &b, &k, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layer 4 (layer4, 'T')");
    op_plan_free(&p);
}

/* ---- timelines -------------------------------------------------------------------------- */

TEST(memory_timeline_by_hand) {
    op_plan p;
    loop_plan(&p);
    /* device 0: static 2 x 1000; F of stage 0 stashes 100, stage 2 300; F at t=0,1,2,3 */
    CHECK_EQ_INT(op_export_peak_bytes(&p, 0), 2000 + 100 + 100 + 300 + 300);
    /* device 1: stages 1 (200) and 3 (400); 3I0 frees 240 at 6 only after 3F1 at 4 */
    CHECK_EQ_INT(op_export_peak_bytes(&p, 1), 2000 + 200 + 200 + 400 + 400);
    op_mem_point *pts;
    int n = op_export_mem_timeline(&p, 1, &pts);
    CHECK(n > 2 && pts[0].t_ms == 0 && pts[0].bytes == 2000);
    CHECK(pts[n - 1].bytes == 2000); /* everything freed at the end */
    free(pts);
    op_export_summary s;
    op_export_summarize(&p, &s);
    CHECK_NEAR(s.makespan_ms, 14, 1e-12);
    CHECK_NEAR(s.bubble_ratio, 1 - 24.0 / 28, 1e-12);
    CHECK_EQ_INT(s.peak_bytes_max, 3200);
    CHECK_EQ_INT(s.peak_dev, 1);
    op_plan_free(&p);
}

/* p's Chrome trace, parsed (NULL, and a failed check, when it is not JSON) */
static json_t *trace_json(const op_plan *p) {
    op_buf b = {0};
    op_err e = {0};
    CHECK(op_export_chrome_trace(p, &b, &e) == OP_OK);
    json_error_t je = {0};
    json_t *root = b.data ? json_loads(b.data, 0, &je) : NULL;
    CHECK_MSG(root != NULL, "line %d: %s", je.line, je.text);
    op_buf_free(&b);
    return root;
}

TEST(chrome_trace_json) {
    op_plan p;
    loop_plan(&p);
    json_t *root = trace_json(&p);
    json_t *ev = json_object_get(root, "traceEvents");
    int nx = 0, nmeta = 0, ns = 0, nf = 0, nc = 0;
    json_int_t peak[2] = {0, 0};
    size_t i;
    json_t *x;
    json_array_foreach(ev, i, x) {
        const char *ph = json_string_value(json_object_get(x, "ph"));
        int pid = (int)json_integer_value(json_object_get(x, "pid"));
        if (!strcmp(ph, "X")) {
            nx++;
            const char *name = json_string_value(json_object_get(x, "name"));
            if (!strcmp(name, "I s2 mb0")) {
                CHECK_NEAR(json_number_value(json_object_get(x, "ts")), 6000, 1e-9);
                CHECK_NEAR(json_number_value(json_object_get(x, "dur")), 1000, 1e-9);
                CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(x, "args"), "stage")), 2);
                CHECK_EQ_INT(pid, 0);
            }
        } else if (!strcmp(ph, "M")) {
            nmeta++;
        } else if (!strcmp(ph, "C")) {
            nc++;
            json_int_t v = json_integer_value(json_object_get(json_object_get(x, "args"), "bytes"));
            if (v > peak[pid]) peak[pid] = v;
        } else if (!strcmp(ph, "s")) {
            ns++;
        } else if (!strcmp(ph, "f")) {
            nf++;
        }
    }
    CHECK_EQ_INT(nx, 24);
    CHECK_EQ_INT(nmeta, 6);
    CHECK_EQ_INT(ns, 12); /* 6 F + 6 I messages cross devices in a 2-device loop */
    CHECK_EQ_INT(nf, 12);
    CHECK(nc >= 2 * 8);
    CHECK_EQ_INT(peak[0], 2800);
    CHECK_EQ_INT(peak[1], 3200);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(root, "otherData"), "makespan_ms")), 14, 1e-12);
    json_decref(root);
    op_plan_free(&p);
}

/* Ops whose times are not whole nanoseconds still follow each other in the trace: ts and dur
 * are taken from the same rounded ends (rounded apart, a plan's back-to-back ops overlapped by
 * 1 ns, which Perfetto nests as one slice starting inside another). */
TEST(chrome_trace_ops_do_not_overlap) {
    op_plan p;
    loop_plan(&p);
    for (int l = 0; l < p.n_layers; l++) /* an llama2-7b embedding's F, a decoder's I and W */
        p.layers[l].f_ms = 0.028052847761194027, p.layers[l].i_ms = 4.106244443295572,
        p.layers[l].w_ms = 3.059812071433035;
    CHECK(replay(&p) == 0);
    json_t *root = trace_json(&p);
    double last_end[2] = {0, 0};
    int nx = 0;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(root, "traceEvents"), i, x) {
        const char *cat = json_string_value(json_object_get(x, "cat"));
        if (strcmp(json_string_value(json_object_get(x, "ph")), "X") || !cat || strlen(cat) != 1)
            continue;
        int pid = (int)json_integer_value(json_object_get(x, "pid"));
        double ts = json_number_value(json_object_get(x, "ts"));
        double dur = json_number_value(json_object_get(x, "dur"));
        /* ops come in device order; each starts at or after the previous one's end */
        CHECK_MSG(ts >= last_end[pid] - 1e-9, "%s starts at %.3f us, before %.3f",
                  json_string_value(json_object_get(x, "name")), ts, last_end[pid]);
        CHECK(dur >= 0);
        last_end[pid] = ts + dur;
        nx++;
    }
    CHECK_EQ_INT(nx, 24);
    json_decref(root);
    op_plan_free(&p);
}

/* Well-formedness: every tag closed and properly nested, attributes quoted.  Returns the
 * number of elements, or -1. */
static int xml_check(const char *s) {
    const char *stack[64];
    size_t len[64];
    int depth = 0, n = 0;
    if (!strncmp(s, "<?xml", 5)) s = strstr(s, "?>") + 2;
    while ((s = strchr(s, '<'))) {
        if (s[1] == '/') {
            const char *nm = s + 2, *e = strchr(nm, '>');
            if (!depth || !e || (size_t)(e - nm) != len[depth - 1] ||
                strncmp(nm, stack[depth - 1], len[depth - 1]))
                return -1;
            depth--;
            s = e + 1;
            continue;
        }
        const char *nm = s + 1, *p = nm;
        while (isalnum((unsigned char)*p)) p++;
        if (p == nm) return -1;
        size_t nl = (size_t)(p - nm);
        int inq = 0;
        while (*p && (inq || (*p != '>'))) {
            if (*p == '"') inq = !inq;
            else if (!inq && *p == '<') return -1;
            p++;
        }
        if (!*p) return -1;
        n++;
        if (p[-1] != '/') {
            if (depth == 64) return -1;
            stack[depth] = nm, len[depth++] = nl;
        }
        s = p + 1;
    }
    return depth == 0 ? n : -1;
}

TEST(svg_small) {
    op_plan p;
    loop_plan(&p);
    op_buf b = {0};
    op_err e = {0};
    CHECK(op_export_svg(&p, &b, &e) == OP_OK);
    CHECK(xml_check(b.data) > 24);
    CHECK_EQ_INT(count(b.data, "<rect class=\"op "), 24);
    CHECK_EQ_INT(count(b.data, "<rect class=\"op W\""), 8);
    CHECK_STR_CONTAINS(b.data, "makespan <tspan font-weight=\"bold\">14.00 ms");
    CHECK_STR_CONTAINS(b.data, "bubble <tspan font-weight=\"bold\">14.3%");
    CHECK_STR_CONTAINS(b.data, ">device 1</text>");
    dump("loop_p2_m2.svg", &b);
    op_buf_free(&b);
    /* a name that needs escaping */
    snprintf(p.name, sizeof p.name, "a<b & \"c\"");
    CHECK(op_export_svg(&p, &b, &e) == OP_OK);
    CHECK(xml_check(b.data) > 0);
    CHECK_STR_CONTAINS(b.data, "a&lt;b &amp; &quot;c&quot;");
    op_buf_free(&b);
    op_plan_free(&p);
}

TEST(svg_large) {
    op_plan p;
    onef1b_plan(&p, 16, 64);
    /* 1F1B with F=1, B=2 per stage: (M + P - 1) * 3 */
    op_export_summary s;
    op_export_summarize(&p, &s);
    CHECK_NEAR(s.makespan_ms, (64 + 15) * 3, 1e-9);
    op_buf b = {0};
    op_err e = {0};
    CHECK(op_export_svg(&p, &b, &e) == OP_OK);
    CHECK(xml_check(b.data) > 2048);
    CHECK_EQ_INT(count(b.data, "<rect class=\"op "), 16 * 64 * 2);
    dump("1f1b_p16_m64.svg", &b);
    op_buf_free(&b);
    CHECK(op_export_chrome_trace(&p, &b, &e) == OP_OK);
    json_error_t je;
    json_t *j = json_loads(b.data, 0, &je);
    CHECK(j != NULL);
    json_decref(j);
    op_buf_free(&b);
    op_plan_free(&p);

    /* V placement (tinted second stage) for the render check */
    static const int vdev[4] = {0, 1, 1, 0};
    static const char *const vrows[2] = {"0F0,0F1,3F0,3I0,3W0,3F1,3I1,3W1,0I0,0W0,0I1,0W1",
                                         "1F0,2F0,1F1,2F1,2I0,2W0,1I0,2I1,2W1,1I1,1W0,1W1"};
    mk_plan(&p, "TTTT", 2, 2, 4, first4, vdev, 1, vrows);
    CHECK(op_export_svg(&p, &b, &e) == OP_OK);
    CHECK_STR_CONTAINS(b.data, "lighter: a device's 2nd");
    dump("v_p2_m2.svg", &b);
    op_buf_free(&b);
    op_plan_free(&p);
}

TEST(times_rejected) {
    op_plan p;
    loop_plan(&p);
    op_buf b = {0};
    op_err e = {0};
    p.ops[1][3].start = 2.5; /* overlaps 3F0 on device 1 */
    CHECK(op_export_svg(&p, &b, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "schedule[1][3]: F(s3,mb1) starts at 2.5 ms, before the previous");
    CHECK(op_export_chrome_trace(&p, &b, &e) == OP_EINVAL);
    CHECK(b.len == 0);
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < p.n_ops[d]; i++) p.ops[d][i].start = p.ops[d][i].end = 0;
    CHECK(op_export_svg(&p, &b, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "no times");
    /* a broken plan (missing op) is refused by every exporter */
    op_plan_free(&p);
    loop_plan(&p);
    p.n_ops[0]--;
    CHECK(op_export_torch_csv(&p, &b, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "missing op W(s0,mb1)");
    CHECK(b.len == 0);
    op_buf_free(&b);
    op_plan_free(&p);
}

/* Every classic baseline (built and simulated by sched/) exports: the CSV passes torch's
 * checks, the memory curve's peak equals the simulator's, trace and SVG are well-formed, and
 * Megatron takes exactly the loop placements. */
TEST(every_baseline_exports) {
    char syms[32] = "E";
    for (int i = 1; i <= 16; i++) syms[i] = 'T';
    syms[17] = 'L';
    op_layer_cost *L = mk_layers(syms);
    for (int l = 0; l < 18; l++) L[l].f_ms = 1 + 0.25 * (l % 3), L[l].i_ms = 1, L[l].w_ms = 0.75;
    op_problem pr = {.model = "toy", .layers = L, .n_layers = 18, .P = 4, .M = 8};
    pr.comm.none = 1;
    int n = 0;
    for (const char *const *nm = op_sched_names(); *nm; nm++) {
        op_plan p;
        op_err e = {0};
        if (op_sched_build(*nm, &pr, &p, &e) != OP_OK) {
            fprintf(stderr, "note: %s not built: %s\n", *nm, e.msg);
            continue;
        }
        n++;
        op_buf b = {0};
        op_torch_style st = op_export_torch_style(&p, NULL);
        int rc = op_export_torch_csv(&p, &b, &e);
        CHECK_MSG(rc == OP_OK, "%s: %s", *nm, e.msg);
        op_torch_check_info ci;
        CHECK(rc || op_export_torch_csv_check(b.data, p.P, p.S, p.M, &ci, &e) == OP_OK);
        b.len = 0;
        for (int d = 0; d < p.P && p.pred.valid; d++)
            CHECK_MSG(op_export_peak_bytes(&p, d) == p.pred.peak_bytes[d],
                      "%s device %d: %lld vs sim %lld", *nm, d,
                      (long long)op_export_peak_bytes(&p, d), (long long)p.pred.peak_bytes[d]);
        op_export_summary sm;
        op_export_summarize(&p, &sm);
        CHECK_NEAR(sm.makespan_ms, p.pred.makespan_ms, 1e-9);
        rc = op_export_chrome_trace(&p, &b, &e);
        json_error_t je;
        json_t *j = rc ? NULL : json_loads(b.data, 0, &je);
        CHECK_MSG(j != NULL, "%s: %s", *nm, e.msg);
        json_decref(j);
        b.len = 0;
        CHECK(op_export_svg(&p, &b, &e) == OP_OK && xml_check(b.data) > 0);
        char fn[64];
        snprintf(fn, sizeof fn, "baseline_%s.svg", *nm);
        dump(fn, &b);
        b.len = 0;
        rc = op_export_megatron(&p, &b, NULL, NULL, &e);
        CHECK_MSG((rc == OP_OK) == (st == OP_TORCH_LOOP), "%s: megatron rc %d, style %d: %s", *nm,
                  rc, st, e.msg);
        op_buf_free(&b);
        op_plan_free(&p);
    }
    CHECK(n >= 6);
    free(L);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(csv_loop_golden);
    RUN(csv_checker_accepts_torch_forms);
    RUN(csv_checker_rejects);
    RUN(csv_v_and_irregular);
    RUN(torch_fqns);
    RUN(megatron_layout_golden);
    RUN(megatron_compress);
    RUN(megatron_refusals);
    RUN(megatron_hybrid_pattern);
    RUN(memory_timeline_by_hand);
    RUN(chrome_trace_json);
    RUN(chrome_trace_ops_do_not_overlap);
    RUN(svg_small);
    RUN(svg_large);
    RUN(times_rejected);
    RUN(every_baseline_exports);
    RUN(megatron_settings);
    return check_report("export");
}
