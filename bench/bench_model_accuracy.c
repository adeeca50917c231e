/* bench_model_accuracy.c: (b) simulator accuracy on real compute and (c) the tuned plan's
 * measured speedup over i1f1b, for the reference model at P=2 on this machine's 2 cores.
 *
 * Method (docs/training.md "Accuracy and calibration"):
 *  1. Profile every layer kind alone (F/I/W, median of R repeats, P profiler threads at once,
 *     thread CPU time) and build the 14 plans from it (baselines, the tuner's three placements,
 *     1f1b under each activation policy: see 5).
 *  2. Open a training session per plan (op_ptrain_session: stages, weights and activation pools
 *     stay alive), run one warm-up step each, then --rounds rounds (160) of one step per
 *     plan, the order rotated and reversed from round to round, on P in-process ranks (thread
 *     transport, BLAS one thread per rank, no progress thread, rank r pinned to core r).  This
 *     machine's cores drift in speed by 10-20% over a second or so (docs/training.md): steps of
 *     one plan spread by ~10%, so only many steps, interleaved with the other plans', give a
 *     stable figure.  A timed step is quiet when every rank was on a CPU >= 97% of its compute
 *     time; the measured time is the 20%-trimmed mean over quiet steps.
 *  3. Predict each plan leave-one-out: per-kind F/I/W times and a per-call constant are fitted
 *     by least squares (op_ptrain_fit_costs, the paper's layer_time_solver) to the per-(stage,
 *     op) times of the OTHER plans' runs; the per-op overhead is that constant plus the
 *     executor's cost measured in the records.  The devices' speed variation is sampled from
 *     the other plans' quiet steps (per step: measured busy time / predicted busy time of each
 *     rank, both ranks together) and the plan is replayed under every sample
 *     (op_sim_speed_samples); the prediction is the trimmed mean of those makespans.  A
 *     pipeline waits for its slowest rank, so with speeds that vary the mean makespan is above
 *     the makespan at the mean speed (flat_ms, shown too).  No number of the plan's own run
 *     enters its prediction.  The profile-only prediction (isolated profile + 0.05 ms per op)
 *     is shown next to it.
 *  4. Peak activation memory per rank, from the stage arenas, against the simulator's peak
 *     (its memory rule has the per-layer I term, act_i_bytes, sim.h); the reference model's
 *     own walk (op_ptrain_pred_act_peak) is a cross-check that must equal the simulator.
 *
 *  5. The activation policies (item d): 1f1b with every stage under selective, full or offload,
 *     run and predicted like the rest (the fit knows the recompute inside I|B, pipe_fit.c; the
 *     offload stash goes over the copy engine, pipe_copy.c, at the plan's host link).
 *
 * Usage: bench_model_accuracy [--model SPEC] [--microbatches M] [--repeats R]
 *          [--rounds N] [--profile-clock cpu|wall] [--progress-thread] [--no-pin]
 *          [--fit speed|ops|overhead] [--plans A,B,..] [--step-log] [--strict]
 * --plans runs a subset, repeats allowed: "1f1b,1f1b" runs two instances of one plan (fresh
 * stages and arenas each), which isolates instance-to-instance noise.  --step-log prints each
 * plan's step times and per-op CPU/wall/faults on stderr.  flt: page faults inside compute
 * calls per timed step (both ranks).
 * --strict exits 1 when the verdict line says FAIL: fewer than 10 quiet plans within 3% (time),
 * a row beyond 5% (memory, simulator), or the cross-check differing from the simulator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

#include "args.h"

#define NP 2
#define NPLANS 14

static int cpu_clock = 1;       /* --profile-clock cpu (default) | wall */
static int progress_thread;     /* --progress-thread: the executor's polling thread during compute */
static int pin = 1;             /* --no-pin: leave the rank threads to the scheduler */
static int rounds = 160;        /* --rounds: every plan runs one step per round, in turns */
/* --fit: how the prediction goes beyond the fitted per-kind op times.
 *  speed (default): per-op overhead = the op-time fit's per-call constant + the executor cost
 *    measured in the records; the devices' speed variation is sampled from the other plans'
 *    steps (measured busy / predicted busy per rank) and the prediction is the trimmed mean
 *    makespan over those samples (op_sim_speed_samples);
 *  ops: the same overhead, speeds fixed at 1;
 *  overhead: a per-op overhead fitted so that the other plans' makespans match (median). */
enum { FIT_SPEED, FIT_OPS, FIT_OVERHEAD };
static int fit_mode = FIT_SPEED;

static op_ptrain_turns turns; /* every plan's steps (op_ptrain_run_turns) */
#define MAXSTEP OP_PTRAIN_MAX_STEPS

typedef struct {
    char name[32], shape[48];
    double meas, pred, pred_prof, err;
    double pred_flat; /* the same costs at the mean speed (no speed variation) */
    double mem_meas[NP], mem_pred[NP], mem_sim[NP], mem_err, sim_err;
    int mem_xdiff; /* the cross-check walk differs from the simulator on some rank */
    double cpu;     /* share of compute wall time on a CPU, lowest rank, kept attempt */
    double cpu_err; /* compute CPU time per step vs the predicted op times (LOO costs), % */
    int n_quiet, n_all;
    double cpu_ms;  /* compute CPU ms per timed step, summed over ranks */
    double rec_exc; /* executor ms per op inside its record, outside the compute call */
    double flt;     /* page faults inside compute calls per timed step, summed over ranks */
} row;

static int step_log;            /* --step-log: each round's step times, CPU shares and per-op
                                 * CPU/wall/faults on stderr (to see where noise comes from) */

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* After the last round: the row's measured time (trimmed mean of the quiet timed steps, else
 * of all), memory. */
static void finish_row(const op_nn_model *m, const op_plan *p, const op_ptrain_report *rep, row *r) {
    r->n_quiet = rep->n_quiet;
    r->n_all = rep->n_step - 1; /* step 0: the warm-up */
    r->meas = rep->n_quiet > 0 ? rep->meas_ms_quiet : rep->meas_ms_trimmed;
    r->rec_exc = rep->op_record_excess_ms;
    double cpu_all = 0;
    double flt = 0;
    for (int i = 0; i < 64 * 4; i++) cpu_all += rep->ops[i].cpu_ms, flt += (double)rep->ops[i].faults;
    r->cpu_ms = r->n_all > 0 ? cpu_all / r->n_all : 0;
    r->flt = r->n_all > 0 ? flt / r->n_all : 0;
    if (step_log) {
        fprintf(stderr, "%-14s step ms (CPU share):", p->name);
        for (int i = 0; i < rep->n_step; i++) fprintf(stderr, " %.1f (%.2f)", rep->step_ms[i], rep->step_cpu[i]);
        fprintf(stderr, "; last loss %a\n", rep->last_loss);
        for (int i = 0; i < 64 * 4; i++)
            if (rep->ops[i].n)
                fprintf(stderr, "op %-14s stage %d %s: n=%lld CPU %.3f ms/op, wall %.3f ms/op, faults %ld\n",
                        p->name, i / 4, op_kind_name((op_kind)(i % 4)),
                        (long long)rep->ops[i].n, rep->ops[i].cpu_ms / (double)rep->ops[i].n,
                        rep->ops[i].wall_ms / (double)rep->ops[i].n, rep->ops[i].faults);
    }
    r->cpu = 1;
    for (int d = 0; d < NP; d++) r->cpu = rep->cpu_share[d] < r->cpu ? rep->cpu_share[d] : r->cpu;
    int64_t pk[NP];
    op_ptrain_pred_act_peak(m, p, pk);
    for (int d = 0; d < NP; d++) {
        r->mem_meas[d] = (double)rep->peak_act[d];
        r->mem_pred[d] = (double)pk[d];
        r->mem_sim[d] = (double)(p->pred.peak_bytes[d] - p->pred.static_bytes[d]);
        double e2 = 100 * (r->mem_pred[d] - r->mem_meas[d]) / r->mem_meas[d];
        double e3 = 100 * (r->mem_sim[d] - r->mem_meas[d]) / r->mem_meas[d];
        if (fabs(e2) > fabs(r->mem_err)) r->mem_err = e2;
        /* the walk's offload copies take no time: it is the simulator's only without offload */
        int offl = 0;
        for (int s = 0; s < p->S; s++) offl |= p->stage_act[s] == OP_ACT_OFFLOAD;
        if (r->mem_pred[d] != r->mem_sim[d] && !offl) r->mem_xdiff = 1;
        if (fabs(e3) > fabs(r->sim_err)) r->sim_err = e3;
    }
}

static void shape(const op_plan *p, char *out, size_t cap) {
    int n = snprintf(out, cap, "S=%d ", p->S);
    for (int s = 0; s < p->S && n < (int)cap - 4; s++)
        n += snprintf(out + n, cap - (size_t)n, "%s%d", s ? "," : "", p->stage_first[s + 1] - p->stage_first[s]);
    snprintf(out + n, cap - (size_t)n, "%s", p->stage_split[0] ? " I/W" : " B");
}


/* Leave-one-out prediction of plan `out` (index): costs and the per-op constant fitted to the
 * other runs' op times, speed samples from their steps (--fit).  Fills r->pred, r->pred_flat,
 * r->err and r->cpu_err; returns 0 or -1. */
static int predict_loo(const op_nn_model *m, op_plan *plans, row *rows, int n, int out,
                       const op_layer_prof *prof, int np, double *ovh_out) {
    const op_plan *pp[NPLANS];
    for (int j = 0; j < n; j++) pp[j] = &plans[j];
    op_layer_prof fit[8];
    op_layer_cost *c = op_xcalloc((size_t)m->n_layers, sizeof *c);
    double ovh = 0, *sp = op_xmalloc(sizeof(double) * NPLANS * MAXSTEP * NP);
    int ns = 0;
    if (op_ptrain_calibrate(m, pp, &turns, out, prof, np, fit, c, &ovh,
                            fit_mode == FIT_SPEED ? sp : NULL, &ns) < 0) {
        free(c), free(sp);
        return -1;
    }
    if (fit_mode == FIT_OVERHEAD) {
        double o[NPLANS];
        int no = 0;
        for (int j = 0; j < n; j++) {
            if (j == out || rows[j].n_quiet <= 0) continue;
            op_plan q;
            if (op_ptrain_repredict(&plans[j], c, 0, &q, NULL) == 0) o[no++] = op_ptrain_fit_overhead(&q, rows[j].meas);
            op_plan_free(&q);
        }
        ovh = no ? median(o, no) : 0.05;
    }
    op_plan q;
    int rc = op_ptrain_repredict(&plans[out], c, ovh, &q, NULL);
    if (rc == 0) {
        row *r = &rows[out];
        r->pred_flat = q.pred.makespan_ms;
        r->pred = op_ptrain_expected_ms(&q, sp, ns);
        r->err = 100 * (r->meas - r->pred) / r->pred;
        double busy[NP], bsum = 0, csum = 0;
        op_exec_pred_bubble(&q, busy);
        for (int d = 0; d < NP; d++)
            bsum += busy[d] - q.n_ops[d] * q.op_overhead_ms;
        csum = r->cpu_ms;
        r->cpu_err = 100 * (csum - bsum) / bsum;
    }
    op_plan_free(&q);
    free(sp);
    free(c);
    *ovh_out = ovh;
    return rc ? -1 : 0;
}

int main(int argc, char **argv) {
    const char *spec = "small", *plan_list = NULL;
    int M = 8, repeats = 21, strict = 0;
    long Ml = M, repl = repeats, roundl = rounds;
    const char *fit = NULL, *clock = NULL;
    ba_args args = {"bench_model_accuracy", "[--model SPEC] [--microbatches M] [--repeats R] [--rounds N] "
                 "[--plans A,B,..] [--step-log] [--profile-clock cpu|wall] [--progress-thread] "
                 "[--no-pin] [--fit speed|ops|overhead] [--strict]", argc, argv, 0, 0, 0};
    while (ba_next(&args)) {
        if (ba_str(&args, "--model", &spec)) {}
        else if (ba_long(&args, "--microbatches", 1, 4096, &Ml)) {}
        else if (ba_long(&args, "--repeats", 1, 100000, &repl)) {}
        else if (ba_long(&args, "--rounds", 1, MAXSTEP - 1, &roundl)) {}
        else if (ba_str(&args, "--plans", &plan_list)) {}
        else if (ba_flag(&args, "--strict")) strict = 1;
        else if (ba_flag(&args, "--step-log")) step_log = 1;
        else if (ba_flag(&args, "--progress-thread")) progress_thread = 1;
        else if (ba_flag(&args, "--no-pin")) pin = 0;
        else if (ba_str(&args, "--fit", &fit)) {
            if (strcmp(fit, "speed") && strcmp(fit, "ops") && strcmp(fit, "overhead"))
                ba_fail(&args, "--fit is speed, ops or overhead");
        } else if (ba_str(&args, "--profile-clock", &clock)) {
            if (strcmp(clock, "cpu") && strcmp(clock, "wall")) ba_fail(&args, "--profile-clock is cpu or wall");
        } else ba_unknown(&args);
    }
    if (ba_status(&args) >= 0) return ba_status(&args);
    M = (int)Ml, repeats = (int)repl, rounds = (int)roundl;
    if (fit) fit_mode = !strcmp(fit, "ops") ? FIT_OPS : !strcmp(fit, "overhead") ? FIT_OVERHEAD : FIT_SPEED;
    if (clock) cpu_clock = strcmp(clock, "wall") != 0;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    op_nn_model m;
    op_err e = {0};
    if (op_nn_model_from_spec(&m, spec, &e)) {
        fprintf(stderr, "bench_model_accuracy: %s\n", e.msg);
        return 2;
    }
    double la[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1;
        fclose(f);
    }
    printf("model %s (%s, %zu parameters), P=%d, M=%d, %d rounds x 1 timed step per plan, profile: median "
           "of %d in %s time; progress thread %s;%s load average %.2f at start\n", m.name, m.pattern,
           m.off[m.n_layers], NP, M, rounds, repeats, cpu_clock ? "thread CPU" : "wall",
           progress_thread ? "on" : "off", pin ? " ranks pinned to cores;" : "", la[0]);
    op_layer_prof prof[8];
    int np = op_ptrain_profile_ranks(&m, repeats, NP, cpu_clock, prof, &e);
    op_layer_cost *costs = op_xcalloc((size_t)m.n_layers, sizeof *costs);
    if (np < 0 || op_ptrain_layer_costs(&m, prof, np, costs, &e)) {
        fprintf(stderr, "bench_model_accuracy: %s\n", e.msg);
        return 1;
    }
    op_comm comm;
    op_ptrain_default_comm(&comm);
    const double ovh0 = 0.05; /* the emulated-run per-op cost (docs/training.md) */

    const char *names[NPLANS] = {"1f1b", "gpipe", "i1f1b", "zbh1", "zbh2", "zbv", "dualpipev",
                                 "balanced-1f1b", "auto", "auto-loop", "auto-v",
                                 "1f1b+selective", "1f1b+full", "1f1b+offload"};
    /* --plans: a subset, repeats allowed (two copies of one plan isolate instance-to-instance
     * noise: same op order, fresh stages and arenas) */
    int nnames = NPLANS;
    char listbuf[256];
    if (plan_list) {
        snprintf(listbuf, sizeof listbuf, "%s", plan_list);
        nnames = 0;
        for (char *tk = strtok(listbuf, ","); tk && nnames < NPLANS; tk = strtok(NULL, ",")) names[nnames++] = tk;
    }
    op_plan *plans = op_xcalloc(NPLANS, sizeof *plans);
    row rows[NPLANS];
    int n = 0;
    for (int k = 0; k < nnames; k++) {
        op_plan *p = &plans[n];
        int rc, pol = -1;
        char base[32];
        snprintf(base, sizeof base, "%s", names[k]);
        char *plus = strchr(base, '+'); /* SCHEDULE+POLICY: every stage under that policy */
        if (plus) {
            *plus = 0;
            op_act_policy ap;
            if (op_act_policy_parse(plus + 1, &ap, &e)) {
                printf("%-14s skipped: %s\n", names[k], e.msg);
                continue;
            }
            pol = (int)ap;
        }
        if (!strncmp(base, "auto-", 5)) {
            op_problem pr;
            memset(&pr, 0, sizeof pr);
            pr.model = m.name, pr.layers = costs, pr.n_layers = m.n_layers, pr.P = NP, pr.M = M;
            pr.comm = comm, pr.tokens_per_mb = (double)m.cfg.batch * m.cfg.seq, pr.op_overhead_ms = ovh0;
            op_tune_opts to;
            op_tune_opts_default(&to);
            to.placement = base[5] == 'l' ? OP_TUNE_PLACE_LOOP : OP_TUNE_PLACE_V;
            rc = op_tune(&pr, &to, p, &e);
        } else {
            rc = op_ptrain_make_plan(&m, costs, NP, M, &comm, ovh0, base, p, &e);
        }
        if (!rc && pol >= 0) {
            memset(p->stage_act, pol, (size_t)p->S);
            snprintf(p->name, sizeof p->name, "%s", names[k]);
            rc = op_sim_replay(p, NULL, &e); /* recompute and copies in the prediction */
        }
        if (rc) {
            printf("%-14s skipped: %s\n", names[k], e.msg);
            continue;
        }
        row *r = &rows[n];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", names[k]);
        shape(p, r->shape, sizeof r->shape);
        r->pred_prof = p->pred.makespan_ms;
        n++;
    }
    /* Every plan keeps its session (stages, pools) for the whole run and the plans take turns
     * step by step (op_ptrain_run_turns): the machine's speed drifts for seconds at a time
     * (docs/training.md), and interleaving makes a drift touch every plan alike. */
    {
        op_ptrain_opts o;
        op_ptrain_opts_default(&o);
        o.data = "copy";
        o.log_every = 0;
        o.progress_thread = progress_thread;
        o.pin_cores = pin;
        const op_plan *pp[NPLANS];
        for (int i = 0; i < n; i++) pp[i] = &plans[i];
        if (op_ptrain_run_turns(&m, pp, n, &o, rounds, &turns, &e)) {
            fprintf(stderr, "bench_model_accuracy: %s\n", e.msg);
            return 1;
        }
        for (int i = 0; i < n; i++) finish_row(&m, &plans[i], &turns.rep[i], &rows[i]);
    }

    int miss_t = 0, n_xdiff = 0, miss_s = 0, n_pred = 0, i_i1f1b = -1, i_auto = -1;
    double sum = 0, mx = 0, csum = 0, osum = 0, xsum = 0;
    printf("\n%-14s %-24s %8s %8s %7s %8s %7s %8s %5s %4s %6s %5s | %-13s %-13s %6s %-13s %6s\n", "plan", "stages",
           "meas_ms", "pred_ms", "err%", "flat_ms", "err%", "prof_ms", "quiet", "cpu%", "cpu_t%", "flt", "act meas MiB",
           "sim MiB", "err%", "walk MiB", "err%");
    for (int i = 0; i < n; i++) {
        row *r = &rows[i];
        double ovh = 0;
        if (predict_loo(&m, plans, rows, n, i, prof, np, &ovh)) {
            printf("%-14s no prediction: no usable op times in the other runs\n", r->name);
            continue;
        }
        osum += ovh, xsum += r->rec_exc;
        if (!strcmp(r->name, "i1f1b")) i_i1f1b = i;
        if (!strcmp(r->name, "auto")) i_auto = i;
        if (r->n_quiet > 0) {
            n_pred++, sum += fabs(r->err), mx = fabs(r->err) > mx ? fabs(r->err) : mx;
            if (fabs(r->err) > 3) miss_t++;
        }
        n_xdiff += r->mem_xdiff;
        if (fabs(r->sim_err) > 5) miss_s++;
        csum += fabs(r->cpu_err);
        char q[16];
        snprintf(q, sizeof q, "%d/%d", r->n_quiet, r->n_all);
        printf("%-14s %-24s %8.1f %8.1f %+7.2f %8.1f %+7.2f %8.1f %5s %4.0f %+6.1f %5.0f | %6.1f %6.1f %6.1f %6.1f %+6.1f %6.1f %6.1f %+6.1f\n",
               r->name, r->shape, r->meas, r->pred, r->err, r->pred_flat,
               100 * (r->meas - r->pred_flat) / r->pred_flat, r->pred_prof, q, 100 * r->cpu, r->cpu_err, r->flt,
               r->mem_meas[0] / 1048576, r->mem_meas[1] / 1048576, r->mem_sim[0] / 1048576,
               r->mem_sim[1] / 1048576, r->sim_err, r->mem_pred[0] / 1048576, r->mem_pred[1] / 1048576,
               r->mem_err);
    }
    double la2 = -1;
    if ((f = fopen("/proc/loadavg", "r"))) {
        if (fscanf(f, "%lf", &la2) != 1) la2 = -1;
        fclose(f);
    }
    printf("\npred_ms: leave-one-out: per-kind times and the %s (mean %.3f ms) fitted to the other "
           "plans' runs; executor cost per op measured inside the records, outside compute: %.3f ms;\n"
           "%s"
           "flat_ms: the same costs with every device at its mean speed;\n"
           "prof_ms: isolated profile + %.2f ms per op.\nquiet: timed steps with every rank "
           "on a CPU >= 97%% of its compute time (meas_ms = their 20%%-trimmed mean; 0/K: the row ran loaded and "
           "its error measures the other jobs).\ncpu%%: lowest rank share, kept attempt; cpu_t%%: compute "
           "CPU time per step vs the predicted op times (mean |error| %.2f%%); flt: page faults in compute per step.\nsim: the simulator's "
           "peak (memory rule with the per-layer I term); walk: op_ptrain_pred_act_peak, a cross-check "
           "that must equal it. Load "
           "average %.2f at the end.\n", fit_mode == FIT_OVERHEAD ? "per-op overhead" : "per-op constant", n ? osum / n : 0.0,
           n ? xsum / n : 0.0,
           fit_mode == FIT_SPEED ? "  the trimmed mean makespan over the devices' speed samples (quiet steps of the other plans: "
                                   "measured / predicted busy time per rank, op_sim_speed_samples);\n" : "",
           ovh0, n ? csum / n : 0.0, la2);
    printf("(b) time: %d of %d plans measured quiet, all predicted leave-one-out: mean |error| %.2f%%, max "
           "%.2f%%, %d beyond 3%%; activation peaks: simulator %d rows beyond 5%%; cross-check "
           "walk differs on %d rows\n",
           n_pred, n, n_pred ? sum / n_pred : 0.0, mx, miss_t, miss_s, n_xdiff);
    const int within = n_pred - miss_t;
    printf("verdict (b): time %s (%d plans within 3%%, target >= 10), memory %s (%d of %d within 5%%, target all)\n",
           within >= 10 ? "PASS" : "FAIL", within, miss_s == 0 && n_xdiff == 0 ? "PASS" : "FAIL", n - miss_s, n);
    if (i_i1f1b >= 0 && i_auto >= 0)
        printf("(c) tuned (auto) over i1f1b: measured speedup %.3fx, predicted %.3fx (profile-only %.3fx; "
               "quiet steps %d and %d)\n", rows[i_i1f1b].meas / rows[i_auto].meas,
               rows[i_i1f1b].pred / rows[i_auto].pred, rows[i_i1f1b].pred_prof / rows[i_auto].pred_prof,
               rows[i_i1f1b].n_quiet, rows[i_auto].n_quiet);
    /* (d) the activation policies, each on 1f1b: measured against the same leave-one-out
     * prediction (recompute inside I|B, the offload stash on the copy engine) */
    int n_pol = 0, pol_in = 0;
    for (int i = 0; i < n; i++) {
        if (!strchr(rows[i].name, '+')) continue;
        const op_ptrain_report *rp = &turns.rep[i];
        printf("%s %s: measured %.1f ms, predicted %.1f (%+.2f%%, quiet %d/%d); peak MiB measured %.1f/%.1f, "
               "simulated %.1f/%.1f; copy engine %d transfers, %.1f ms per step, CPU %.1f ms per step (%.1f%% "
               "of the prediction)\n", n_pol ? "   " : "(d)",
               rows[i].name, rows[i].meas, rows[i].pred, rows[i].err, rows[i].n_quiet, rows[i].n_all,
               rows[i].mem_meas[0] / 1048576, rows[i].mem_meas[1] / 1048576, rows[i].mem_sim[0] / 1048576,
               rows[i].mem_sim[1] / 1048576, rp->copy_xfers[0] + rp->copy_xfers[1],
               rp->steps_run ? (rp->copy_busy_ms[0] + rp->copy_busy_ms[1]) / (double)rp->steps_run : 0.0,
               rp->steps_run ? (rp->copy_cpu_ms[0] + rp->copy_cpu_ms[1]) / (double)rp->steps_run : 0.0,
               rp->steps_run && rows[i].pred > 0
                   ? 100 * (rp->copy_cpu_ms[0] + rp->copy_cpu_ms[1]) / (double)rp->steps_run / rows[i].pred
                   : 0.0);
        n_pol++, pol_in += fabs(rows[i].err) <= 3;
    }
    if (n_pol) printf("verdict (d): %d of %d policy plans within 3%% of the prediction\n", pol_in, n_pol);
    for (int i = 0; i < n; i++) op_plan_free(&plans[i]);
    op_ptrain_turns_free(&turns);
    free(plans), free(costs);
    return strict && (within < 10 || miss_s || n_xdiff) ? 1 : 0;
}
