/* test_ptrain.c: pipelined training of the reference model through the executor (in-process
 * ranks): for P in {1, 2, 4} and every schedule that fits the model, losses and final weights
 * (the checkpoint file, bit for bit) equal the single-process loop's; measured activation
 * peaks equal the arena-rule prediction; resume is bitwise; bad plans are refused.  The real
 * mpirun case is tests/sh_train.sh. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/ptrain.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"

#define STEPS 3
#define MB 8 /* dualpipev needs M >= 2P */

static char tmpdir[64];

static void mktmp(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/octopipe-ptrain-XXXXXX");
    OP_ASSERT(mkdtemp(tmpdir), "mkdtemp");
}

static void rmtmp(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static char *slurp(const char *path, size_t *n) {
    char *d = NULL;
    op_err e;
    if (op_read_file(path, &d, n, &e)) return NULL;
    return d;
}

/* Synthetic costs (no profiling: fast and deterministic plans). */
static void fake_costs(const op_nn_model *m, op_layer_cost *c) {
    op_layer_prof prof[6];
    const char syms[] = "EM*-#L";
    for (int k = 0; k < 6; k++) {
        memset(&prof[k], 0, sizeof prof[k]);
        prof[k].sym = syms[k];
        prof[k].f_ms = 1 + k, prof[k].i_ms = 1 + k, prof[k].w_ms = 0.5 + k;
    }
    op_err e;
    OP_ASSERT(op_ptrain_layer_costs(m, prof, 6, c, &e) == OP_OK, "%s", e.msg);
}

/* tiny dimensions over any pattern */
static void tiny_model(op_nn_model *m, const char *pattern) {
    op_nn_cfg c;
    op_nn_cfg_preset("tiny", &c);
    op_err e;
    OP_ASSERT(op_nn_model_init(m, pattern, &c, &e) == OP_OK, "%s", e.msg);
    snprintf(m->name, sizeof m->name, "%s", pattern);
}

/* A plan for m from fake_costs over the default links: what most tests train through.  sched
 * is a schedule name or a plan file; the plan keeps its own copy of the costs. */
static int fake_plan(const op_nn_model *m, int P, int M, double overhead_ms, const char *sched,
                     op_plan *p, op_err *e) {
    op_layer_cost costs[64];
    fake_costs(m, costs);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    return op_ptrain_make_plan(m, costs, P, M, &comm, overhead_ms, sched, p, e);
}

static int g_policy; /* activation policy given to every stage of the plan pipelined runs */
static int64_t g_closed[64]; /* when g_closed_on: closed-form peak per device to check */
static int g_closed_on;

static int pipelined(const op_nn_model *m, int P, const char *sched, const char *dir, double *losses,
                     op_ptrain_report *rep, int resume, int steps) {
    op_plan p;
    op_err e = {0};
    int rc = fake_plan(m, P, MB, 0, sched, &p, &e);
    if (rc) return rc;
    if (g_policy) /* a plan file keeps its own */
        for (int s = 0; s < p.S; s++) p.stage_act[s] = (uint8_t)g_policy;
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy";
    o.steps = steps;
    o.ckpt_dir = dir;
    o.resume = resume;
    o.losses = losses;
    o.eo.quiet = 1;
    op_ptrain_report r;
    rc = op_ptrain_run_threads(m, &p, &o, rep ? rep : &r, &e);
    if (rc) fprintf(stderr, "%s P=%d: %s\n", sched, P, e.msg);
    if (rep && rc == OP_OK) {
        int64_t pk[64], pkeep[64];
        OP_ASSERT(op_ptrain_pred_act_peak(m, &p, pk) == OP_OK, "pred peak");
        int offl = 0;
        for (int s = 0; s < p.S; s++) offl |= p.stage_act[s] == OP_ACT_OFFLOAD;
        if (offl) {
            /* the copy engine runs beside compute: a stash leaves the device when its copy has
             * ended and is back from its reload's start, so the peak lies between the walk's
             * (copies taking no time) and keep's (stashes never leaving) */
            op_plan q;
            op_plan_copy(&q, &p);
            memset(q.stage_act, OP_ACT_KEEP, (size_t)q.S);
            OP_ASSERT(op_ptrain_pred_act_peak(m, &q, pkeep) == OP_OK, "pred peak");
            op_plan_free(&q);
            for (int d = 0; d < P; d++)
                CHECK_MSG(rep->peak_act[d] >= pk[d] - pk[d] / 1000 && rep->peak_act[d] <= pkeep[d] + pkeep[d] / 1000,
                          "%s P=%d d%d offload: measured %lld outside [%lld, %lld]", sched, P, d,
                          (long long)rep->peak_act[d], (long long)pk[d], (long long)pkeep[d]);
        } else {
            /* MoE buffers follow the routing (data), so bytes differ by alignment padding only */
            for (int d = 0; d < P; d++) {
                CHECK_NEAR((double)rep->peak_act[d], (double)pk[d], 1e-3);
                /* and the simulator's peak is the same walk (plan.h's rules on the probed costs) */
                if (op_sim_replay(&p, NULL, &e) == OP_OK)
                    CHECK_MSG(llabs(rep->peak_act[d] - (p.pred.peak_bytes[d] - p.pred.static_bytes[d])) <= pk[d] / 1000,
                              "%s P=%d d%d policy %s: measured %lld, simulated %lld", sched, P, d,
                              op_act_policy_name(g_policy), (long long)rep->peak_act[d],
                              (long long)(p.pred.peak_bytes[d] - p.pred.static_bytes[d]));
            }
        }
        if (g_closed_on && !offl) {
            void closed_form_peak(const op_nn_model *, const op_plan *, int64_t *);
            closed_form_peak(m, &p, g_closed);
            for (int d = 0; d < P; d++)
                CHECK_MSG(fabs((double)rep->peak_act[d] - (double)g_closed[d]) <= 1e-3 * (double)g_closed[d],
                          "%s P=%d policy %s d%d: measured %lld, closed form %lld", sched, P,
                          op_act_policy_name(g_policy), d, (long long)rep->peak_act[d],
                          (long long)g_closed[d]);
        }
    }
    if (!rep) op_ptrain_report_free(&r);
    op_plan_free(&p);
    return rc;
}

static void single(const char *dir, double *losses) {
    op_train_opts o;
    op_train_opts_default(&o);
    o.model = "tiny";
    o.data = "copy";
    o.microbatches = MB;
    o.steps = STEPS;
    o.ckpt_dir = dir;
    o.losses = losses;
    o.log_every = 0;
    op_err e;
    OP_ASSERT(op_train_single(&o, &e) == OP_OK, "%s", e.msg);
}

/* Every schedule for P in {1, 2, 4} on `tiny`; the ones needing more stages than tiny's 6
 * layers (i1f1b, zbv, dualpipev at P=4) on a 12-layer tiny-width model against its P=1 run,
 * which the first half shows equal to the single-process loop. */
TEST(equivalence_every_schedule) {
    const char *sch[] = {"1f1b", "i1f1b", "zbh1", "zbv", "dualpipev", "auto"};
    char ref[128], dir[128];
    snprintf(ref, sizeof ref, "%s/single", tmpdir);
    double lref[STEPS], l[STEPS];
    single(ref, lref);
    strcat(ref, "/model.ckpt");
    size_t nref, n;
    char *cref = slurp(ref, &nref);
    CHECK(cref != NULL);
    op_nn_model tiny, big;
    tiny_model(&tiny, "EM*-#L");
    tiny_model(&big, "EM*-M*-M*-#L");
    char *cbig = NULL;
    size_t nbig = 0;
    double lbig[STEPS];
    int ran = 0;
    for (int P = 1; P <= 4; P *= 2)
        for (size_t k = 0; k < sizeof sch / sizeof *sch; k++) {
            if (P == 1 && k > 0) continue; /* every schedule is the same one stage */
            op_plan probe;
            op_err e;
            int fits = fake_plan(&tiny, P, MB, 0, sch[k], &probe, &e) == OP_OK;
            if (fits) op_plan_free(&probe);
            const op_nn_model *m = fits ? &tiny : &big;
            snprintf(dir, sizeof dir, "%s/%s-%d", tmpdir, sch[k], P);
            memset(l, 0, sizeof l);
            int rc = pipelined(m, P, sch[k], dir, l, NULL, 0, STEPS);
            CHECK_MSG(rc == OP_OK, "%s P=%d", sch[k], P);
            strcat(dir, "/model.ckpt");
            char *c2 = slurp(dir, &n);
            if (fits) {
                CHECK_MSG(c2 && n == nref && !memcmp(c2, cref, n), "%s P=%d: weights differ from single", sch[k], P);
                CHECK_MSG(!memcmp(l, lref, sizeof l), "%s P=%d: losses %.17g vs %.17g", sch[k], P, l[STEPS - 1], lref[STEPS - 1]);
            } else {
                if (!cbig) { /* the reference: big's one-stage run */
                    char d1[128];
                    snprintf(d1, sizeof d1, "%s/big-1", tmpdir);
                    CHECK(pipelined(&big, 1, "1f1b", d1, lbig, NULL, 0, STEPS) == OP_OK);
                    strcat(d1, "/model.ckpt");
                    cbig = slurp(d1, &nbig);
                }
                CHECK_MSG(c2 && cbig && n == nbig && !memcmp(c2, cbig, n), "%s P=%d (12 layers): weights differ", sch[k], P);
                CHECK_MSG(!memcmp(l, lbig, sizeof l), "%s P=%d (12 layers): losses differ", sch[k], P);
            }
            free(c2);
            ran++;
        }
    CHECK_EQ_INT(ran, 13);
    free(cref), free(cbig);
}

/* Measured per-rank activation peaks equal the arena-rule prediction (checked inside
 * pipelined), and the loss goes down on the copy task. */
TEST(memory_and_loss) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    const char *sch[] = {"1f1b", "zbh1", "zbv"};
    for (int k = 0; k < 3; k++) {
        op_ptrain_report r;
        CHECK(pipelined(&m, 2, sch[k], NULL, NULL, &r, 0, k == 0 ? 60 : 2) == OP_OK);
        for (int d = 0; d < 2; d++) CHECK(r.peak_act[d] > 0);
        if (k == 0) CHECK_MSG(r.last_loss < 0.75 * r.first_loss, "loss %.3f -> %.3f", r.first_loss, r.last_loss);
        CHECK(r.meas_ms_median > 0 && r.pred_ms > 0);
        op_ptrain_report_free(&r);
    }
}

/* The activation rule of each policy in closed form, from the plan's per-layer costs (act_bytes
 * held after F, act_w_bytes after I, act_i_bytes I's transient: keep's rule) and the two
 * quantities the policies change, computed here from the model's dimensions:
 *   core  = B*H*T*T floats per attention layer: what selective drops (act_sel = act - core);
 *   input = (N,d) floats, or N int32 token ids on stage 0: all that full keeps.
 * Per device, walking its ops: F adds the kept bytes (offload: act at F's end, then 0); I (or B)
 * first makes the stash whole again (full: input + act until the input goes), peaks at
 * + act_i, then holds act_w (W frees it) or nothing (B). */
void closed_form_peak(const op_nn_model *m, const op_plan *p, int64_t *peak);
void closed_form_peak(const op_nn_model *m, const op_plan *p, int64_t *peak) {
    const op_nn_cfg *c = &m->cfg;
    int64_t N = (int64_t)c->batch * c->seq, core = N / c->seq * c->n_heads * c->seq * c->seq * 4;
    for (int d = 0; d < p->P; d++) {
        int64_t cur = 0, pk = 0;
        for (int i = 0; i < p->n_ops[d]; i++) {
            const op_op *o = &p->ops[d][i];
            int s = o->stage, pol = p->stage_act[s];
            int64_t act = 0, actw = 0, acti = 0, sel = 0;
            for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++) {
                const op_layer_cost *lc = &p->layers[l];
                act += lc->act_bytes, actw += lc->act_w_bytes, acti += lc->act_i_bytes;
                sel += lc->act_bytes - (lc->sym == '*' ? core : 0);
            }
            int64_t in = s == 0 ? (N * 4 + 15) / 16 * 16 : N * c->d * 4;
            int64_t kept = pol == OP_ACT_SELECTIVE ? sel : pol == OP_ACT_FULL ? in
                         : pol == OP_ACT_OFFLOAD ? 0 : act;
            if (o->kind == OP_F) {
                if (pol == OP_ACT_OFFLOAD && cur + act > pk) pk = cur + act;
                cur += kept;
            } else if (o->kind == OP_W) {
                cur -= actw;
            } else {
                if (pol == OP_ACT_FULL && cur + act > pk) pk = cur + act;
                cur += act - kept;
                if (cur + acti > pk) pk = cur + acti;
                cur += o->kind == OP_I ? actw - act : -act;
            }
            if (cur > pk) pk = cur;
        }
        peak[d] = pk;
    }
}

/* Every policy trains bitwise like keep (losses and the checkpointed weights) for P in
 * {1, 2, 4} and a schedule with and without split backward, and the ranks' measured peaks
 * equal both op_ptrain_pred_act_peak and the closed form above; selective and full hold less
 * than keep where a stage has the layers they drop. */
TEST(policies_bitwise_and_memory) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    const char *sch[] = {"1f1b", "zbh1"};
    int ran = 0;
    for (int P = 1; P <= 4; P *= 2)
        for (int k = 0; k < 2; k++) {
            if (P == 1 && k) continue;
            double lk[STEPS], lp[STEPS];
            int64_t peak_keep[64];
            char dk[128], dp[128];
            snprintf(dk, sizeof dk, "%s/pol-keep-%s-%d", tmpdir, sch[k], P);
            op_ptrain_report r;
            g_policy = OP_ACT_KEEP, g_closed_on = 1;
            CHECK(pipelined(&m, P, sch[k], dk, lk, &r, 0, STEPS) == OP_OK);
            memcpy(peak_keep, r.peak_act, sizeof peak_keep);
            op_ptrain_report_free(&r);
            strcat(dk, "/model.ckpt");
            size_t nk, np;
            char *ck = slurp(dk, &nk);
            for (int pol = OP_ACT_SELECTIVE; pol <= OP_ACT_OFFLOAD; pol++) {
                snprintf(dp, sizeof dp, "%s/pol-%d-%s-%d", tmpdir, pol, sch[k], P);
                g_policy = pol;
                memset(lp, 0, sizeof lp);
                CHECK_MSG(pipelined(&m, P, sch[k], dp, lp, &r, 0, STEPS) == OP_OK, "%s P=%d", sch[k], P);
                strcat(dp, "/model.ckpt");
                char *cp = slurp(dp, &np);
                CHECK_MSG(ck && cp && nk == np && !memcmp(ck, cp, nk), "%s P=%d %s: weights differ from keep",
                          sch[k], P, op_act_policy_name(pol));
                CHECK_MSG(!memcmp(lk, lp, sizeof lk), "%s P=%d %s: losses differ from keep", sch[k], P,
                          op_act_policy_name(pol));
                /* P = 2: device 0 holds two microbatches' stashes (one at P = 1: only I's peak,
                 * which every policy restores) with the attention layer and more than its input */
                if (P == 2 && pol != OP_ACT_OFFLOAD) /* offload: copy_engine_overlaps below */
                    CHECK_MSG(r.peak_act[0] < peak_keep[0], "%s P=%d %s: peak %lld not below keep's %lld",
                              sch[k], P, op_act_policy_name(pol), (long long)r.peak_act[0],
                              (long long)peak_keep[0]);
                op_ptrain_report_free(&r);
                free(cp);
                ran++;
            }
            free(ck);
        }
    g_policy = OP_ACT_KEEP, g_closed_on = 0;
    CHECK_EQ_INT(ran, 15);
}

/* The copy engine of an offload stage runs beside compute, as the simulator's rule says:
 * P = 1, M = 2, 1F1B (F0 B0 F1 B1), every copy made to last c = 15 ms over the plan's host
 * link.  Each B waits for its stash to go out after its F (c) and come back (c): B(m) starts
 * >= F(m)'s end + 2c, as the simulator says.  Four
 * transfers per step, each lasting at least c. */
TEST(copy_engine_overlaps) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_plan p;
    op_err e = {0};
    const int steps = 2;
    const double c = 15;
    CHECK(fake_plan(&m, 1, 2, 0, "1f1b", &p, &e) == OP_OK);
    p.stage_act[0] = OP_ACT_OFFLOAD;
    p.comm.host_lat_ms = 0;
    p.comm.host_bw_GBps = (double)op_stage_act_bytes(&p, 0) / (c * 1e-3) / 1e9;
    CHECK_NEAR(op_stage_copy_ms(&p, 0), c, 1e-9);
    static const uint8_t order[4] = {OP_F, OP_B, OP_F, OP_B};
    CHECK_EQ_INT(p.n_ops[0], 4);
    for (int i = 0; i < 4 && i < p.n_ops[0]; i++) CHECK_EQ_INT(p.ops[0][i].kind, order[i]);
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy", o.steps = steps, o.eo.quiet = 1, o.keep_result = 1;
    op_ptrain_session *ss;
    CHECK(op_ptrain_session_new(&m, &p, &o, &ss, &e) == OP_OK);
    double lo = 0;
    for (int st = 0; st < steps; st++) {
        CHECK(op_ptrain_session_step(ss, &e) == OP_OK);
        const op_exec_result *r = op_ptrain_session_last(ss);
        CHECK(r != NULL);
        if (!r) break;
        const op_exec_rec *rc = r->recs[0];
        CHECK_EQ_INT(r->n_recs[0], 4);
        for (int k = 0; k < 2 && r->n_recs[0] == 4; k++) {
            /* the record of B starts when the rank calls it, its wait for the reload inside */
            double gap = rc[2 * k + 1].end - rc[2 * k].end;
            CHECK_MSG(gap >= 2 * c - 0.05, "step %d: B%d ends %.2f ms after F%d (copies %.0f + %.0f)",
                      st, k, gap, k, c, c);
            lo = gap;
        }
    }
    op_ptrain_report rep;
    op_ptrain_session_report(ss, &rep);
    CHECK_EQ_INT(rep.copy_xfers[0], 4 * steps);
    CHECK_MSG(rep.copy_busy_ms[0] >= 4 * steps * c - 0.1, "copy engine busy %.2f ms", rep.copy_busy_ms[0]);
    /* the copies themselves took CPU time, less than the transfers lasted (the link's sleep) */
    CHECK_MSG(rep.copy_cpu_ms[0] > 0 && rep.copy_cpu_ms[0] < rep.copy_busy_ms[0], "copy CPU %.3f ms of %.2f",
              rep.copy_cpu_ms[0], rep.copy_busy_ms[0]);
    /* the simulator (whatever the op times: the copies dominate) puts B0 at F0's end + 2c too */
    CHECK(op_sim_replay(&p, NULL, &e) == OP_OK);
    CHECK_NEAR(p.ops[0][1].start - p.ops[0][0].end, 2 * c, 1e-9);
    printf("  copy engine: B ends %.2f ms after its F (two %.0f ms copies), %d transfers, %.1f ms busy\n",
           lo, c, rep.copy_xfers[0], rep.copy_busy_ms[0]);
    op_ptrain_report_free(&rep);
    op_ptrain_session_free(ss);
    op_plan_free(&p);
}

/* Out of threads (a process or user limit, or the address space): a thread that cannot start
 * is an error the caller gets, not an abort.  Every new thread's default stack made larger than
 * any address space makes pthread_create fail as it does then (RLIMIT_NPROC would not: it does
 * not bind root).  The profilers of op_ptrain_profile_ranks; a rank's copy engine (offload) in
 * its compute's setup, through op_ptrain_run_rank on this thread (the thread transport, P = 1),
 * which writes no checkpoint. */
TEST(out_of_threads_is_an_error) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_plan p;
    op_err e = {0};
    CHECK(fake_plan(&m, 1, 2, 0, "1f1b", &p, &e) == OP_OK);
    p.stage_act[0] = OP_ACT_OFFLOAD;
    CHECK(op_sim_replay(&p, NULL, &e) == OP_OK);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/nothreads", tmpdir);
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy", o.steps = 2, o.eo.quiet = 1, o.ckpt_dir = dir;
    CHECK(mkdir(dir, 0700) == 0);

    pthread_attr_t def, huge;
    CHECK(pthread_getattr_default_np(&def) == 0);
    CHECK(pthread_attr_init(&huge) == 0);
    CHECK(pthread_attr_setstacksize(&huge, (size_t)1 << 50) == 0);
    CHECK(pthread_setattr_default_np(&huge) == 0);
    op_layer_prof prof[8];
    memset(prof, 0x5a, sizeof prof);
    int np = op_ptrain_profile_ranks(&m, 1, 2, 1, prof, &e);
    op_xport x;
    op_xport_threads_new(&x, 1);
    op_err e2 = {0};
    int rc = op_ptrain_run_rank(&m, &p, &x, &o, NULL, &e2);
    CHECK(pthread_setattr_default_np(&def) == 0); /* before any CHECK can print */
    pthread_attr_destroy(&huge), pthread_attr_destroy(&def);
    op_xport_threads_free(&x, 1);

    CHECK_EQ_INT(np, OP_EIO);
    CHECK_MSG(strstr(e.msg, "profile: cannot start profiler 1 of 2 as a thread"), "%s", e.msg);
    CHECK(prof[0].sym == 0x5a); /* out untouched */
    CHECK_EQ_INT(rc, OP_EIO);
    CHECK_MSG(strstr(e2.msg, "rank 0: cannot start the copy engine") && !strchr(e2.msg, '\n'), "%s", e2.msg);
    char ck[160];
    snprintf(ck, sizeof ck, "%s/model.ckpt", dir);
    CHECK(access(ck, F_OK) != 0);
    /* threads back: the same run trains */
    op_xport_threads_new(&x, 1);
    CHECK_MSG(op_ptrain_run_rank(&m, &p, &x, &o, NULL, &e2) == OP_OK, "%s", e2.msg);
    op_xport_threads_free(&x, 1);
    CHECK(access(ck, F_OK) == 0);
    op_plan_free(&p);
}

/* Recomputation costs what the simulator's rule says, measured in thread CPU time per op (a
 * busy machine stretches wall time, not this): one stage of small's widths (E M * - L), P = 1,
 * the three policies taking turns step by step (sessions) so a drift of the machine touches
 * them alike.  Under full, B costs keep's B + keep's F; under selective keep's B + the
 * attention core (small against the rest: printed, not checked); F is the same for all. */
TEST(recompute_adds_the_forward_to_i) {
    op_nn_cfg c;
    op_nn_cfg_preset("small", &c);
    op_nn_model m;
    op_err e = {0};
    OP_ASSERT(op_nn_model_init(&m, "EM*-L", &c, &e) == OP_OK, "%s", e.msg);
    op_plan p[3];
    op_ptrain_session *ss[3];
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy", o.steps = 7, o.eo.quiet = 1;
    for (int pol = 0; pol <= 2; pol++) {
        CHECK(fake_plan(&m, 1, 4, 0, "1f1b", &p[pol], &e) == OP_OK);
        p[pol].stage_act[0] = (uint8_t)pol;
        CHECK(op_ptrain_session_new(&m, &p[pol], &o, &ss[pol], &e) == OP_OK);
    }
    for (int step = 0; step < o.steps; step++)
        for (int k = 0; k < 3; k++) CHECK(op_ptrain_session_step(ss[(step + k) % 3], &e) == OP_OK);
    double f[3] = {0}, i[3] = {0};
    for (int pol = 0; pol <= 2; pol++) {
        op_ptrain_report r;
        op_ptrain_session_report(ss[pol], &r);
        const op_ptrain_opstat *F = &r.ops[OP_F], *B = &r.ops[OP_B];
        f[pol] = F->n ? F->cpu_ms / (double)F->n : 0, i[pol] = B->n ? B->cpu_ms / (double)B->n : 0;
        op_ptrain_report_free(&r);
        op_ptrain_session_free(ss[pol]);
        op_plan_free(&p[pol]);
    }
    printf("  CPU ms per op (E M * - L, small widths): keep F %.2f B %.2f | selective F %.2f B %.2f |"
           " full F %.2f B %.2f (keep B + F = %.2f)\n", f[0], i[0], f[1], i[1], f[2], i[2], i[0] + f[0]);
    CHECK(f[0] > 0 && i[0] > 0);
    CHECK_MSG(fabs(i[2] - (i[0] + f[0])) <= 0.3 * f[0] + 0.1 * i[0], "full B %.2f vs keep B + F %.2f",
              i[2], i[0] + f[0]);
    CHECK_MSG(fabs(f[2] - f[0]) <= 0.3 * f[0], "full F %.2f vs keep F %.2f", f[2], f[0]);
}

/* A plan file with an "activation" key runs as it is: its policies reach the stages (the
 * ranks' peaks follow them) and training stays bitwise keep's. */
TEST(plan_file_activation_runs_as_is) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_plan p;
    op_err e = {0};
    CHECK(fake_plan(&m, 2, MB, 0, "1f1b", &p, &e) == OP_OK);
    p.stage_act[0] = OP_ACT_FULL, p.stage_act[p.S - 1] = OP_ACT_OFFLOAD;
    CHECK_MSG(op_sim_replay(&p, NULL, &e) == OP_OK, "%s", e.msg); /* times under the policies */
    char path[128], dk[128], dp[128];
    snprintf(path, sizeof path, "%s/act-plan.json", tmpdir);
    CHECK(op_plan_write(&p, path, &e) == OP_OK);
    op_plan q;
    int rq = fake_plan(&m, 2, MB, 0, path, &q, &e);
    CHECK_MSG(rq == OP_OK, "%s", e.msg);
    if (rq != OP_OK) return;
    CHECK(q.stage_act[0] == OP_ACT_FULL && q.stage_act[q.S - 1] == OP_ACT_OFFLOAD);
    op_plan_free(&q);
    double lk[STEPS], lp[STEPS];
    op_ptrain_report rk, rp;
    snprintf(dk, sizeof dk, "%s/af-keep", tmpdir);
    snprintf(dp, sizeof dp, "%s/af-file", tmpdir);
    CHECK(pipelined(&m, 2, "1f1b", dk, lk, &rk, 0, STEPS) == OP_OK);
    g_closed_on = 1; /* g_policy stays keep: the file's policies are the ones that count */
    CHECK(pipelined(&m, 2, path, dp, lp, &rp, 0, STEPS) == OP_OK);
    g_closed_on = 0;
    CHECK(!memcmp(lk, lp, sizeof lk));
    /* device 0 holds two stashes (full: two inputs); the last stage runs each microbatch's B
     * right after its F, so its peak is I's, which offload restores */
    CHECK(rp.peak_act[0] < rk.peak_act[0] && rp.peak_act[1] == rk.peak_act[1]);
    op_ptrain_report_free(&rk), op_ptrain_report_free(&rp);
    op_plan_free(&p);
}

/* 2 steps, checkpoint, resume to 4 = 4 uninterrupted (losses and file). */
TEST(resume_bitwise) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/ra", tmpdir);
    snprintf(b, sizeof b, "%s/rb", tmpdir);
    double la[4] = {0}, lb[4] = {0};
    CHECK(pipelined(&m, 2, "zbv", a, la, NULL, 0, 4) == OP_OK);
    CHECK(pipelined(&m, 2, "1f1b", b, lb, NULL, 0, 2) == OP_OK);
    CHECK(pipelined(&m, 2, "zbh1", b, lb, NULL, 1, 4) == OP_OK); /* another plan resumes */
    CHECK(!memcmp(la, lb, sizeof la));
    strcat(a, "/model.ckpt"), strcat(b, "/model.ckpt");
    size_t na, nb;
    char *ca = slurp(a, &na), *cb = slurp(b, &nb);
    CHECK(ca && cb && na == nb && !memcmp(ca, cb, na));
    free(ca), free(cb);
}

TEST(bad_plans_refused) {
    op_nn_model m, other;
    tiny_model(&m, "EM*-#L");
    tiny_model(&other, "EMM*-#L");
    op_plan p;
    op_err e = {0};
    CHECK(fake_plan(&m, 2, MB, 0, "nosuchschedule", &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "nosuchschedule");
    /* a plan file for another model */
    char path[128];
    snprintf(path, sizeof path, "%s/other.json", tmpdir);
    CHECK(fake_plan(&other, 2, MB, 0, "1f1b", &p, &e) == OP_OK);
    CHECK(op_plan_write(&p, path, &e) == OP_OK);
    op_plan_free(&p);
    CHECK(fake_plan(&m, 2, MB, 0, path, &p, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "layers");
    /* ... and the same file for its own model loads, re-predicted with the given costs */
    CHECK(fake_plan(&other, 2, MB, 0.5, path, &p, &e) == OP_OK);
    CHECK(p.pred.valid && p.op_overhead_ms == 0.5);
    op_plan_free(&p);
    /* a profile without a kind the model has */
    op_layer_prof pr[1] = {{.sym = 'E'}};
    op_layer_cost c[64];
    CHECK(op_ptrain_layer_costs(&m, pr, 1, c, &e) == OP_EINVAL);
    CHECK_STR_CONTAINS(e.msg, "'M'");
}

/* The calibration finds the overhead a plan was predicted with. */
TEST(fit_overhead_round_trip) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_plan p, q;
    op_err e;
    CHECK(fake_plan(&m, 2, MB, 0, "1f1b", &p, &e) == OP_OK);
    CHECK(fake_plan(&m, 2, MB, 0.25, "1f1b", &q, &e) == OP_OK);
    CHECK(q.pred.makespan_ms > p.pred.makespan_ms);
    CHECK_NEAR(op_ptrain_fit_overhead(&p, q.pred.makespan_ms), 0.25, 1e-6);
    op_plan_free(&p), op_plan_free(&q);
}

/* Synthetic per-(stage, op) times from known per-kind times `truth` (+ a per-call constant):
 * the least-squares calibration reproduces every row, finds the constant, and moves a kind the
 * data pin down to its true time; with no usable row it reports -1. */
static void synth(const op_nn_model *m, const op_plan *p, const op_layer_prof *truth, int nt,
                  double call, op_ptrain_report *r) {
    memset(r, 0, sizeof *r);
    r->n_quiet = 1;
    for (int s = 0; s < p->S; s++)
        for (int k = 0; k < 4; k++) {
            if (p->stage_split[s] ? k == OP_B : (k == OP_I || k == OP_W)) continue;
            double t = call;
            int pol = p->stage_act[s];
            for (int l = p->stage_first[s]; l < p->stage_first[s + 1]; l++)
                for (int j = 0; j < nt; j++)
                    if (truth[j].sym == m->pattern[l]) {
                        t += k == OP_F ? truth[j].f_ms : k == OP_I ? truth[j].i_ms : k == OP_W ? truth[j].w_ms
                                                                              : truth[j].i_ms + truth[j].w_ms;
                        if (k == OP_I || k == OP_B) /* the recompute runs inside I|B */
                            t += pol == OP_ACT_FULL ? truth[j].f_ms : pol == OP_ACT_SELECTIVE ? truth[j].f_sel_ms : 0;
                    }
            r->ops_quiet[s * 4 + k] = (op_ptrain_opstat){.cpu_ms = 8 * t, .wall_ms = 8 * t, .n = 8};
        }
}

TEST(fit_costs_least_squares) {
    op_nn_model m;
    tiny_model(&m, "EM*-M#-L");
    op_layer_prof prior[6], truth[6], fit[6];
    const char syms[] = "EM*-#L";
    for (int k = 0; k < 6; k++) {
        memset(&prior[k], 0, sizeof prior[k]);
        prior[k].sym = syms[k];
        prior[k].f_ms = 1 + k, prior[k].i_ms = 1 + k, prior[k].w_ms = 0.5 + k;
        truth[k] = prior[k];
    }
    truth[1].f_ms *= 1.3, truth[1].i_ms *= 1.2, truth[1].w_ms *= 1.1; /* Mamba slower in the run */
    op_layer_cost c[64];
    op_ptrain_layer_costs(&m, prior, 6, c, &(op_err){0});
    op_comm comm;
    op_ptrain_default_comm(&comm);
    const char *specs[] = {"1f1b", "zbv", "i1f1b"};
    op_plan p[3];
    op_ptrain_report *r = op_xcalloc(3, sizeof *r);
    op_err e;
    for (int i = 0; i < 3; i++) {
        CHECK(op_ptrain_make_plan(&m, c, 2, MB, &comm, 0, specs[i], &p[i], &e) == OP_OK);
        synth(&m, &p[i], truth, 6, 0.05, &r[i]);
    }
    const op_plan *pp[3] = {&p[0], &p[1], &p[2]};
    const op_ptrain_report *rr[3] = {&r[0], &r[1], &r[2]};
    double call = -1, rms = op_ptrain_fit_costs(&m, pp, rr, 3, prior, 6, 1e-4, fit, &call);
    CHECK(rms >= 0 && rms < 0.5);
    CHECK_NEAR(call, 0.05, 0.02);
    CHECK(fit[1].f_ms > 1.2 * prior[1].f_ms && fit[1].f_ms < 1.4 * prior[1].f_ms);
    CHECK(fit[1].i_ms + fit[1].w_ms > 1.1 * (prior[1].i_ms + prior[1].w_ms));
    CHECK(fit[0].sym == 'E' && fit[5].sym == 'L');
    /* the fitted stage times reproduce the measured ones */
    op_layer_cost fc[64];
    CHECK(op_ptrain_layer_costs(&m, fit, 6, fc, &e) == OP_OK);
    for (int i = 0; i < 3; i++)
        for (int l = 0; l < m.n_layers; l++) p[i].layers[l] = fc[l];
    for (int s = 0; s < p[1].S; s++) {
        double want = r[1].ops_quiet[s * 4 + OP_F].wall_ms / 8 - 0.05;
        CHECK_NEAR(op_stage_ms(&p[1], s, OP_F), want, 0.01 * want);
    }
    /* nothing usable: no quiet rows and no CPU rows */
    for (int i = 0; i < 3; i++) memset(&r[i], 0, sizeof r[i]);
    CHECK(op_ptrain_fit_costs(&m, pp, rr, 3, prior, 6, 0.05, fit, &call) < 0);
    for (int i = 0; i < 3; i++) op_plan_free(&p[i]);
    free(r);
}

/* Runs whose stages recompute: their I|B times carry the re-run forward (full: F, selective:
 * the attention core, 40% of attention's F here), the fit takes it out again and recovers the
 * true times; the fitted f_sel_ms keeps the core's share of the fitted F, so the simulator's
 * I of a recomputing stage equals the measured one. */
TEST(fit_costs_with_recompute) {
    op_nn_model m;
    tiny_model(&m, "EM*-M*-L");
    op_layer_prof prior[6], truth[6], fit[6];
    const char syms[] = "EM*-#L";
    for (int k = 0; k < 6; k++) {
        memset(&prior[k], 0, sizeof prior[k]);
        prior[k].sym = syms[k];
        prior[k].f_ms = 1 + k, prior[k].i_ms = 1 + k, prior[k].w_ms = 0.5 + k;
        prior[k].f_sel_ms = syms[k] == '*' ? 0.4 * prior[k].f_ms : 0;
        truth[k] = prior[k];
    }
    truth[2].f_ms *= 1.25, truth[2].f_sel_ms *= 1.25; /* attention slower in the run */
    op_layer_cost c[64];
    op_ptrain_layer_costs(&m, prior, 6, c, &(op_err){0});
    op_comm comm;
    op_ptrain_default_comm(&comm);
    const char *specs[] = {"1f1b", "zbv", "i1f1b"};
    const uint8_t pol[3] = {OP_ACT_FULL, OP_ACT_SELECTIVE, OP_ACT_KEEP};
    op_plan p[3];
    op_ptrain_report *r = op_xcalloc(3, sizeof *r);
    op_err e;
    for (int i = 0; i < 3; i++) {
        CHECK(op_ptrain_make_plan(&m, c, 2, MB, &comm, 0, specs[i], &p[i], &e) == OP_OK);
        for (int s = 0; s < p[i].S; s += 2) p[i].stage_act[s] = pol[i]; /* every other stage */
        synth(&m, &p[i], truth, 6, 0.05, &r[i]);
    }
    const op_plan *pp[3] = {&p[0], &p[1], &p[2]};
    const op_ptrain_report *rr[3] = {&r[0], &r[1], &r[2]};
    double call = -1, rms = op_ptrain_fit_costs(&m, pp, rr, 3, prior, 6, 1e-4, fit, &call);
    CHECK_MSG(rms >= 0 && rms < 0.5, "rms %.3f%%", rms);
    CHECK_NEAR(fit[2].f_ms, truth[2].f_ms, 0.02 * truth[2].f_ms);
    CHECK_NEAR(fit[2].i_ms, truth[2].i_ms, 0.02 * truth[2].i_ms);
    CHECK_NEAR(fit[2].f_sel_ms, 0.4 * fit[2].f_ms, 1e-12);
    CHECK_NEAR(fit[3].f_sel_ms, 0, 1e-12);
    op_layer_cost fc[64];
    CHECK(op_ptrain_layer_costs(&m, fit, 6, fc, &e) == OP_OK);
    for (int i = 0; i < 2; i++) {
        for (int l = 0; l < m.n_layers; l++) p[i].layers[l] = fc[l];
        for (int s = 0; s < p[i].S; s++) {
            int k = p[i].stage_split[s] ? OP_I : OP_B;
            double want = r[i].ops_quiet[s * 4 + k].wall_ms / 8 - 0.05;
            CHECK_NEAR(op_stage_ms(&p[i], s, (op_kind)k), want, 0.01 * want);
        }
    }
    for (int i = 0; i < 3; i++) op_plan_free(&p[i]);
    free(r);
}

/* Per-step CPU share and per-(stage, op) stats of a real run: every timed op counted once. */
TEST(step_and_op_stats) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_plan p;
    op_err e;
    CHECK(fake_plan(&m, 2, MB, 0, "zbh1", &p, &e) == OP_OK);
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    CHECK(o.progress_thread == 0);
    o.data = "copy";
    o.steps = 4;
    o.eo.quiet = 1;
    op_ptrain_report *r = op_xcalloc(1, sizeof *r);
    CHECK(op_ptrain_run_threads(&m, &p, &o, r, &e) == OP_OK);
    CHECK(r->n_step == 4);
    for (int i = 0; i < r->n_step; i++) CHECK(r->step_ms[i] > 0 && r->step_cpu[i] > 0 && r->step_cpu[i] <= 1.05);
    CHECK(r->n_quiet >= 0 && r->n_quiet <= 3);
    CHECK((r->n_quiet > 0) == (r->meas_ms_quiet > 0));
    for (int s = 0; s < p.S; s++) {
        int64_t want = 3 * MB; /* three timed steps of MB microbatches */
        CHECK(r->ops[s * 4 + OP_F].n == want);
        CHECK(r->ops[s * 4 + (p.stage_split[s] ? OP_W : OP_B)].n == want);
        CHECK(r->ops[s * 4 + OP_F].cpu_ms > 0 && r->ops[s * 4 + OP_F].wall_ms > 0);
        CHECK(r->ops_quiet[s * 4 + OP_F].n == (int64_t)r->n_quiet * MB);
    }
    op_ptrain_report_free(r);
    free(r);
    op_plan_free(&p);
}

/* Sessions of two plans stepped alternately (what bench_model_accuracy does) train exactly as
 * each alone: the losses equal the single-process loop's, and a session keeps the last
 * step's records and reports the steps run so far. */
TEST(sessions_interleaved) {
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    double lref[STEPS];
    char ref[128];
    snprintf(ref, sizeof ref, "%s/single-s", tmpdir);
    single(ref, lref);
    const char *sch[2] = {"1f1b", "zbv"};
    op_plan p[2];
    op_ptrain_session *s[2];
    double l[2][STEPS];
    op_err e = {0};
    for (int k = 0; k < 2; k++) {
        CHECK(fake_plan(&m, 2, MB, 0, sch[k], &p[k], &e) == OP_OK);
        op_ptrain_opts o;
        op_ptrain_opts_default(&o);
        o.data = "copy";
        o.steps = STEPS;
        o.losses = l[k];
        o.keep_result = 1;
        o.eo.quiet = 1;
        CHECK(op_ptrain_session_new(&m, &p[k], &o, &s[k], &e) == OP_OK);
        CHECK(op_ptrain_session_last(s[k]) == NULL);
    }
    for (int t = 0; t < STEPS; t++)
        for (int k = 0; k < 2; k++) {
            CHECK(op_ptrain_session_step(s[k], &e) == OP_OK);
            const op_exec_result *r = op_ptrain_session_last(s[k]);
            CHECK(r && r->P == 2 && r->n_recs[0] == p[k].n_ops[0] && r->busy_ms[1] > 0);
        }
    for (int k = 0; k < 2; k++) {
        CHECK_MSG(!memcmp(l[k], lref, sizeof lref), "%s: interleaved losses differ", sch[k]);
        op_ptrain_report rep;
        op_ptrain_session_report(s[k], &rep);
        CHECK_EQ_INT(rep.steps_run, STEPS);
        CHECK_EQ_INT(rep.n_step, STEPS);
        CHECK(rep.have_last && rep.last.makespan_ms == rep.step_ms[STEPS - 1]);
        CHECK(op_ptrain_session_last(s[k]) == NULL); /* the result moved to the report */
        op_ptrain_report_free(&rep);
        op_ptrain_session_free(s[k]);
        op_plan_free(&p[k]);
    }
}

/* The slow-down wrapper (pipe_slow.c) on 2 ranks with cores of their own spins: rank 1's ops
 * last at least twice their compute (no wait is cut short to make up for an earlier late one),
 * its spins are counted (wall time = at least its compute, CPU time no more than the wall),
 * and rank 0 (k = 1) never waits. */
TEST(slowed_rank_spins_counted) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2) return; /* one core: the wrapper naps instead (no spin to count) */
    op_nn_model m;
    tiny_model(&m, "EM*-#L");
    op_plan p;
    op_err e = {0};
    CHECK(fake_plan(&m, 2, MB, 0, "1f1b", &p, &e) == OP_OK);
    double k[2] = {1, 2}, inner = 0; /* rank 1's emulated compute: its ops' modelled times */
    for (int x = 0; x < p.n_ops[1]; x++) inner += op_stage_ms(&p, p.ops[1][x].stage, p.ops[1][x].kind);
    op_ptrain_slow s = {.inner = op_compute_emulate(), .p = &p, .k = k};
    op_compute cmp = op_ptrain_slow_compute(&s);
    op_exec_result r;
    CHECK(op_exec_run_threads(&p, &cmp, NULL, &r, &e) == OP_OK);
    CHECK(s.spin_wall[0] == 0 && s.spin_cpu[0] == 0);
    CHECK_MSG(1e3 * s.spin_wall[1] >= 0.999 * inner, "spins %.2f ms, compute %.2f ms", 1e3 * s.spin_wall[1], inner);
    CHECK(s.spin_cpu[1] > 0 && s.spin_cpu[1] <= s.spin_wall[1] * 1.01 + 1e-4);
    CHECK_MSG(r.busy_ms[1] >= 2 * 0.999 * inner, "rank 1 busy %.2f ms, 2 x compute %.2f ms", r.busy_ms[1], 2 * inner);
    op_exec_result_free(&r);
    op_plan_free(&p);
}

/* Library calls with arguments a caller could plausibly pass: a plan made for another model,
 * zero plans or rounds, a plan index out of range, a slow-down of 0 or NaN.  Each is an error
 * (or no samples), nothing is changed, never an abort. */
TEST(bad_arguments_refused) {
    op_nn_model m, other;
    tiny_model(&m, "EM*-#L");
    tiny_model(&other, "EM-L");
    op_plan p;
    op_err e = {0};
    CHECK(fake_plan(&other, 2, 2, 0, "1f1b", &p, &e) == OP_OK);
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy", o.steps = 1, o.eo.quiet = 1;
    op_ptrain_report rep;
    CHECK_EQ_INT(op_ptrain_run_threads(&m, &p, &o, &rep, &e), OP_EINVAL);
    CHECK_MSG(strstr(e.msg, "has 4 layers, model EM*-#L has 6"), "%s", e.msg);
    op_ptrain_session *ss = (op_ptrain_session *)&e;
    CHECK_EQ_INT(op_ptrain_session_new(&m, &p, &o, &ss, &e), OP_EINVAL);
    CHECK(ss == NULL);
    op_train_data d;
    CHECK(op_train_data_open(&d, "copy", &m.cfg, 1, &e) == OP_OK);
    CHECK(op_ptrain_new(&m, &d, &p, -1) == NULL);
    op_train_data_free(&d);
    const op_plan *plans[1] = {&p};
    op_ptrain_turns tu;
    CHECK_EQ_INT(op_ptrain_run_turns(&other, plans, 0, &o, 2, &tu, &e), OP_EINVAL);
    CHECK_EQ_INT(op_ptrain_run_turns(&other, plans, 1, &o, 0, &tu, &e), OP_EINVAL);
    CHECK_MSG(strstr(e.msg, "turns: 1 plans and 0 rounds"), "%s", e.msg);
    op_ptrain_turns_free(&tu);
    op_ptrain_turns t0 = {.n = 1, .rounds = 1, .P = 2};
    double out[8];
    CHECK_EQ_INT(op_ptrain_speed_samples(&t0, 1, &p, out), 0); /* no plan 1 (t0.rep unread) */
    CHECK_EQ_INT(op_ptrain_speed_samples(&t0, -1, &p, out), 0);
    t0.P = 3;
    CHECK_EQ_INT(op_ptrain_speed_samples(&t0, 0, &p, out), 0); /* pred has 2 devices */
    double k0[2] = {1, 0}, kn[2] = {NAN, 1};
    double mk = p.pred.makespan_ms;
    op_layer_cost costs[64];
    fake_costs(&other, costs);
    CHECK_EQ_INT(op_ptrain_slowdown_plan(&p, costs, k0, &e), OP_EINVAL);
    CHECK_MSG(strstr(e.msg, "slow-down of device 1: 0"), "%s", e.msg);
    CHECK_EQ_INT(op_exec_slow_plan(&p, kn), OP_EINVAL);
    CHECK(p.n_types <= 1 && p.pred.makespan_ms == mk); /* unchanged */
    op_plan_free(&p);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    mktmp();
    RUN(equivalence_every_schedule);
    RUN(memory_and_loss);
    RUN(policies_bitwise_and_memory);
    RUN(plan_file_activation_runs_as_is);
    RUN(copy_engine_overlaps);
    RUN(out_of_threads_is_an_error);
    RUN(recompute_adds_the_forward_to_i);
    RUN(resume_bitwise);
    RUN(bad_plans_refused);
    RUN(bad_arguments_refused);
    RUN(fit_overhead_round_trip);
    RUN(fit_costs_least_squares);
    RUN(fit_costs_with_recompute);
    RUN(step_and_op_stats);
    RUN(sessions_interleaved);
    RUN(slowed_rank_spins_counted);
    rmtmp();
    return check_report("ptrain");
}
