/* bench_model_accuracy.c: (b) simulator accuracy on real compute and (c) the tuned plan's
 * measured speedup over i1f1b, for the reference model at P=2 on this machine's 2 cores.
 *
 * Method (docs/training.md "Accuracy"):
 *  1. Profile: every layer kind F/I/W, median of R repeats, measured by P threads at once (one
 *     per core, BLAS single-threaded), the way the ranks will compute; the per-kind times are
 *     the mean over the threads.
 *  2. Calibrate one number: the executor's per-op overhead (plan->op_overhead_ms), fitted so
 *     the simulated makespan of the 1f1b plan equals its measured median (op_ptrain_fit_overhead).
 *     It absorbs what a stage call costs beyond its layers (buffer hand-over, messages, the
 *     progress thread, dispatch).  The 1f1b row is the calibration row; every other plan is a
 *     prediction with that same constant.
 *  3. Each plan trains K+1 steps on P in-process ranks (thread transport, one thread per rank);
 *     the first step (page faults of the activation pools) is dropped, the median makespan of
 *     the rest is compared with the simulated makespan.  Peak activation memory per rank is read
 *     from the stage arenas and compared with the arena-rule prediction on the plan's order
 *     (op_ptrain_pred_act_peak) and with the simulator's own memory rule.
 *
 * Usage: bench_model_accuracy [--model SPEC] [--microbatches M] [--steps K] [--repeats R]
 *                             [--estimator median|min] [--profile-clock cpu|wall] [--strict]
 * --estimator min takes each plan's best step (for a box shared with other jobs: the step least
 * disturbed); --strict exits 1 when a row misses 3% (time) or 5% (memory). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/ptrain.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

#define NP 2

static int cpu_clock = 1; /* --profile-clock cpu (default) | wall */

typedef struct {
    char name[32], shape[48];
    double meas, pred, err;
    double mem_meas[NP], mem_pred[NP], mem_sim[NP], mem_err, sim_err;
    double cpu; /* lowest share of compute wall time a rank was on a CPU */
    double cpu_err; /* compute CPU time per step (all ranks) vs the predicted busy time, % */
    int n_quiet, tries; /* quiet timed steps of the kept attempt; attempts made */
} row;

static int use_min; /* --estimator min: best step instead of the median */
static int progress_thread; /* --progress-thread: the executor's polling thread runs during compute */

static int tries = 3;
static double fixed_ovh = -1; /* --overhead-ms X: not fitted */
static int fit_costs = 1;     /* --no-fit: the isolated profile's times as they are */ /* --tries: attempts per plan when its steps were disturbed */

/* Trains `steps` timed steps (plus the dropped first); repeats up to `tries` times while fewer
 * than half the timed steps were quiet (every rank on a CPU >= 97% of its compute time), and
 * keeps the attempt with the most quiet steps.  The measured time is the median over quiet
 * steps (or over all timed steps when none was quiet: the row is then marked loaded). */
static op_ptrain_report last_rep; /* the kept attempt of the last run_plan */

static int run_plan(const op_nn_model *m, op_plan *p, int steps, row *r) {
    op_ptrain_opts o;
    op_ptrain_opts_default(&o);
    o.data = "copy";
    o.steps = steps + 1;
    o.log_every = 0;
    o.progress_thread = progress_thread;
    op_ptrain_report rep, best;
    op_err e = {0};
    memset(&best, 0, sizeof best);
    best.n_quiet = -1;
    r->tries = 0;
    for (int a = 0; a < tries; a++) {
        int rc = op_ptrain_run_threads(m, p, &o, &rep, &e);
        if (rc) {
            fprintf(stderr, "bench_model_accuracy: %s: %s\n", p->name, e.msg);
            return rc;
        }
        r->tries++;
        if (rep.n_quiet > best.n_quiet ||
            (rep.n_quiet == best.n_quiet && rep.meas_ms_median < best.meas_ms_median))
            best = rep;
        op_ptrain_report_free(&rep);
        if (2 * best.n_quiet >= steps) break;
    }
    rep = best;
    last_rep = best;
    r->n_quiet = rep.n_quiet;
    r->meas = rep.n_quiet > 0 ? rep.meas_ms_quiet : use_min ? rep.meas_ms_min : rep.meas_ms_median;
    r->pred = p->pred.makespan_ms;
    r->err = 100 * (r->meas - r->pred) / r->pred;
    int64_t pk[NP];
    op_ptrain_pred_act_peak(m, p, pk);
    r->mem_err = 0;
    r->cpu = 1;
    double busy[NP], bsum = 0, csum = 0;
    op_exec_pred_bubble(p, busy);
    for (int d = 0; d < NP; d++) {
        r->cpu = rep.cpu_share[d] < r->cpu ? rep.cpu_share[d] : r->cpu;
        /* the profile's own op times: the calibrated per-op overhead is not compute */
        bsum += busy[d] - p->n_ops[d] * p->op_overhead_ms, csum += rep.cpu_ms_step[d];
    }
    r->cpu_err = 100 * (csum - bsum) / bsum;
    for (int d = 0; d < NP; d++) {
        r->mem_meas[d] = (double)rep.peak_act[d];
        r->mem_pred[d] = (double)pk[d];
        r->mem_sim[d] = (double)(p->pred.peak_bytes[d] - p->pred.static_bytes[d]);
        double e2 = 100 * (r->mem_pred[d] - r->mem_meas[d]) / r->mem_meas[d];
        if (fabs(e2) > fabs(r->mem_err)) r->mem_err = e2;
        double e3 = 100 * (r->mem_sim[d] - r->mem_meas[d]) / r->mem_meas[d];
        if (fabs(e3) > fabs(r->sim_err)) r->sim_err = e3;
    }
    return 0;
}

static void shape(const op_plan *p, char *out, size_t cap) {
    int n = snprintf(out, cap, "S=%d ", p->S);
    for (int s = 0; s < p->S && n < (int)cap - 4; s++)
        n += snprintf(out + n, cap - (size_t)n, "%s%d", s ? "," : "", p->stage_first[s + 1] - p->stage_first[s]);
    snprintf(out + n, cap - (size_t)n, "%s", p->stage_split[0] ? " I/W" : " B");
}

int main(int argc, char **argv) {
    const char *spec = "small";
    int M = 8, steps = 3, repeats = 9, strict = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--model") && v) spec = v, i++;
        else if (!strcmp(argv[i], "--microbatches") && v) M = atoi(v), i++;
        else if (!strcmp(argv[i], "--steps") && v) steps = atoi(v), i++;
        else if (!strcmp(argv[i], "--repeats") && v) repeats = atoi(v), i++;
        else if (!strcmp(argv[i], "--strict")) strict = 1;
        else if (!strcmp(argv[i], "--progress-thread")) progress_thread = 1;
        else if (!strcmp(argv[i], "--tries") && v) tries = atoi(v), i++;
        else if (!strcmp(argv[i], "--overhead-ms") && v) fixed_ovh = atof(v), i++;
        else if (!strcmp(argv[i], "--no-fit")) fit_costs = 0;
        else if (!strcmp(argv[i], "--estimator") && v) use_min = !strcmp(v, "min"), i++;
        else if (!strcmp(argv[i], "--profile-clock") && v) cpu_clock = strcmp(v, "wall") != 0, i++;
        else {
            fprintf(stderr, "usage: bench_model_accuracy [--model SPEC] [--microbatches M] [--steps K] [--repeats R] [--estimator median|min] [--profile-clock cpu|wall] [--progress-thread] [--tries N] [--overhead-ms X] [--no-fit] [--strict]\n");
            return 2;
        }
    }
    if (M < 1 || steps < 1 || repeats < 1) {
        fprintf(stderr, "bench_model_accuracy: M, steps and repeats must be positive\n");
        return 2;
    }
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
    printf("model %s (%s, %zu parameters), P=%d, M=%d, %d timed steps per plan (%s), profile in %s time, load "
           "average %.2f when starting\n", m.name, m.pattern, m.off[m.n_layers], NP, M, steps, use_min ? "best" : "median", cpu_clock ? "thread CPU" : "wall", la[0]);
    op_layer_prof prof[8];
    int np = op_ptrain_profile_ranks(&m, repeats, NP, cpu_clock, prof);
    op_layer_cost *costs = op_xcalloc((size_t)m.n_layers, sizeof *costs);
    if (op_ptrain_layer_costs(&m, prof, np, costs, &e)) {
        fprintf(stderr, "bench_model_accuracy: %s\n", e.msg);
        return 1;
    }
    op_comm comm;
    op_ptrain_default_comm(&comm);

    /* calibration: per-kind times fitted to the per-(stage, op) CPU times of two runs at
     * M_cal = M/2 microbatches (1f1b: B ops on 2 stages; zbv: F, I, W on 4 stages), then the
     * executor's per-op overhead fitted to their quiet makespans.  Every row of the table is
     * then a prediction: other microbatch count, other plans. */
    const char *cal_names[] = {"1f1b", "zbv"};
    int Mc = M / 2 >= NP ? M / 2 : M;
    op_plan cal[2];
    op_ptrain_report crep[2];
    row crow[2];
    double ovh = fixed_ovh;
    for (int c = 0; c < 2; c++) {
        if (op_ptrain_make_plan(&m, costs, NP, Mc, &comm, 0, cal_names[c], &cal[c], &e)) {
            fprintf(stderr, "bench_model_accuracy: %s\n", e.msg);
            return 1;
        }
        memset(&crow[c], 0, sizeof crow[c]);
        if (run_plan(&m, &cal[c], steps, &crow[c])) return 1;
        crep[c] = last_rep;
    }
    op_layer_prof fit[8];
    double call_ms = 0;
    const op_plan *cp[2] = {&cal[0], &cal[1]};
    const op_ptrain_report *cr[2] = {&crep[0], &crep[1]};
    double rms = fit_costs ? op_ptrain_fit_costs(&m, cp, cr, 2, prof, np, 0.05, fit, &call_ms) : -1;
    if (rms >= 0) {
        printf("calibration at M=%d (1f1b, zbv): per-kind times fitted to their ops' CPU time, rms "
               "residual %.2f%%, per-call constant %.3f ms\n", Mc, rms, call_ms);
        printf("  kind  F ms profile -> fitted   I ms                W ms\n");
        for (int k = 0; k < np; k++)
            printf("  %c    %7.3f -> %7.3f    %7.3f -> %7.3f    %7.3f -> %7.3f\n", prof[k].sym, prof[k].f_ms,
                   fit[k].f_ms, prof[k].i_ms, fit[k].i_ms, prof[k].w_ms, fit[k].w_ms);
        if (op_ptrain_layer_costs(&m, fit, np, costs, &e)) {
            fprintf(stderr, "bench_model_accuracy: %s\n", e.msg);
            return 1;
        }
    }
    if (ovh < 0) {
        double sum_o = 0;
        int n_o = 0;
        for (int c = 0; c < 2; c++) {
            for (int i = 0; i < m.n_layers; i++) cal[c].layers[i] = costs[i];
            if (op_sim_replay(&cal[c], NULL, &e)) continue;
            if (crow[c].n_quiet > 0) sum_o += op_ptrain_fit_overhead(&cal[c], crow[c].meas), n_o++;
        }
        ovh = n_o ? sum_o / n_o : 0.05;
        if (n_o)
            printf("per-op executor overhead fitted to %d quiet calibration makespan(s) (1f1b %.1f ms, zbv %.1f ms): "
                   "%.4f ms\n\n", n_o, crow[0].meas, crow[1].meas, ovh);
        else
            printf("no quiet calibration step: per-op overhead left at the emulated-run value %.2f ms\n\n", ovh);
    } else {
        printf("per-op overhead %.4f ms (--overhead-ms)\n\n", ovh);
    }
    for (int c = 0; c < 2; c++) op_plan_free(&cal[c]);

    const char *names[] = {"1f1b", "gpipe", "i1f1b", "zbh1", "zbh2", "zbv", "dualpipev",
                           "balanced-1f1b", "auto", "auto-loop", "auto-v", NULL};
    row rows[16];
    int n = 0, miss_t = 0, miss_m = 0, miss_s = 0, n_pred = 0, i_i1f1b = -1, i_auto = -1;
    double sum = 0, mx = 0, csum2 = 0;
    printf("%-14s %-16s %8s %8s %7s %5s %4s %6s | %-13s %-13s %6s %-13s %6s\n", "plan", "stages",
           "meas_ms", "pred_ms", "err%", "quiet", "cpu%", "cpu_t%", "act meas MiB", "sim now MiB",
           "err%", "sim+I MiB", "err%");
    for (int k = 0; names[k]; k++) {
        op_plan p;
        int rc;
        if (!strncmp(names[k], "auto-", 5)) {
            op_problem pr;
            memset(&pr, 0, sizeof pr);
            pr.model = m.name, pr.layers = costs, pr.n_layers = m.n_layers, pr.P = NP, pr.M = M;
            pr.comm = comm, pr.tokens_per_mb = (double)m.cfg.batch * m.cfg.seq, pr.op_overhead_ms = ovh;
            op_tune_opts to;
            op_tune_opts_default(&to);
            to.placement = names[k][5] == 'l' ? OP_TUNE_PLACE_LOOP : OP_TUNE_PLACE_V;
            rc = op_tune(&pr, &to, &p, &e);
        } else {
            rc = op_ptrain_make_plan(&m, costs, NP, M, &comm, ovh, names[k], &p, &e);
        }
        if (rc) {
            printf("%-14s skipped: %s\n", names[k], e.msg);
            continue;
        }
        row *r = &rows[n];
        memset(r, 0, sizeof *r);
        int is_cal = 0;
        snprintf(r->name, sizeof r->name, "%s", names[k]);
        shape(&p, r->shape, sizeof r->shape);
        if (run_plan(&m, &p, steps, r)) return 1;
        op_plan_free(&p);
        if (!strcmp(names[k], "i1f1b")) i_i1f1b = n;
        if (!strcmp(names[k], "auto")) i_auto = n;
        if (!is_cal && r->n_quiet > 0) {
            n_pred++, sum += fabs(r->err), mx = fabs(r->err) > mx ? fabs(r->err) : mx;
            if (fabs(r->err) > 3) miss_t++;
        }
        if (fabs(r->mem_err) > 5) miss_m++;
        if (fabs(r->sim_err) > 5) miss_s++;
        csum2 += fabs(r->cpu_err);
        char q[16];
        snprintf(q, sizeof q, "%d/%d", r->n_quiet, steps);
        printf("%-14s %-16s %8.1f %8.1f %+7.2f %5s %4.0f %+6.1f | %6.1f %6.1f %6.1f %6.1f %+6.1f %6.1f %6.1f %+6.1f\n",
               r->name, r->shape, r->meas, r->pred, r->err, q, 100 * r->cpu, r->cpu_err,
               r->mem_meas[0] / 1048576, r->mem_meas[1] / 1048576, r->mem_sim[0] / 1048576,
               r->mem_sim[1] / 1048576, r->sim_err, r->mem_pred[0] / 1048576, r->mem_pred[1] / 1048576,
               r->mem_err);
        fflush(stdout);
        n++;
    }
    printf("\nquiet: timed steps in which every rank was on a CPU >= 97%% of its compute time (meas_ms is "
           "their median; 0: the row ran loaded, its time says nothing about the model);\ncpu%%: lowest "
           "share over ranks for the whole kept attempt; cpu_t%%: compute CPU time per step vs the "
           "profile's op times (mean |error| %.2f%% over %d plans).\nsim now: the simulator's memory "
           "rule (no I transient); sim+I: the same walk with the proposed per-layer I term "
           "(op_ptrain_pred_act_peak).\n", n ? csum2 / n : 0.0, n);
    printf("(b) time: %d predicted plans measured quiet (of %d rows): mean |error| %.2f%%, max %.2f%%, %d beyond "
           "3%%; activation peaks: simulator %d rows beyond 5%%, with the I term %d rows beyond 5%%\n",
           n_pred, n, n_pred ? sum / n_pred : 0.0, mx, miss_t, miss_s, miss_m);
    if (i_i1f1b >= 0 && i_auto >= 0)
        printf("(c) tuned (auto) over i1f1b: measured speedup %.3fx, predicted %.3fx (quiet steps %d and %d)\n",
               rows[i_i1f1b].meas / rows[i_auto].meas, rows[i_i1f1b].pred / rows[i_auto].pred,
               rows[i_i1f1b].n_quiet, rows[i_auto].n_quiet);
    free(costs);
    return strict && (miss_t || miss_m) ? 1 : 0;
}
