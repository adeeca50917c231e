/* test_tune_mixed.c: the tuner and the baselines on mixed clusters, against makespans worked
 * out by hand.
 *
 * Two devices, one twice as fast as the other, three equal layers (fast: F 1, B 1 ms; slow:
 * F 2, B 2 ms), M = 4, free links.  In a chain the only balanced partition gives the slow
 * device one layer and the fast one two (both stages F 2 + B 2 ms); 1F1B then takes
 * (M + P - 1)(F + B) = 5 x 4 = 20 ms, which is optimal for a chain: the second device starts
 * no earlier than 2 ms (one stage's F), works 16 ms, and the first device's last B (2 ms)
 * follows.  The other partition leaves 2 layers (8 ms a microbatch, 32 ms in all) on the
 * slow device.  With any placement the fast device holding layers 0 and 2 around the slow one
 * reaches 18 (the slow device works 16 ms from t = 1 to 17, the last B of layer 0 follows),
 * which is optimal: no layout gives the slow device less than 16 ms, and each start/end adds
 * at least a layer's 1 ms.
 *
 * A link to avoid: four equal devices in two nodes of two, four layers (F 1, B 2 ms), the
 * boundary after layer 1 carrying 1 GB over an inter-node link of 1 GB/s (1000 ms), every
 * other boundary nothing.  Device order 0 1 | 2 3 puts that boundary across the nodes (each
 * microbatch pays 2 x 1000 ms); placing the pipeline so that layers 1 and 2 share a node
 * costs nothing, and 1F1B on four equal stages takes (M + P - 1)(F + B) = 11 x 3 = 33 ms. */
#include "check.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"
#include "tune/tune_int.h"
#include "tune/tune_mixed_heavy.h"

static void layer(op_layer_cost *l, int i, double f, double b, int64_t out) {
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "l%d", i);
    l->sym = 'T';
    l->f_ms = f;
    l->i_ms = b;
    l->out_bytes = out;
}

/* Two device types over n equal layers: type 0 F=B=fast, type 1 F=B=slow. */
typedef struct two_speed {
    op_layer_cost rows[2 * 16];
    int dev_type[8];
    op_problem pr;
} two_speed;

static void two_speed_init(two_speed *x, int n, int P, const int *types, int M) {
    memset(x, 0, sizeof *x);
    for (int l = 0; l < n; l++) {
        layer(&x->rows[l], l, 1, 1, 1 << 20);
        layer(&x->rows[n + l], l, 2, 2, 1 << 20);
    }
    for (int d = 0; d < P; d++) x->dev_type[d] = types[d];
    x->pr.model = "two-speed";
    x->pr.layers = x->rows;
    x->pr.n_layers = n;
    x->pr.P = P;
    x->pr.M = M;
    x->pr.tokens_per_mb = 1;
    x->pr.comm.none = 1;
    x->pr.n_types = 2;
    x->pr.type_layers = x->rows;
    x->pr.dev_type = x->dev_type;
}

/* x: fast device 0 and slow device 1 (3x), M = 4, one layer per letter of kinds: 'h' heavy
 * (F = I = 2 ms on device 0, static 10 bytes), else light (1 ms, 1 byte); each device's limit
 * lim[d] (the caller's; pr.mem_limit_bytes 15). */
static void heavy_light_init(two_speed *x, const char *kinds, double *lim) {
    int n = (int)strlen(kinds);
    two_speed_init(x, n, 2, (const int[]){0, 1}, 4);
    for (int t = 0; t < 2; t++)
        for (int l = 0; l < n; l++) {
            op_layer_cost *c = &x->rows[t * n + l];
            int hv = kinds[l] == 'h';
            c->f_ms = c->i_ms = (t ? 3 : 1) * (hv ? 2 : 1);
            c->static_bytes = c->param_bytes = hv ? 10 : 1;
        }
    x->pr.dev_mem_limit = lim;
    x->pr.mem_limit_bytes = 15;
}

/* Layers held by devices of type t in plan p. */
static int layers_on_type(const op_plan *p, int t) {
    int n = 0;
    for (int s = 0; s < p->S; s++)
        if (p->dev_type[p->stage_dev[s]] == t) n += p->stage_first[s + 1] - p->stage_first[s];
    return n;
}

TEST(speed_split_gives_the_fast_device_more_layers) {
    two_speed x;
    int types[2] = {1, 0}; /* device 0 slow, device 1 fast */
    two_speed_init(&x, 6, 2, types, 4);
    int dev[2] = {0, 1}, first[3];
    op_err e = {0};
    CHECK_EQ_INT(op_sched_speed_split(&x.pr, 2, dev, first, &e), OP_OK);
    /* slow: 2 layers x 4 ms = 8; fast: 4 layers x 2 ms = 8 */
    CHECK_EQ_INT(first[0], 0);
    CHECK_EQ_INT(first[1], 2);
    CHECK_EQ_INT(first[2], 6);
    CHECK_EQ_INT(op_sched_speed_split(&x.pr, 7, (int[7]){0}, first, &e), OP_EINVAL);
    /* a stage on a device outside 0..P-1 is refused (it aborted on an assertion) */
    CHECK_EQ_INT(op_sched_speed_split(&x.pr, 2, (int[2]){0, 2}, first, &e), OP_EINVAL);
    CHECK(strstr(e.msg, "stage 1 is placed on device 2") != NULL);
    CHECK_EQ_INT(op_sched_speed_split(&x.pr, 2, (int[2]){-1, 1}, first, &e), OP_EINVAL);
}

TEST(baseline_1f1b_takes_the_speed_proportional_split) {
    /* fast, slow, fast, slow over 12 layers: Megatron's splits keep the middle ranks even (at
     * best 3 layers = 12 ms on slow device 1); the speed-proportional split 4/2/4/2 gives
     * every stage 8 ms, and 1F1B takes (M + P - 1) x 8 = 11 x 8 = 88 ms */
    two_speed x;
    int types[4] = {0, 1, 0, 1};
    two_speed_init(&x, 12, 4, types, 8);
    op_plan p;
    op_sched_info info;
    op_err e = {0};
    CHECK_EQ_INT(op_sched_build_opts("1f1b", &x.pr, NULL, &p, &info, &e), OP_OK);
    CHECK_STR_CONTAINS(info.settings, "speed-proportional");
    CHECK_NEAR(p.pred.makespan_ms, 88.0, 1e-9);
    CHECK_EQ_INT(layers_on_type(&p, 0), 8);
    op_plan_free(&p);
    /* the same cluster, uniform: the speed split is not offered */
    x.pr.n_types = 1;
    CHECK_EQ_INT(op_sched_build_opts("1f1b", &x.pr, NULL, &p, &info, &e), OP_OK);
    CHECK(!strstr(info.settings, "speed-proportional"));
    op_plan_free(&p);
}

TEST(tuner_balances_by_device_speed_in_a_chain) {
    two_speed x;
    int types[2] = {1, 0};
    two_speed_init(&x, 3, 2, types, 4);
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.placement = OP_TUNE_PLACE_LOOP; /* 3 layers on 2 devices: the chain 0 -> 1 only */
    o.no_baselines = 1;               /* the search alone must find it */
    op_plan p;
    op_err e = {0};
    CHECK_EQ_INT(op_tune(&x.pr, &o, &p, &e), OP_OK);
    CHECK_EQ_INT(p.S, 2);
    CHECK_EQ_INT(p.stage_first[1], 1); /* slow device 0: one layer */
    CHECK_EQ_INT(layers_on_type(&p, 0), 2);
    CHECK_NEAR(p.pred.makespan_ms, 20.0, 1e-9);
    op_plan_free(&p);
}

TEST(tuner_any_placement_reaches_the_hand_optimum) {
    two_speed x;
    int types[2] = {1, 0};
    two_speed_init(&x, 3, 2, types, 4);
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.no_baselines = 1;
    op_plan p;
    op_err e = {0};
    CHECK_EQ_INT(op_tune(&x.pr, &o, &p, &e), OP_OK);
    CHECK_EQ_INT(layers_on_type(&p, 0), 2);
    CHECK_NEAR(p.pred.makespan_ms, 18.0, 1e-9);
    op_plan_free(&p);
}

TEST(each_device_keeps_to_its_own_memory_limit) {
    /* equal speeds, 4 layers of 10 static bytes; device 0 holds 15 bytes (one layer), device
     * 1 has room for all: every fitting plan leaves device 0 at most one layer */
    two_speed x;
    int types[2] = {0, 0};
    two_speed_init(&x, 4, 2, types, 4);
    for (int l = 0; l < 8; l++) x.rows[l].param_bytes = 10, x.rows[l].static_bytes = 10;
    x.pr.n_types = 1;
    double lim[2] = {15, 1000};
    x.pr.dev_mem_limit = lim;
    x.pr.mem_limit_bytes = 1000;
    op_tune_opts o;
    op_tune_opts_default(&o);
    op_plan p;
    op_err e = {0};
    CHECK_EQ_INT(op_tune(&x.pr, &o, &p, &e), OP_OK);
    int on0 = 0;
    for (int s = 0; s < p.S; s++)
        if (p.stage_dev[s] == 0) on0 += p.stage_first[s + 1] - p.stage_first[s];
    CHECK_MSG(on0 <= 1, "device 0 holds %d layers over its 15-byte limit", on0);
    CHECK(p.pred.peak_bytes[0] <= 15);
    /* device 1 does 3 layers x 2 ms x 4 microbatches at least */
    CHECK(p.pred.makespan_ms >= 24.0 - 1e-9);
    op_plan_free(&p);
    /* no device has room for the model over two: a clear error, not a plan */
    lim[1] = 15;
    CHECK_EQ_INT(op_tune(&x.pr, &o, &p, &e), OP_ENOMEM);
}

TEST(tuner_keeps_the_big_boundary_off_the_slow_link) {
    op_layer_cost l[4];
    for (int i = 0; i < 4; i++) layer(&l[i], i, 1, 2, i == 1 ? 1000000000 : 0);
    op_problem pr = {0};
    pr.model = "link";
    pr.layers = l;
    pr.n_layers = 4;
    pr.P = 4;
    pr.M = 8;
    pr.tokens_per_mb = 1;
    op_comm_default(&pr.comm, 2);
    pr.comm.intra_lat_ms = pr.comm.inter_lat_ms = 0;
    pr.comm.intra_bw_GBps = 1e9; /* 1 GB in 1e-6 ms */
    pr.comm.inter_bw_GBps = 1;   /* 1 GB in 1000 ms */
    op_plan b;
    op_err e = {0};
    CHECK_EQ_INT(op_sched_build("1f1b", &pr, &b, &e), OP_OK);
    CHECK(b.pred.makespan_ms > 2000); /* the chain 0 1 | 2 3 crosses with the 1 GB boundary */
    op_plan_free(&b);
    op_tune_opts o;
    op_tune_opts_default(&o);
    op_plan p;
    CHECK_EQ_INT(op_tune(&pr, &o, &p, &e), OP_OK);
    for (int s = 0; s + 1 < p.S; s++)
        if (op_stage_out_bytes(&p, s) > 0)
            CHECK_MSG(p.stage_dev[s] / 2 == p.stage_dev[s + 1] / 2,
                      "1 GB boundary after stage %d crosses nodes (%d -> %d)", s, p.stage_dev[s],
                      p.stage_dev[s + 1]);
    CHECK_MSG(p.pred.makespan_ms <= 33.0 + 1e-3, "%.6f over 1F1B's 33 ms", p.pred.makespan_ms);
    op_plan_free(&p);
}

/* Mixed types with per-stage policies: the engine's makespan and per-device peaks equal the
 * simulator's on the plan built from the engine's own order.  Type 1 is 2.5x slower and each
 * stage's recompute (selective's f_sel, full's F) must run at its own device's speed. */
TEST(engine_times_policies_on_each_type_as_the_simulator) {
    enum { L = 10, P = 3, M = 5 };
    op_layer_cost rows[2 * L];
    int types[P] = {0, 1, 0};
    for (int t = 0; t < 2; t++)
        for (int l = 0; l < L; l++) {
            op_layer_cost *c = &rows[t * L + l];
            double k = t ? 2.5 : 1;
            layer(c, l, k * (1 + 0.25 * (l % 4)), k * (1.5 + 0.1 * (l % 3)), (2 + l % 2) << 20);
            c->w_ms = k * 0.5;
            c->act_bytes = (int64_t)(40 + 8 * (l % 5)) << 20;
            c->act_w_bytes = 10 << 20;
            c->act_i_bytes = 4 << 20;
            c->static_bytes = 100 << 20;
            if (l % 3 == 0) c->f_sel_ms = k * 0.3, c->act_sel_bytes = 25 << 20;
        }
    op_problem pr = {0};
    pr.model = "mixed-pol";
    pr.layers = rows;
    pr.n_layers = L;
    pr.P = P;
    pr.M = M;
    pr.tokens_per_mb = 4096;
    pr.comm.none = 1;
    pr.n_types = 2;
    pr.type_layers = rows;
    pr.dev_type = types;
    tn_prob pb;
    tn_prob_init(&pb, &pr);
    tn_eng *e = tn_eng_new(&pb);
    tn_res r;
    tn_res_alloc(&r, P);
    tn_cand c;
    tn_cand_alloc(&c, &pb);
    op_rng rng;
    op_rng_seed(&rng, 11);
    int n_pol[3] = {0}, slow_rc = 0;
    for (int trial = 0; trial < 40; trial++) {
        int S = P * (1 + op_rng_int(&rng, 2)); /* 3 or 6 stages, irregular placement */
        c.S = S;
        for (int s = 0; s < S; s++) c.dev[s] = op_rng_int(&rng, P);
        tn_partition_balanced(&pb, &c, 0);
        c.split = op_rng_int(&rng, 2);
        for (int s = 0; s < S; s++) {
            c.pol[s] = (uint8_t)op_rng_int(&rng, 3);
            n_pol[c.pol[s]]++;
            slow_rc += c.pol[s] != OP_ACT_KEEP && c.dev[s] == 1;
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
    CHECK(n_pol[0] > 0 && n_pol[1] > 0 && n_pol[2] > 0 && slow_rc > 0);
    tn_cand_free(&c);
    tn_res_free(&r);
    tn_eng_free(e);
    tn_prob_free(&pb);
}

/* tn_mixed_heavy_seeds' offer: checks every seed of the 5-layer case below.  The "policies"
 * seeds (the policy search that asks for them, tn_search.heavy_pol) recompute in full on the
 * fast device 0's stages that start in the first two thirds of the layers (before layer 4 of
 * 5) and keep everywhere else. */
static int seen, alone, with_pol;
static void collect(tn_search *st, void *ctx, tn_cand *c, const char *shape) {
    (void)ctx;
    seen++;
    if (!strcmp(shape, "policies")) {
        CHECK(st->pol0 >= 0 && st->heavy_pol);
        with_pol++;
        for (int s = 0; s < c->S; s++) {
            int want = c->dev[s] == 0 && c->first[s] < 4 ? OP_ACT_FULL : OP_ACT_KEEP;
            CHECK_MSG(c->pol[s] == want, "stage %d [%d, %d) on device %d: policy %d, want %d", s,
                      c->first[s], c->first[s + 1], c->dev[s], c->pol[s], want);
        }
    } else {
        CHECK_STR_CONTAINS(shape, "irregular");
    }
    int on1 = 0, heavy1 = 0, heavy0 = 0;
    for (int s = 0; s < c->S; s++)
        for (int l = c->first[s]; l < c->first[s + 1]; l++) {
            if (c->dev[s] == 1) on1++, heavy1 += l % 2;
            else heavy0 += l % 2;
        }
    CHECK_MSG(heavy1 == 1 && heavy0 == 1, "heavy layers: %d on the slow device, %d on the fast", heavy1, heavy0);
    alone += on1 == 1; /* with room for its weights (97% of the limit) the fast one takes every light layer */
}

/* Layers two of which fill a device: light l0, heavy h1, light l2, heavy h3, light l4 on a fast
 * device 0 and a slow device 1 (3x), each limited to 15 bytes, heavy layers 10 static bytes,
 * light ones 1.  Per microbatch (F + B): light 2 / 6 ms, heavy 4 / 12 ms.  Each device holds one
 * heavy layer.  A contiguous split gives the slow device its heavy layer with at least one
 * light neighbour: >= 18 ms a microbatch, 72 ms for M = 4.  The slow device running h1 alone
 * (12 ms a microbatch, 48 in all) and the fast one l0 and l2-h3-l4 (10 ms) needs three stages
 * and reaches about 48 plus the fill (l0's F and B, 1 ms each, and the fast stage's F and B
 * between the slow device's F and B). */
TEST(tuner_gives_the_slow_device_its_heavy_layer_alone) {
    two_speed x;
    double lim[2] = {15, 15};
    heavy_light_init(&x, "lhlhl", lim);
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.no_baselines = 1;
    /* the seeds themselves: one heavy layer per device, and some with the slow device's alone */
    tn_prob pb;
    tn_prob_init(&pb, &x.pr);
    tn_search st;
    memset(&st, 0, sizeof st);
    st.pb = &pb;
    st.o = &o;
    st.mode = OP_TUNE_PLACE_ANY;
    st.max_evals = 1000;
    st.pol0 = -1; /* a search without policy moves: layouts only, even when asked */
    st.heavy_pol = 1;
    seen = alone = with_pol = 0;
    tn_mixed_heavy_seeds(&st, collect, NULL);
    CHECK(seen > 0 && alone > 0);
    CHECK_EQ_INT(with_pol, 0);
    int layouts = seen;
    st.pol0 = OP_ACT_KEEP; /* a policy search that does not ask: the same */
    st.heavy_pol = 0;
    seen = with_pol = 0;
    tn_mixed_heavy_seeds(&st, collect, NULL);
    CHECK_EQ_INT(seen, layouts);
    CHECK_EQ_INT(with_pol, 0);
    st.heavy_pol = 1; /* asked: the same layouts again, with their policies */
    seen = with_pol = 0;
    tn_mixed_heavy_seeds(&st, collect, NULL);
    CHECK_EQ_INT(with_pol, layouts);
    CHECK_EQ_INT(seen, 2 * layouts);
    /* op_tune runs that search here (a fast and a slow device, each heavy layer alone), not
     * with placement loop, nor where both devices are alike */
    CHECK(tn_mixed_heavy_pol_applies(&x.pr, OP_TUNE_PLACE_ANY));
    CHECK(!tn_mixed_heavy_pol_applies(&x.pr, OP_TUNE_PLACE_LOOP));
    for (int l = 0; l < 5; l++) /* type 1 as fast as type 0 */
        x.rows[5 + l].f_ms = x.rows[5 + l].i_ms = x.rows[l].f_ms;
    CHECK(!tn_mixed_heavy_pol_applies(&x.pr, OP_TUNE_PLACE_ANY));
    for (int l = 0; l < 5; l++) /* slow again (3x) for the tuner below */
        x.rows[5 + l].f_ms = x.rows[5 + l].i_ms = 3 * x.rows[l].f_ms;
    tn_prob_free(&pb);
    op_plan p;
    op_err e = {0};
    CHECK_EQ_INT(op_tune(&x.pr, &o, &p, &e), OP_OK);
    int on_slow = 0, heavy_slow = 0;
    for (int s = 0; s < p.S; s++)
        if (p.stage_dev[s] == 1)
            for (int l = p.stage_first[s]; l < p.stage_first[s + 1]; l++) on_slow++, heavy_slow += l % 2;
    CHECK_MSG(on_slow == 1 && heavy_slow == 1, "slow device holds %d layers, %d heavy", on_slow, heavy_slow);
    CHECK(op_plan_fits(&p));
    CHECK_MSG(p.pred.makespan_ms < 60, "%.3f ms: no better than a contiguous split's 72", p.pred.makespan_ms);
    CHECK(p.pred.makespan_ms >= 48 - 1e-9);
    op_plan_free(&p);
}

/* A search state on pb as the tuner's core starts one (any placement, no policy search,
 * random stream 1, a budget of max_evals simulations); search_close frees what it made. */
static void search_open(tn_search *st, const tn_prob *pb, const op_tune_opts *o, long max_evals) {
    memset(st, 0, sizeof *st);
    st->pb = pb;
    st->o = o;
    st->e = tn_eng_new(pb);
    tn_res_alloc(&st->r, pb->P);
    tn_res_alloc(&st->cr, pb->P);
    st->mode = OP_TUNE_PLACE_ANY;
    st->max_evals = max_evals;
    st->s_ref = pb->L;
    st->best_score = 1e300;
    st->min_peak = INT64_MAX;
    st->pol0 = -1;
    op_rng_seed(&st->rng, 1);
    tn_cand_alloc(&st->best, pb);
}

static void search_close(tn_search *st) {
    tn_cand_free(&st->best);
    tn_res_free(&st->r);
    tn_res_free(&st->cr);
    tn_eng_free(st->e);
}

/* Simulations restart `kick` spends when st's search runs on problem pr instead (st->pb is
 * restored). */
static long kick_sims_on(tn_search *st, const op_problem *pr, void (*kick)(tn_search *)) {
    const tn_prob *was = st->pb;
    tn_prob pu;
    tn_prob_init(&pu, pr);
    st->pb = &pu;
    long sims = st->sims;
    kick(st);
    sims = st->sims - sims;
    st->pb = was;
    tn_prob_free(&pu);
    return sims;
}

/* c: S stages with these first layers (S + 1 of them) and devices, I and W split. */
static void cand_set(tn_cand *c, int S, const int *first, const int *dev) {
    c->S = S;
    memcpy(c->first, first, sizeof(int) * (size_t)(S + 1));
    memcpy(c->dev, dev, sizeof(int) * (size_t)S);
    c->split = 1;
}

/* The restart after the search (tn_mixed_heavy_kick): from a best plan whose slow device runs
 * a heavy layer alone after a fast stage of two light layers, it searches again (simulations
 * are spent) from the slow device also taking the light layer before it, and never returns
 * anything worse than the best it started from.  Layers l0 l1 h2 l3 h4 (heavy: 10 bytes of 15),
 * fast device 0, slow device 1 (3x). */
TEST(kick_restarts_from_the_slow_device_taking_a_light_layer) {
    two_speed x;
    double lim[2] = {15, 15};
    heavy_light_init(&x, "llhlh", lim);
    op_tune_opts o;
    op_tune_opts_default(&o);
    tn_prob pb;
    tn_prob_init(&pb, &x.pr);
    tn_search st;
    search_open(&st, &pb, &o, 300);
    tn_cand c;
    tn_cand_alloc(&c, &pb);
    cand_set(&c, 3, (const int[]){0, 2, 3, 5}, (const int[]){0, 1, 0});
    double start = tn_score(&st, &c); /* becomes st.best */
    CHECK(start < TN_NOFIT);
    long sims = st.sims;
    tn_mixed_heavy_kick(&st);
    CHECK_MSG(st.sims > sims + 1, "the restart ran no search (%ld simulations)", st.sims - sims);
    CHECK(st.best_score <= start);
    x.pr.n_types = 1; /* uniform: nothing to do */
    CHECK_EQ_INT((int)kick_sims_on(&st, &x.pr, tn_mixed_heavy_kick), 0);
    tn_cand_free(&c);
    search_close(&st);
    tn_prob_free(&pb);
}

/* Heavy layers (heavy_light_init's 10 static bytes) that c puts on device d. */
static int heavy_on(const tn_cand *c, const two_speed *x, int d) {
    int n = 0;
    for (int s = 0; s < c->S; s++)
        for (int l = c->first[s]; l < c->first[s + 1]; l++)
            n += c->dev[s] == d && x->rows[l].static_bytes == 10;
    return n;
}

/* The cap restart (tn_mixed_cap_kick): a fast device 0 whose limit (30 bytes) holds two heavy
 * layers (10 bytes each) and a slow device 1 (3x) whose limit (15) holds one.  Layers h0 l1 h2;
 * per microbatch (F + B) on device 0: heavy 4 ms, light 2; on device 1: 12 and 6.  From the
 * best plan h0 on 0, l1 h2 on 1 (18 ms a microbatch on device 1), moving h2 to device 0 (8 ms,
 * device 1 then 6) is the cap move; the result holds both heavy layers on device 0 and is
 * faster, and a local search refines it.  With device 0's limit at 15 it may hold one:
 * nothing is simulated. */
TEST(cap_kick_gives_the_large_device_two_heavy_layers) {
    two_speed x;
    double lim[2] = {30, 15};
    heavy_light_init(&x, "hlh", lim);
    op_tune_opts o;
    op_tune_opts_default(&o);
    for (int big = 1; big >= 0; big--) {
        lim[0] = big ? 30 : 15;
        tn_prob pb;
        tn_prob_init(&pb, &x.pr);
        int cap[2] = {0, 0};
        CHECK_EQ_INT(tn_heavy_caps(&pb, cap), big ? 2 : 1);
        CHECK_EQ_INT(cap[0], big ? 2 : 1);
        CHECK_EQ_INT(cap[1], 1);
        tn_search st;
        search_open(&st, &pb, &o, 300);
        tn_cand c;
        tn_cand_alloc(&c, &pb);
        cand_set(&c, 2, (const int[]){0, 1, 3}, (const int[]){0, 1});
        double start = tn_score(&st, &c); /* becomes st.best */
        CHECK(start < TN_NOFIT);
        long sims = st.sims;
        tn_mixed_cap_kick(&st);
        if (big) {
            int heavy0 = heavy_on(&st.best, &x, 0);
            CHECK_MSG(heavy0 == 2, "device 0 holds %d heavy layers", heavy0);
            CHECK_MSG(st.best_score < 0.8 * start, "%.3f ms from %.3f", st.best_score, start);
            /* one move to score, then a local search from it */
            CHECK_MSG(st.sims > sims + 1, "the restart ran no search (%ld simulations)", st.sims - sims);
        } else {
            CHECK_EQ_INT((int)(st.sims - sims), 0);
            CHECK(st.best_score == start);
        }
        tn_cand_free(&c);
        search_close(&st);
        tn_prob_free(&pb);
    }
}

/* The shift restart (tn_mixed_shift_kick): slow device 0 (2x) and fast devices 1, 2, ten equal
 * layers (F + B a microbatch: 2 ms fast, 4 ms slow), M = 4.  From the chain 1 | 4 | 5 layers
 * (4, 8, 10 ms a microbatch; 52 ms) the least busy device is 0; the shifts give its stage a
 * layer from stage 1 (2 | 3 | 5) or from stage 2, both boundaries moving (2 | 4 | 4: 8, 8, 8 ms,
 * 48 ms), the faster.  A budget of four simulations leaves the search after it one: the result
 * is the shift's 48 ms (a local search from 1 | 5 | 4 reaches 46).  On a uniform cluster
 * nothing runs. */
TEST(shift_kick_moves_a_layer_along_the_chain_to_the_least_busy_device) {
    two_speed x;
    int types[3] = {1, 0, 0};
    two_speed_init(&x, 10, 3, types, 4);
    op_tune_opts o;
    op_tune_opts_default(&o);
    tn_prob pb;
    tn_prob_init(&pb, &x.pr);
    tn_search st;
    search_open(&st, &pb, &o, 4);
    tn_cand c, y;
    tn_cand_alloc(&c, &pb);
    tn_cand_alloc(&y, &pb);
    cand_set(&c, 3, (const int[]){0, 1, 5, 10}, (const int[]){0, 1, 2});
    /* the shift itself: every boundary between the two stages moves by one */
    CHECK(tn_shift_layer(&c, 2, 0, &y, &pb));
    CHECK(y.first[0] == 0 && y.first[1] == 2 && y.first[2] == 6 && y.first[3] == 10);
    CHECK(tn_shift_layer(&c, 1, 2, &y, &pb));
    CHECK(y.first[1] == 1 && y.first[2] == 4 && y.first[3] == 10);
    CHECK(!tn_shift_layer(&c, 0, 1, &y, &pb)); /* stage 0 holds one layer */
    CHECK(!tn_shift_layer(&c, 1, 1, &y, &pb));
    double start = tn_score(&st, &c); /* becomes st.best */
    CHECK(start < TN_NOFIT);
    long sims = st.sims;
    tn_mixed_shift_kick(&st);
    /* the best plan rescored, two shifts, one step of the search */
    CHECK_MSG(st.sims - sims >= 3 && st.sims - sims <= 4, "%ld simulations", st.sims - sims);
    CHECK_MSG(start > 51.9 && st.best_score < 48 + 1e-9, "%.3f ms from %.3f", st.best_score, start);
    int slow = 0;
    for (int s = 0; s < st.best.S; s++)
        if (st.best.dev[s] == 0) slow += st.best.first[s + 1] - st.best.first[s];
    CHECK_MSG(slow == 2, "the slow device holds %d layers", slow);
    x.pr.n_types = 1; /* uniform: nothing to do */
    CHECK_EQ_INT((int)kick_sims_on(&st, &x.pr, tn_mixed_shift_kick), 0);
    tn_cand_free(&c);
    tn_cand_free(&y);
    search_close(&st);
    tn_prob_free(&pb);
}

/* The affinity trial's search (tn_mixed_affinity): fast device 0, slow device 1, four layers of
 * kinds a b a b (F = I = 1 ms each on device 0; on device 1 kind a 2 ms, 2x, kind b 3 ms, 3x),
 * M = 4.  Per microbatch the fast type needs 8 ms, the slow 20, so the balanced share is
 * 8 / (1 + 8 / 20) = 5.71 ms: the slow device takes one layer of kind a (4 ms), the cheaper
 * kind there, and no b (6 ms); from the last layer back that is layer 2, from the first layer
 * 0.  With no budget for the local searches every layout is only scored (six knob settings
 * each, then one rescoring per search): the best has the slow device run one a layer alone.
 * Where both kinds are 2.5x slower (no kind cheaper than the average) and on a uniform
 * cluster nothing runs. */
TEST(affinity_gives_the_slow_device_the_kind_it_is_least_slow_at) {
    two_speed x;
    two_speed_init(&x, 4, 2, (const int[]){0, 1}, 4);
    for (int l = 0; l < 4; l++) {
        x.rows[l].sym = x.rows[4 + l].sym = l % 2 ? 'b' : 'a';
        x.rows[4 + l].f_ms = x.rows[4 + l].i_ms = l % 2 ? 3 : 2;
    }
    op_tune_opts o;
    op_tune_opts_default(&o);
    tn_prob pb;
    tn_prob_init(&pb, &x.pr);
    tn_search st;
    search_open(&st, &pb, &o, 0);
    tn_mixed_affinity(&st);
    CHECK_MSG(st.sims == 6 * 7 + 1, "%ld simulations", st.sims);
    CHECK(st.best_score < TN_NOFIT);
    int on_slow = 0, kind_a = 1;
    for (int s = 0; s < st.best.S; s++)
        for (int l = st.best.first[s]; l < st.best.first[s + 1] && st.best.dev[s] == 1; l++)
            on_slow++, kind_a &= x.rows[l].sym == 'a';
    CHECK_MSG(on_slow == 1 && kind_a, "the slow device holds %d layers (all of kind a: %d)", on_slow,
              kind_a);
    for (int l = 0; l < 4; l++) x.rows[4 + l].f_ms = x.rows[4 + l].i_ms = 2.5;
    CHECK_EQ_INT((int)kick_sims_on(&st, &x.pr, tn_mixed_affinity), 0);
    x.pr.n_types = 1;
    CHECK_EQ_INT((int)kick_sims_on(&st, &x.pr, tn_mixed_affinity), 0);
    search_close(&st);
    tn_prob_free(&pb);
}

/* The roomy trial's search (tn_mixed_affinity_roomy): fast device 0 whose limit (30 bytes)
 * holds two heavy layers (10 bytes each), slow device 1 whose limit (15) holds one; layers
 * h0 l1 l2 l3 h4, F = I = 2 ms heavy and 1 light on device 0, 10 and 1.2 on device 1 (the slow
 * type is slow at heavy layers).  Balanced share per microbatch: 1 / (1/47.2 + 1/14) = 10.8 ms,
 * so device 0 takes both heavy layers (8 ms) and device 1 the light run (7.2 ms): the layouts
 * fit and the search keeps both heavy layers on device 0, faster than any plan that puts one
 * on device 1 (20 ms a microbatch there).  With device 0's limit at 15 both hold one heavy
 * layer, and under --placement loop the trial does not run: nothing is simulated. */
TEST(roomy_gives_the_device_that_holds_two_heavy_layers_both) {
    two_speed x;
    double lim[2] = {30, 15};
    heavy_light_init(&x, "hlllh", lim);
    for (int l = 0; l < 5; l++) {
        op_layer_cost *c = &x.rows[5 + l];
        c->f_ms = c->i_ms = x.rows[l].static_bytes == 10 ? 10 : 1.2;
    }
    op_tune_opts o;
    op_tune_opts_default(&o);
    tn_prob pb;
    tn_prob_init(&pb, &x.pr);
    tn_search st;
    for (int budget = 0; budget <= 300; budget += 300) { /* the layouts alone, then searched */
        search_open(&st, &pb, &o, budget);
        tn_mixed_affinity_roomy(&st);
        CHECK(st.best_score < TN_NOFIT);
        if (!budget) /* six layouts under six knobs, each with one move, and one more */
            CHECK_MSG(st.sims == 6 * 7 + 1, "%ld simulations", st.sims);
        int heavy0 = heavy_on(&st.best, &x, 0);
        CHECK_MSG(heavy0 == 2, "budget %d: device 0 holds %d heavy layers", budget, heavy0);
        CHECK_MSG(st.best_score < 4 * 10.0, "%.3f ms", st.best_score); /* under 4 x 10 ms */
        if (!budget) search_close(&st);
    }
    lim[0] = 15;
    CHECK_EQ_INT((int)kick_sims_on(&st, &x.pr, tn_mixed_affinity_roomy), 0);
    lim[0] = 30;
    st.mode = OP_TUNE_PLACE_LOOP;
    CHECK_EQ_INT((int)kick_sims_on(&st, &x.pr, tn_mixed_affinity_roomy), 0);
    search_close(&st);
    tn_prob_free(&pb);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(speed_split_gives_the_fast_device_more_layers);
    RUN(baseline_1f1b_takes_the_speed_proportional_split);
    RUN(tuner_balances_by_device_speed_in_a_chain);
    RUN(tuner_any_placement_reaches_the_hand_optimum);
    RUN(each_device_keeps_to_its_own_memory_limit);
    RUN(tuner_keeps_the_big_boundary_off_the_slow_link);
    RUN(engine_times_policies_on_each_type_as_the_simulator);
    RUN(tuner_gives_the_slow_device_its_heavy_layer_alone);
    RUN(kick_restarts_from_the_slow_device_taking_a_light_layer);
    RUN(cap_kick_gives_the_large_device_two_heavy_layers);
    RUN(shift_kick_moves_a_layer_along_the_chain_to_the_least_busy_device);
    RUN(affinity_gives_the_slow_device_the_kind_it_is_least_slow_at);
    RUN(roomy_gives_the_device_that_holds_two_heavy_layers_both);
    return check_report("tune_mixed");
}
