/* test_exec.c: the executor over the thread transport: lowering (golden), deadlock refusal,
 * every plan runs in its planned order, random valid plans never hang, the watchdog. */
#include <pthread.h>

#include "check.h"
#include "exec/exec_internal.h"
#include "octopipe/exec.h"
#include "octopipe/plan_io.h"
#include "test_exec_plans.h"

#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

/* golden: checked by hand (tags (mb<<12)|(stage<<1)|grad; receives posted before F(s0,mb0)) */
static const char *golden_1f1b_p2_m2 =
    "rank 0: 4 compute ops, 12 instructions, 4 buffers, <= 2 receives posted\n"
    "  RECV b2 <- r1 tag 1 for B(s0,mb0) 1000 B\n"
    "  RECV b3 <- r1 tag 4097 for B(s0,mb1) 1000 B\n"
    "  COMP F(s0,mb0) out b0\n"
    "  SEND b0 -> r1 tag 2 for F(s1,mb0) 1000 B\n"
    "  COMP F(s0,mb1) out b1\n"
    "  SEND b1 -> r1 tag 4098 for F(s1,mb1) 1000 B\n"
    "  WAIT b2\n"
    "  COMP B(s0,mb0) in b2\n"
    "  FREE b2\n"
    "  WAIT b3\n"
    "  COMP B(s0,mb1) in b3\n"
    "  FREE b3\n"
    "rank 1: 4 compute ops, 12 instructions, 4 buffers, <= 2 receives posted\n"
    "  RECV b0 <- r0 tag 2 for F(s1,mb0) 1000 B\n"
    "  RECV b2 <- r0 tag 4098 for F(s1,mb1) 1000 B\n"
    "  WAIT b0\n"
    "  COMP F(s1,mb0) in b0\n"
    "  FREE b0\n"
    "  COMP B(s1,mb0) out b1\n"
    "  SEND b1 -> r0 tag 1 for B(s0,mb0) 1000 B\n"
    "  WAIT b2\n"
    "  COMP F(s1,mb1) in b2\n"
    "  FREE b2\n"
    "  COMP B(s1,mb1) out b3\n"
    "  SEND b3 -> r0 tag 4097 for B(s0,mb1) 1000 B\n";

TEST(lower_golden_1f1b) {
    op_plan p;
    xp_1f1b(&p, 2, 2, 1.0, 1000);
    op_lowered l;
    op_err e = {0};
    CHECK(op_exec_lower(&p, NULL, &l, &e) == OP_OK);
    op_buf b = {0};
    op_lowered_print(&l, &b);
    CHECK(b.data && !strcmp(b.data, golden_1f1b_p2_m2));
    if (b.data && strcmp(b.data, golden_1f1b_p2_m2)) fputs(b.data, stderr);
    op_buf_free(&b);
    op_lowered_free(&l);
    op_plan_free(&p);
}

TEST(lower_local_handover_and_window) {
    /* two stages on one device: F(s0) hands over to F(s1) in memory, no messages */
    op_plan p;
    xp_1f1b(&p, 2, 4, 1.0, 64);
    p.stage_dev[1] = 0;
    op_op o[16];
    int n = 0;
    for (int m = 0; m < 4; m++) {
        o[n++] = (op_op){OP_F, 0, m, 0, 0};
        o[n++] = (op_op){OP_F, 1, m, 0, 0};
        o[n++] = (op_op){OP_B, 1, m, 0, 0};
        o[n++] = (op_op){OP_B, 0, m, 0, 0};
    }
    op_plan_set_ops(&p, 0, o, n);
    op_plan_set_ops(&p, 1, o, 0);
    op_lowered l;
    op_err e = {0};
    CHECK(op_exec_lower(&p, NULL, &l, &e) == OP_OK);
    const op_prog *r0 = &l.progs[0];
    int sends = 0, recvs = 0, frees = 0;
    for (int i = 0; i < r0->n; i++) {
        sends += r0->ins[i].code == OP_I_SEND;
        recvs += r0->ins[i].code == OP_I_RECV;
        frees += r0->ins[i].code == OP_I_FREE;
    }
    CHECK_EQ_INT(sends, 0);
    CHECK_EQ_INT(recvs, 0);
    CHECK_EQ_INT(frees, 8); /* each hand-over buffer freed after its consumer */
    CHECK_EQ_INT(l.progs[1].n, 0);
    op_lowered_free(&l);
    op_plan_free(&p);
    /* the largest message a plan file holds (2^53 bytes) times the largest --bytes-scale (1e6)
     * is refused by its size, not cast to an int64 it does not fit */
    xp_1f1b(&p, 2, 2, 0.01, 256);
    for (int k = 0; k < p.n_layers; k++) p.layers[k].out_bytes = (int64_t)1 << 53;
    op_lower_opts big = {0};
    big.bytes_scale = 1e6;
    CHECK(op_exec_lower(&p, &big, &l, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "stage 0 sends 9007199254740992000000 bytes per message");
    op_plan_free(&p);
    /* receive window 1: at most one receive posted at a time, still runs */
    xp_1f1b(&p, 4, 8, 0.01, 256);
    op_lower_opts lo = {0};
    lo.recv_window = 1;
    lo.recv_budget_bytes = 1;
    CHECK(op_exec_lower(&p, &lo, &l, &e) == OP_OK);
    for (int d = 0; d < 4; d++) CHECK(l.progs[d].max_posted <= 1);
    op_lowered_free(&l);
    op_exec_opts eo = {0};
    eo.lower = lo;
    op_compute c = op_compute_emulate();
    op_exec_result r;
    CHECK(op_exec_run_threads(&p, &c, &eo, &r, &e) == OP_OK);
    CHECK(op_exec_check_order(&r, &p, &e) == OP_OK);
    op_exec_result_free(&r);
    op_plan_free(&p);
}

TEST(cyclic_plan_refused_with_cycle) {
    op_plan p;
    xp_1f1b(&p, 2, 2, 1.0, 64);
    /* device 1 runs B(s1,mb1) before F(s1,mb1): waits for itself */
    op_op o[4] = {{OP_F, 1, 0, 0, 0}, {OP_B, 1, 0, 0, 0}, {OP_B, 1, 1, 0, 0}, {OP_F, 1, 1, 0, 0}};
    op_plan_set_ops(&p, 1, o, 4);
    op_lowered l;
    op_err e = {0};
    CHECK(op_exec_lower(&p, NULL, &l, &e) == OP_EDEADLOCK);
    CHECK_STR_CONTAINS(e.msg, "B(s1,mb1)@d1 waits for F(s1,mb1)@d1");
    /* cross-device: device 0 runs B(s0,mb0) before F(s0,mb1), device 1 F(s1,mb1) before B(s1,mb0) */
    op_op a[4] = {{OP_F, 0, 0, 0, 0}, {OP_B, 0, 0, 0, 0}, {OP_F, 0, 1, 0, 0}, {OP_B, 0, 1, 0, 0}};
    op_op b[4] = {{OP_F, 1, 0, 0, 0}, {OP_F, 1, 1, 0, 0}, {OP_B, 1, 0, 0, 0}, {OP_B, 1, 1, 0, 0}};
    op_plan_set_ops(&p, 0, a, 4);
    op_plan_set_ops(&p, 1, b, 4);
    CHECK(op_exec_lower(&p, NULL, &l, &e) == OP_EDEADLOCK);
    CHECK_STR_CONTAINS(e.msg, "@d0 waits for");
    CHECK_STR_CONTAINS(e.msg, "@d1 waits for");
    op_exec_result r;
    op_compute c = op_compute_emulate();
    CHECK(op_exec_run_threads(&p, &c, NULL, &r, &e) == OP_EDEADLOCK);
    op_plan_free(&p);
}

static int run_and_check(op_plan *p, op_err *e) {
    op_compute c = op_compute_emulate();
    op_exec_opts eo = {0};
    eo.watchdog_s = 20;
    op_exec_result r;
    int rc = op_exec_run_threads(p, &c, &eo, &r, e);
    if (rc == OP_OK) rc = op_exec_check_order(&r, p, e);
    if (rc == OP_OK) {
        /* every dependency respected in the measured times */
        for (int d = 0; d < p->P && rc == OP_OK; d++)
            for (int i = 0; i < r.n_recs[d]; i++) {
                const op_exec_rec *x = &r.recs[d][i];
                if (x->kind != OP_F || x->stage == 0) continue;
                int pd = p->stage_dev[x->stage - 1];
                for (int j = 0; j < r.n_recs[pd]; j++) {
                    const op_exec_rec *y = &r.recs[pd][j];
                    if (y->kind == OP_F && y->stage == x->stage - 1 && y->mb == x->mb &&
                        y->end > x->start + 1e-9)
                        rc = op_errf(e, OP_EINVAL, "F(s%d,mb%d) started before its input", x->stage, x->mb);
                }
            }
    }
    op_exec_result_free(&r);
    return rc;
}

TEST(baselines_run_in_plan_order) {
    op_err e = {0};
    for (int P = 2; P <= 8; P *= 2) {
        op_plan p;
        xp_1f1b(&p, P, 2 * P, 0.05, 4096);
        CHECK_MSG(run_and_check(&p, &e) == OP_OK, "1f1b P=%d: %s", P, e.msg);
        op_plan_free(&p);
        const char *names[] = {"gpipe", "1f1b", "i1f1b", "zbh1", "zbh2", "zbv", "dualpipev", "balanced-1f1b"};
        for (int k = 0; k < 8; k++) {
            op_layer_cost L[32];
            xp_layers(L, 32, 0.02, 4096);
            op_problem pr = {0};
            pr.model = "uniform";
            pr.layers = L;
            pr.n_layers = 32;
            pr.P = P;
            pr.M = 2 * P;
            pr.comm.none = 1;
            int rc = op_sched_build(names[k], &pr, &p, &e);
            if (rc) {
                fprintf(stderr, "note: %s P=%d not built: %s\n", names[k], P, e.msg);
                continue;
            }
            CHECK_MSG(run_and_check(&p, &e) == OP_OK, "%s P=%d: %s", names[k], P, e.msg);
            op_plan_free(&p);
        }
        /* the tuner's plan (irregular placements, several stages per device, I/W split) */
        op_layer_cost L[32];
        xp_layers(L, 32, 0.02, 4096);
        for (int l = 0; l < 32; l += 5) L[l].f_ms *= 3; /* heterogeneous, so the tuner has work */
        op_problem pr = {0};
        pr.model = "hetero";
        pr.layers = L;
        pr.n_layers = 32;
        pr.P = P;
        pr.M = 2 * P;
        pr.comm.none = 1;
        op_tune_opts to;
        op_tune_opts_default(&to);
        to.max_evals = 300;
        CHECK(op_tune(&pr, &to, &p, &e) == OP_OK);
        CHECK_MSG(run_and_check(&p, &e) == OP_OK, "tuned P=%d: %s", P, e.msg);
        op_plan_free(&p);
    }
}

TEST(random_plans_never_hang) {
    op_rng rng;
    op_rng_seed(&rng, 7);
    op_err e = {0};
    int ok = 0;
    for (int i = 0; i < 200; i++) {
        int P = 2 + op_rng_int(&rng, 7);
        int S = P + op_rng_int(&rng, 2 * P);
        int M = 1 + op_rng_int(&rng, 6);
        op_plan p;
        xp_random(&p, &rng, P, S, M, 0.01, 1 + op_rng_int(&rng, 5000));
        int rc = run_and_check(&p, &e);
        CHECK_MSG(rc == OP_OK, "random plan %d (P=%d S=%d M=%d): %s", i, P, S, M, e.msg);
        ok += rc == OP_OK;
        op_plan_free(&p);
    }
    CHECK_EQ_INT(ok, 200);
}

/* 1F1B on 3 devices, 3 microbatches, with rank `rank` hung in its compute op `op` (-1: its
 * last); returns op_exec_run_threads' code and *secs its wall time. */
static int hang_run(op_plan *p, int rank, int op, double watchdog_s, double timeout_s,
                    op_exec_result *r, op_err *e, double *secs) {
    xp_1f1b(p, 3, 3, 0.05, 128);
    op_compute c = op_compute_emulate();
    op_exec_opts eo = {0};
    eo.watchdog_s = watchdog_s;
    eo.timeout_s = timeout_s;
    eo.fault.kind = OP_FAULT_HANG;
    eo.fault.rank = rank;
    eo.fault.op_index = op >= 0 ? op : p->n_ops[rank] - 1;
    double t = op_now_s();
    int rc = op_exec_run_threads(p, &c, &eo, r, e);
    *secs = op_now_s() - t;
    return rc;
}

TEST(watchdog_names_the_wait) {
    op_plan p;
    op_exec_result r;
    op_err e = {0};
    double secs;
    CHECK(hang_run(&p, 1, 1, 0.3, 0, &r, &e, &secs) == OP_ETIMEOUT);
    CHECK(secs < 3);
    CHECK_STR_CONTAINS(r.wait_report, "rank 1: stuck in compute F(s1,mb1)");
    CHECK_STR_CONTAINS(r.wait_report, "rank 0: waiting");
    CHECK_STR_CONTAINS(r.wait_report, "rank 2: waiting");
    CHECK_STR_CONTAINS(r.wait_report, "from rank 1");
    CHECK(r.watchdog_rank == 0 || r.watchdog_rank == 2);
    op_exec_result_free(&r);
    op_plan_free(&p);
}

/* The time limit stops a rank stuck where nobody waits on it (rank 0's last op), which the
 * watchdog cannot see, and the error names the stuck rank and the limit. */
TEST(time_limit_stops_an_unwatched_hang) {
    op_plan p;
    op_exec_result r;
    op_err e = {0};
    double secs;
    CHECK(hang_run(&p, 0, -1, 0, 1.5, &r, &e, &secs) == OP_ETIMEOUT);
    CHECK(secs < 4);
    CHECK_STR_CONTAINS(e.msg, "passed its --timeout of 1.5 s: rank 0: stuck in compute");
    CHECK(r.watchdog_rank == -1); /* the limit, not a rank, raised it */
    op_exec_result_free(&r);
    op_plan_free(&p);
}

typedef struct {
    op_xport *x;
    int rc, done;
    void *out[2];
} gather_arg;

static void *gather_main(void *a) {
    gather_arg *g = a;
    int64_t lens[2];
    char mine[16] = "a rank";
    g->rc = g->x->gather(g->x, mine, sizeof mine, g->out, lens); /* mine dies with this frame */
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A rank that leaves a barrier because the job aborts takes its arrival back: rank 1 gave up
 * on a gather (abort raised while it waited) and returned, freeing its buffer; rank 0, arriving
 * last, passed the barrier and copied from it. */
TEST(aborted_gather_is_left_by_all) {
    op_xport xs[2];
    op_xport_threads_new(xs, 2);
    gather_arg g1 = {&xs[1], 0, 0, {NULL, NULL}}, g0 = {&xs[0], 0, 0, {NULL, NULL}};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, gather_main, &g1) == 0);
    op_exec_nap_us(20e3); /* rank 1 waits in the barrier */
    xs[0].raise_abort(&xs[0], 3);
    pthread_join(th, NULL);
    CHECK(g1.rc == -1);
    /* rank 0 in a thread too: had it passed the first barrier it would wait in the second for
     * a rank that left; give it 2 s, and leave it there rather than hang the test */
    CHECK(pthread_create(&th, NULL, gather_main, &g0) == 0);
    for (int i = 0; i < 200 && !__atomic_load_n(&g0.done, __ATOMIC_ACQUIRE); i++) op_exec_nap_us(10e3);
    int done = __atomic_load_n(&g0.done, __ATOMIC_ACQUIRE);
    CHECK(done && g0.rc == -1 && g0.out[0] == NULL);
    if (!done) return;
    pthread_join(th, NULL);
    op_xport_threads_free(xs, 2);
}

/* Real-compute stand-in: spins briefly, stamps its output with (stage, mb) and checks that its
 * input carries the stamp of the op that produced it. */
static int stamp_run(void *ctx, const op_compute_call *c, op_err *err) {
    double end = op_now_s() + 50e-6;
    while (op_now_s() < end) {
    }
    if (c->in) {
        const int32_t *v = c->in;
        int want_stage = c->kind == OP_F ? c->stage - 1 : c->stage + 1;
        if (v[0] != want_stage || v[1] != c->mb)
            return op_errf(err, OP_EINVAL, "%s(s%d,mb%d) got the output of s%d mb%d",
                           op_kind_name(c->kind), c->stage, c->mb, v[0], v[1]);
    }
    if (c->out && c->out_bytes >= 8) {
        int32_t *v = c->out;
        v[0] = c->stage;
        v[1] = c->mb;
    }
    return OP_OK;
}

/* n random plans on P0 .. P0 + Pr - 1 devices run through `run` with the progress thread on:
 * each ends OK with every op in its order (the runs stamp and check their payloads). */
static void random_plans_run(int (*run)(void *, const op_compute_call *, op_err *), uint64_t seed, int n,
                             int P0, int Pr) {
    op_rng rng;
    op_rng_seed(&rng, seed);
    op_compute c = {0};
    c.run = run;
    c.progress_thread = 1;
    op_err e = {0};
    for (int i = 0; i < n; i++) {
        op_plan p;
        xp_random(&p, &rng, P0 + (Pr > 1 ? op_rng_int(&rng, Pr) : 0), 4 + op_rng_int(&rng, 8), 4, 0.01, 64);
        op_exec_result r;
        int rc = op_exec_run_threads(&p, &c, NULL, &r, &e);
        CHECK_MSG(rc == OP_OK, "plan %d: %s", i, e.msg);
        if (rc == OP_OK) CHECK(op_exec_check_order(&r, &p, &e) == OP_OK);
        op_exec_result_free(&r);
        op_plan_free(&p);
    }
}

TEST(payloads_reach_their_consumer) { random_plans_run(stamp_run, 11, 20, 4, 1); }

/* A compute that waits inside its ops the way a slowed rank (pipe_slow.c) and emulation do:
 * in op_exec_sleep_until, which reads the rank's abort reason and requests in flight while the
 * progress thread (on) changes them; then stamps and checks the payload as stamp_run does. */
static int napping_run(void *ctx, const op_compute_call *c, op_err *err) {
    double end = op_now_s() + 60e-6;
    do
        if (op_exec_sleep_until(c->rt, op_now_s() + 20e-6) != OP_OK)
            return op_errf(err, OP_ETIMEOUT, "stopped while napping");
    while (op_now_s() < end);
    return stamp_run(ctx, c, err);
}

/* The rank's thread reads that state under the rank's lock: a data race before, which
 * `make test SAN=thread T=test_exec` reported here (op_exec_sleep_until, run_list after each op),
 * on a run that otherwise finished.  Here: every plan runs in its order with the payloads
 * right, and a watchdog stop while the others nap ends every rank. */
TEST(progress_thread_beside_napping_ops) {
    random_plans_run(napping_run, 29, 12, 2, 3);
    op_compute c = {0};
    c.run = napping_run;
    c.progress_thread = 1;
    op_err e = {0};
    op_plan p;
    xp_1f1b(&p, 3, 4, 1, 64);
    op_exec_opts o = {0};
    o.quiet = 1;
    o.watchdog_s = 0.3;
    o.fault.kind = OP_FAULT_HANG, o.fault.rank = 1, o.fault.op_index = 2;
    op_exec_result r;
    double t0 = op_now_s();
    CHECK(op_exec_run_threads(&p, &c, &o, &r, &e) == OP_ETIMEOUT);
    CHECK(op_now_s() - t0 < 5);
    op_exec_result_free(&r);
    op_plan_free(&p);
}

/* A plan file may name up to 2^16 devices, all but one idle: each would be a rank (a thread of
 * run --threads, a process under mpirun), 65536 of them.  The executor runs as many ranks as
 * the planner makes devices, and says so for more. */
static int idle_plan(op_plan *p, int P, op_err *e) {
    op_buf b = {0};
    op_buf_printf(&b, "{\"format\": \"octopipe.plan/1\", \"devices\": %d, \"microbatches\": 1, "
                      "\"layers\": [{\"kind\": \"T\", \"F\": 1, \"I\": 1, \"W\": 0, "
                      "\"out_bytes\": 8, \"act_bytes\": 8}], \"stages\": [[0, 1]], "
                      "\"placement\": [[0]", P);
    for (int d = 1; d < P; d++) op_buf_printf(&b, ", []");
    op_buf_printf(&b, "], \"schedule\": [[{\"op\": \"F\", \"stage\": 0, \"mb\": 0}, "
                      "{\"op\": \"B\", \"stage\": 0, \"mb\": 0}]");
    for (int d = 1; d < P; d++) op_buf_printf(&b, ", []");
    op_buf_printf(&b, "]}");
    int rc = op_plan_from_json(b.data, "idle.json", p, e);
    op_buf_free(&b);
    return rc;
}

TEST(lower_refuses_more_ranks_than_it_runs) {
    op_plan p;
    op_lowered l;
    op_err e = {0};
    CHECK_MSG(idle_plan(&p, OP_EXEC_MAX_RANKS, &e) == OP_OK, "%s", e.msg);
    CHECK(op_exec_lower(&p, NULL, &l, &e) == OP_OK);
    op_lowered_free(&l);
    op_plan_free(&p);
    CHECK_MSG(idle_plan(&p, OP_EXEC_MAX_RANKS + 1, &e) == OP_OK, "%s", e.msg);
    CHECK(op_exec_lower(&p, NULL, &l, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "plan has 4097 devices; the executor runs at most 4096 ranks");
    op_plan_free(&p);
}

TEST(report_numbers_are_exact) {
    /* 1f1b P=2 M=1 with F = B/2 = 1 ms: predicted F0 [0,1] F1 [1,2] B1 [2,4] B0 [4,6] */
    op_plan p;
    xp_1f1b(&p, 2, 1, 1.0, 64);
    p.layers[0].w_ms = p.layers[1].w_ms = 1.0; /* B = I + W = 2 ms */
    double st[2][2] = {{0, 4}, {1, 2}}, en[2][2] = {{1, 6}, {2, 4}};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 2; i++) p.ops[d][i].start = st[d][i], p.ops[d][i].end = en[d][i];
    p.pred.makespan_ms = 6;
    /* measured: everything 10% slower */
    op_exec_rec r0[2] = {{OP_F, 0, 0, 0, 1.1}, {OP_B, 0, 0, 4.4, 6.6}};
    op_exec_rec r1[2] = {{OP_F, 1, 0, 1.1, 2.2}, {OP_B, 1, 0, 2.2, 4.4}};
    op_exec_rec *recs[2] = {r0, r1};
    int n[2] = {2, 2};
    op_exec_result r = {0};
    op_exec_result_build(&r, &p, recs, n);
    CHECK_NEAR(r.makespan_ms, 6.6, 1e-12);
    CHECK_NEAR(r.busy_ms[0], 3.3, 1e-12);
    CHECK_NEAR(r.bubble_ratio, 1 - 6.6 / (2 * 6.6), 1e-12);
    CHECK_NEAR(r.overhead_ms, 0.15, 1e-12); /* (0.1 + 0.2 + 0.1 + 0.2) / 4 */
    CHECK_NEAR(op_exec_pred_bubble(&p, NULL), 0.5, 1e-12);
    op_buf b = {0};
    op_exec_report_json(&r, &p, 1.0, &b);
    CHECK_STR_CONTAINS(b.data, "\"makespan_error_pct\": 10.000");
    CHECK_STR_CONTAINS(b.data, "\"busy_ms\": [3.3000, 3.3000]");
    op_buf_free(&b);
    /* the plan's name is the file's, any string: run --json stays JSON */
    snprintf(p.name, sizeof p.name, "a\"b\\c\nd");
    op_exec_report_json(&r, &p, 1.0, &b);
    CHECK_STR_CONTAINS(b.data, "{\"plan\": \"a\\\"b\\\\c\\u000ad\", \"devices\": 2");
    op_buf_free(&b);
    op_exec_chrome_trace(&r, &p, &b);
    CHECK_STR_CONTAINS(b.data, "\"name\": \"predicted\"");
    CHECK_STR_CONTAINS(b.data, "\"ts\": 4400.000, \"dur\": 2200.000");
    op_buf_free(&b);
    /* ops whose times are not whole nanoseconds still touch: dur runs between the rounded
     * ends (rounded apart, F1 [28.0526, 56.1054] us ended at 28.053 + 28.053 = 56.106, after
     * B1 began at 56.105) */
    p.ops[1][0].start = 0.0280526, p.ops[1][0].end = p.ops[1][1].start = 0.0561054;
    op_exec_chrome_trace(&r, &p, &b);
    CHECK_STR_CONTAINS(b.data, "\"ts\": 28.053, \"dur\": 28.052, \"args\": {\"stage\": 1");
    CHECK_STR_CONTAINS(b.data, "\"ts\": 56.105, \"dur\": 3943.895, \"args\": {\"stage\": 1");
    op_buf_free(&b);
    CHECK(op_exec_check_order(&r, &p, NULL) == OP_OK);
    r.recs[1][0].kind = OP_B; /* a wrong order is named */
    op_err e = {0};
    CHECK(op_exec_check_order(&r, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "rank 1 op 0: executed B(s1,mb0), plan says F(s1,mb0)");
    op_exec_result_free(&r);
    op_plan_free(&p);
}

TEST(tags_stay_below_2_28) {
    CHECK(op_exec_tag(OP_EXEC_MAX_STAGES - 1, OP_EXEC_MAX_MB - 1, 1) < (1 << 28));
    CHECK(op_exec_tag(3, 5, 0) != op_exec_tag(3, 5, 1));
    CHECK(op_exec_tag(3, 5, 0) != op_exec_tag(5, 3, 0));
}

/* Offload on the emulated copy engine, one device, f = i = w = F ms, act = 20 MB at 1 GB/s:
 * each transfer lasts c = 20 ms.
 *  - 1F1B order F0 B0 F1 B1: a reload can only follow its offload, so each B waits 2c:
 *    makespan = 2 f + 2 b + 4 c (b = i + w), hand-computed;
 *  - GPipe order F0 F1 B0 B1 with c = 2 ms: the copies hide behind compute (2c <= f):
 *    makespan = 2 f + 2 b, as keep;
 *  - the first case with a host budget below one stash: nothing moves, as keep. */
TEST(offload_copy_engine_times) {
    const double F = 10;
    for (int k = 0; k < 3; k++) {
        op_plan p;
        xp_1f1b(&p, 1, 2, F, 64);
        p.layers[0].act_bytes = k != 1 ? 20000000 : 2000000;
        if (k == 1) {
            op_op o[4] = {{OP_F, 0, 0, 0, 0}, {OP_F, 0, 1, 0, 0}, {OP_B, 0, 0, 0, 0}, {OP_B, 0, 1, 0, 0}};
            op_plan_set_ops(&p, 0, o, 4);
        }
        p.stage_act[0] = OP_ACT_OFFLOAD;
        /* the best of up to 3 runs: a busy machine only delays wake-ups (never speeds them) */
        double cms = k == 0 ? 20 : k == 1 ? 2 : 0, want = 2 * F + 2 * 2 * F + (k == 0 ? 4 * cms : 0);
        double best = 1e30, best_busy = 0;
        int xfers = -1;
        for (int att = 0; att < 3 && !(best <= want * 1.2 + 3); att++) {
            op_exec_copy_stats cs[1];
            op_exec_opts eo = {0};
            eo.host_bw_GBps = 1;
            eo.host_mem_bytes = k == 2 ? 19999999 : 0;
            eo.copy_stats = cs;
            op_compute c = op_compute_emulate_opts(&eo);
            op_exec_result r;
            op_err e = {0};
            CHECK(op_exec_run_threads(&p, &c, &eo, &r, &e) == OP_OK);
            if (r.makespan_ms < best) best = r.makespan_ms, best_busy = cs[0].busy_ms;
            xfers = cs[0].n_xfers;
            op_exec_result_free(&r);
        }
        const char *what[3] = {"1f1b (exposed)", "gpipe (hidden)", "1f1b, host budget < stash"};
        printf("  offload %s: makespan %.2f ms, hand-computed %.2f; copy engine %d transfers, %.2f ms\n",
               what[k], best, want, xfers, best_busy);
        CHECK_MSG(best >= want - 0.5 && best <= want * 1.2 + 3, "makespan %.2f vs %.2f", best, want);
        CHECK_EQ_INT(xfers, k == 2 ? 0 : 4);
        /* each transfer at least its modelled time; a loaded box wakes the engine late, up to a
         * few ms per transfer (2 ms copies measured 5 ms each at load 12) */
        CHECK_MSG(best_busy >= 4 * cms - 0.1 && best_busy <= 4 * (cms * 1.5 + 4), "copy engine busy %.2f ms for 4 x %.0f",
                  best_busy, cms);
        op_plan_free(&p);
    }
}

/* Full recomputation in emulation: I|B re-runs the stage's forward first.  One device,
 * F = I = W = 10 ms, b = I + W, 1F1B F0 B0 F1 B1: makespan 2 (f + f + b) = 80 ms against keep's 60. */
TEST(full_recompute_emulated_time) {
    op_plan p;
    xp_1f1b(&p, 1, 2, 10, 64);
    p.stage_act[0] = OP_ACT_FULL;
    double best = 1e30;
    for (int att = 0; att < 3 && !(best <= 80 * 1.2 + 3); att++) {
        op_compute c = op_compute_emulate();
        op_exec_result r;
        op_err e = {0};
        CHECK(op_exec_run_threads(&p, &c, NULL, &r, &e) == OP_OK);
        if (r.makespan_ms < best) best = r.makespan_ms;
        op_exec_result_free(&r);
    }
    printf("  full recompute: makespan %.2f ms, hand-computed 80.00\n", best);
    CHECK_MSG(best >= 79.5 && best <= 80 * 1.2 + 3, "makespan %.2f", best);
    op_plan_free(&p);
}

/* Mixed cluster, 2 ranks, device 1 two times slower (op_exec_slow_plan): F = I = W = f on
 * device 0, 2f on device 1, fused B = I + W, 1F1B with M = 2, no link cost (times in f):
 *   d0: F0 [0,1]  F1 [1,2]                   B0 [7,9]          B1 [13,15]
 *   d1:           F0 [1,3] B0 [3,7] F1 [7,9] B1 [9,13]
 * makespan 15 f (uniform: 9 f); f = 50 ms: 750 ms.  The simulator says the same, and a run over
 * the thread transport measures it within 2% (each rank sleeps its own type's durations; ops
 * of 50-200 ms keep a busy machine's late wake-ups small against them). */
TEST(mixed_two_speeds_emulated) {
    op_plan p;
    xp_1f1b(&p, 2, 2, 50, 64);
    double k[2] = {1, 2};
    op_exec_slow_plan(&p, k);
    CHECK(op_plan_is_mixed(&p));
    CHECK_EQ_INT(p.n_types, 2);
    CHECK(!strcmp(p.type_name[1], "x2"));
    CHECK_NEAR(op_stage_ms(&p, 0, OP_B), 100, 1e-12);
    CHECK_NEAR(op_stage_ms(&p, 1, OP_B), 200, 1e-12);
    op_err e = {0};
    CHECK(op_sim_replay(&p, NULL, &e) == OP_OK);
    CHECK_NEAR(p.pred.makespan_ms, 750, 1e-9);
    /* the emulated plan keeps the types: every row scaled */
    op_plan emu;
    op_exec_emulated_plan(&emu, &p, 0.5, 1, NULL, 0);
    CHECK_NEAR(op_stage_ms(&emu, 1, OP_F), 50, 1e-12);
    CHECK_NEAR(op_stage_ms(&emu, 0, OP_F), 25, 1e-12);
    op_plan_free(&emu);
    double best = 1e30, busy0 = 0, busy1 = 0;
    for (int att = 0; att < 5 && !(fabs(best - 750) <= 15); att++) { /* best of up to 5: load only delays */
        op_compute c = op_compute_emulate();
        op_exec_result r;
        CHECK(op_exec_run_threads(&p, &c, NULL, &r, &e) == OP_OK);
        CHECK(op_exec_check_order(&r, &p, &e) == OP_OK);
        if (fabs(r.makespan_ms - 750) < fabs(best - 750))
            best = r.makespan_ms, busy0 = r.busy_ms[0], busy1 = r.busy_ms[1];
        op_exec_result_free(&r);
    }
    printf("  mixed 2 ranks (x1, x2): makespan %.2f ms, hand-computed 750.00 (%+.2f%%); busy %.1f / %.1f ms\n",
           best, 100 * (best - 750) / 750, busy0, busy1);
    CHECK_MSG(fabs(best - 750) <= 0.02 * 750, "makespan %.2f vs 750", best);
    CHECK_MSG(fabs(busy1 - 2 * busy0) <= 0.04 * busy1, "busy %.2f vs 2 x %.2f", busy1, busy0);
    /* a named type keeps its name at x1 and gains the factor otherwise */
    op_plan q;
    xp_1f1b(&q, 2, 2, 1, 64);
    snprintf(q.type_name[0], sizeof q.type_name[0], "h100-80gb");
    double k2[2] = {1, 1.5};
    op_exec_slow_plan(&q, k2);
    CHECK(!strcmp(q.type_name[0], "h100-80gb"));
    CHECK(!strcmp(q.type_name[1], "h100-80gb x1.5"));
    CHECK_EQ_INT(q.dev_type[1], 1);
    op_plan_free(&q);
    op_plan_free(&p);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(lower_golden_1f1b);
    RUN(lower_local_handover_and_window);
    RUN(cyclic_plan_refused_with_cycle);
    RUN(lower_refuses_more_ranks_than_it_runs);
    RUN(baselines_run_in_plan_order);
    RUN(random_plans_never_hang);
    RUN(watchdog_names_the_wait);
    RUN(time_limit_stops_an_unwatched_hang);
    RUN(aborted_gather_is_left_by_all);
    RUN(payloads_reach_their_consumer);
    RUN(progress_thread_beside_napping_ops);
    RUN(report_numbers_are_exact);
    RUN(tags_stay_below_2_28);
    RUN(offload_copy_engine_times);
    RUN(full_recompute_emulated_time);
    RUN(mixed_two_speeds_emulated);
    return check_report("exec");
}
