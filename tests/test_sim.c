/* test_sim.c: the simulator against analytic results under uniform costs (GPipe, 1F1B),
 * transfers, memory timelines (1F1B vs GPipe, I/W split), deadlock cycles, dynamic mode ==
 * replay of its own output, the idle split, and replay against a naive fixpoint reference. */
#include <math.h>

#include "check.h"
#include <string.h>
#include "octopipe/export.h"
#include "octopipe/sim.h"

/* One layer per stage, S = P stages in sequence, F = I = W = 1 ms, act 100 B (40 kept for W),
 * static 1000 B per stage, 1 MB boundary messages. */
static void uniform_plan(op_plan *p, int P, int M, int split, const op_comm *comm) {
    op_layer_cost *L = op_xcalloc((size_t)P, sizeof *L);
    for (int l = 0; l < P; l++) {
        snprintf(L[l].name, sizeof L[l].name, "layer%d", l);
        L[l].sym = '-';
        L[l].f_ms = L[l].i_ms = L[l].w_ms = 1.0;
        L[l].out_bytes = 1000000;
        L[l].act_bytes = 100;
        L[l].act_w_bytes = 40;
        L[l].static_bytes = 1000;
    }
    op_plan_init(p, "test", L, P, P, M, P, comm);
    free(L);
    p->tokens_per_mb = 4096;
    for (int s = 0; s <= P; s++) p->stage_first[s] = s;
    for (int s = 0; s < P; s++) {
        p->stage_dev[s] = s;
        p->stage_split[s] = (uint8_t)split;
    }
}

static op_op mk(op_kind k, int s, int m) { return (op_op){(uint8_t)k, s, m, 0, 0}; }

/* backward op(s) of (s, m): B, or I then W right after */
static int put_bwd(op_op *o, int n, int split, int s, int m) {
    if (split) {
        o[n++] = mk(OP_I, s, m);
        o[n++] = mk(OP_W, s, m);
    } else {
        o[n++] = mk(OP_B, s, m);
    }
    return n;
}

static void gpipe_orders(op_plan *p, int split) {
    op_op *o = op_xmalloc(sizeof *o * (size_t)p->M * 3);
    for (int d = 0; d < p->P; d++) {
        int n = 0;
        for (int m = 0; m < p->M; m++) o[n++] = mk(OP_F, d, m);
        for (int m = 0; m < p->M; m++) n = put_bwd(o, n, split, d, m);
        op_plan_set_ops(p, d, o, n);
    }
    free(o);
}

static void onef1b_orders(op_plan *p, int split) {
    op_op *o = op_xmalloc(sizeof *o * (size_t)p->M * 3);
    for (int d = 0; d < p->P; d++) {
        int n = 0, w = p->P - 1 - d;
        if (w > p->M) w = p->M;
        for (int m = 0; m < w; m++) o[n++] = mk(OP_F, d, m);
        for (int i = 0; i + w < p->M; i++) {
            o[n++] = mk(OP_F, d, w + i);
            n = put_bwd(o, n, split, d, i);
        }
        for (int m = p->M - w; m < p->M; m++) n = put_bwd(o, n, split, d, m);
        op_plan_set_ops(p, d, o, n);
    }
    free(o);
}

/* Mixed cluster: device 1 is of a type twice as slow.  GPipe, P = 2, M = 4, F = 1, B = 2 on
 * device 0 and F = 2, B = 4 on device 1: device 1's F chain ends at 1 + 4*2 = 9, its four B
 * at 25, device 0's last B (2 ms) at 27.  A copy keeps the types. */
TEST(mixed_types_follow_device) {
    op_plan p;
    uniform_plan(&p, 2, 4, 0, NULL);
    gpipe_orders(&p, 0);
    op_layer_cost rows[4];
    memcpy(rows, p.layers, sizeof(op_layer_cost) * 2);
    memcpy(rows + 2, p.layers, sizeof(op_layer_cost) * 2);
    for (int l = 2; l < 4; l++) rows[l].f_ms = rows[l].i_ms = rows[l].w_ms = 2.0;
    const char names[2][32] = {"fast", "slow"};
    int types[2] = {0, 1};
    op_plan_set_types(&p, 2, names, rows, types, NULL);
    CHECK(op_plan_is_mixed(&p));
    CHECK_NEAR(op_stage_ms(&p, 0, OP_B), 2.0, 1e-12);
    CHECK_NEAR(op_stage_ms(&p, 1, OP_B), 4.0, 1e-12);
    op_err e = {0};
    CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_OK);
    CHECK_NEAR(p.pred.makespan_ms, 27.0, 1e-12);
    CHECK_NEAR(p.pred.busy_ms[0], 12.0, 1e-12);
    CHECK_NEAR(p.pred.busy_ms[1], 24.0, 1e-12);
    op_plan q;
    op_plan_copy(&q, &p);
    CHECK_EQ_INT(q.n_types, 2);
    CHECK(strcmp(q.type_name[1], "slow") == 0);
    CHECK_EQ_INT(op_sim_replay(&q, NULL, &e), OP_OK);
    CHECK_NEAR(q.pred.makespan_ms, 27.0, 1e-12);
    op_plan_free(&q);
    op_plan_free(&p);
}

TEST(gpipe_uniform) {
    for (int P = 1; P <= 8; P *= 2)
        for (int M = 1; M <= 16; M *= 4) {
            op_plan p;
            uniform_plan(&p, P, M, 0, NULL);
            gpipe_orders(&p, 0);
            op_err e = {0};
            CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_OK);
            CHECK_NEAR(p.pred.makespan_ms, 3.0 * (M + P - 1), 1e-12);
            CHECK_NEAR(p.pred.bubble_ratio, (double)(P - 1) / (M + P - 1), 1e-12);
            for (int d = 0; d < P; d++) {
                CHECK_NEAR(p.pred.busy_ms[d], 3.0 * M, 1e-12);
                CHECK_EQ_INT(p.pred.peak_bytes[d], 1000 + 100 * M); /* all M stashed */
                CHECK_EQ_INT(p.pred.static_bytes[d], 1000);
            }
            CHECK_NEAR(p.pred.tokens_per_s, 4096.0 * M / (3.0 * (M + P - 1) / 1000), 1e-12);
            op_plan_free(&p);
        }
}

TEST(onef1b_uniform) {
    const int Ps[] = {2, 4, 8}, Ms[] = {4, 8, 32};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int split = 0; split <= 1; split++) {
                int P = Ps[a], M = Ms[b];
                op_plan p;
                uniform_plan(&p, P, M, split, NULL);
                onef1b_orders(&p, split);
                op_err e = {0};
                CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_OK);
                if (!split) {
                    CHECK_NEAR(p.pred.makespan_ms, 3.0 * (M + P - 1), 1e-12);
                    CHECK_NEAR(p.pred.bubble_ratio, (double)(P - 1) / (M + P - 1), 1e-12);
                } else {
                    /* I right before W: the gradient chain only waits for I, so it is shorter */
                    CHECK(p.pred.makespan_ms < 3.0 * (M + P - 1));
                    CHECK(p.pred.makespan_ms >= 3.0 * M + (P - 1) * 2.0);
                }
                /* min(P-d, M) microbatches in flight on device d */
                for (int d = 0; d < P; d++)
                    CHECK_EQ_INT(p.pred.peak_bytes[d], 1000 + 100 * (P - d < M ? P - d : M));
                CHECK_EQ_INT(p.pred.peak_bytes_max, 1000 + 100 * (P < M ? P : M));
                /* lower bound: plan.c's, at least max(3M*P/P, chain 2P), at most the makespan */
                CHECK(p.pred.lower_bound_ms == op_plan_lower_bound(&p));
                CHECK(p.pred.lower_bound_ms >= fmax(3.0 * M, 2.0 * P));
                CHECK(p.pred.lower_bound_ms <= p.pred.makespan_ms);
                op_plan_free(&p);
            }
    op_plan p;
    uniform_plan(&p, 4, 8, 0, NULL);
    onef1b_orders(&p, 0);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK(p.pred.makespan_ms == 33.0); /* the anchor: P=4, M=8 */
    op_plan_free(&p);
}

TEST(comm_adds_exactly) {
    op_comm c = {0};
    c.intra_lat_ms = 0.5;
    c.intra_bw_GBps = 1.0;
    c.inter_lat_ms = 2.0;
    c.inter_bw_GBps = 0.5;
    c.nodes_of = 2;
    for (int P = 2; P <= 4; P++) {
        op_plan p;
        uniform_plan(&p, P, 1, 0, &c);
        gpipe_orders(&p, 0);
        CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
        /* M = 1: one chain down and back up, each boundary crossed twice */
        double expect = 3.0 * P;
        for (int d = 0; d + 1 < P; d++) expect += 2 * op_comm_ms(&c, d, d + 1, 1000000);
        CHECK(p.pred.makespan_ms == expect);
        CHECK(expect > 3.0 * P + 2 * (P - 1) * 0.5); /* the link costs something */
        /* arrival = producer end + transfer */
        CHECK(p.ops[1][0].start == p.ops[0][0].end + op_comm_ms(&c, 0, 1, 1000000));
        op_plan_free(&p);
    }
    /* the same stages on one device: no transfer */
    op_plan p;
    uniform_plan(&p, 2, 1, 0, &c);
    p.P = 2;
    p.stage_dev[1] = 0;
    op_op o[4] = {mk(OP_F, 0, 0), mk(OP_F, 1, 0), mk(OP_B, 1, 0), mk(OP_B, 0, 0)};
    op_plan_set_ops(&p, 0, o, 4);
    op_plan_set_ops(&p, 1, o, 0);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK(p.pred.makespan_ms == 6.0);
    CHECK_NEAR(p.pred.bubble_ratio, 0.5, 1e-15); /* device 1 holds nothing */
    CHECK_NEAR(p.pred.cooldown_ms[1] + p.pred.warmup_ms[1] + p.pred.residual_ms[1], 6.0, 1e-15);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 2000 + 200);
    CHECK_EQ_INT(p.pred.peak_bytes[1], 0);
    op_plan_free(&p);
}

TEST(gradient_message_is_boundary_size) {
    /* the gradient from stage 1 back to stage 0 crosses the same boundary as the activation
     * going forward: stage 0's out_bytes, not stage 1's */
    op_comm c = {0};
    c.intra_lat_ms = 0.25;
    c.intra_bw_GBps = 1.0;
    op_plan p;
    uniform_plan(&p, 2, 1, 0, &c);
    p.layers[0].out_bytes = 2000000;  /* 2 ms at 1 GB/s */
    p.layers[1].out_bytes = 50000000; /* would be 50 ms */
    gpipe_orders(&p, 0);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    double tr = op_comm_ms(&c, 0, 1, 2000000);
    CHECK_NEAR(tr, 2.25, 1e-12);
    CHECK(p.ops[1][0].start == 1.0 + tr);                /* F(s1) after F(s0) + transfer */
    CHECK(p.ops[0][1].start == p.ops[1][1].end + tr);    /* B(s0) after B(s1) + transfer */
    CHECK(p.pred.makespan_ms == 6.0 + 2 * tr);
    op_plan_free(&p);
}

TEST(iw_split_frees_memory) {
    /* one device, one stage, two microbatches: act 100 = 60 freed by I + 40 kept for W */
    op_plan p;
    uniform_plan(&p, 1, 2, 1, NULL);
    op_op a[6] = {mk(OP_F, 0, 0), mk(OP_I, 0, 0), mk(OP_W, 0, 0),
                  mk(OP_F, 0, 1), mk(OP_I, 0, 1), mk(OP_W, 0, 1)};
    op_plan_set_ops(&p, 0, a, 6);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 100);
    /* W deferred: the 40 bytes stay while the next F allocates */
    op_op b[6] = {mk(OP_F, 0, 0), mk(OP_I, 0, 0), mk(OP_F, 0, 1),
                  mk(OP_I, 0, 1), mk(OP_W, 0, 0), mk(OP_W, 0, 1)};
    op_plan_set_ops(&p, 0, b, 6);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 140);
    CHECK(p.pred.makespan_ms == 6.0);
    /* both F first: 200 */
    op_op c[6] = {mk(OP_F, 0, 0), mk(OP_F, 0, 1), mk(OP_I, 0, 0),
                  mk(OP_W, 0, 0), mk(OP_I, 0, 1), mk(OP_W, 0, 1)};
    op_plan_set_ops(&p, 0, c, 6);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 200);
    op_plan_free(&p);
}

/* The I term: act 100 held from F, a transient act_i 70 during I (or B), and I leaves act_w 150
 * (more than F stored) until W.  One device, one stage, two microbatches, F = I = W = 1 ms,
 * static 1000; each peak is hand-computed from the rule in sim.h. */
static void i_term_plan(op_plan *p, int split) {
    uniform_plan(p, 1, 2, split, NULL);
    p->layers[0].act_w_bytes = 150;
    p->layers[0].act_i_bytes = 70;
}

TEST(i_term_peaks_replay) {
    op_plan p;
    i_term_plan(&p, 1);
    /* F0 I0 W0 F1 I1 W1: 100, then 100 + 70 during I0 -> 1170 */
    op_op a[6] = {mk(OP_F, 0, 0), mk(OP_I, 0, 0), mk(OP_W, 0, 0),
                  mk(OP_F, 0, 1), mk(OP_I, 0, 1), mk(OP_W, 0, 1)};
    op_plan_set_ops(&p, 0, a, 6);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 170);
    CHECK_EQ_INT(op_export_peak_bytes(&p, 0), p.pred.peak_bytes[0]);
    /* F0 I0 F1 I1 W0 W1: F0 100; I0 170, leaves 150; F1 250; I1 250 + 70 = 320, leaves 300
     * (without act_i it would be 1300, without the growth to act_w 1270) */
    op_op b[6] = {mk(OP_F, 0, 0), mk(OP_I, 0, 0), mk(OP_F, 0, 1),
                  mk(OP_I, 0, 1), mk(OP_W, 0, 0), mk(OP_W, 0, 1)};
    op_plan_set_ops(&p, 0, b, 6);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 320);
    CHECK_EQ_INT(op_export_peak_bytes(&p, 0), p.pred.peak_bytes[0]);
    /* F0 F1 I0 W0 I1 W1: 200; I0 270, leaves 250; W0 100; I1 170 */
    op_op c[6] = {mk(OP_F, 0, 0), mk(OP_F, 0, 1), mk(OP_I, 0, 0),
                  mk(OP_W, 0, 0), mk(OP_I, 0, 1), mk(OP_W, 0, 1)};
    op_plan_set_ops(&p, 0, c, 6);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 270);
    CHECK_EQ_INT(op_export_peak_bytes(&p, 0), p.pred.peak_bytes[0]);
    op_plan_free(&p);
    /* fused B: act_w plays no part; F0 F1 B0 B1: 200, B0 200 + 70 = 270, then 100, B1 170 */
    i_term_plan(&p, 0);
    op_op d[4] = {mk(OP_F, 0, 0), mk(OP_F, 0, 1), mk(OP_B, 0, 0), mk(OP_B, 0, 1)};
    op_plan_set_ops(&p, 0, d, 4);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 270);
    CHECK_EQ_INT(op_export_peak_bytes(&p, 0), p.pred.peak_bytes[0]);
    op_plan_free(&p);
}

TEST(i_term_peaks_dynamic) {
    op_plan p;
    i_term_plan(&p, 1);
    op_err e = {0};
    /* built-in rule, no limit: I before F before W gives F0 I0 F1 I1 W0 W1, peak 1320 */
    CHECK_EQ_INT(op_sim_dynamic(&p, NULL, NULL, &e), OP_OK);
    const op_kind want[6] = {OP_F, OP_I, OP_F, OP_I, OP_W, OP_W};
    CHECK_EQ_INT(p.n_ops[0], 6);
    for (int i = 0; i < 6 && i < p.n_ops[0]; i++) CHECK(p.ops[0][i].kind == want[i]);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 320);
    /* limit 1300: after I0 1150 are held and F1 reserves 100 + max(70, 150 - 100) = 170, so
     * it waits for W0; then F0 I0 W0 F1 I1 W1 peaks at 1170 */
    op_sim_policy lim = {0};
    lim.mem_limit_bytes = 1300;
    CHECK_EQ_INT(op_sim_dynamic(&p, &lim, NULL, &e), OP_OK);
    const op_kind want2[6] = {OP_F, OP_I, OP_W, OP_F, OP_I, OP_W};
    for (int i = 0; i < 6 && i < p.n_ops[0]; i++) CHECK(p.ops[0][i].kind == want2[i]);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 170);
    op_plan_free(&p);
    /* fused B under the built-in rule: F0 B0 F1 B1, peak 100 + 70 */
    i_term_plan(&p, 0);
    CHECK_EQ_INT(op_sim_dynamic(&p, NULL, NULL, &e), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes[0], 1000 + 170);
    op_plan_free(&p);
}

TEST(deadlock_names_cycle) {
    op_plan p;
    uniform_plan(&p, 2, 1, 0, NULL);
    op_op d0[2] = {mk(OP_B, 0, 0), mk(OP_F, 0, 0)};
    op_op d1[2] = {mk(OP_F, 1, 0), mk(OP_B, 1, 0)};
    op_plan_set_ops(&p, 0, d0, 2);
    op_plan_set_ops(&p, 1, d1, 2);
    op_err e = {0};
    CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_EDEADLOCK);
    CHECK_STR_CONTAINS(e.msg, "B(s0,mb0)@dev0 waits for B(s1,mb0)@dev1, which waits behind "
                              "F(s1,mb0)@dev1, which waits for F(s0,mb0)@dev0, which waits "
                              "behind B(s0,mb0)@dev0");
    CHECK(op_sim_makespan(&p, NULL) < 0);
    CHECK(!p.pred.valid);
    /* a cycle inside one device: W before its I */
    op_plan q;
    uniform_plan(&q, 1, 1, 1, NULL);
    op_op o[3] = {mk(OP_F, 0, 0), mk(OP_W, 0, 0), mk(OP_I, 0, 0)};
    op_plan_set_ops(&q, 0, o, 3);
    CHECK_EQ_INT(op_sim_replay(&q, NULL, &e), OP_EDEADLOCK);
    CHECK_STR_CONTAINS(e.msg, "W(s0,mb0)@dev0 waits for I(s0,mb0)@dev0, which waits behind "
                              "W(s0,mb0)@dev0");
    op_plan_free(&q);
    /* a 4-device cycle: 1F1B with device 2 running its first B before its warm-up F */
    op_plan r;
    uniform_plan(&r, 4, 4, 0, NULL);
    onef1b_orders(&r, 0);
    op_op *x = r.ops[1];
    op_op t = x[0];
    x[0] = x[3], x[3] = t; /* device 1: B(1,0) first */
    CHECK_EQ_INT(op_sim_replay(&r, NULL, &e), OP_EDEADLOCK);
    CHECK_STR_CONTAINS(e.msg, "B(s1,mb0)@dev1 waits for B(s2,mb0)@dev2");
    CHECK_STR_CONTAINS(e.msg, "F(s1,mb0)@dev1");
    op_plan_free(&r);
    op_plan_free(&p);
}

TEST(invalid_plan_rejected) {
    op_plan p;
    uniform_plan(&p, 2, 2, 0, NULL);
    gpipe_orders(&p, 0);
    p.ops[1][1] = mk(OP_F, 1, 0); /* F(1,0) twice, F(1,1) missing */
    op_err e = {0};
    CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "duplicate op F(s1,mb0)");
    op_plan_free(&p);
}

/* Naive reference: fixpoint of start = max(previous op end, producer end + transfer). */
static double naive_makespan(const op_plan *p) {
    int n = 0;
    for (int d = 0; d < p->P; d++) n += p->n_ops[d];
    double *st = op_xcalloc((size_t)n, sizeof(double)), *en = op_xcalloc((size_t)n, sizeof(double));
    int changed = 1, it = 0;
    while (changed && it++ < n + 2) {
        changed = 0;
        int k = 0;
        for (int d = 0; d < p->P; d++)
            for (int i = 0; i < p->n_ops[d]; i++, k++) {
                const op_op *o = &p->ops[d][i];
                double s0 = i ? en[k - 1] : 0;
                /* find the producer by search (slow on purpose: independent of sim ids) */
                int ps = -1, pk = -1;
                if (o->kind == OP_F && o->stage > 0) ps = o->stage - 1, pk = OP_F;
                else if (o->kind == OP_W) ps = o->stage, pk = OP_I;
                else if ((o->kind == OP_I || o->kind == OP_B) && o->stage + 1 < p->S)
                    ps = o->stage + 1, pk = p->stage_split[o->stage + 1] ? OP_I : OP_B;
                else if (o->kind != OP_F) ps = o->stage, pk = OP_F;
                if (ps >= 0) {
                    int kk = 0;
                    for (int e = 0; e < p->P; e++)
                        for (int j = 0; j < p->n_ops[e]; j++, kk++) {
                            const op_op *q = &p->ops[e][j];
                            if (q->stage == ps && q->mb == o->mb && q->kind == pk) {
                                int64_t bytes = op_stage_out_bytes(p, o->kind == OP_F ? ps : o->stage);
                                double tr = e == d ? 0 : op_comm_ms(&p->comm, e, d, bytes);
                                if (en[kk] + tr > s0) s0 = en[kk] + tr;
                            }
                        }
                }
                double e1 = s0 + op_stage_ms(p, o->stage, (op_kind)o->kind);
                if (s0 != st[k] || e1 != en[k]) changed = 1;
                st[k] = s0;
                en[k] = e1;
            }
    }
    double T = 0;
    for (int k = 0; k < n; k++) T = fmax(T, en[k]);
    free(st);
    free(en);
    return T;
}

static double rnd_prio(void *ctx, int d, op_kind kind, int stage, int mb, double now) {
    op_rng *r = ctx;
    return op_rng_uniform(r);
}

/* Random heterogeneous plans: random costs, stage counts, placements and orders (from list
 * scheduling with random priorities). */
static void random_plan(op_plan *p, op_rng *r, op_sim_ws *ws) {
    int P = 1 + op_rng_int(r, 4), M = 1 + op_rng_int(r, 6);
    int S = P + op_rng_int(r, 2 * P), L = S + op_rng_int(r, 4);
    op_layer_cost *lc = op_xcalloc((size_t)L, sizeof *lc);
    for (int l = 0; l < L; l++) {
        lc[l].f_ms = 0.25 * (1 + op_rng_int(r, 8));
        lc[l].i_ms = 0.25 * (1 + op_rng_int(r, 8));
        lc[l].w_ms = 0.25 * op_rng_int(r, 8);
        lc[l].out_bytes = 1000 * op_rng_int(r, 1000);
        lc[l].act_bytes = 1000 + op_rng_int(r, 1000);
        lc[l].act_w_bytes = op_rng_int(r, 1000);
        lc[l].static_bytes = op_rng_int(r, 5000);
    }
    op_comm c = {0};
    c.nodes_of = 2;
    c.intra_lat_ms = 0.01;
    c.intra_bw_GBps = 100;
    c.inter_lat_ms = 0.02;
    c.inter_bw_GBps = 20;
    c.none = op_rng_int(r, 2);
    op_plan_init(p, "rnd", lc, L, P, M, S, &c);
    free(lc);
    /* cut points: S-1 distinct among 1..L-1 */
    p->stage_first[0] = 0;
    int left = L - S;
    for (int s = 1; s < S; s++) {
        int extra = left ? op_rng_int(r, left + 1) / 2 : 0;
        left -= extra;
        p->stage_first[s] = p->stage_first[s - 1] + 1 + extra;
    }
    p->stage_first[S] = L;
    for (int s = 0; s < S; s++) {
        p->stage_dev[s] = s < P ? s : op_rng_int(r, P);
        p->stage_split[s] = (uint8_t)op_rng_int(r, 2);
    }
    op_sim_policy pol = {0};
    pol.prio = rnd_prio;
    pol.ctx = r;
    op_err e = {0};
    CHECK_EQ_INT(op_sim_dynamic(p, &pol, ws, &e), OP_OK);
}

TEST(replay_matches_naive_reference) {
    op_rng r;
    op_rng_seed(&r, 7);
    op_sim_ws *ws = op_sim_ws_new();
    for (int it = 0; it < 300; it++) {
        op_plan p;
        random_plan(&p, &r, ws);
        double T = p.pred.makespan_ms;
        CHECK_NEAR(naive_makespan(&p), T, 1e-12);
        CHECK(op_sim_makespan(&p, ws) == T);
        CHECK(op_sim_peak_max(&p) == p.pred.peak_bytes_max); /* the walk alone, same peak */
        /* idle split sums to P * makespan - busy */
        double idle = 0, busy = 0;
        for (int d = 0; d < p.P; d++) {
            double i = p.pred.warmup_ms[d] + p.pred.residual_ms[d] + p.pred.cooldown_ms[d];
            CHECK(p.pred.warmup_ms[d] >= 0 && p.pred.residual_ms[d] >= 0 &&
                  p.pred.cooldown_ms[d] >= 0);
            CHECK_NEAR(i + p.pred.busy_ms[d], T, 1e-9);
            idle += i;
            busy += p.pred.busy_ms[d];
        }
        CHECK_NEAR(idle, p.P * T - busy, 1e-9);
        CHECK_NEAR(p.pred.bubble_ratio, idle / (p.P * T), 1e-12);
        if (it % 3 == 0) { /* recomputation re-materialises from I's start: same peak again */
            for (int s = 0; s < p.S; s++) p.stage_act[s] = (uint8_t)(s % 3); /* keep, sel, full */
            CHECK_EQ_INT(op_sim_replay(&p, ws, NULL), OP_OK);
            CHECK(op_sim_peak_max(&p) == p.pred.peak_bytes_max);
        }
        op_plan_free(&p);
    }
    op_sim_ws_free(ws);
}

/* op_sim_retime_from after moving one op of a device (as the polish step does) gives the
 * times of a full re-time bit for bit, deadlocks included; it keeps the ops that started
 * before the moved ones (so it does skip work), and putting back the times from[] names
 * restores the timeline before the move. */
TEST(retime_from_equals_full) {
    op_rng r;
    op_rng_seed(&r, 23);
    op_sim_ws *ws = op_sim_ws_new(), *ws2 = op_sim_ws_new();
    long kept = 0, moves = 0, deadlocks = 0;
    for (int it = 0; it < 150; it++) {
        op_plan p;
        random_plan(&p, &r, ws);
        CHECK(op_sim_retime(&p, ws) == p.pred.makespan_ms); /* what op_sim_replay gave */
        int *from = op_xmalloc(sizeof(int) * (size_t)p.P);
        for (int k = 0; k < 40; k++) {
            int d = op_rng_int(&r, p.P), n = p.n_ops[d];
            if (n < 2) continue;
            int i = op_rng_int(&r, n), j = i + (op_rng_int(&r, 2) ? 1 : -1) * (1 + op_rng_int(&r, 4));
            if (j < 0 || j >= n) continue;
            int lo = i < j ? i : j, hi = i < j ? j : i;
            op_plan before;
            op_plan_copy(&before, &p);
            op_op mv = p.ops[d][i];
            if (j > i) memmove(&p.ops[d][i], &p.ops[d][i + 1], sizeof(op_op) * (size_t)(j - i));
            else memmove(&p.ops[d][j + 1], &p.ops[d][j], sizeof(op_op) * (size_t)(i - j));
            p.ops[d][j] = mv;
            op_plan full;
            op_plan_copy(&full, &p);
            double tf = op_sim_retime(&full, ws2), ti = op_sim_retime_from(&p, ws, d, lo, hi, from);
            moves++;
            CHECK(from[d] <= lo);
            CHECK((tf < 0 && ti < 0) || tf == ti);
            if (tf >= 0) {
                for (int e = 0; e < p.P; e++) {
                    kept += from[e];
                    for (int x = 0; x < p.n_ops[e]; x++)
                        CHECK(p.ops[e][x].start == full.ops[e][x].start &&
                              p.ops[e][x].end == full.ops[e][x].end);
                }
            } else { /* undo the move, put back what was rewritten */
                deadlocks++;
                memcpy(p.ops[d], before.ops[d], sizeof(op_op) * (size_t)n);
                for (int e = 0; e < p.P; e++)
                    memcpy(p.ops[e] + from[e], before.ops[e] + from[e],
                           sizeof(op_op) * (size_t)(p.n_ops[e] - from[e]));
                for (int e = 0; e < p.P; e++)
                    CHECK(!memcmp(p.ops[e], before.ops[e], sizeof(op_op) * (size_t)p.n_ops[e]));
            }
            op_plan_free(&full);
            op_plan_free(&before);
        }
        free(from);
        op_plan_free(&p);
    }
    CHECK(moves > 1000 && deadlocks > 0);
    CHECK(kept > moves); /* ops before the move were kept, not replayed */
    op_sim_ws_free(ws);
    op_sim_ws_free(ws2);
}

/* Dynamic mode: its own output replays to identical times. */
TEST(dynamic_equals_replay) {
    op_rng r;
    op_rng_seed(&r, 11);
    op_sim_ws *ws = op_sim_ws_new();
    for (int it = 0; it < 200; it++) {
        op_plan p;
        random_plan(&p, &r, ws);
        /* built-in policy too, on the same layout */
        op_sim_policy pol = {0};
        if (it % 2) pol.mem_limit_bytes = 1e4;
        CHECK_EQ_INT(op_sim_dynamic(&p, &pol, ws, NULL), OP_OK);
        op_plan q;
        op_plan_copy(&q, &p);
        for (int d = 0; d < q.P; d++)
            for (int i = 0; i < q.n_ops[d]; i++) q.ops[d][i].start = q.ops[d][i].end = -5;
        op_err e = {0};
        CHECK_EQ_INT(op_sim_replay(&q, ws, &e), OP_OK);
        CHECK(q.pred.makespan_ms == p.pred.makespan_ms);
        CHECK(q.pred.peak_bytes_max == p.pred.peak_bytes_max);
        for (int d = 0; d < q.P; d++)
            for (int i = 0; i < q.n_ops[d]; i++)
                CHECK(q.ops[d][i].start == p.ops[d][i].start && q.ops[d][i].end == p.ops[d][i].end);
        op_plan_free(&q);
        op_plan_free(&p);
    }
    op_sim_ws_free(ws);
}

/* A small heterogeneous plan for pinning dynamic results: 6 layers of distinct costs in 5
 * stages on 3 devices (devices 1 and 2 hold two stages each), I+W split on some, transfers on
 * (two nodes of 2), M = 4. */
static void pin_plan(op_plan *p) {
    const int L = 6, P = 3, M = 4, S = 5;
    op_layer_cost lc[6];
    memset(lc, 0, sizeof lc);
    const double f[6] = {1.0, 1.25, 0.75, 1.5, 1.0, 2.0}, i[6] = {1.25, 1.5, 1.0, 1.75, 1.0, 2.5},
                 w[6] = {0.5, 0.75, 0.5, 1.0, 0.25, 1.25};
    for (int l = 0; l < L; l++) {
        snprintf(lc[l].name, sizeof lc[l].name, "l%d", l);
        lc[l].f_ms = f[l];
        lc[l].i_ms = i[l];
        lc[l].w_ms = w[l];
        lc[l].out_bytes = 4000000 * (l + 1);
        lc[l].act_bytes = 100 * (l + 1);
        lc[l].act_w_bytes = 30 * (l + 1);
        lc[l].static_bytes = 1000;
    }
    op_comm c = {0};
    c.nodes_of = 2;
    c.intra_lat_ms = 0.01;
    c.intra_bw_GBps = 100;
    c.inter_lat_ms = 0.05;
    c.inter_bw_GBps = 25;
    op_plan_init(p, "pin", lc, L, P, M, S, &c);
    const int first[6] = {0, 1, 2, 4, 5, 6}, dev[5] = {0, 1, 2, 2, 1}, split[5] = {1, 0, 1, 1, 0};
    for (int s = 0; s <= S; s++) p->stage_first[s] = first[s];
    for (int s = 0; s < S; s++) {
        p->stage_dev[s] = dev[s];
        p->stage_split[s] = (uint8_t)split[s];
    }
}

/* "F2.0 I2.0 ..." (kind, stage.mb) of device d's order */
static void order_str(const op_plan *p, int d, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n_ops[d] && n + 16 < cap; i++) {
        const op_op *o = &p->ops[d][i];
        n += (size_t)snprintf(buf + n, cap - n, "%s%c%d.%d", i ? " " : "", "FIWB"[o->kind],
                              o->stage, o->mb);
    }
}

/* Dynamic mode's exact output under three built-in policies, recorded from the simulator
 * before its rewrite for speed (same orders and times for the same input). */
TEST(dynamic_pinned) {
    static const char *want[3][3] = {
        {"F0.0 F0.1 F0.2 F0.3 I0.0 W0.0 I0.1 W0.1 I0.2 W0.2 I0.3 W0.3",
         "F1.0 F1.1 F1.2 F1.3 F4.0 B4.0 F4.1 B4.1 F4.2 B1.0 B4.2 B1.1 F4.3 B4.3 B1.2 B1.3",
         "F2.0 F3.0 F2.1 F3.1 F2.2 F3.2 F2.3 I3.0 I2.0 F3.3 I3.1 I2.1 W2.0 W3.0 W2.1 W3.1 I3.2 "
         "I2.2 W2.2 W3.2 I3.3 I2.3 W2.3 W3.3"},
        {"F0.0 F0.1 F0.2 I0.0 F0.3 W0.0 I0.1 W0.1 I0.2 W0.2 I0.3 W0.3",
         "F1.0 F1.1 F1.2 F4.0 B4.0 B1.0 F1.3 F4.1 B4.1 B1.1 F4.2 B4.2 B1.2 F4.3 B4.3 B1.3",
         "F2.0 F3.0 I3.0 W3.0 I2.0 W2.0 F2.1 F3.1 I3.1 W3.1 I2.1 W2.1 F2.2 F3.2 I3.2 W3.2 I2.2 "
         "W2.2 F2.3 F3.3 I3.3 W3.3 I2.3 W2.3"},
        {"F0.0 F0.1 F0.2 F0.3 I0.0 W0.0 I0.1 W0.1 I0.2 W0.2 I0.3 W0.3",
         "F1.0 F1.1 F1.2 F1.3 F4.0 B4.0 B1.0 F4.1 B4.1 B1.1 F4.2 B4.2 B1.2 F4.3 B4.3 B1.3",
         "F2.0 F3.0 I3.0 I2.0 W2.0 W3.0 F2.1 F3.1 I3.1 I2.1 W2.1 W3.1 F2.2 F3.2 I3.2 I2.2 W2.2 "
         "W3.2 F2.3 F3.3 I3.3 I2.3 W2.3 W3.3"}};
    static const double want_T[3] = {0x1.5a51eb851eb84p+5, 0x1.1c0a3d70a3d71p+6,
                                      0x1.188f5c28f5c29p+6};
    static const int64_t want_peak[3] = {7300, 4200, 4200};
    int warm[3] = {2, 1, 0}, wl[3] = {0, 2, 1}, cap[3] = {3, 0, 2};
    op_sim_ws *ws = op_sim_ws_new();
    for (int k = 0; k < 3; k++) {
        op_plan p;
        pin_plan(&p);
        op_sim_policy pol = {0};
        if (k == 1) pol.warmup = warm, pol.w_limit = wl, pol.max_inflight = cap;
        if (k == 2) pol.mem_limit_bytes = 1000 + 2600;
        op_err e = {0};
        CHECK_EQ_INT(op_sim_dynamic(&p, k ? &pol : NULL, k == 1 ? NULL : ws, &e), OP_OK);
        CHECK(p.pred.makespan_ms == want_T[k]);
        CHECK_EQ_INT(p.pred.peak_bytes_max, want_peak[k]);
        for (int d = 0; d < 3; d++) {
            char b[1000];
            order_str(&p, d, b, sizeof b);
            CHECK_MSG(strcmp(b, want[k][d]) == 0, "device %d under policy %d: got \"%s\"", d, k, b);
        }
        op_plan_free(&p);
    }
    op_sim_ws_free(ws);
}

TEST(dynamic_builtin_1f1b) {
    /* warmup P-1-d and at most P-d stashes: the built-in rule is 1F1B */
    int P = 4, M = 8;
    op_plan p;
    uniform_plan(&p, P, M, 0, NULL);
    int warm[4], cap[4];
    for (int d = 0; d < P; d++) warm[d] = P - 1 - d, cap[d] = P - d;
    op_sim_policy pol = {0};
    pol.warmup = warm;
    pol.max_inflight = cap;
    op_err e = {0};
    CHECK_EQ_INT(op_sim_dynamic(&p, &pol, NULL, &e), OP_OK);
    CHECK(p.pred.makespan_ms == 33.0);
    for (int d = 0; d < P; d++) CHECK_EQ_INT(p.pred.peak_bytes[d], 1000 + 100 * (P - d));
    op_plan q;
    uniform_plan(&q, P, M, 0, NULL);
    onef1b_orders(&q, 0);
    for (int d = 0; d < P; d++)
        for (int i = 0; i < q.n_ops[d]; i++)
            CHECK(q.ops[d][i].kind == p.ops[d][i].kind && q.ops[d][i].mb == p.ops[d][i].mb);
    /* default policy never does worse than 1F1B here, and a tight memory limit is obeyed */
    CHECK_EQ_INT(op_sim_dynamic(&q, NULL, NULL, &e), OP_OK);
    CHECK(q.pred.makespan_ms <= 33.0);
    op_sim_policy lim = {0};
    lim.mem_limit_bytes = 1000 + 2 * 100;
    CHECK_EQ_INT(op_sim_dynamic(&q, &lim, NULL, &e), OP_OK);
    CHECK(q.pred.peak_bytes_max <= 1200);
    op_plan_free(&q);
    op_plan_free(&p);
}

/* a custom key: all F before any B gives GPipe */
static double gpipe_prio(void *ctx, int d, op_kind kind, int stage, int mb, double now) {
    return kind == OP_F ? mb : 1e6 + mb;
}

static double view_prio(void *ctx, const op_sim_view *v, op_kind kind, int stage, int mb) {
    int *calls = ctx;
    (*calls)++;
    /* hold F while 2 stashes are held: at most 2 in flight */
    if (kind == OP_F && v->inflight >= 2) return INFINITY;
    return kind == OP_F ? 1 : 0;
}

TEST(dynamic_custom_priority) {
    int P = 4, M = 8;
    op_plan p;
    uniform_plan(&p, P, M, 0, NULL);
    op_sim_policy pol = {0};
    pol.prio = gpipe_prio;
    CHECK_EQ_INT(op_sim_dynamic(&p, &pol, NULL, NULL), OP_OK);
    CHECK(p.pred.makespan_ms == 33.0);
    for (int d = 0; d < P; d++) CHECK_EQ_INT(p.pred.peak_bytes[d], 1000 + 100 * M);
    int calls = 0;
    op_sim_policy v = {0};
    v.prio_ex = view_prio;
    v.ctx = &calls;
    CHECK_EQ_INT(op_sim_dynamic(&p, &v, NULL, NULL), OP_OK);
    CHECK(calls > 0);
    CHECK_EQ_INT(p.pred.peak_bytes_max, 1000 + 200);
    op_plan_free(&p);
}

static double hold_all(void *ctx, int d, op_kind kind, int stage, int mb, double now) {
    return INFINITY;
}

TEST(dynamic_holds_never_hang) {
    /* every op held: the stall rule still runs them all, in tie order */
    op_plan p;
    uniform_plan(&p, 3, 4, 1, NULL);
    op_sim_policy pol = {0};
    pol.prio = hold_all;
    op_err e = {0};
    CHECK_EQ_INT(op_sim_dynamic(&p, &pol, NULL, &e), OP_OK);
    CHECK(p.pred.valid && p.pred.makespan_ms > 0);
    /* an impossible memory limit: every F runs only when all else stalls, one at a time */
    op_sim_policy lim = {0};
    lim.mem_limit_bytes = 1;
    CHECK_EQ_INT(op_sim_dynamic(&p, &lim, NULL, &e), OP_OK);
    CHECK_EQ_INT(p.pred.peak_bytes_max, 1000 + 100);
    /* devices without stages: nothing to run there, all idle */
    p.stage_dev[1] = 0;
    p.stage_dev[2] = 0;
    for (int k = 0; k < 2; k++) { /* twice: the second run reuses the plan's arrays */
        CHECK_EQ_INT(op_sim_dynamic(&p, NULL, NULL, &e), OP_OK);
        CHECK(p.n_ops[1] == 0 && p.n_ops[2] == 0 && p.n_ops[0] == 3 * 3 * 4);
        CHECK(p.pred.makespan_ms == 3 * 3 * 4.0); /* one device does all the work */
        CHECK_NEAR(p.pred.bubble_ratio, 2.0 / 3.0, 1e-15);
    }
    op_plan_free(&p);
}

TEST(warmup_cooldown_split_gpipe) {
    /* GPipe P=2 M=2, F=1 B=2: last F ends at 3, first B starts at 3 */
    op_plan p;
    uniform_plan(&p, 2, 2, 0, NULL);
    gpipe_orders(&p, 0);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    CHECK(p.pred.makespan_ms == 9.0);
    /* device 0: F [0,2), idle [2,5), B [5,9) ; device 1: idle [0,1), F [1,3), B [3,7), idle [7,9) */
    CHECK_NEAR(p.pred.warmup_ms[0], 1.0, 0);
    CHECK_NEAR(p.pred.cooldown_ms[0], 2.0, 0);
    CHECK_NEAR(p.pred.warmup_ms[1], 1.0, 0);
    CHECK_NEAR(p.pred.cooldown_ms[1], 2.0, 0);
    CHECK_NEAR(p.pred.residual_ms[0] + p.pred.residual_ms[1], 0.0, 0);
    op_plan_free(&p);
}

TEST(speed_samples_scale_devices) {
    /* 1F1B, P=2, M=4, F=1, B=2 per stage, no comm: 15 ms at speed 1 (3(M+P-1)).  Every op twice
     * as long: 30.  Device 1 twice as slow: it is busy from its first F (t=1) to the end, then
     * device 0's last B: 1 + 4 (2 + 4) + 2 = 27.  Device 0 twice as slow: worked by hand on the
     * 1F1B order, 25. */
    op_plan p;
    uniform_plan(&p, 2, 4, 0, NULL);
    onef1b_orders(&p, 0);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    const double speed[] = {1, 1, 2, 2, 1, 2, 2, 1};
    double mk[4];
    op_err e = {0};
    CHECK_EQ_INT(op_sim_speed_samples(&p, speed, 4, mk, &e), OP_OK);
    CHECK_NEAR(mk[0], 15.0, 1e-12);
    CHECK_NEAR(mk[1], 30.0, 1e-12);
    CHECK_NEAR(mk[2], 27.0, 1e-12);
    CHECK_NEAR(mk[3], 25.0, 1e-12);
    /* the plan itself is untouched */
    CHECK(p.layers[1].f_ms == 1.0 && p.pred.makespan_ms == 15.0);
    op_plan_free(&p);
}

TEST(hand_built_plan_numbers_checked) {
    /* a plan filled by hand has been through no problem check: NaN link latency replayed to NaN
     * op times with OP_OK, a zero bandwidth aborted in op_comm_ms, and a huge act_bytes
     * overflowed the stage sums; op_plan_validate (so op_sim_replay) refuses them */
    op_comm c;
    op_comm_default(&c, 8);
    for (int k = 0; k < 5; k++) {
        op_plan p;
        uniform_plan(&p, 2, 4, 0, &c);
        onef1b_orders(&p, 0);
        const char *want = "";
        switch (k) {
        case 0: p.comm.intra_lat_ms = NAN, want = "intra-node latency nan"; break;
        case 1: p.comm.intra_bw_GBps = 0, want = "intra-node bandwidth 0 GB/s"; break;
        case 2: p.layers[1].act_bytes = INT64_MAX, want = "act_bytes 9223372036854775807"; break;
        case 3: p.op_overhead_ms = -1, want = "per-op overhead -1 ms"; break;
        case 4: p.stage_act[0] = 7, want = "stage 0: unknown activation policy 7"; break;
        }
        op_err e = {0};
        CHECK_EQ_INT(op_sim_replay(&p, NULL, &e), OP_EINVAL);
        CHECK_MSG(strstr(e.msg, want) != NULL, "%s", e.msg);
        op_plan_free(&p);
    }
}

TEST(speed_samples_bad_factors) {
    /* factors are input: zero, negative, NaN or one that makes an op last beyond OP_MAX_MS is
     * OP_EINVAL naming the sample and device (it aborted, or returned an infinite makespan) */
    op_plan p;
    uniform_plan(&p, 2, 4, 0, NULL);
    onef1b_orders(&p, 0);
    CHECK_EQ_INT(op_sim_replay(&p, NULL, NULL), OP_OK);
    const double bad[][2] = {{1, 0}, {-1, 1}, {1, NAN}, {INFINITY, 1}, {1e308, 1}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const double speed[4] = {1, 1, bad[k][0], bad[k][1]};
        double mk[2] = {0, 0};
        op_err e = {0};
        CHECK_EQ_INT(op_sim_speed_samples(&p, speed, 2, mk, &e), OP_EINVAL);
        CHECK(strstr(e.msg, "speed sample 1: device") != NULL);
        CHECK_NEAR(mk[0], 15.0, 1e-12);
    }
    op_plan_free(&p);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(gpipe_uniform);
    RUN(mixed_types_follow_device);
    RUN(onef1b_uniform);
    RUN(comm_adds_exactly);
    RUN(gradient_message_is_boundary_size);
    RUN(iw_split_frees_memory);
    RUN(i_term_peaks_replay);
    RUN(i_term_peaks_dynamic);
    RUN(deadlock_names_cycle);
    RUN(invalid_plan_rejected);
    RUN(replay_matches_naive_reference);
    RUN(dynamic_equals_replay);
    RUN(retime_from_equals_full);
    RUN(dynamic_pinned);
    RUN(dynamic_builtin_1f1b);
    RUN(dynamic_custom_priority);
    RUN(dynamic_holds_never_hang);
    RUN(warmup_cooldown_split_gpipe);
    RUN(speed_samples_scale_devices);
    RUN(speed_samples_bad_factors);
    RUN(hand_built_plan_numbers_checked);
    return check_report("sim");
}
