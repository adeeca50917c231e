/* test_sched.c: the classic schedules pinned to known results with uniform costs (F=I=W=1 per
 * stage, no communication), plus validity of every generated plan and the settings choosers. */
#include <jansson.h>
#include <limits.h>

#include "check.h"
#include "octopipe/cost.h"
#include "octopipe/model.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "sched/sched_int.h"

#define MAXL 4100
static op_layer_cost L[MAXL];

static void layer(int l, char sym, double f, double i, double w) {
    memset(&L[l], 0, sizeof L[l]);
    snprintf(L[l].name, sizeof L[l].name, "%c%d", sym, l);
    L[l].sym = sym;
    L[l].f_ms = f;
    L[l].i_ms = i;
    L[l].w_ms = w;
    L[l].out_bytes = 1 << 20;
    L[l].act_bytes = 1000;
    L[l].act_w_bytes = 0;
    L[l].param_bytes = 100;
    L[l].static_bytes = 1800;
}

/* n body layers ('T') with unit F, I, W and nothing else: one layer = one unit stage. */
static op_problem uniform(int n, int P, int M) {
    for (int l = 0; l < n; l++) layer(l, 'T', 1, 1, 1);
    op_problem pr = {.model = "uniform", .layers = L, .n_layers = n, .P = P, .M = M};
    pr.comm.none = 1;
    pr.tokens_per_mb = 4096;
    return pr;
}

/* E + n decoder layers + head: head `head`x a layer, embedding 0.2x; optional comm. */
static op_problem hetero(int n, double head, int P, int M) {
    layer(0, 'E', 0.2, 0.2, 0.2);
    for (int l = 1; l <= n; l++) layer(l, 'T', 1, 1, 1);
    layer(n + 1, 'L', head, head, head);
    op_problem pr = {.model = "hetero", .layers = L, .n_layers = n + 2, .P = P, .M = M};
    pr.comm.none = 1;
    pr.tokens_per_mb = 4096;
    return pr;
}

static double build_ms(const char *name, const op_problem *pr, const op_sched_opts *o) {
    op_plan p;
    op_err e = {0};
    op_sched_info info;
    int rc = op_sched_build_opts(name, pr, o, &p, &info, &e);
    CHECK_MSG(rc == OP_OK, "%s: %s", name, e.msg);
    if (rc != OP_OK) return -1;
    double ms = p.pred.makespan_ms;
    op_plan_free(&p);
    return ms;
}

TEST(uniform_p4_m8_1f1b_33_zbh1_27) {
    op_problem pr = uniform(4, 4, 8);
    CHECK_NEAR(build_ms("1f1b", &pr, NULL), 33, 1e-9);
    CHECK_NEAR(build_ms("zbh1", &pr, NULL), 27, 1e-9);
    CHECK_NEAR(build_ms("gpipe", &pr, NULL), 33, 1e-9);
    CHECK_NEAR(build_ms("balanced-1f1b", &pr, NULL), 33, 1e-9);
}

TEST(handcrafted_zbh1_matches_paper) {
    /* the handcrafted order alone: M(F+I+W) + (P-1)(F+I-W), also with F=1 I=2 W=1; memory:
     * at most P microbatches in flight (until W) on every device, 1F1B's peak */
    for (int pass = 0; pass < 2; pass++) {
        op_problem pr = uniform(4, 4, 8);
        for (int l = 0; l < 4; l++) {
            L[l].i_ms = pass ? 2 : 1;
            L[l].act_w_bytes = 1000; /* W frees everything: in flight = F done, W not */
        }
        op_plan p;
        op_plan_init_problem(&p, "zbh1", &pr, 4);
        for (int s = 0; s <= 4; s++) p.stage_first[s] = s;
        for (int s = 0; s < 4; s++) p.stage_dev[s] = s;
        sched_order_zbh1(&p);
        op_err e = {0};
        CHECK(op_plan_validate(&p, &e) == OP_OK);
        CHECK(op_sim_replay(&p, NULL, &e) == OP_OK);
        double F = 1, I = pass ? 2 : 1, W = 1;
        CHECK_NEAR(p.pred.makespan_ms, 8 * (F + I + W) + 3 * (F + I - W), 1e-9);
        for (int d = 0; d < 4; d++)
            CHECK_EQ_INT(p.pred.peak_bytes[d] - p.pred.static_bytes[d], 4 * 1000);
        op_plan_free(&p);
        /* the built baseline is at least as good as the handcrafted pattern */
        CHECK(build_ms("zbh1", &pr, NULL) <= 8 * (F + I + W) + 3 * (F + I - W) + 1e-9);
    }
}

TEST(bubble_ratio_1f1b_and_gpipe) {
    int Ps[] = {2, 4, 8}, Ms[] = {1, 3, 8, 16};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++) {
            int P = Ps[a], M = Ms[b];
            op_problem pr = uniform(P, P, M);
            op_plan p;
            op_err e = {0};
            CHECK(op_sched_build("1f1b", &pr, &p, &e) == OP_OK);
            CHECK_NEAR(p.pred.makespan_ms, (M + P - 1) * 3.0, 1e-9);
            CHECK_NEAR(p.pred.bubble_ratio, (P - 1.0) / (M + P - 1.0), 1e-9);
            int64_t act1 = p.pred.peak_bytes[0] - p.pred.static_bytes[0];
            op_plan_free(&p);
            CHECK(op_sched_build("gpipe", &pr, &p, &e) == OP_OK);
            CHECK_NEAR(p.pred.makespan_ms, (M + P - 1) * 3.0, 1e-9);
            int64_t actg = p.pred.peak_bytes[0] - p.pred.static_bytes[0];
            op_plan_free(&p);
            /* GPipe stashes all M microbatches on device 0, 1F1B at most P */
            CHECK_EQ_INT(actg, (int64_t)M * 1000);
            CHECK_EQ_INT(act1, (int64_t)(M < P ? M : P) * 1000);
        }
}

TEST(interleaving_divides_warmup_by_v) {
    /* P*v unit layers, one per chunk.  1F1B (v layers per stage): (M + P-1) * 3v.
     * Megatron interleaved (G = P, M % P == 0): (M*v + P-1) * 3: the (P-1) warm-up/cool-down
     * term shrinks from 3v(P-1) to 3(P-1), i.e. divided by v. */
    int P = 4;
    for (int v = 2; v <= 4; v++)
        for (int M = 4; M <= 12; M += 4) {
            op_problem pr = uniform(P * v, P, M);
            op_sched_opts o = {.v = v};
            int even[5] = {0, v, 2 * v, 3 * v, 4 * v}; /* 1F1B's chooser may prefer uneven */
            op_sched_opts oe = {.stage_first = even, .S = 4};
            double i1 = build_ms("i1f1b", &pr, &o), f1 = build_ms("1f1b", &pr, &oe);
            CHECK_NEAR(i1, (M * v + P - 1) * 3.0, 1e-9);
            CHECK_NEAR(f1, (M + P - 1) * 3.0 * v, 1e-9);
            CHECK_NEAR((f1 - 3.0 * v * M) / (i1 - 3.0 * v * M), (double)v, 1e-9);
        }
}

TEST(i1f1b_picks_fastest_v_within_memory) {
    op_problem pr = uniform(32, 4, 8);
    op_plan p;
    op_err e = {0};
    op_sched_info info;
    CHECK(op_sched_build_opts("i1f1b", &pr, NULL, &p, &info, &e) == OP_OK);
    /* no comm, no overhead: more chunks is faster; v = 8 is the most 32 layers allow */
    CHECK_EQ_INT(p.S, 32);
    CHECK_STR_CONTAINS(info.settings, "v=8");
    CHECK_NEAR(p.pred.makespan_ms, (8 * 8 + 3) * 3.0, 1e-9);
    op_plan_free(&p);
    /* a per-op overhead makes many small chunks costly */
    pr.op_overhead_ms = 0.5;
    CHECK(op_sched_build_opts("i1f1b", &pr, NULL, &p, &info, &e) == OP_OK);
    CHECK(p.S < 32);
    op_plan_free(&p);
    pr.op_overhead_ms = 0;
    /* with slow links a deeper warm-up (larger G) pays, at the price of memory; under a
     * limit just below that plan's peak the chooser falls back to one that fits */
    pr.M = 16;
    op_comm_default(&pr.comm, 0);
    pr.comm.intra_lat_ms = 0.5;
    CHECK(op_sched_build_opts("i1f1b", &pr, NULL, &p, &info, &e) == OP_OK);
    double fast = p.pred.makespan_ms;
    int64_t peak = p.pred.peak_bytes_max;
    CHECK_MSG(strstr(info.settings, "G=4") == NULL, "%s", info.settings);
    op_plan_free(&p);
    pr.mem_limit_bytes = (double)peak - 1;
    CHECK(op_sched_build_opts("i1f1b", &pr, NULL, &p, &info, &e) == OP_OK);
    CHECK((double)p.pred.peak_bytes_max <= pr.mem_limit_bytes);
    CHECK(p.pred.makespan_ms >= fast);
    op_plan_free(&p);
}

TEST(zbh2_parallelogram) {
    /* ZB-H2 (2P microbatches of memory): the only bubble left in one iteration is the
     * warm-up skew of the forward chain, (P-1) F, which ZB hides across iterations. */
    int Ps[] = {2, 4, 8};
    for (int a = 0; a < 3; a++) {
        int P = Ps[a];
        for (int M = 2 * P - 1; M <= 4 * P; M += P) {
            op_problem pr = uniform(P, P, M);
            op_plan p;
            op_err e = {0};
            CHECK(op_sched_build("zbh2", &pr, &p, &e) == OP_OK);
            CHECK_NEAR(p.pred.makespan_ms, 3.0 * M + (P - 1), 1e-9);
            for (int d = 0; d < P; d++)
                CHECK(p.pred.peak_bytes[d] - p.pred.static_bytes[d] <= (int64_t)2 * P * 1000);
            op_plan_free(&p);
            CHECK(build_ms("zbh1", &pr, NULL) >= 3.0 * M + (P - 1) - 1e-9);
        }
    }
}

static void check_v_placement(const op_plan *p) {
    CHECK_EQ_INT(p->S, 2 * p->P);
    for (int d = 0; d < p->P; d++) {
        CHECK_EQ_INT(p->stage_dev[d], d);
        CHECK_EQ_INT(p->stage_dev[2 * p->P - 1 - d], d);
    }
    for (int s = 0; s < p->S; s++) CHECK(p->stage_split[s]);
}

TEST(zbv_and_dualpipev_v_shape) {
    int Ps[] = {2, 4, 8};
    for (int a = 0; a < 3; a++) {
        int P = Ps[a];
        for (int M = 2 * P; M <= 4 * P; M += P) {
            op_problem pr = uniform(2 * P, P, M);
            op_plan p;
            op_err e = {0};
            double one = build_ms("1f1b", &pr, NULL);
            CHECK(op_sched_build("zbv", &pr, &p, &e) == OP_OK);
            check_v_placement(&p);
            CHECK(op_plan_validate(&p, &e) == OP_OK);
            CHECK(p.pred.makespan_ms < one);
            op_plan_free(&p);
            CHECK(op_sched_build("dualpipev", &pr, &p, &e) == OP_OK);
            check_v_placement(&p);
            CHECK(op_plan_validate(&p, &e) == OP_OK);
            CHECK(p.pred.makespan_ms < one);
            op_plan_free(&p);
        }
    }
}

TEST(every_plan_valid_and_replays) {
    int Ps[] = {2, 4, 8};
    const char *const *names = op_sched_names();
    op_sim_ws *ws = op_sim_ws_new();
    for (int a = 0; a < 3; a++)
        for (int Mi = 0; Mi < 3; Mi++) {
            int P = Ps[a], M = Mi == 0 ? P : Mi == 1 ? 2 * P : 3 * P + 1;
            op_problem pr = hetero(6 * P - 2, 5, P, M);
            op_comm_default(&pr.comm, 4);
            for (int l = 0; l < pr.n_layers; l++) L[l].act_w_bytes = 300;
            for (int i = 0; names[i]; i++) {
                op_plan p;
                op_err e = {0};
                int rc = op_sched_build(names[i], &pr, &p, &e);
                if (!strcmp(names[i], "dualpipev") && M < 2 * P) {
                    CHECK(rc == OP_EINVAL);
                    CHECK_STR_CONTAINS(e.msg, "M=");
                    continue;
                }
                CHECK_MSG(rc == OP_OK, "%s P=%d M=%d: %s", names[i], P, M, e.msg);
                if (rc != OP_OK) continue;
                CHECK_MSG(op_plan_validate(&p, &e) == OP_OK, "%s: %s", names[i], e.msg);
                double ms = p.pred.makespan_ms;
                CHECK(op_sim_replay(&p, ws, &e) == OP_OK);
                CHECK_NEAR(p.pred.makespan_ms, ms, 1e-12);
                CHECK(ms >= op_plan_lower_bound(&p) - 1e-9);
                CHECK(!strcmp(p.name, names[i]));
                op_plan_free(&p);
            }
        }
    op_sim_ws_free(ws);
}

/* Is stages' body-layer count a Megatron-valid split (plain / account_for / first-last)? */
static int megatron_valid(const op_plan *p, int N) {
    int P = p->P, S = p->S, v = S / P;
    int *c = op_xcalloc((size_t)S, sizeof *c);
    for (int s = 0; s < S; s++)
        for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) c[s] += L[l].sym == 'T';
    int ok = 1, mid = c[1 % S];
    for (int s = 1; s < S - 1; s++) ok &= (s % P == 0 || s % P == P - 1) || c[s] == mid;
    if (!ok) { free(c); return 0; }
    /* account_for: first or last one fewer than the rest, or plain */
    int acc = c[0] >= mid - 1 && c[0] <= mid && c[S - 1] >= mid - 1 && c[S - 1] <= mid;
    for (int s = 1; s < S - 1; s++) acc &= c[s] == mid;
    /* first/last: ranks 0 and P-1 each have one count per chunk */
    int fl = 1;
    for (int s = 0; s < S; s++) fl &= c[s] == c[s % P];
    int tot = 0;
    for (int s = 0; s < S; s++) tot += c[s];
    free(c);
    (void)v;
    return tot == N && (acc || fl);
}

TEST(megatron_split_chooser_heavy_head) {
    /* E + 16 decoder layers + a head of 5 layers' cost, P=4 */
    op_problem pr = hetero(16, 5, 4, 8);
    op_plan p;
    op_err e = {0};
    op_sched_info info;
    CHECK(op_sched_build_opts("1f1b", &pr, NULL, &p, &info, &e) == OP_OK);
    CHECK(megatron_valid(&p, 16));
    CHECK(p.stage_first[1] - p.stage_first[0] >= 1 && L[0].sym == 'E');
    /* the last stage holds fewer decoder layers than the even 4 */
    CHECK(p.stage_first[4] - p.stage_first[3] - 1 < 4);
    double chosen = p.pred.makespan_ms;
    op_plan_free(&p);
    int even[5] = {0, 5, 9, 13, 18};
    op_sched_opts o = {.stage_first = even, .S = 4};
    CHECK(chosen < build_ms("1f1b", &pr, &o) - 1e-9);
    /* interleaved too: a valid split for v chunks (classic options only, no layout) */
    op_sched_opts oc = {.classic_splits = 1};
    CHECK(op_sched_build_opts("i1f1b", &pr, &oc, &p, &info, &e) == OP_OK);
    CHECK(megatron_valid(&p, 16));
    op_plan_free(&p);
}

TEST(balanced_beats_1f1b_on_heavy_head) {
    /* a 5x head after a hybrid body whose first half is twice as heavy (MoE then dense):
     * Megatron's equal middle ranks cannot follow the costs, a cost-balanced split can */
    op_problem pr = hetero(24, 5, 4, 16);
    for (int l = 1; l <= 12; l++) L[l].f_ms = L[l].i_ms = L[l].w_ms = 2;
    op_sched_opts oc = {.classic_splits = 1};
    double bal = build_ms("balanced-1f1b", &pr, NULL), one = build_ms("1f1b", &pr, &oc);
    CHECK_MSG(bal < 0.97 * one, "balanced %g vs 1f1b %g", bal, one);
    /* with a --pipeline-model-parallel-layout (the default search) 1f1b catches up */
    CHECK(build_ms("1f1b", &pr, NULL) <= bal + 1e-9);
}

TEST(balanced_split_is_optimal) {
    op_rng r;
    op_rng_seed(&r, 7);
    for (int trial = 0; trial < 30; trial++) {
        int n = 3 + op_rng_int(&r, 8), S = 1 + op_rng_int(&r, n);
        for (int l = 0; l < n; l++) layer(l, 'T', op_rng_uniform(&r), op_rng_uniform(&r), 0);
        int first[16];
        op_err e = {0};
        CHECK(op_sched_balanced_split(L, n, S, first, &e) == OP_OK);
        double got = 0;
        for (int s = 0; s < S; s++) {
            double t = 0;
            CHECK(first[s + 1] > first[s]);
            for (int l = first[s]; l < first[s + 1]; l++) t += L[l].f_ms + L[l].i_ms;
            got = t > got ? t : got;
        }
        /* brute force over all cut sets (bitmask of n-1 cut points with S-1 bits) */
        double best = 1e300;
        for (int mask = 0; mask < 1 << (n - 1); mask++) {
            if (__builtin_popcount((unsigned)mask) != S - 1) continue;
            double t = 0, mx = 0;
            for (int l = 0; l < n; l++) {
                t += L[l].f_ms + L[l].i_ms;
                if (l == n - 1 || (mask >> l & 1)) {
                    mx = t > mx ? t : mx;
                    t = 0;
                }
            }
            best = mx < best ? mx : best;
        }
        CHECK_NEAR(got, best, 1e-12);
    }
    int first[4];
    op_err e = {0};
    CHECK(op_sched_balanced_split(L, 2, 3, first, &e) == OP_EINVAL);
}

TEST(zb_greedy_times_match_simulator) {
    op_problem pr = hetero(14, 3, 4, 12);
    op_comm_default(&pr.comm, 2);
    op_plan p;
    op_plan_init_problem(&p, "zb", &pr, 8);
    int first[9] = {0, 2, 4, 6, 8, 10, 12, 14, 16};
    memcpy(p.stage_first, first, sizeof first);
    for (int s = 0; s < 8; s++) {
        p.stage_dev[s] = s < 4 ? s : 7 - s;
        p.stage_split[s] = 1;
    }
    for (int f = 0; f < 8; f++) {
        op_sched_zb_greedy(&p, NULL, 0, f);
        double mx = 0;
        for (int d = 0; d < 4; d++)
            for (int i = 0; i < p.n_ops[d]; i++) mx = p.ops[d][i].end > mx ? p.ops[d][i].end : mx;
        op_err e = {0};
        CHECK(op_sim_replay(&p, NULL, &e) == OP_OK);
        CHECK_NEAR(p.pred.makespan_ms, mx, 1e-9);
    }
    op_plan_free(&p);
}

TEST(not_applicable_is_einval_with_reason) {
    op_problem pr = uniform(8, 4, 6);
    op_plan p;
    op_err e = {0};
    CHECK(op_sched_build("dualpipev", &pr, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "DualPipeV needs microbatches >= 2 x devices");
    CHECK(op_sched_build("nosuch", &pr, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "unknown schedule 'nosuch'");
    pr = uniform(4, 4, 8); /* 4 layers: no room for 2 chunks per device */
    CHECK(op_sched_build("i1f1b", &pr, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "at least 2 stages per device");
    pr = uniform(8, 4, 3); /* M < P */
    CHECK(op_sched_build("i1f1b", &pr, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "microbatches >= devices");
    pr = uniform(8, 4, 8);
    int bad[3] = {0, 4, 8};
    op_sched_opts o = {.stage_first = bad, .S = 2};
    CHECK(op_sched_build_opts("1f1b", &pr, &o, &p, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "needs 4");
    op_sched_opts og = {.v = 2, .group = 5}; /* M % G = 3 < P */
    CHECK(op_sched_build_opts("i1f1b", &pr, &og, &p, NULL, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "group size 5");
}

TEST(single_device_and_determinism) {
    op_problem pr = hetero(6, 3, 1, 4);
    const char *const *names = op_sched_names();
    for (int i = 0; names[i]; i++) {
        op_plan p;
        op_err e = {0};
        int rc = op_sched_build(names[i], &pr, &p, &e);
        if (!strcmp(names[i], "i1f1b")) {
            CHECK(rc == OP_EINVAL);
            continue;
        }
        CHECK_MSG(rc == OP_OK, "%s P=1: %s", names[i], e.msg);
        if (rc != OP_OK) continue;
        CHECK(op_plan_validate(&p, &e) == OP_OK);
        /* one device runs everything back to back: no bubble */
        CHECK_NEAR(p.pred.makespan_ms, op_plan_lower_bound(&p), 1e-9);
        op_plan_free(&p);
    }
    /* the same problem twice gives the same plan, op for op */
    pr = hetero(22, 4, 4, 9);
    op_comm_default(&pr.comm, 2);
    for (int i = 0; names[i]; i++) {
        op_plan a, b;
        op_err e = {0};
        if (op_sched_build(names[i], &pr, &a, &e) != OP_OK) {
            CHECK_MSG(0, "%s: %s", names[i], e.msg);
            continue;
        }
        CHECK(op_sched_build(names[i], &pr, &b, &e) == OP_OK);
        CHECK_EQ_INT(a.S, b.S);
        CHECK(!memcmp(a.stage_first, b.stage_first, sizeof(int) * (size_t)(a.S + 1)));
        for (int d = 0; d < 4; d++) {
            CHECK_EQ_INT(a.n_ops[d], b.n_ops[d]);
            for (int k = 0; k < a.n_ops[d] && k < b.n_ops[d]; k++)
                CHECK(a.ops[d][k].stage == b.ops[d][k].stage && a.ops[d][k].mb == b.ops[d][k].mb &&
                      a.ops[d][k].kind == b.ops[d][k].kind);
        }
        op_plan_free(&a);
        op_plan_free(&b);
    }
}

TEST(names_list) {
    const char *const *n = op_sched_names();
    int c = 0;
    while (n[c]) c++;
    CHECK_EQ_INT(c, 10);
    CHECK(!strcmp(n[2], "i1f1b"));
    CHECK(!strcmp(n[7], "vhalf") && !strcmp(n[8], "vmin"));
}

/* The Zero Bubble table's uniform closed forms, 2P unit layers on P devices (a V stage is one
 * layer, a chain stage two): 1F1B 6M+6(P-1), ZB-H1 = ZB-H2 6M+2(P-1) (the chain's start-up
 * delay: no chain order does better), DualPipeV and ZB-V 6M+P-1 (ZB-V's auto-scheduler reaches
 * it for every P with M >= 2P). */
TEST(uniform_closed_forms_p2_to_16) {
    for (int P = 2; P <= 16; P *= 2)
        for (int k = 2; k <= 4; k += 2) {
            int M = k * P;
            op_problem pr = uniform(2 * P, P, M);
            CHECK_NEAR(build_ms("1f1b", &pr, NULL), 6.0 * M + 6 * (P - 1), 1e-9);
            CHECK_NEAR(build_ms("zbh1", &pr, NULL), 6.0 * M + 2 * (P - 1), 1e-9);
            CHECK_NEAR(build_ms("zbh2", &pr, NULL), 6.0 * M + 2 * (P - 1), 1e-9);
            CHECK_NEAR(build_ms("dualpipev", &pr, NULL), 6.0 * M + P - 1, 1e-9);
            CHECK_NEAR(build_ms("zbv", &pr, NULL), 6.0 * M + P - 1, 1e-9);
        }
}

/* ZB-V's auto-scheduler alone (zbv_rounds.c), planned on the true unit costs, is the closed
 * form; and it cannot plan with an in-flight limit below the V's warm-up (one microbatch). */
TEST(zbv_rounds_alone_reaches_closed_form) {
    op_sim_ws *ws = op_sim_ws_new();
    for (int P = 2; P <= 16; P *= 2) {
        int M = 4 * P;
        op_problem pr = uniform(2 * P, P, M);
        sched_split_list l = {0};
        CHECK(sched_megatron_splits(&pr, 2 * P, SCHED_PLACE_V, 0, 0, &l) >= 1);
        op_plan p;
        sched_plan_from_split(&p, "zbv", &pr, &l.v[0], SCHED_PLACE_V, 1);
        const double c[3] = {1, 1, 1};
        int best = -1;
        double ms = 1e30;
        for (int fill = 0; fill < 4; fill++) {
            op_err e = {0};
            if (sched_zbv_rounds(&p, c, 0.5, P, fill & 1, fill >> 1, 16) != OP_OK) continue;
            CHECK_MSG(op_sim_replay(&p, ws, &e) == OP_OK, "%s", e.msg);
            if (p.pred.makespan_ms < ms) ms = p.pred.makespan_ms, best = fill;
        }
        CHECK_MSG(best >= 0 && fabs(ms - (6.0 * M + P - 1)) < 1e-9, "P=%d: %g", P, ms);
        CHECK(sched_zbv_rounds(&p, c, 0.5, 0.5, 0, 0, 16) == OP_EINVAL);
        op_plan_free(&p);
        sched_split_list_free(&l);
    }
    op_sim_ws_free(ws);
}

/* V-Half / V-Min hold at most (P+2)/2 and (P+4)/3 microbatches of a device's activations
 * (1F1B holds P).  V-Half's stable pattern, reordered, has its authors' bubble
 * 3P-1-3m+max(3P, P+1+2((m+1)/2)) with m = P+2 chunks in flight (under B/2 = 3(P-1) for
 * P >= 4); V-Min's stays under 2B/3 + 6 = 4(P-1)+6. */
TEST(vhalf_vmin_memory_and_bubble) {
    for (int P = 2; P <= 16; P *= 2)
        for (int k2 = 2; k2 <= 4; k2 += 2) {
            int M = k2 * P;
            op_problem pr = uniform(2 * P, P, M);
            const char *nm[2] = {"vhalf", "vmin"};
            for (int k = 0; k < 2; k++) {
                op_plan p;
                op_err e = {0};
                CHECK(op_sched_build(nm[k], &pr, &p, &e) == OP_OK);
                double cap = k ? (P + 4) / 3 : (P + 2) / 2;
                for (int d = 0; d < P; d++) /* a device's microbatch: 2 layers x 1000 bytes */
                    CHECK_MSG(p.pred.peak_bytes[d] - p.pred.static_bytes[d] <= cap * 2000,
                              "%s P=%d d=%d peak %lld", nm[k], P, d,
                              (long long)(p.pred.peak_bytes[d] - p.pred.static_bytes[d]));
                int m = P + 2, b = 3 * P - 1 - 3 * m;
                b += 3 * P > P + 1 + 2 * ((m + 1) / 2) ? 3 * P : P + 1 + 2 * ((m + 1) / 2);
                double bound = k ? 6.0 * M + 4 * (P - 1) + 6 : 6.0 * M + (P >= 4 ? b : 3 * (P - 1));
                CHECK_MSG(p.pred.makespan_ms <= bound + 1e-9, "%s P=%d M=%d: %g > %g", nm[k], P, M,
                          p.pred.makespan_ms, bound);
                op_plan_free(&p);
            }
        }
}

/* The patterns alone on unit costs: V-Half's makespan is its authors' closed form exactly, and
 * both orders replay on skewed costs too (the order is valid whatever the costs). */
TEST(vstable_patterns_exact_and_valid) {
    op_sim_ws *ws = op_sim_ws_new();
    for (int P = 4; P <= 16; P *= 2) {
        int M = 2 * P;
        op_problem pr = uniform(2 * P, P, M);
        sched_split_list l = {0};
        CHECK(sched_megatron_splits(&pr, 2 * P, SCHED_PLACE_V, 0, 0, &l) >= 1);
        for (int half = 0; half < 2; half++) {
            op_plan p;
            op_err e = {0};
            sched_plan_from_split(&p, "vstable", &pr, &l.v[0], SCHED_PLACE_V, 1);
            CHECK(sched_order_vstable(&p, half) == OP_OK);
            CHECK_MSG(op_sim_replay(&p, ws, &e) == OP_OK, "%s", e.msg);
            int m = P + 2, b = 3 * P - 1 - 3 * m;
            b += 3 * P > P + 1 + 2 * ((m + 1) / 2) ? 3 * P : P + 1 + 2 * ((m + 1) / 2);
            if (half) CHECK_NEAR(p.pred.makespan_ms, 6.0 * M + b, 1e-9);
            op_plan_free(&p);
        }
        for (int i = 0; i < 2 * P; i++) L[i].f_ms = 1 + (i % 3), L[i].i_ms = 2 - (i % 2) * 0.5;
        for (int half = 0; half < 2; half++) {
            op_plan p;
            op_err e = {0};
            sched_plan_from_split(&p, "vstable", &pr, &l.v[0], SCHED_PLACE_V, 1);
            CHECK(sched_order_vstable(&p, half) == OP_OK);
            CHECK_MSG(op_sim_replay(&p, ws, &e) == OP_OK, "%s", e.msg);
            op_plan_free(&p);
        }
        sched_split_list_free(&l);
    }
    op_problem pr = uniform(2, 1, 4); /* one device: no V */
    op_plan p;
    sched_split sp = {.S = 2, .first = (int[]){0, 1, 2}};
    sched_plan_from_split(&p, "vstable", &pr, &sp, SCHED_PLACE_V, 1);
    CHECK(sched_order_vstable(&p, 1) == OP_EINVAL);
    op_plan_free(&p);
    op_sim_ws_free(ws);
}

/* zbh2 may hold twice H1's memory, so it is never slower than zbh1 (H1's orders are H2's). */
TEST(zbh2_never_slower_than_zbh1) {
    op_problem pr = hetero(13, 6, 4, 8);
    CHECK(build_ms("zbh2", &pr, NULL) <= build_ms("zbh1", &pr, NULL) + 1e-9);
    pr = hetero(26, 3, 8, 16);
    CHECK(build_ms("zbh2", &pr, NULL) <= build_ms("zbh1", &pr, NULL) + 1e-9);
}

/* Thousands of layers stay fast: the balanced split is exact (bottleneck equals the DP's on a
 * small case) and 4000 layers split in well under a second. */
TEST(balanced_split_large) {
    op_problem pr = hetero(4000, 9, 8, 16);
    int first[65];
    op_err e = {0};
    CHECK(op_sched_balanced_split(pr.layers, pr.n_layers, 64, first, &e) == OP_OK);
    double mx = 0;
    for (int s = 0; s < 64; s++) {
        double t = 0;
        for (int l = first[s]; l < first[s + 1]; l++) t += 3 * pr.layers[l].f_ms;
        mx = t > mx ? t : mx;
    }
    /* 4002 layers of 3 ms (head 27, embedding 0.6): the bottleneck is ceil over 64 stages */
    CHECK(mx >= (3.0 * 4000 + 27.6) / 64 - 1e-9 && mx <= (3.0 * 4000 + 27.6) / 64 + 27);
}

/* The peers' own schedulers on our presets (bench/data/peer-vectors.json, --comm none): zbh1
 * and zbv on exactly the peer's partition are never slower than the peer's schedule (its
 * figures are rounded to 0.01 ms), as in bench-baselines. */
TEST(peer_vectors_guard) {
    json_error_t je;
    json_t *root = json_load_file("bench/data/peer-vectors.json", 0, &je);
    CHECK_MSG(root != NULL, "peer vectors: %s", je.text);
    if (!root) return;
    json_t *cases = json_object_get(root, "cases");
    CHECK(json_array_size(cases) >= 10);
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *j = json_array_get(cases, c);
        op_model m;
        op_err e = {0};
        CHECK(op_model_preset(json_string_value(json_object_get(j, "model")), &m, &e) == OP_OK);
        op_train_cfg t;
        op_train_cfg_default(&t);
        op_device dev;
        op_device_preset("h100-80gb", &dev, &e);
        op_layer_cost *lc = calloc((size_t)m.n_layers, sizeof *lc);
        CHECK(op_cost_layers(&m, &t, &dev, lc, &e) == OP_OK);
        op_problem pr = {.model = "peer", .layers = lc, .n_layers = m.n_layers};
        pr.P = (int)json_integer_value(json_object_get(j, "devices"));
        pr.M = (int)json_integer_value(json_object_get(j, "microbatches"));
        pr.comm.none = 1;
        pr.tokens_per_mb = 4096;
        pr.mem_limit_bytes = json_object_get(j, "mem_limit") ? 0 : 0.9 * dev.mem_GiB * 1073741824.0;
        const char *key[2] = {"zbh1_stages", "zbv_stages"}, *ref[2] = {"zb_h1_ms", "zbv_auto_ms"};
        const char *nm[2] = {"zbh1", "zbv"};
        for (int k = 0; k < 2; k++) {
            json_t *st = json_object_get(j, key[k]);
            int S = (int)json_array_size(st), first[64];
            if (S < 1 || S > 63) continue;
            for (int s = 0; s < S; s++) {
                first[s] = (int)json_integer_value(json_array_get(json_array_get(st, (size_t)s), 0));
                first[s + 1] = (int)json_integer_value(json_array_get(json_array_get(st, (size_t)s), 1));
            }
            op_sched_opts o = {.stage_first = first, .S = S};
            double ms = build_ms(nm[k], &pr, &o), r = json_number_value(json_object_get(j, ref[k]));
            CHECK_MSG(ms > 0 && ms <= r + 0.005, "case %zu %s %.2f vs peer %.2f", c,
                      nm[k], ms, r);
        }
        free(lc);
        op_model_free(&m);
    }
    json_decref(root);
}

/* op_sched_move: an op moves past others of other stages, or of its stage with another
 * microbatch and kind; never past one of its stage with its microbatch (F0 before I0) or its
 * kind (F0 before F1); unmove restores the order exactly. */
TEST(order_move_rules_and_undo) {
    op_op o[5] = {{.kind = OP_F, .stage = 0, .mb = 0}, {.kind = OP_F, .stage = 1, .mb = 0},
                  {.kind = OP_F, .stage = 0, .mb = 1}, {.kind = OP_I, .stage = 0, .mb = 0},
                  {.kind = OP_W, .stage = 1, .mb = 0}};
    op_op keep[5];
    memcpy(keep, o, sizeof o);
    CHECK(op_sched_move(o, 5, 1, 0)); /* F(1,0) before F(0,0): other stage */
    CHECK(o[0].stage == 1 && o[1].stage == 0 && o[1].mb == 0);
    op_sched_unmove(o, 1, 0);
    CHECK(memcmp(o, keep, sizeof o) == 0);
    CHECK(!op_sched_move(o, 5, 2, 0)); /* F(0,1) past F(0,0): same stage and kind */
    CHECK(!op_sched_move(o, 5, 3, 0)); /* I(0,0) past F(0,0): same stage and mb */
    CHECK(memcmp(o, keep, sizeof o) == 0);
    CHECK(op_sched_move(o, 5, 3, 2)); /* I(0,0) before F(0,1): same stage, other mb and kind */
    CHECK(o[2].kind == OP_I && o[3].kind == OP_F && o[3].mb == 1);
    op_sched_unmove(o, 3, 2);
    CHECK(memcmp(o, keep, sizeof o) == 0);
    CHECK(op_sched_move(o, 5, 0, 2) == 0); /* past F(0,1) */
    CHECK(!op_sched_move(o, 5, 4, 5) && !op_sched_move(o, 5, -1, 0) && !op_sched_move(o, 5, 2, 2));
    CHECK(!op_sched_move(o, 5, 4, 0)); /* W(1,0) past F(1,0): same stage and mb */
    CHECK(op_sched_move(o, 5, 4, 2) && o[2].kind == OP_W); /* past F(0,1), I(0,0): other stage */
}

/* The public building blocks refuse a plan of the wrong shape (a caller's plausible mistake)
 * with OP_EINVAL and leave it as it was; a plan with a count below 1 is refused empty. */
TEST(building_blocks_refuse_wrong_shapes) {
    for (int l = 0; l < 4; l++) layer(l, 'T', 1, 1, 1);
    op_plan p;
    CHECK_EQ_INT(op_plan_init(&p, "bad", L, 4, 0, 4, 2, NULL), OP_EINVAL);
    CHECK(p.P == 0 && p.ops == NULL);
    op_plan_free(&p);
    CHECK_EQ_INT(op_plan_init(&p, "bad", L, 4, 2, 4, -1, NULL), OP_EINVAL);
    op_plan_free(&p);
    CHECK_EQ_INT(op_plan_init(&p, "s4p2", L, 4, 2, 4, 4, NULL), OP_OK);
    for (int s = 0; s <= 4; s++) p.stage_first[s] = s;
    for (int s = 0; s < 4; s++) p.stage_dev[s] = s % 2;
    CHECK_EQ_INT(op_sched_order_1f1b(&p), OP_EINVAL); /* S = 4 on P = 2 */
    CHECK(p.n_ops[0] == 0 && p.n_ops[1] == 0);
    CHECK_EQ_INT(op_sched_order_interleaved(&p, 3, 2), OP_EINVAL); /* 4 != 3 * 2 */
    CHECK_EQ_INT(op_sched_order_interleaved(&p, 2, 0), OP_EINVAL);
    CHECK_EQ_INT(op_sched_order_interleaved(&p, 0, 1), OP_EINVAL);
    CHECK(p.n_ops[0] == 0 && p.n_ops[1] == 0);
    CHECK_EQ_INT(op_sched_zb_greedy(&p, NULL, 0, 0), OP_EINVAL); /* stage_split all 0 */
    CHECK(p.n_ops[0] == 0 && p.n_ops[1] == 0);
    op_op o = {.kind = OP_F, .stage = 0, .mb = 0};
    CHECK_EQ_INT(op_plan_set_ops(&p, 2, &o, 1), OP_EINVAL);
    CHECK_EQ_INT(op_plan_set_ops(&p, -1, &o, 1), OP_EINVAL);
    CHECK_EQ_INT(op_plan_set_ops(&p, 0, &o, -1), OP_EINVAL);
    CHECK_EQ_INT(op_plan_set_ops(&p, 0, NULL, 1), OP_EINVAL);
    CHECK(p.n_ops[0] == 0);
    /* the right shapes still work */
    CHECK_EQ_INT(op_sched_order_interleaved(&p, 2, 2), OP_OK);
    CHECK(p.n_ops[0] == 16 && p.n_ops[1] == 16);
    for (int s = 0; s < 4; s++) p.stage_split[s] = 1;
    CHECK_EQ_INT(op_sched_zb_greedy(&p, NULL, 0, 0), OP_OK);
    CHECK(p.n_ops[0] == 24 && p.n_ops[1] == 24);
    op_err e;
    CHECK_MSG(op_sim_replay(&p, NULL, &e) == OP_OK, "%s", e.msg);
    op_plan_free(&p);
}

/* Public building blocks given a plan in a state they did not expect: op_sched_polish on a
 * plan never simulated, or whose order was changed after it was (a deadlock), aborted at its
 * assertions (polish.c: "polish wants a simulated plan", "polished order does not simulate");
 * op_sched_order_interleaved with a group size near INT_MAX overflowed (v - 1) * G. */
TEST(building_blocks_take_callers_plans) {
    op_problem pr = uniform(4, 2, 6);
    op_plan p;
    op_err e = {0};
    CHECK_MSG(op_sched_build("zbh1", &pr, &p, &e) == OP_OK, "%s", e.msg);
    double mk = p.pred.makespan_ms;
    p.pred.valid = 0; /* as a caller's plan that was never simulated */
    CHECK(op_sched_polish(&p, 50) >= 0);
    CHECK(p.pred.valid && p.pred.makespan_ms <= mk);
    int n = p.n_ops[0];
    op_op *rev = malloc(sizeof *rev * (size_t)n);
    for (int i = 0; i < n; i++) rev[i] = p.ops[0][n - 1 - i];
    CHECK_EQ_INT(op_plan_set_ops(&p, 0, rev, n), OP_OK); /* W(s0) before its own I: deadlock */
    free(rev);
    CHECK_EQ_INT(op_sched_polish(&p, 50), OP_EINVAL);
    op_plan_free(&p);

    pr = uniform(6, 2, 4);
    CHECK_EQ_INT(op_plan_init(&p, "s6p2", L, 6, 2, 4, 6, NULL), OP_OK);
    for (int s = 0; s <= 6; s++) p.stage_first[s] = s;
    for (int s = 0; s < 6; s++) p.stage_dev[s] = s % 2;
    CHECK_EQ_INT(op_sched_order_interleaved(&p, 3, INT_MAX), OP_OK);
    CHECK(p.n_ops[0] == 24 && p.n_ops[1] == 24);
    /* a group of all microbatches: every F of a device first (warm-up covers them all) */
    for (int i = 0; i < 12; i++) CHECK(p.ops[1][i].kind == OP_F);
    CHECK_MSG(op_sim_replay(&p, NULL, &e) == OP_OK, "%s", e.msg);
    op_plan_free(&p);
    /* i1f1b with a v no layers can fill is refused before v * P is formed (INT_MAX overflowed) */
    op_sched_opts so = {.v = INT_MAX};
    op_sched_info info;
    CHECK_EQ_INT(op_sched_build_opts("i1f1b", &pr, &so, &p, &info, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "6 layers cannot fill them");
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(uniform_p4_m8_1f1b_33_zbh1_27);
    RUN(building_blocks_refuse_wrong_shapes);
    RUN(building_blocks_take_callers_plans);
    RUN(handcrafted_zbh1_matches_paper);
    RUN(bubble_ratio_1f1b_and_gpipe);
    RUN(interleaving_divides_warmup_by_v);
    RUN(i1f1b_picks_fastest_v_within_memory);
    RUN(zbh2_parallelogram);
    RUN(zbv_and_dualpipev_v_shape);
    RUN(every_plan_valid_and_replays);
    RUN(megatron_split_chooser_heavy_head);
    RUN(balanced_beats_1f1b_on_heavy_head);
    RUN(balanced_split_is_optimal);
    RUN(zb_greedy_times_match_simulator);
    RUN(not_applicable_is_einval_with_reason);
    RUN(single_device_and_determinism);
    RUN(names_list);
    RUN(uniform_closed_forms_p2_to_16);
    RUN(zbv_rounds_alone_reaches_closed_form);
    RUN(vhalf_vmin_memory_and_bubble);
    RUN(vstable_patterns_exact_and_valid);
    RUN(zbh2_never_slower_than_zbh1);
    RUN(balanced_split_large);
    RUN(peer_vectors_guard);
    RUN(order_move_rules_and_undo);
    return check_report("sched");
}
