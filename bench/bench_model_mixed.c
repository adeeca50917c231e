/* bench_model_mixed.c: the reference model on a mixed cluster, measured for real on this
 * machine (`make bench-model`).  Rank 1 is a device half as fast as rank 0 (`--slowdown 1,2`
 * of `octopipe train`: after each op it waits as long as the op took, src/train/pipe_slow.c).
 *
 * Method, as bench_model_accuracy's: model `small`, P = 2, M = 8, in-process ranks pinned to
 * the two cores.  Four uniform plans (1f1b and zbv with no rank slowed, x1,x1, and with every
 * rank slowed x2, x2,x2) and three mixed ones (1f1b and zbv with rank 1 slowed, and the
 * tuner's plan for the mixed costs) each keep a training session and take turns step by step
 * for --rounds rounds: a round is one step of each plan, the order rotated and reversed from
 * round to round, so every mixed step has uniform steps within a few seconds of it.
 *
 * Each device kind is calibrated on uniform runs of its own kind, as one profiles each GPU
 * type (op_ptrain_calibrate): the x1 kind's per-layer-kind F/I/W times and the per-op overhead
 * on the x1,x1 plans' steps; the x2 kind's on the x2,x2 plans' (the compute inside their ops,
 * an op lasting 2 x that).  Why: a rank slowed x2 computes a few % slower than in a uniform
 * run (its compute alternates with spins: caches, clock), so costs from x1 runs alone put
 * every mixed plan's prediction low.  Each plan is predicted from the costs of its ranks' own
 * kinds (op_ptrain_slowdown_plan_kinds).  No number of a mixed run enters its prediction.
 *
 * Why per round: this VM's cores drift in speed by 5-20% for seconds at a time, and other
 * jobs share them, so a whole-run mean of one plan against a whole-run prediction moved by ~5
 * points between runs minutes apart.  So each round is its own comparison: the round's
 * uniform steps give the ranks' speed at that moment (measured busy / predicted busy of each
 * rank, op_ptrain_speed_samples' rule, each rank from the steps of its own kind), the mixed
 * plan is replayed under those speeds (op_sim_speed_samples), and the round's ratio is its
 * mixed step over that.  A round counts when the mixed step is quiet (every rank on a CPU >=
 * 97% of its compute time, spins included) and so is a uniform step of each of its kinds.
 * Reported: the median of the per-round errors and their
 * interquartile range; target: every mixed plan's median within 3%.  The whole-run figure
 * (trimmed mean of quiet steps against the prediction under all rounds' speeds) is shown too.
 *
 * --trace adds, per plan, where a step's time goes: its critical path (walked back from the op
 * that ends last, each op's predecessor being whichever of its rank's previous op and its
 * producer ended later) split into each rank's op time and the gaps between ops (messages,
 * reaction), measured (mean over quiet steps) and predicted; each rank's summed op time and
 * how much longer its ops are than the compute inside them (a slowed rank's: k); how much the
 * predicted makespan moves when one rank's ops take 10% longer; and each rank's compute CPU
 * time against the fitted op times (thread CPU time: what other jobs on the cores move least).
 * Usage: bench_model_mixed [--rounds N] (5..254, default 40) [--trace] [--quiet SHARE] (default 0.97)
 *          [--poll-us U] (executor wait poll, every plan: 0 = the executor's default) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

#include "args.h"

#define NP 2
#define NK 2                /* device kinds: x1 and x(KF) */
#define KF 2.0              /* the slowed kind's factor */
#define NUK 2               /* uniform (calibration) plans per kind: 1f1b, zbv */
#define NU (NK * NUK)       /* uniform plans */
#define NM 3                /* mixed plans */
#define NPL (NU + NM)
#define NCOMB (NUK * NUK)   /* speed samples of one round for a plan of both kinds */
#define NCP (2 * NP + 1) /* critical path: ops of rank d, gaps before them, step start */

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of v[n] (sorted), linear between neighbours. */
static double quantile(const double *v, int n, double q) {
    if (n <= 0) return 0;
    double h = q * (n - 1);
    int i = (int)h;
    return i + 1 < n ? v[i] + (h - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* Index of op (kind, stage, mb) in [slot][S][M] (slot: F 0, I|B 1, W 2). */
static int op_id(const op_plan *p, int kind, int s, int mb) {
    int slot = kind == OP_F ? 0 : kind == OP_W ? 2 : 1;
    return (slot * p->S + s) * p->M + mb;
}

/* The critical path of one step whose op x of rank d ran [st, en][d * nmax + x] (plan order).
 * Adds to cp[d] the op time of rank d on it, to cp[NP + d] the gaps before rank d's ops on it
 * (waiting for a message beyond its transfer, or reacting late), to cp[2 * NP] the time before
 * its first op.  `where` maps op_id to d * nmax + x. */
static void crit_path(const op_plan *p, int nmax, const int *where, const double *st,
                      const double *en, double *cp) {
    int cur = -1;
    for (int d = 0; d < p->P; d++)
        if (p->n_ops[d] && (cur < 0 || en[d * nmax + p->n_ops[d] - 1] > en[cur])) cur = d * nmax + p->n_ops[d] - 1;
    while (cur >= 0) {
        int d = cur / nmax, x = cur % nmax;
        const op_op *o = &p->ops[d][x];
        cp[d] += en[cur] - st[cur];
        int prev = x > 0 ? cur - 1 : -1, prod = -1;
        if (o->kind == OP_F && o->stage > 0) prod = where[op_id(p, OP_F, o->stage - 1, o->mb)];
        else if (o->kind == OP_W) prod = where[op_id(p, OP_I, o->stage, o->mb)];
        else if (o->kind != OP_F)
            prod = where[o->stage + 1 < p->S ? op_id(p, OP_I, o->stage + 1, o->mb) : op_id(p, OP_F, o->stage, o->mb)];
        int pred = prev >= 0 && (prod < 0 || en[prev] >= en[prod]) ? prev : prod;
        if (pred < 0) {
            cp[2 * NP] += st[cur];
            break;
        }
        cp[NP + d] += st[cur] - en[pred];
        cur = pred;
    }
}

/* --trace: where plan i's step time goes, q being its prediction and fac its ranks' factors.
 * The critical path measured (mean over quiet steps) vs predicted; each rank's summed op
 * time and its ratio to the compute inside its ops; the predicted makespan's sensitivity to
 * each rank; each rank's compute CPU time against the fitted op times of its kind. */
static void print_trace(const op_plan *q, const op_ptrain_report *r, const double *fac, const double *st,
                        const double *en, const double *mbusy, int i, int rounds, int nmax, int *where,
                        double quiet) {
    const size_t per = (size_t)NP * nmax;
    op_err e = {0};
    for (int d = 0; d < NP; d++)
        for (int x = 0; x < q->n_ops[d]; x++)
            where[op_id(q, q->ops[d][x].kind, q->ops[d][x].stage, q->ops[d][x].mb)] = d * nmax + x;
    double cm[NCP] = {0}, cpr[NCP] = {0}, bm[NP] = {0}, bp[NP];
    double *ps = op_xcalloc(per, sizeof(double)), *pe = op_xcalloc(per, sizeof(double));
    for (int d = 0; d < NP; d++)
        for (int x = 0; x < q->n_ops[d]; x++) ps[d * nmax + x] = q->ops[d][x].start, pe[d * nmax + x] = q->ops[d][x].end;
    crit_path(q, nmax, where, ps, pe, cpr);
    op_exec_pred_bubble(q, bp);
    int nq = 0;
    for (int rr = 0; rr < rounds; rr++) {
        if (r->step_cpu[rr + 1] < quiet) continue;
        size_t at = ((size_t)i * rounds + rr) * per;
        crit_path(q, nmax, where, st + at, en + at, cm);
        for (int d = 0; d < NP; d++) bm[d] += mbusy[((size_t)i * rounds + rr) * NP + d];
        nq++;
    }
    for (int c = 0; c < NCP; c++) cm[c] /= nq ? nq : 1;
    printf("   critical path ms   ");
    for (int d = 0; d < NP; d++) printf("ops r%d %7.2f/%-7.2f gaps r%d %5.2f/%-5.2f ", d, cm[d], cpr[d], d, cm[NP + d], cpr[NP + d]);
    printf("start %.2f/%.2f  (measured over %d quiet steps/predicted)\n", cm[2 * NP], cpr[2 * NP], nq);
    /* a slowed rank's ops should last k x the compute inside them (pipe_slow.c) */
    double inner[NP] = {0}, ball[NP] = {0}, cpu[NP] = {0}, fitted[NP] = {0};
    for (int s = 0; s < q->S; s++)
        for (int kk = 0; kk < 4; kk++) {
            const op_ptrain_opstat *o = &r->ops[s * 4 + kk];
            int d = q->stage_dev[s];
            inner[d] += o->wall_ms, cpu[d] += o->cpu_ms;
            fitted[d] += (double)o->n * op_stage_ms(q, s, (op_kind)kk) / fac[d];
        }
    for (int rr = 0; rr < rounds; rr++)
        for (int d = 0; d < NP; d++) ball[d] += mbusy[((size_t)i * rounds + rr) * NP + d];
    printf("   summed op time ms  ");
    for (int d = 0; d < NP; d++)
        printf("r%d %7.2f/%-7.2f (op / compute inside: x%.4f)  ", d, nq ? bm[d] / nq : 0, bp[d],
               inner[d] > 0 ? ball[d] / inner[d] : 0);
    /* how much each rank's op time moves the predicted makespan: +10% on one rank */
    printf("\n   makespan if one rank's ops take 10%% longer (predicted):");
    for (int d = 0; d < NP; d++) {
        double f[NP], mk;
        for (int j = 0; j < NP; j++) f[j] = j == d ? 1.1 : 1;
        OP_ASSERT(op_sim_speed_samples(q, f, 1, &mk, &e) == OP_OK, "%s", e.msg);
        printf(" r%d %+.2f%%", d, 100 * (mk / q->pred.makespan_ms - 1));
    }
    /* compute CPU time against the fitted op times of the rank's kind: what a load moves least */
    printf("\n   compute CPU time vs fitted op times (all timed steps) ");
    for (int d = 0; d < NP; d++) printf(" r%d %+.2f%%", d, fitted[d] > 0 ? 100 * (cpu[d] / fitted[d] - 1) : 0);
    printf("\n");
    free(ps), free(pe);
}

int main(int argc, char **argv) {
    int rounds = 40, M = 8, trace = 0;
    double poll_us = 0, quiet = 0.97;
    long roundl = rounds;
    _Static_assert(OP_PTRAIN_MAX_STEPS - 2 == 254, "the usage names the most rounds");
    ba_args args = {"bench_model_mixed", "[--rounds 5..254] [--trace] [--quiet SHARE] [--poll-us US]",
                 argc, argv, 0, 0, 0};
    while (ba_next(&args)) {
        if (ba_long(&args, "--rounds", 5, OP_PTRAIN_MAX_STEPS - 2, &roundl)) {}
        else if (ba_double(&args, "--poll-us", 0, 1e6, &poll_us)) {}
        else if (ba_double(&args, "--quiet", 0, 1, &quiet)) {}
        else if (ba_flag(&args, "--trace")) trace = 1;
        else ba_unknown(&args);
    }
    if (ba_status(&args) >= 0) return ba_status(&args);
    rounds = (int)roundl;
    op_nn_model m;
    op_err e = {0};
    OP_ASSERT(op_nn_model_from_spec(&m, "small", &e) == OP_OK, "%s", e.msg);
    op_layer_prof prof[8];
    int np = op_ptrain_profile_ranks(&m, 9, NP, 1, prof, &e);
    OP_ASSERT(np >= 0, "%s", e.msg);
    op_layer_cost *costs = op_xcalloc((size_t)m.n_layers, sizeof *costs);
    OP_ASSERT(op_ptrain_layer_costs(&m, prof, np, costs, &e) == OP_OK, "%s", e.msg);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    const double ovh0 = 0.05, k[NP] = {1, 2};

    /* plans: uniform x1 1f1b, zbv; uniform x2 1f1b, zbv; mixed 1f1b, zbv, and the tuner's for
     * costs x k.  fac[i]: each rank's slow-down in plan i (its device kind) */
    const char *names[NPL] = {"1f1b", "zbv", "1f1b", "zbv", "1f1b", "zbv", "tuned"};
    double fac[NPL][NP];
    for (int i = 0; i < NPL; i++)
        for (int d = 0; d < NP; d++) fac[i][d] = i < NUK ? 1 : i < NU ? KF : k[d];
    op_plan plans[NPL];
    for (int i = 0; i < NPL; i++) {
        if (i < NPL - 1) {
            OP_ASSERT(op_ptrain_make_plan(&m, costs, NP, M, &comm, ovh0, names[i], &plans[i], &e) == OP_OK,
                      "%s", e.msg);
            if (i >= NUK) OP_ASSERT(op_ptrain_slowdown_plan(&plans[i], costs, fac[i], &e) == OP_OK, "%s", e.msg);
        } else {
            OP_ASSERT(op_ptrain_tune_slow(&m, costs, NP, M, &comm, ovh0, k, &plans[i], &e) == OP_OK, "%s", e.msg);
        }
    }

    /* sessions taking turns; all but the x1 plans slowed down */
    op_ptrain_opts ou, o2, om;
    op_ptrain_opts_default(&ou);
    ou.data = "copy", ou.log_every = 0, ou.pin_cores = 1, ou.keep_result = 1;
    ou.steps = rounds + 1;
    ou.quiet_share = quiet;
    if (poll_us > 0) ou.eo.poll_us = ou.eo.poll_max_us = poll_us, ou.eo.poll_growth = 1e-12;
    o2 = om = ou;
    o2.slowdown = fac[NUK];
    om.slowdown = k;
    op_ptrain_session *ss[NPL];
    int nmax = 0;
    for (int i = 0; i < NPL; i++) {
        const op_ptrain_opts *o = i < NUK ? &ou : i < NU ? &o2 : &om;
        OP_ASSERT(op_ptrain_session_new(&m, &plans[i], o, &ss[i], &e) == OP_OK, "%s", e.msg);
        OP_ASSERT(op_ptrain_session_step(ss[i], &e) == OP_OK, "%s", e.msg); /* warm-up */
        for (int d = 0; d < NP; d++) nmax = plans[i].n_ops[d] > nmax ? plans[i].n_ops[d] : nmax;
    }
    /* every step's op times, plan order: [plan][round][d * nmax + x]; busy ms [plan][round][d] */
    const size_t per = (size_t)NP * nmax;
    double *st = op_xcalloc((size_t)NPL * rounds * per, sizeof(double));
    double *en = op_xcalloc((size_t)NPL * rounds * per, sizeof(double));
    double *mbusy = op_xcalloc((size_t)NPL * rounds * NP, sizeof(double));
    double t0 = op_now_s();
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < NPL; j++) {
            int i = (r + (r % 2 ? NPL - 1 - j : j)) % NPL; /* rotated, every other round reversed */
            OP_ASSERT(op_ptrain_session_step(ss[i], &e) == OP_OK, "%s", e.msg);
            const op_exec_result *res = op_ptrain_session_last(ss[i]);
            OP_ASSERT(res && op_exec_check_order(res, &plans[i], &e) == OP_OK, "%s", e.msg);
            for (int d = 0; d < NP; d++) {
                mbusy[((size_t)i * rounds + r) * NP + d] = res->busy_ms[d];
                for (int x = 0; x < res->n_recs[d]; x++) {
                    size_t at = ((size_t)i * rounds + r) * per + (size_t)d * nmax + x;
                    st[at] = res->recs[d][x].start, en[at] = res->recs[d][x].end;
                }
            }
        }
    op_ptrain_report rep[NPL];
    for (int i = 0; i < NPL; i++) op_ptrain_session_report(ss[i], &rep[i]);

    /* calibration per device kind, each on the uniform plans of that kind only: the x1 kind
     * on the x1,x1 plans (prior: the isolated profile), the x2 kind on the x2,x2 plans (the
     * compute inside their ops; prior: the x1 kind's fit, so that what the x2 runs cannot
     * separate keeps its shape).  The x2 device's op is KF x that compute (pipe_slow.c). */
    op_ptrain_turns t[NK];
    op_layer_prof fit[NK][8];
    op_layer_cost *cal[NK];
    double ovh[NK], rms[NK], *speed = op_xcalloc((size_t)NUK * rounds * NP, sizeof(double));
    int ns = 0;
    for (int c = 0; c < NK; c++) {
        memset(&t[c], 0, sizeof t[c]);
        t[c].n = NUK, t[c].rounds = rounds, t[c].P = NP, t[c].quiet = quiet;
        t[c].rep = rep + c * NUK;
        t[c].busy = mbusy + (size_t)c * NUK * rounds * NP;
        cal[c] = op_xcalloc((size_t)m.n_layers, sizeof *cal[c]);
        ovh[c] = ovh0;
        const op_plan *pp[NUK];
        for (int u = 0; u < NUK; u++) pp[u] = &plans[c * NUK + u];
        rms[c] = op_ptrain_calibrate(&m, pp, &t[c], -1, c ? fit[0] : prof, np, fit[c], cal[c], &ovh[c],
                                     c ? NULL : speed, &ns);
        OP_ASSERT(rms[c] >= 0, "calibration of the x%g kind failed", c ? KF : 1.0);
    }
    /* plan i predicted from its ranks' own kinds' costs, at the x1 calibration's per-op
     * overhead (one executor) */
    op_plan q[NPL];
    for (int i = 0; i < NPL; i++) {
        const op_layer_cost *dc[NP];
        for (int d = 0; d < NP; d++) dc[d] = cal[fac[i][d] > 1];
        op_plan_copy(&q[i], &plans[i]);
        q[i].op_overhead_ms = ovh[0];
        OP_ASSERT(op_ptrain_slowdown_plan_kinds(&q[i], dc, fac[i], &e) == OP_OK, "%s", e.msg);
    }
    /* each uniform step's per-rank speed against its kind's costs (0 = not quiet), as
     * op_ptrain_speed_samples rules */
    double *sp = op_xcalloc((size_t)NU * rounds * NP, sizeof(double));
    for (int i = 0; i < NU; i++) {
        double pb[NP];
        op_exec_pred_bubble(&q[i], pb);
        for (int r = 0; r < rounds; r++)
            for (int d = 0; d < NP && rep[i].step_cpu[r + 1] >= quiet; d++)
                sp[((size_t)i * rounds + r) * NP + d] = pb[d] > 0 ? mbusy[((size_t)i * rounds + r) * NP + d] / pb[d] : 1;
    }
    /* each uniform plan's standing in its kind, per rank: its mean speed over its quiet steps
     * over the mean of its kind's plans' (what the per-kind fit leaves on that schedule's
     * stages: a stage's layers together run a little faster or slower than the sum of their
     * fitted times, by up to a few %).  A plan with the same schedule (the same stages on each
     * rank) takes it with its rank's speed in each round below. */
    double stand[NU][NP];
    for (int d = 0; d < NP; d++)
        for (int c = 0; c < NK; c++) {
            double ms[NUK], mk = 0;
            int nk = 0;
            for (int u = 0; u < NUK; u++) {
                double sum = 0;
                int n = 0;
                for (int r = 0; r < rounds; r++) {
                    double v = sp[((size_t)(c * NUK + u) * rounds + r) * NP + d];
                    sum += v, n += v > 0;
                }
                ms[u] = n ? sum / n : 0;
                mk += ms[u], nk += n > 0;
            }
            for (int u = 0; u < NUK; u++) stand[c * NUK + u][d] = ms[u] > 0 ? ms[u] / (mk / nk) : 1;
        }
    double w1 = 0, w2 = 0;
    for (int l = 0; l < m.n_layers; l++)
        w1 += cal[0][l].f_ms + cal[0][l].i_ms + cal[0][l].w_ms, w2 += cal[1][l].f_ms + cal[1][l].i_ms + cal[1][l].w_ms;
    printf("model %s (%s), P=%d, M=%d, %d rounds x 1 step per plan (%.0f s); rank 1 slowed x%g%s\n",
           m.name, m.pattern, NP, M, rounds, op_now_s() - t0, k[1], poll_us > 0 ? ", waits poll" : "");
    printf("calibrated on the uniform plans: fit residual %.1f%%, per-op overhead %.3f ms, %d speed samples\n",
           rms[0], ovh[0], ns);
    printf("x%g kind calibrated on the x%g,x%g plans: fit residual %.1f%%, compute inside an op x%.4f the x1 kind's"
           " (F+I+W over the layers)\n", KF, KF, KF, rms[1], w1 > 0 ? w2 / w1 : 0);
    printf("%-6s %-6s %9s %9s %7s %6s | %7s %15s %6s\n", "plan", "ranks", "pred ms", "meas ms", "err %",
           "quiet", "round%", "IQR %", "rounds");
    double worst = 0, *ratio = op_xcalloc((size_t)rounds, sizeof(double));
    /* speed samples of one round: up to NUK^NK vectors; of all rounds, for the whole-run figure */
    double *all = op_xcalloc((size_t)rounds * NCOMB * NP, sizeof(double));
    int *where = op_xcalloc((size_t)3 * 64 * M, sizeof(int));
    for (int i = 0; i < NPL; i++) {
        const op_ptrain_report *r = &rep[i];
        /* per round: this plan's step against its prediction at the round's speeds.  Rank d's
         * speed comes from the round's quiet uniform steps of its own kind; ranks of one kind
         * read one step together (a pipeline waits for whichever rank is slow at the moment),
         * ranks of different kinds pair every such step of the one with every one of the other;
         * times its schedule's standing in the kind, where a uniform plan of the kind has it */
        int nr = 0, na = 0;
        for (int rr = 0; rr < rounds; rr++) {
            double s[NCOMB * NP], bias[NP];
            int n = 0, used[NK] = {0};
            for (int d = 0; d < NP; d++) {
                int c = fac[i][d] > 1;
                used[c] = 1, bias[d] = 1;
                for (int u = c * NUK; u < (c + 1) * NUK; u++)
                    if (!strcmp(names[u], names[i])) bias[d] = stand[u][d];
            }
            for (int c0 = 0; c0 < (used[0] ? NUK : 1); c0++)
                for (int c1 = 0; c1 < (used[1] ? NUK : 1); c1++) {
                    int ok = 1;
                    for (int d = 0; d < NP; d++) {
                        int c = fac[i][d] > 1, u = c * NUK + (c ? c1 : c0);
                        s[n * NP + d] = bias[d] * sp[((size_t)u * rounds + rr) * NP + d];
                        ok &= s[n * NP + d] > 0;
                    }
                    n += ok;
                }
            memcpy(all + (size_t)na * NP, s, sizeof(double) * (size_t)n * NP);
            na += n;
            if (n && r->step_cpu[rr + 1] >= quiet)
                ratio[nr++] = 100 * (r->step_ms[rr + 1] / op_ptrain_expected_ms(&q[i], s, n) - 1);
        }
        double pred = op_ptrain_expected_ms(&q[i], all, na);
        double meas = r->n_quiet > 0 ? r->meas_ms_quiet : r->meas_ms_trimmed;
        double err = 100 * (meas - pred) / pred;
        qsort(ratio, (size_t)nr, sizeof *ratio, cmp_d);
        double med = quantile(ratio, nr, 0.5);
        if (i >= NU && (nr == 0 || fabs(med) > worst)) worst = nr ? fabs(med) : INFINITY;
        char ranks[32];
        snprintf(ranks, sizeof ranks, "x%g,x%g", fac[i][0], fac[i][1]);
        printf("%-6s %-6s %9.2f %9.2f %+7.2f %2d/%-3d | ", names[i], ranks, pred, meas, err, r->n_quiet, rounds);
        if (nr) printf("%+7.2f  [%+5.2f, %+5.2f]", med, quantile(ratio, nr, 0.25), quantile(ratio, nr, 0.75));
        else printf("%7s  %15s", "-", "-");
        printf(" %3d/%-3d%s\n", nr, rounds, i < NU ? "  (calibration)" : "");
        if (trace) print_trace(&q[i], r, fac[i], st, en, mbusy, i, rounds, nmax, where, quiet);
    }
    if (isinf(worst)) printf("mixed plans: a plan has no quiet round (other work on the cores): MISS\n");
    else printf("mixed plans: worst median per-round error %.2f%% (target 3%%): %s\n", worst, worst <= 3 ? "PASS" : "MISS");
    for (int i = 0; i < NPL; i++) {
        op_ptrain_report_free(&rep[i]);
        op_ptrain_session_free(ss[i]);
        op_plan_free(&plans[i]);
        op_plan_free(&q[i]);
    }
    for (int c = 0; c < NK; c++) free(cal[c]);
    free(speed), free(costs), free(sp), free(ratio), free(where), free(all);
    free(st), free(en), free(mbusy);
    return 0;
}
