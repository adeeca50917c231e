/* bench_model_mixed.c: the reference model on a mixed cluster, measured for real on this
 * machine (`make bench-model`).  Rank 1 is a device half as fast as rank 0 (`--slowdown 1,2`
 * of `octopipe train`: after each op it waits as long as the op took, src/train/pipe_slow.c).
 *
 * Method, as bench_model_accuracy's: model `small`, P = 2, M = 8, in-process ranks pinned to
 * the two cores.  Two uniform plans (1f1b, zbv) and three mixed ones (1f1b and zbv with rank 1
 * slowed, and the tuner's plan for the mixed costs) each keep a training session and take
 * turns step by step for --rounds rounds (so the machine's drift touches all alike).  The
 * per-kind F/I/W times, per-op overhead and the ranks' speed spread are calibrated on the
 * UNIFORM plans' steps only (op_ptrain_calibrate); each mixed plan is then predicted from
 * those costs x each rank's factor (op_ptrain_slowdown_plan) under the speed samples
 * (op_ptrain_expected_ms).  No number of a mixed run enters its prediction.  Measured: the
 * trimmed mean over quiet steps (every rank on a CPU >= 97% of its compute time).
 * Target: within 3%.  Usage: bench_model_mixed [--rounds N] (default 40). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

#define NP 2
#define NU 2 /* uniform (calibration) plans */
#define NM 3 /* mixed plans */

int main(int argc, char **argv) {
    int rounds = 40, M = 8;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
    if (rounds < 5 || rounds > OP_PTRAIN_MAX_STEPS - 2) rounds = 40;
    op_nn_model m;
    op_err e = {0};
    OP_ASSERT(op_nn_model_from_spec(&m, "small", &e) == OP_OK, "%s", e.msg);
    op_layer_prof prof[8];
    int np = op_ptrain_profile_ranks(&m, 9, NP, 1, prof);
    op_layer_cost *costs = op_xcalloc((size_t)m.n_layers, sizeof *costs);
    OP_ASSERT(op_ptrain_layer_costs(&m, prof, np, costs, &e) == OP_OK, "%s", e.msg);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    const double ovh0 = 0.05, k[NP] = {1, 2};
    const int dev_type[NP] = {0, 1};

    /* plans: uniform 1f1b, zbv; mixed 1f1b, zbv, and the tuner's for costs x k */
    const char *names[NU + NM] = {"1f1b", "zbv", "1f1b", "zbv", "tuned"};
    op_plan plans[NU + NM];
    for (int i = 0; i < NU + NM; i++) {
        if (i < NU + NM - 1) {
            OP_ASSERT(op_ptrain_make_plan(&m, costs, NP, M, &comm, ovh0, names[i], &plans[i], &e) == OP_OK,
                      "%s", e.msg);
            if (i >= NU) OP_ASSERT(op_ptrain_slowdown_plan(&plans[i], costs, k, &e) == OP_OK, "%s", e.msg);
            continue;
        }
        op_layer_cost *rows = op_xcalloc((size_t)2 * m.n_layers, sizeof *rows);
        for (int t = 0; t < 2; t++)
            for (int l = 0; l < m.n_layers; l++) {
                op_layer_cost c = costs[l];
                c.f_ms *= k[t], c.i_ms *= k[t], c.w_ms *= k[t], c.f_sel_ms *= k[t];
                rows[(size_t)t * m.n_layers + l] = c;
            }
        op_problem pr;
        memset(&pr, 0, sizeof pr);
        pr.model = m.name, pr.layers = rows, pr.n_layers = m.n_layers, pr.P = NP, pr.M = M;
        pr.comm = comm, pr.tokens_per_mb = (double)m.cfg.batch * m.cfg.seq, pr.op_overhead_ms = ovh0;
        pr.n_types = 2, pr.type_layers = rows, pr.dev_type = dev_type;
        op_tune_opts to;
        op_tune_opts_default(&to);
        OP_ASSERT(op_tune(&pr, &to, &plans[i], &e) == OP_OK, "%s", e.msg);
        free(rows);
    }

    /* sessions taking turns; the mixed ones slowed down */
    op_ptrain_opts ou, om;
    op_ptrain_opts_default(&ou);
    ou.data = "copy", ou.log_every = 0, ou.pin_cores = 1, ou.keep_result = 1;
    ou.steps = rounds + 1;
    om = ou;
    om.slowdown = k;
    op_ptrain_session *ss[NU + NM];
    for (int i = 0; i < NU + NM; i++) {
        OP_ASSERT(op_ptrain_session_new(&m, &plans[i], i < NU ? &ou : &om, &ss[i], &e) == OP_OK, "%s", e.msg);
        OP_ASSERT(op_ptrain_session_step(ss[i], &e) == OP_OK, "%s", e.msg); /* warm-up */
    }
    op_ptrain_turns t;
    memset(&t, 0, sizeof t);
    t.n = NU, t.rounds = rounds, t.P = NP, t.quiet = 0.97;
    t.rep = op_xcalloc(NU, sizeof *t.rep);
    t.busy = op_xcalloc((size_t)NU * rounds * NP, sizeof(double));
    double t0 = op_now_s();
    const int n = NU + NM;
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < n; j++) {
            int i = (r + (r % 2 ? n - 1 - j : j)) % n; /* rotated, every other round reversed */
            OP_ASSERT(op_ptrain_session_step(ss[i], &e) == OP_OK, "%s", e.msg);
            const op_exec_result *res = op_ptrain_session_last(ss[i]);
            for (int d = 0; i < NU && res && d < NP; d++) t.busy[((size_t)i * rounds + r) * NP + d] = res->busy_ms[d];
        }
    op_ptrain_report rep[NU + NM];
    for (int i = 0; i < n; i++) op_ptrain_session_report(ss[i], &rep[i]);
    for (int i = 0; i < NU; i++) t.rep[i] = rep[i];

    /* calibration on the uniform plans only */
    op_layer_prof fit[8];
    op_layer_cost *cal = op_xcalloc((size_t)m.n_layers, sizeof *cal);
    double ovh = ovh0, *speed = op_xcalloc((size_t)NU * rounds * NP, sizeof(double));
    int ns = 0;
    const op_plan *pp[NU] = {&plans[0], &plans[1]};
    double rms = op_ptrain_calibrate(&m, pp, &t, -1, prof, np, fit, cal, &ovh, speed, &ns);
    OP_ASSERT(rms >= 0, "calibration failed");
    printf("model %s (%s), P=%d, M=%d, %d rounds x 1 step per plan (%.0f s); rank 1 slowed x%g\n",
           m.name, m.pattern, NP, M, rounds, op_now_s() - t0, k[1]);
    printf("calibrated on the uniform plans: fit residual %.1f%%, per-op overhead %.3f ms, %d speed samples\n",
           rms, ovh, ns);
    printf("%-8s %-6s %10s %10s %8s %7s\n", "plan", "ranks", "pred ms", "meas ms", "err %", "quiet");
    double worst = 0;
    for (int i = 0; i < n; i++) {
        op_plan q;
        op_plan_copy(&q, &plans[i]);
        q.op_overhead_ms = ovh;
        double one[NP] = {1, 1};
        OP_ASSERT(op_ptrain_slowdown_plan(&q, cal, i < NU ? one : k, &e) == OP_OK, "%s", e.msg);
        double pred = op_ptrain_expected_ms(&q, speed, ns);
        const op_ptrain_report *r = &rep[i];
        double meas = r->n_quiet > 0 ? r->meas_ms_quiet : r->meas_ms_trimmed;
        double err = 100 * (meas - pred) / pred;
        if (i >= NU && fabs(err) > worst) worst = fabs(err);
        printf("%-8s %-6s %10.2f %10.2f %+8.2f %3d/%-3d%s\n", names[i], i < NU ? "x1,x1" : "x1,x2", pred,
               meas, err, r->n_quiet, rounds, i < NU ? "  (calibration: fitted to these)" : "");
        op_plan_free(&q);
    }
    printf("mixed plans: worst error %.2f%% (target 3%%): %s\n", worst, worst <= 3 ? "PASS" : "MISS");
    for (int i = 0; i < n; i++) {
        op_ptrain_report_free(&rep[i]);
        op_ptrain_session_free(ss[i]);
        op_plan_free(&plans[i]);
    }
    free(t.rep), free(t.busy), free(speed), free(cal), free(costs);
    return 0;
}
