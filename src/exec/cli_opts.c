/* cli_opts.c: flags shared by `octopipe run` and `octopipe exec`, the plan an emulated run is
 * predicted with, and the report printed after it. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_cli.h"
#include "octopipe/out.h"
#include "exec/exec_internal.h"
#include "octopipe/cluster.h"
#include "octopipe/sim.h"


const char *op_exec_cli_help(void) {
    return "  --emulate           each op sleeps for its modelled duration (the only compute the CLI\n"
           "                      runs; the reference model plugs in through `octopipe train`)\n"
           "  --time-scale X      multiply every op duration by X (default 1; e.g. 0.1 runs 10x faster)\n"
           "  --bytes-scale X     multiply every message size by X (default 1)\n"
           "  --cluster FILE      predict with the links measured by `octopipe profile comm`,\n"
           "                      per pair where it has them (then one row per rank of the plan)\n"
           "                      (default: the plan's own link model)\n"
           "  --dispatch-ms X     per-op executor cost the prediction adds (default 0)\n"
           "  --json              print measured vs predicted as JSON (on stderr when --trace -\n"
           "                      takes stdout)\n"
           "  --trace FILE        write the merged Chrome trace (measured ranks + predicted devices);\n"
           "                      '-' is stdout\n"
           "  --watchdog SEC      a rank waiting this long on one message stops the job (default 30);\n"
           "                      a rank stuck where no other rank waits on it (its last ops, or\n"
           "                      a one-rank job) is stopped by --timeout\n"
           "  --slice-ms X        emulated compute progresses messages every X ms (default 0.5)\n"
           "  --poll-us X         first sleep between tests while waiting (default 20)\n"
           "  --poll-growth F     later sleeps: F x the time waited so far (default 0.003)\n"
           "  --poll-max-us X     longest sleep between tests (default 300)\n"
           "  --recv-window N     post receives up to N compute ops ahead (default 8)\n"
           "  --recv-budget MIB   cap on posted receive buffers per rank (default 1024)\n"
           "  --inject-crash R:I  testing: rank R kills itself at its compute op I (MPI ranks only)\n"
           "  --inject-hang R:I   testing: rank R hangs in its compute op I\n";
}

/* A decimal number in [lo, hi] (whole with integer != 0), as every other command reads
 * numbers: --time-scale 0x1p-4 ran at 0.0625 and --recv-window 2.5 as 2. */
static int num_of(const char *cmd, const char *flag, const char *v, double lo, double hi, int integer,
                  double *out) {
    double x = 0;
    if (!v || op_parse_decimal(v, strlen(v), &x) || !(x >= lo && x <= hi) || (integer && x != floor(x))) {
        fprintf(stderr, "octopipe %s: %s needs %s in [%g, %g] (got '%s')\n", cmd, flag,
                integer ? "a whole number" : "a decimal number", lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static int num(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out) {
    return num_of(cmd, flag, v, lo, hi, 0, out);
}

static int fault(const char *cmd, const char *flag, const char *v, op_exec_fault *f, int kind) {
    /* two whole numbers split at the colon (sscanf's %d would take spaces and overflow) */
    const char *colon = v ? strchr(v, ':') : NULL;
    char rank[32];
    long r = -1, i = -1;
    if (colon && (size_t)(colon - v) < sizeof rank) {
        memcpy(rank, v, (size_t)(colon - v));
        rank[colon - v] = 0;
        if (op_parse_long(rank, &r) || op_parse_long(colon + 1, &i)) r = -1;
    }
    if (r < 0 || i < 0 || r > INT_MAX || i > INT_MAX) {
        fprintf(stderr, "octopipe %s: %s needs RANK:OPINDEX (got '%s')\n", cmd, flag, v ? v : "");
        return -1;
    }
    f->rank = (int)r;
    f->op_index = (int)i;
    f->kind = kind;
    return 0;
}

int op_exec_cli_parse(op_exec_cli *c, int argc, char **argv, const char *cmd, int allow_run_flags) {
    memset(c, 0, sizeof *c);
    c->time_scale = c->bytes_scale = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        int rc = 0, used = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--emulate")) c->emulate = 1, used = 0;
        else if (!strcmp(a, "--json")) c->json = 1, used = 0;
        else if (allow_run_flags && !strcmp(a, "--threads")) c->threads = 1, used = 0;
        else if (!strcmp(a, "--time-scale")) rc = num(cmd, a, v, 1e-6, 1e6, &c->time_scale);
        else if (!strcmp(a, "--bytes-scale")) rc = num(cmd, a, v, 0, 1e6, &c->bytes_scale);
        else if (!strcmp(a, "--dispatch-ms")) rc = num(cmd, a, v, 0, 1e6, &c->extra_overhead_ms);
        else if (!strcmp(a, "--watchdog")) rc = num(cmd, a, v, 0.01, 1e6, &c->eo.watchdog_s);
        else if (!strcmp(a, "--slice-ms")) rc = num(cmd, a, v, 0.001, 1e4, &c->eo.slice_ms);
        else if (!strcmp(a, "--poll-us")) rc = num(cmd, a, v, 0.1, 1e6, &c->eo.poll_us);
        else if (!strcmp(a, "--poll-growth")) rc = num(cmd, a, v, 1e-6, 1, &c->eo.poll_growth);
        else if (!strcmp(a, "--poll-max-us")) rc = num(cmd, a, v, 0.1, 1e6, &c->eo.poll_max_us);
        else if (!strcmp(a, "--timeout")) rc = num(cmd, a, v, 1, 86400, &c->timeout_s);
        else if (!strcmp(a, "--recv-window")) {
            rc = num_of(cmd, a, v, 1, 1e6, 1, &x);
            c->eo.lower.recv_window = (int)x;
        } else if (!strcmp(a, "--recv-budget")) {
            rc = num(cmd, a, v, 1e-6, 1e7, &x);
            c->eo.lower.recv_budget_bytes = (int64_t)(x * 1048576.0);
            if (c->eo.lower.recv_budget_bytes < 1) c->eo.lower.recv_budget_bytes = 1;
        } else if (!strcmp(a, "--cluster") || !strcmp(a, "--trace")) {
            if (!v || !*v) {
                fprintf(stderr, "octopipe %s: %s needs a file name\n", cmd, a);
                return 2;
            }
            if (a[2] == 'c') op_out_protect(c->cluster_path = v); /* an input: --trace may not replace it */
            else c->trace_path = v;
        } else if (!strcmp(a, "--inject-crash")) rc = fault(cmd, a, v, &c->eo.fault, OP_FAULT_CRASH);
        else if (!strcmp(a, "--inject-hang")) rc = fault(cmd, a, v, &c->eo.fault, OP_FAULT_HANG);
        else if (a[0] == '-' && a[1]) { /* "-" alone is a (missing) plan file */
            char dym[160];
            fprintf(stderr, "octopipe %s: unknown flag '%s'%s (octopipe %s --help)\n", cmd, a,
                    op_flag_suggest(op_exec_cli_help(), a, dym, sizeof dym), cmd);
            return 2;
        } else if (!c->plan_path) {
            c->plan_path = a, used = 0;
            op_out_protect(a); /* a --trace naming the plan would replace it */
        }
        else {
            fprintf(stderr, "octopipe %s: one plan file only (got '%s' and '%s')\n", cmd,
                    c->plan_path, a);
            return 2;
        }
        if (rc) return 2;
        i += used;
    }
    /* threads share one process: a rank killing itself takes every rank down with no report */
    if (c->threads && c->eo.fault.kind == OP_FAULT_CRASH) {
        fprintf(stderr, "octopipe %s: --inject-crash needs MPI ranks (a crashing thread would kill every "
                "rank with no report); drop --threads\n", cmd);
        return 2;
    }
    if (!c->plan_path) {
        fprintf(stderr, "octopipe %s: missing PLAN (octopipe %s --help)\n", cmd, cmd);
        return 2;
    }
    if (!c->emulate) {
        fprintf(stderr,
                "octopipe %s: only --emulate compute is available from the CLI (the reference "
                "model runs plans through `octopipe train`)\n",
                cmd);
        return 2;
    }
    return 0;
}

int op_exec_cli_plans(const op_exec_cli *c, const char *cmd, const char *text, op_plan *emu,
                      op_plan *pred, int *have_pred) {
    op_err e = {0};
    op_plan p;
    char *own = NULL;
    *have_pred = 0;
    if (!text) {
        size_t n;
        if (op_read_file(c->plan_path, &own, &n, &e)) {
            fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
            return 2;
        }
        text = own;
    }
    int rc = op_plan_from_json(text, c->plan_path, &p, &e);
    free(own);
    if (rc) {
        fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
        return 2;
    }
    op_cluster measured;
    if (c->cluster_path) {
        /* the links, per pair too, must be this plan's devices: a file of another count would
         * mix measured and modelled links without a word (plan and compare refuse it too) */
        rc = op_cluster_load(c->cluster_path, &measured, &e);
        if (!rc && measured.P > 0 && measured.P != p.P)
            rc = op_errf(&e, OP_EINVAL, "%s lists %d devices but %s has %d ranks", c->cluster_path,
                         measured.P, c->plan_path, p.P);
        if (!rc && measured.comm.pair_n > 0 && measured.comm.pair_n != p.P)
            rc = op_errf(&e, OP_EINVAL, "%s: pair_lat_ms/pair_bw_GBps are %d x %d but %s has %d ranks",
                         c->cluster_path, measured.comm.pair_n, measured.comm.pair_n, c->plan_path, p.P);
        if (rc) {
            fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
            op_cluster_free(&measured);
            op_plan_free(&p);
            return 2;
        }
        if (measured.P > 0 && !getenv(OP_EXEC_LAUNCHED_ENV)) /* `run` said it before its mpirun */
            fprintf(stderr, "octopipe %s: note: the GPU types %s lists are not used: the plan's own "
                    "are (a plan records each device's type); its links are\n", cmd, c->cluster_path);
    }
    op_exec_emulated_plan(emu, &p, c->time_scale, c->bytes_scale, c->cluster_path ? &measured.comm : NULL, 0);
    if (c->cluster_path) op_cluster_free(&measured);
    op_plan_free(&p);
    op_lowered l;
    rc = op_exec_lower(emu, &c->eo.lower, &l, &e);
    if (rc) {
        fprintf(stderr, "octopipe %s: %s: %s\n", cmd, c->plan_path, e.msg);
        op_plan_free(emu);
        return 2;
    }
    op_lowered_free(&l);
    /* a fault at a rank or op the plan lacks never fired: the run passed as if the test worked */
    const op_exec_fault *f = &c->eo.fault;
    if (f->kind != OP_FAULT_NONE && (f->rank >= emu->P || f->op_index >= emu->n_ops[f->rank])) {
        if (f->rank >= emu->P)
            fprintf(stderr, "octopipe %s: --inject-%s %d:%d: %s has ranks 0..%d\n", cmd,
                    f->kind == OP_FAULT_CRASH ? "crash" : "hang", f->rank, f->op_index, c->plan_path,
                    emu->P - 1);
        else
            fprintf(stderr, "octopipe %s: --inject-%s %d:%d: rank %d of %s has compute ops 0..%d\n", cmd,
                    f->kind == OP_FAULT_CRASH ? "crash" : "hang", f->rank, f->op_index, f->rank,
                    c->plan_path, emu->n_ops[f->rank] - 1);
        op_plan_free(emu);
        return 2;
    }
    op_plan_copy(pred, emu);
    pred->op_overhead_ms += c->extra_overhead_ms;
    {
        if (op_sim_replay(pred, NULL, &e)) {
            fprintf(stderr, "octopipe %s: %s: %s\n", cmd, c->plan_path, e.msg);
            op_plan_free(emu);
            op_plan_free(pred);
            return 2;
        }
        *have_pred = 1;
    }
    return 0;
}

/* `run` measures on one machine, where every message is a memory copy by the ranks' CPUs that
 * the plan's link model (NVLink, the fabric) does not see.  The first run a user tries has the
 * defaults: Nemotron-H 8B on 2 H100 + 2 A100, 8 microbatches, measured +174% over the
 * prediction here, and +0.17% with --bytes-scale 0.002 --cluster (profile comm).  So a run
 * far above its prediction without those says which of them is missing: `run`, and the `exec`
 * ranks its mpirun starts (OP_EXEC_LAUNCHED_ENV); not `exec` under the user's own mpirun,
 * where the links may be the real ones. */
#define RUN_NOTE_ERR 0.10
static void run_note(const op_exec_cli *c, const char *cmd, double err, FILE *info) {
    if (strcmp(cmd, "run") && !getenv(OP_EXEC_LAUNCHED_ENV)) return;
    int big = c->bytes_scale > 0.01, links = !c->cluster_path;
    if (!(err > RUN_NOTE_ERR) || !isfinite(err) || !(big || links)) return;
    fprintf(info,
            "  note: %.0f%% above the prediction: on one machine every message is a memory copy by\n"
            "        the ranks' CPUs, which the plan's link model does not see; rerun with\n"
            "        %s%s%s\n",
            100 * err, big ? "--bytes-scale 0.002" : "", big && links ? " " : "",
            links ? "--cluster FILE (FILE from `octopipe profile comm --out FILE`)" : "");
}

int op_exec_cli_report(const op_exec_cli *c, const char *cmd, const op_exec_result *r,
                       const op_plan *pred, int have_pred) {
    op_buf b = {0};
    FILE *info = op_out_is_stdout(c->trace_path) ? stderr : stdout; /* --trace -: trace alone */
    if (c->json) {
        op_exec_report_json(r, pred, c->time_scale, &b);
        fputs(b.data, info);
    } else {
        fprintf(info, "%s: %d ranks, %d microbatches, time scale %g, message bytes x%g, links: %s\n",
               pred->name, pred->P, pred->M, c->time_scale, c->bytes_scale,
               c->cluster_path ? c->cluster_path
                               : "the plan's (--cluster FILE from `octopipe profile comm` for this machine's)");
        fprintf(info, "  measured  makespan %10.3f ms  bubble %5.1f%%  (per-op overhead %.3f ms)\n",
               r->makespan_ms, 100 * r->bubble_ratio, r->overhead_ms);
        if (have_pred) {
            double err = (r->makespan_ms - pred->pred.makespan_ms) / pred->pred.makespan_ms;
            fprintf(info, "  predicted makespan %10.3f ms  bubble %5.1f%%  error %+.2f%%\n",
                   pred->pred.makespan_ms, 100 * op_exec_pred_bubble(pred, NULL), 100 * err);
            run_note(c, cmd, err, info);
        } else {
            fprintf(info, "  predicted: simulator not built\n");
        }
    }
    fflush(info);
    op_buf_free(&b);
    if (c->trace_path) {
        op_err e = {0};
        op_exec_chrome_trace(r, pred, &b);
        int rc = op_out_write(c->trace_path, b.data, b.len, &e);
        op_buf_free(&b);
        if (rc) {
            fprintf(stderr, "octopipe %s: %s\n", cmd, e.msg);
            return 1;
        }
    }
    return 0;
}

int op_exec_cli_run_rank(const op_exec_cli *c, op_xport *x, const op_plan *emu,
                         op_exec_result *res) {
    op_err e = {0};
    op_lowered l;
    OP_ASSERT(op_exec_lower(emu, &c->eo.lower, &l, &e) == OP_OK, "lowering failed after its check: %s",
              e.msg);
    op_compute comp = op_compute_emulate();
    int rc = op_exec_rank_run(emu, &l, x, &comp, &c->eo, res, &e);
    op_lowered_free(&l);
    if (rc) {
        if (rc != OP_ETIMEOUT) fprintf(stderr, "octopipe exec: rank %d: %s\n", x->rank, e.msg);
        fflush(stderr);
        op_exec_nap_us(1e6);
        x->hard_abort(x, rc == OP_ETIMEOUT ? 3 : 1);
        exit(rc == OP_ETIMEOUT ? 3 : 1); /* not reached under MPI */
    }
    return 0;
}
