/* cmd_train.c: `octopipe train`: profile the reference model, plan (tuner, classic schedule or
 * a plan file), train it through the executor (MPI ranks started with mpirun, or in-process
 * ranks with --threads), print progress with measured vs predicted iteration time, and write
 * the measured trace and SVG timeline.  Under mpirun (ours or the user's), rank 0 profiles and
 * plans and broadcasts the plan, so every rank runs the same one. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "cli/cli_out.h"
#include "cli/train_args.h"
#include "octopipe/cluster.h"
#include "octopipe/exec.h"
#include "octopipe/export.h"
#include "octopipe/out.h"
#include "octopipe/ptrain.h"
#include "octopipe/sim.h"

static void fill_opts(const targs *a, op_ptrain_opts *o);
static int resume_check(const targs *a, const op_nn_model *m);

/* Where the human-readable lines go: stderr when an output (--svg, --trace, --save-plan) is
 * stdout, which then carries that artifact alone and parses. */
static FILE *info_of(const targs *a) {
    FILE *f = op_cli_info(a->svg);
    if (f == stdout) f = op_cli_info(a->trace);
    if (f == stdout) f = op_cli_info(a->save_plan);
    return f;
}

/* --calibrate: 1f1b and zbv (or zbh1) take turns for a->calibrate steps each on in-process
 * ranks; per-kind times are fitted to their op times (costs[] replaced), the per-op overhead
 * is the fit's per-call constant plus the executor's own cost, and the ranks' speed in those
 * steps is left in speed[] (*ns samples, room for 2 * a->calibrate * P). */
static int calibrate(const targs *a, const op_nn_model *m, const op_layer_prof *prof, int np,
                     const op_comm *comm, op_layer_cost *costs, double *overhead, double *speed,
                     int *ns) {
    FILE *info = info_of(a);
    op_err e = {0};
    const char *names[3] = {"1f1b", "zbv", "zbh1"};
    op_plan plans[2];
    const op_plan *pp[2];
    int n = 0;
    for (int k = 0; k < 3 && n < 2; k++) /* zbh1 only when zbv does not fit */
        if (op_ptrain_make_plan(m, costs, a->P, a->M, comm, *overhead, names[k], &plans[n], &e) == OP_OK)
            pp[n] = &plans[n], n++;
    if (n == 0) {
        fprintf(stderr, "octopipe train: --calibrate: no calibration plan fits (%s)\n", e.msg);
        return 2;
    }
    op_ptrain_opts o;
    fill_opts(a, &o);
    o.log_every = 0;
    /* on the info stream, as the steps' lines: under train's own mpirun rank 0's stdout reaches
     * the user as it is written, its stderr only when the job ends */
    fprintf(info, "calibrating: %s%s%s take turns for %d steps each on in-process ranks; their op "
                  "times then fit the per-kind F/I/W costs the plan is made with\n",
            pp[0]->name, n > 1 ? " and " : "", n > 1 ? pp[1]->name : "", a->calibrate);
    fflush(info);
    double t0 = op_now_s();
    op_ptrain_turns t;
    int rc = op_ptrain_run_turns(m, pp, n, &o, a->calibrate, &t, &e);
    op_layer_prof fit[8];
    double rms = -1;
    if (rc == OP_OK) {
        rms = op_ptrain_calibrate(m, pp, &t, -1, prof, np, fit, costs, overhead, speed, ns);
        if (rms < 0) rc = op_errf(&e, OP_EINVAL, "--calibrate: the calibration steps left no op times to fit");
    }
    if (rc == OP_OK) {
        fprintf(info, "calibration: %s%s%s, %d steps each in turns, %.1f s; per-kind times fitted to their ops "
               "(rms residual %.1f%%), per-op constant %.3f ms, %d speed samples\n",
               pp[0]->name, n > 1 ? " and " : "", n > 1 ? pp[1]->name : "", a->calibrate, op_now_s() - t0,
               rms, *overhead, *ns);
        for (int k = 0; k < np; k++)
            fprintf(info, "  %c  F %7.3f  I %7.3f  W %7.3f ms\n", fit[k].sym, fit[k].f_ms, fit[k].i_ms, fit[k].w_ms);
    }
    if (rc) fprintf(stderr, "octopipe train: %s\n", e.msg);
    op_ptrain_turns_free(&t);
    for (int i = 0; i < n; i++) op_plan_free(&plans[i]);
    return rc ? (rc == OP_EINVAL ? 2 : 1) : 0;
}

/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
static double mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

/* Every rank runs on this machine: refuse up front when their arenas together (weights,
 * gradients, AdamW m and v and the weight-gradient scratch, 5 floats a parameter, plus each
 * rank's predicted activation peak) exceed the memory available, rather than fail mid-run. */
static int check_memory(const op_nn_model *m, const op_plan *p) {
    int64_t act[64] = {0};
    if (p->P > 64 || op_ptrain_pred_act_peak(m, p, act) != OP_OK) return 0;
    double stat = 0, acts = 0, avail = mem_available();
    for (int s = 0; s < p->S; s++)
        stat += 5.0 * sizeof(float) * (double)(m->off[p->stage_first[s + 1]] - m->off[p->stage_first[s]]);
    for (int d = 0; d < p->P; d++) acts += (double)act[d];
    if (avail <= 0 || stat + acts <= 0.9 * avail) return 0;
    fprintf(stderr, "octopipe train: the %d ranks need %.2f GiB (weights, gradients and optimizer state "
            "%.2f GiB, activations of %d microbatches %.2f GiB) but this machine has %.2f GiB available: "
            "use fewer ranks or microbatches\n", p->P, (stat + acts) / 1073741824.0, stat / 1073741824.0,
            p->M, acts / 1073741824.0, avail / 1073741824.0);
    return 2;
}

/* Profile, costs, plan: what rank 0 (or the --threads process) does before training.
 * *pred_ms: the iteration time to compare with (the plan's makespan, or with --calibrate its
 * expected time under the calibration's speed spread). */
static int make_plan(const targs *a, const op_nn_model *m, op_plan *p, double *pred_ms,
                     double *slow) {
    FILE *info = info_of(a);
    op_err e = {0};
    op_layer_prof prof[8];
    int np = 0;
    op_layer_cost *costs = op_xcalloc((size_t)m->n_layers, sizeof *costs);
    double t0 = op_now_s();
    /* one profiler per rank at once (threads of this process): as the ranks will compute */
    int nr = a->P < 16 ? a->P : 16;
    np = op_ptrain_profile_ranks(m, a->repeats, nr, !a->wall_clock, prof, &e);
    if (np < 0) { /* out of threads: the machine's state, not the flags (exit 1, not 2) */
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        free(costs);
        return 1;
    }
    fprintf(info, "profile: %s (%d layers: %s), %d layer kinds, median of %d in %s time, %d at once, %.1f s\n",
           m->name, m->n_layers, m->pattern, np, a->repeats, a->wall_clock ? "wall" : "thread CPU", nr,
           op_now_s() - t0);
    for (int k = 0; k < np; k++)
        fprintf(info, "  %c  F %7.3f  I %7.3f  W %7.3f ms\n", prof[k].sym, prof[k].f_ms, prof[k].i_ms, prof[k].w_ms);
    int rc = op_ptrain_layer_costs(m, prof, np, costs, &e);
    op_comm comm;
    op_ptrain_default_comm(&comm);
    op_comm links;
    if (rc == OP_OK && a->cluster && (rc = op_cluster_read(a->cluster, &links, &e)) == OP_OK)
        op_comm_set_links(&comm, &links); /* the file has no host link: offload keeps the default */
    double ovh = a->overhead_ms, *speed = NULL;
    int ns = 0;
    if (rc == OP_OK && a->calibrate > 0) {
        speed = op_xcalloc((size_t)2 * a->calibrate * a->P, sizeof(double));
        int c = calibrate(a, m, prof, np, &comm, costs, &ovh, speed, &ns);
        if (c) {
            free(speed), free(costs);
            return c;
        }
    }
    t0 = op_now_s();
    int tune_slow = a->slowdown && (!strcmp(a->plan, "auto") || !strcmp(a->plan, "tuned") ||
                                    !strcmp(a->plan, "octopipe"));
    if (rc == OP_OK && tune_slow) { /* the tuner sees each rank's speed */
        op_ptrain_slowdown_parse(a->slowdown, a->P, slow, &e); /* checked by train_parse() */
        rc = op_ptrain_tune_slow(m, costs, a->P, a->M, &comm, ovh, slow, p, &e);
    } else if (rc == OP_OK)
        rc = op_ptrain_make_plan(m, costs, a->P, a->M, &comm, ovh, a->plan, p, &e);
    if (rc == OP_OK && a->recompute >= 0) { /* every stage, whatever the plan chose */
        for (int s = 0; s < p->S; s++) p->stage_act[s] = (uint8_t)a->recompute;
        rc = op_sim_replay(p, NULL, &e);
        if (rc) op_plan_free(p);
    }
    /* a mixed cluster on this machine: --slowdown, or a mixed plan file's speed ratios */
    int slowed = 0;
    if (rc == OP_OK)
        slowed = a->slowdown ? op_ptrain_slowdown_parse(a->slowdown, a->P, slow, &e) == OP_OK
                             : op_ptrain_plan_slowdown(p, slow);
    if (slowed < 0) {
        rc = op_errf(&e, OP_EINVAL, "plan '%s': its device types differ in speed by more than "
                     "1000x (what --slowdown can emulate)", a->plan);
        op_plan_free(p);
    }
    for (int d = 0; !slowed && d < a->P; d++) slow[d] = 1; /* slow[]: what the ranks then do */
    /* also a typed plan at equal speeds: its type rows must become this machine's costs (a
     * plan tuned for the slow-down has them already, its types named "x2": once more made
     * them "x2 x2") */
    if (rc == OP_OK && !tune_slow && (slowed || p->n_types > 1)) {
        rc = op_ptrain_slowdown_plan(p, costs, slow, &e);
        if (rc) op_plan_free(p);
    }
    free(costs);
    if (rc) {
        free(speed);
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return 2;
    }
    /* the simulator puts each stage's recomputation before its I (the profiled costs carry
     * f_sel_ms), so the plan's own prediction includes it */
    *pred_ms = op_ptrain_expected_ms(p, speed, ns);
    free(speed);
    fprintf(info, "plan: %s (%s), %d stages on %d ranks, %d microbatches, predicted %.2f ms per step",
           p->name, a->plan, p->S, p->P, p->M, *pred_ms);
    if (ns > 0) fprintf(info, " (%.2f at every rank's mean speed)", p->pred.makespan_ms);
    fprintf(info, ", bubble %.1f%% (%.1f s)\n", 100 * p->pred.bubble_ratio, op_now_s() - t0);
    for (int d = 0; slowed && d < p->P; d++)
        fprintf(info, "%s%g%s", d ? "," : "slow-down per rank (each op then waits k-1 times its time): ",
               slow[d], d == p->P - 1 ? "\n" : "");
    int any = 0;
    for (int s = 0; s < p->S; s++) any |= p->stage_act[s] != OP_ACT_KEEP;
    for (int s = 0; any && s < p->S; s++)
        fprintf(info, "%s%s%s", s ? " " : "activation per stage: ", op_act_policy_name(p->stage_act[s]),
               s == p->S - 1 ? "\n" : "");
    fflush(info);
    if (check_memory(m, p)) {
        op_plan_free(p);
        return 2;
    }
    if (a->save_plan && op_plan_write(p, a->save_plan, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        op_plan_free(p); /* the callers free the plan only when it is returned */
        return 1;
    }
    return 0;
}

/* The measured timeline as a plan: the plan's ops with the last step's measured times. */
static int outputs(const targs *a, const op_plan *p, const op_ptrain_report *rep) {
    if (!rep->have_last) return 0;
    FILE *info = info_of(a);
    op_err e = {0};
    int rc = 0;
    if (a->trace) {
        op_buf b = {0};
        op_exec_chrome_trace(&rep->last, p, &b);
        if (op_write_file_atomic(a->trace, b.data, b.len, &e)) rc = 1;
        else if (!op_out_is_stdout(a->trace))
            fprintf(info, "wrote %s (measured ranks next to the predicted devices)\n", a->trace);
        op_buf_free(&b);
    }
    if (a->svg && !rc) {
        op_plan q;
        op_plan_copy(&q, p);
        for (int d = 0; d < q.P; d++) {
            OP_ASSERT(rep->last.n_recs[d] == q.n_ops[d], "rank %d ran %d ops, plan has %d", d,
                      rep->last.n_recs[d], q.n_ops[d]);
            for (int i = 0; i < q.n_ops[d]; i++) {
                q.ops[d][i].start = rep->last.recs[d][i].start;
                q.ops[d][i].end = rep->last.recs[d][i].end;
            }
        }
        snprintf(q.name, sizeof q.name, "%.38s measured", p->name);
        op_sim_fill_pred(&q);
        op_buf b = {0};
        if (op_export_svg(&q, &b, &e) || op_write_file_atomic(a->svg, b.data, b.len, &e)) rc = 1;
        else if (!op_out_is_stdout(a->svg))
            fprintf(info, "wrote %s (measured timeline of the last step)\n", a->svg);
        op_buf_free(&b);
        op_plan_free(&q);
    }
    if (rc) fprintf(stderr, "octopipe train: %s\n", e.msg);
    return rc;
}

/* A rank that waits for a CPU inside its compute calls makes the measured iteration longer by
 * that wait, which no plan predicts: on a machine busy with other work the error above says how
 * busy the machine was, not how good the plan is.  Say so, with the steps on which every rank
 * had its CPU where there were some (a user's first `make run` on a busy machine read +318%
 * and nothing else). */
static void busy_machine_note(FILE *info, const op_plan *p, const op_ptrain_report *r) {
    double low = 1;
    for (int d = 0; d < p->P && d < 64; d++)
        if (r->cpu_share[d] > 0 && r->cpu_share[d] < low) low = r->cpu_share[d];
    if (low >= 0.9) return;
    double load[1] = {0};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(info, "note: a rank had a CPU for only %.0f%% of its compute time", 100 * low);
    if (getloadavg(load, 1) == 1 && cpus > 0)
        fprintf(info, " (load average %.1f on %ld CPUs)", load[0], cpus);
    fprintf(info, ": other work on this machine is in the measured time, not in the prediction");
    int timed = r->steps_run > 1 ? (int)r->steps_run - 1 : (int)r->steps_run;
    if (r->n_quiet > 0 && r->pred_ms > 0)
        fprintf(info, "; on the %d of %d timed steps where every rank had its CPU: measured %.2f ms, "
                "error %+.1f%%\n", r->n_quiet, timed, r->meas_ms_quiet,
                100 * (r->meas_ms_quiet - r->pred_ms) / r->pred_ms);
    else
        fprintf(info, "; no step had every rank on its CPU: rerun on an idle machine to compare\n");
}

static void summary(const targs *a, const op_nn_model *m, const op_plan *p, const op_ptrain_report *r) {
    FILE *info = info_of(a);
    fprintf(info, "trained %lld steps in %.1f s: loss %.4f -> %.4f, %.0f tokens/s\n",
           (long long)r->steps_run, r->wall_s, op_shown(r->first_loss), op_shown(r->last_loss), r->tokens_per_s);
    if (!isfinite(r->last_loss)) /* the run is still timed; its weights mean nothing */
        fprintf(stderr, "octopipe train: the loss is not finite: training diverged (try a smaller "
                        "--lr)\n");
    fprintf(info, "iteration time: measured %.2f ms (mean of the middle 60%% of the steps after the first; "
           "median %.2f), predicted %.2f ms, error %+.1f%%\n",
           r->meas_ms_trimmed, r->meas_ms_median, r->pred_ms,
           r->pred_ms > 0 ? 100 * (r->meas_ms_trimmed - r->pred_ms) / r->pred_ms : 0.0);
    busy_machine_note(info, p, r);
    int64_t arena[64] = {0};
    int have = op_ptrain_pred_act_peak(m, p, arena) == OP_OK;
    for (int d = 0; d < p->P && d < 64; d++) {
        int64_t sim = p->pred.peak_bytes ? p->pred.peak_bytes[d] - (p->pred.static_bytes ? p->pred.static_bytes[d] : 0) : 0;
        fprintf(info, "  rank %d: peak activations measured %.2f MiB, predicted %.2f MiB (simulator %.2f MiB); "
               "on a CPU %.0f%% of its compute time\n",
               d, r->peak_act[d] / 1048576.0, have ? arena[d] / 1048576.0 : 0.0, sim / 1048576.0,
               100 * r->cpu_share[d]);
    }
    fflush(info);
}

static void fill_opts(const targs *a, op_ptrain_opts *o) {
    op_ptrain_opts_default(o);
    o->data = a->data;
    o->steps = a->steps;
    o->seed = (uint64_t)a->seed;
    if (a->lr > 0) o->opt.lr = (float)a->lr;
    o->ckpt_dir = a->ckpt;
    o->ckpt_every = a->ckpt_every;
    o->resume = a->resume;
    o->log_every = a->log_every;
    o->progress_thread = a->progress_thread;
    o->eo.watchdog_s = a->watchdog_s; /* 0: the executor's default */
    o->pin_cores = a->pin;
    o->keep_result = a->svg || a->trace;
    o->log = info_of(a); /* the step lines */
}

static int load_model(const targs *a, op_nn_model *m) {
    op_err e = {0};
    if (op_nn_model_from_spec(m, a->model, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return 2;
    }
    m->cfg.seed = (uint64_t)a->seed;
    return 0;
}

static int train_threads(const targs *a) {
    op_nn_model m;
    if (load_model(a, &m)) return 2;
    op_plan p;
    double pred = 0, slow[64];
    int rc = make_plan(a, &m, &p, &pred, slow);
    if (rc) return rc;
    op_ptrain_opts o;
    fill_opts(a, &o);
    o.pred_ms = pred;
    int slowed = 0;
    for (int d = 0; d < a->P; d++) slowed |= slow[d] > 1;
    o.slowdown = slowed ? slow : NULL;
    op_ptrain_report r;
    op_err e = {0};
    rc = op_ptrain_run_threads(&m, &p, &o, &r, &e);
    if (rc) fprintf(stderr, "octopipe train: %s\n", e.msg);
    else {
        summary(a, &m, &p, &r);
        rc = outputs(a, &p, &r);
    }
    op_ptrain_report_free(&r);
    op_plan_free(&p);
    return rc ? (rc == OP_EINVAL ? 2 : 1) : 0;
}

static char timeout_msg[128];
static void on_timeout(int sig) {
    (void)sig;
    ssize_t w = write(2, timeout_msg, strlen(timeout_msg));
    (void)w;
    _exit(124);
}

static int train_rank(const targs *a, int argc, char **argv) {
    op_xport x;
    op_err e = {0};
    if (op_xport_mpi_init(&x, &argc, &argv, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return 1;
    }
    /* --timeout under the user's own mpirun: each rank keeps it (a rank that exits ends the
     * job); under the mpirun train starts itself, that launcher keeps it, and the default 600 s
     * applies there only: a user's own job runs as long as its mpirun lets it */
    if (a->timeout_given && !getenv(OP_EXEC_LAUNCHED_ENV)) {
        snprintf(timeout_msg, sizeof timeout_msg,
                 "octopipe train: rank %d: ran past --timeout %g s; stopping the job\n", x.rank, a->timeout_s);
        signal(SIGALRM, on_timeout);
        alarm((unsigned)fmax(1, ceil(a->timeout_s)));
    }
    op_nn_model m;
    int rc = load_model(a, &m);
    op_plan p;
    memset(&p, 0, sizeof p);
    op_buf js = {0};
    int64_t len = -1;
    if (x.rank == 0 && rc == 0 && x.size != a->P) {
        fprintf(stderr, "octopipe train: --devices %d but mpirun started %d ranks\n", a->P, x.size);
        rc = 2;
    }
    /* --resume under the user's own mpirun, where no launcher checked the checkpoint (and
     * under ours, where it may have changed since): rank 0 checks it before profiling, and
     * every rank learns the verdict.  A bad one is rank 0's line and exit 2 (not each rank's
     * line and an MPI_ABORT after the profile), one at or past --steps "nothing to do" and
     * exit 0 (not a summary of 0 steps) */
    int32_t verdict = 0;
    if (x.rank == 0 && rc == 0) verdict = resume_check(a, &m);
    x.bcast(&x, &verdict, sizeof verdict);
    if (verdict) {
        op_xport_mpi_finalize(&x);
        return verdict == 1 ? 0 : 2;
    }
    double pred = 0, slow[64];
    for (int d = 0; d < 64; d++) slow[d] = 1;
    if (x.rank == 0 && rc == 0 && (rc = make_plan(a, &m, &p, &pred, slow)) == 0) {
        /* the other ranks need the structure only (their slow-down comes with slow[]): a
         * slowed plan goes as its first device type's costs, re-simulated to stay valid */
        op_plan q;
        op_plan_copy(&q, &p);
        if (q.n_types > 1) {
            op_plan_set_types(&q, 1, NULL, q.layers, NULL, q.dev_mem_limit);
            /* replay fails only on bad costs or a deadlock: row 0 passed with p, orders stay */
            OP_ASSERT(op_sim_replay(&q, NULL, &e) == OP_OK, "%s", e.msg);
        }
        op_plan_to_json(&q, &js);
        op_plan_free(&q);
        len = (int64_t)js.len;
    }
    x.bcast(&x, &len, sizeof len);
    if (len < 0) {
        op_buf_free(&js);
        if (x.rank == 0) op_plan_free(&p);
        op_xport_mpi_finalize(&x);
        return rc ? rc : 2;
    }
    if (x.rank != 0) {
        js.data = op_xcalloc((size_t)len + 1, 1);
        js.len = (size_t)len;
    }
    x.bcast(&x, js.data, len);
    x.bcast(&x, slow, sizeof slow); /* every rank's slow-down: rank 0 read it off the plan */
    /* rank 0's op_plan_to_json of a plan it made or read and checked: the reader takes it */
    if (x.rank != 0 && op_plan_from_json(js.data, "plan from rank 0", &p, &e))
        OP_ASSERT(0, "rank %d cannot read rank 0's plan: %s", x.rank, e.msg);
    op_buf_free(&js);
    op_ptrain_opts o;
    fill_opts(a, &o);
    o.pred_ms = pred; /* rank 0's; only rank 0 logs and reports */
    int slowed = 0;
    for (int d = 0; d < a->P; d++) slowed |= slow[d] > 1;
    o.slowdown = slowed ? slow : NULL;
    op_ptrain_report r;
    rc = op_ptrain_run_rank(&m, &p, &x, &o, &r, &e);
    int code = 0;
    if (rc) {
        fprintf(stderr, "octopipe train: rank %d: %s\n", x.rank, e.msg);
        fflush(stderr);
        x.hard_abort(&x, rc == OP_ETIMEOUT ? 3 : 1);
        code = 1;
    } else if (x.rank == 0) {
        summary(a, &m, &p, &r);
        code = outputs(a, &p, &r);
    }
    op_ptrain_report_free(&r);
    op_plan_free(&p);
    op_xport_mpi_finalize(&x);
    return code;
}

/* Every output path checked before anything starts: a run that cannot be saved is one line
 * and exit 2 up front, not a finished run lost at the end. */
static int check_outputs(const targs *a) {
    const char *outs[] = {a->svg, a->trace, a->save_plan};
    for (int k = 0; k < 3; k++)
        if (op_cli_check_out("train", outs[k])) return 2;
    /* --checkpoint DIR: created when missing, then takes DIR/model.ckpt (a missing DIR with
     * --resume is the missing checkpoint, reported where it is read) */
    struct stat st;
    if (a->ckpt && (!a->resume || stat(a->ckpt, &st) == 0) && op_cli_check_out_dir("train", a->ckpt))
        return 2;
    /* DIR/model.ckpt is replaced by rename: a FIFO or device there would block or take the
     * save only after the whole run (op_ckpt_save refuses it then); said before any work */
    char path[4096];
    op_err e = {0};
    if (a->ckpt && snprintf(path, sizeof path, "%s/model.ckpt", a->ckpt) > 0 && op_ckpt_check_file(path, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return 2;
    }
    return 0;
}

/* Settings of this run that differ from those of the run that wrote the checkpoint (the file
 * records them since version 2): a note each, since the resumed run is then not bitwise the
 * uninterrupted one.  Said, not refused: a new learning rate on resume is a choice. */
static void resume_notes(const targs *a, const char *path, const op_ckpt_run *was) {
    if (was->microbatches <= 0) return; /* not recorded */
    op_ptrain_opts o;
    fill_opts(a, &o);
    const char *data = o.data ? o.data : "text";
    const op_adamw *w = &was->opt, *n = &o.opt;
    char diff[3][160];
    int k = 0;
    if (was->microbatches != a->M)
        snprintf(diff[k++], sizeof diff[0], "--microbatches %d (it had %d)", a->M, was->microbatches);
    if (w->lr != n->lr)
        snprintf(diff[k++], sizeof diff[0], "--lr %g (it had %g)", (double)n->lr, (double)w->lr);
    else if (w->beta1 != n->beta1 || w->beta2 != n->beta2 || w->eps != n->eps || w->wd != n->wd ||
             w->warmup != n->warmup)
        snprintf(diff[k++], sizeof diff[0], "other AdamW settings (another build's defaults)");
    if (strcmp(was->data, data))
        snprintf(diff[k++], sizeof diff[0], "--data %.60s (it had %.60s)", data, was->data);
    for (int i = 0; i < k; i++)
        fprintf(stderr, "octopipe train: note: resuming %s with %s: training goes on, but not "
                        "bitwise as the uninterrupted run would\n", path, diff[i]);
}

/* --resume: the checkpoint DIR/model.ckpt checked (op_ckpt_check) before any work.  0 to go on,
 * 2 for a bad one (its line said), 1 when it is at or past --steps (nothing to do, said). */
static int resume_check(const targs *a, const op_nn_model *m) {
    if (!a->resume) return 0;
    char path[4096];
    int64_t next = 0;
    op_err e = {0};
    snprintf(path, sizeof path, "%s/model.ckpt", a->ckpt);
    op_ckpt_run *was = op_xcalloc(1, sizeof *was);
    if (op_ckpt_check_run(path, m, &next, was, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        free(was);
        return 2;
    }
    resume_notes(a, path, was);
    free(was);
    if (next >= a->steps) {
        fprintf(info_of(a), "nothing to do: %s is at step %lld and --steps is %d (raise --steps to train on)\n",
                path, (long long)next, a->steps);
        return 1;
    }
    return 0;
}

/* Model, data, outputs and the checkpoint to resume from checked in the launcher, before
 * mpirun: bad input is one line and exit 2; 1 when a resumed run has nothing left to do. */
static int check_inputs(const targs *a) {
    if (check_outputs(a)) return 2;
    op_nn_model m;
    if (load_model(a, &m)) return 2;
    op_train_data d;
    op_err e = {0};
    if (op_train_data_open(&d, a->data, &m.cfg, (uint64_t)a->seed, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return 2;
    }
    op_train_data_free(&d);
    /* a plan file that is missing or for another model: said before profiling (and
     * --calibrate's steps), which come first where the plan is made */
    if (op_ptrain_plan_file_check(&m, a->P, a->M, a->plan, &e)) {
        fprintf(stderr, "octopipe train: %s\n", e.msg);
        return 2;
    }
    return resume_check(a, &m); /* a bad checkpoint: one line and exit 2, before any rank starts */
}

int cmd_train(int argc, char **argv) {
    targs a;
    int rc = train_parse(&a, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && (rc = check_inputs(&a))) return rc == 1 ? 0 : 2;
    if (getenv("OMPI_COMM_WORLD_SIZE")) { /* under the user's own mpirun: each rank checks, rank 0 says */
        int saved = -1;
        if (op_cli_mpi_other_rank()) fflush(stderr), saved = dup(2), close(2);
        int bad = check_outputs(&a);
        if (saved >= 0) dup2(saved, 2), close(saved);
        if (bad) return 2;
    }
    if (a.threads) return train_threads(&a);
    if (getenv("OMPI_COMM_WORLD_SIZE")) return train_rank(&a, argc, argv);
    /* not under mpirun: start P ranks of ourselves with the same flags */
    op_err e = {0};
    int code = op_exec_launch(a.P, argv, argc, a.timeout_s, NULL, &e);
    if (code) fprintf(stderr, "octopipe train: %s\n", e.msg[0] ? e.msg : "the job failed");
    return code ? (code == 2 ? 2 : 1) : 0;
}
