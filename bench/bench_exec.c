/* bench_exec.c: the executor measured against the simulator (`make bench-exec`).
 *
 *  1. links: ping-pong between 2 MPI ranks (what `octopipe profile comm` does) -> lat, bw;
 *  2. for P in {4, 8, 16}: baselines and the tuned plan for nemotron-h-8b (H100 costs), each run
 *     emulated over P MPI ranks on this machine (time-scaled so a run takes about a second),
 *     predicted by op_sim_replay with the measured links and the executor's measured per-op
 *     dispatch cost; prints measured vs predicted makespan and the tuned/i1f1b speedups;
 *  3. a mixed cluster (4 H100 + 4 A100): 1f1b, zbv and the tuned plan, each rank at its own
 *     type's speed, measured vs predicted;
 *  4. 1000 random valid plans over the thread transport: none may hang.
 * The binary is its own rank program: under mpirun it runs `pingpong FILE` or `run PLANFILE
 * OUTFILE ...` (plans travel in a small private binary file: this bench only). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "exec/exec_cli.h"
#include "octopipe/cluster.h"
#include "octopipe/exec.h"
#include "octopipe/sched.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"
#include "../tests/test_exec_plans.h"
#include "args.h"

/* ---- private plan file: the fields an emulated run needs */
static void put(FILE *f, const void *p, size_t n) { OP_ASSERT(fwrite(p, 1, n, f) == n, "write"); }
static void get(FILE *f, void *p, size_t n) { OP_ASSERT(fread(p, 1, n, f) == n, "read"); }

static void plan_dump(const op_plan *p, const char *path) {
    FILE *f = fopen(path, "wb");
    OP_ASSERT(f, "cannot write %s", path);
    put(f, p->name, sizeof p->name);
    put(f, &p->n_layers, sizeof(int));
    put(f, &p->P, sizeof(int));
    put(f, &p->M, sizeof(int));
    put(f, &p->S, sizeof(int));
    put(f, &p->comm, sizeof p->comm);
    put(f, &p->op_overhead_ms, sizeof(double));
    put(f, p->layers, sizeof(op_layer_cost) * (size_t)p->n_layers);
    put(f, p->stage_first, sizeof(int) * (size_t)(p->S + 1));
    put(f, p->stage_dev, sizeof(int) * (size_t)p->S);
    put(f, p->stage_split, (size_t)p->S);
    /* device types (mixed plans): n_types, names, rows, dev_type */
    put(f, &p->n_types, sizeof(int));
    put(f, p->type_name, (size_t)32 * (size_t)p->n_types);
    put(f, p->type_layers, sizeof(op_layer_cost) * (size_t)p->n_types * (size_t)p->n_layers);
    put(f, p->dev_type, sizeof(int) * (size_t)p->P);
    for (int d = 0; d < p->P; d++) {
        put(f, &p->n_ops[d], sizeof(int));
        put(f, p->ops[d], sizeof(op_op) * (size_t)p->n_ops[d]);
    }
    fclose(f);
}

static void plan_load(op_plan *p, const char *path) {
    FILE *f = fopen(path, "rb");
    OP_ASSERT(f, "cannot read %s", path);
    char name[48];
    int L, P, M, S;
    op_comm c;
    double ov;
    get(f, name, sizeof name);
    get(f, &L, sizeof L);
    get(f, &P, sizeof P);
    get(f, &M, sizeof M);
    get(f, &S, sizeof S);
    get(f, &c, sizeof c);
    get(f, &ov, sizeof ov);
    op_layer_cost *lay = op_xcalloc((size_t)L, sizeof *lay);
    get(f, lay, sizeof *lay * (size_t)L);
    op_plan_init(p, name, lay, L, P, M, S, &c);
    free(lay);
    p->op_overhead_ms = ov;
    get(f, p->stage_first, sizeof(int) * (size_t)(S + 1));
    get(f, p->stage_dev, sizeof(int) * (size_t)S);
    get(f, p->stage_split, (size_t)S);
    int nt;
    get(f, &nt, sizeof nt);
    OP_ASSERT(nt >= 1 && nt <= P, "types %d", nt);
    char(*tn)[32] = op_xcalloc((size_t)nt, 32);
    op_layer_cost *tl = op_xcalloc((size_t)nt * (size_t)L, sizeof *tl);
    int *dt = op_xcalloc((size_t)P, sizeof *dt);
    get(f, tn, (size_t)32 * (size_t)nt);
    get(f, tl, sizeof *tl * (size_t)nt * (size_t)L);
    get(f, dt, sizeof *dt * (size_t)P);
    op_plan_set_types(p, nt, (const char(*)[32])tn, tl, dt, NULL);
    free(tn), free(tl), free(dt);
    for (int d = 0; d < P; d++) {
        int n;
        get(f, &n, sizeof n);
        op_op *ops = op_xcalloc((size_t)n + 1, sizeof *ops);
        get(f, ops, sizeof *ops * (size_t)n);
        op_plan_set_ops(p, d, ops, n);
        free(ops);
    }
    fclose(f);
}

/* ---- rank programs (under mpirun) */
static int child(int argc, char **argv) {
    op_xport x;
    op_err e = {0};
    if (op_xport_mpi_init(&x, &argc, &argv, &e)) return 1;
    if (!strcmp(argv[1], "pingpong")) {
        double lat = 0, bw = 0;
        op_buf tab = {0};
        int rc = op_exec_pingpong(&x, 4 << 20, 100, &lat, &bw, &tab, &e);
        if (x.rank == 0 && !rc) {
            op_comm c = {0};
            c.intra_lat_ms = c.inter_lat_ms = lat;
            c.intra_bw_GBps = c.inter_bw_GBps = bw;
            rc = op_cluster_write(argv[2], &c, "bench_exec ping-pong", &e);
        }
        op_buf_free(&tab);
        op_xport_mpi_finalize(&x);
        return rc ? 1 : 0;
    }
    /* run PLAN OUT: the plan file is already scaled (emulated plan) */
    op_plan emu;
    plan_load(&emu, argv[2]);
    op_exec_cli c;
    memset(&c, 0, sizeof c);
    c.eo.watchdog_s = 20;
    if (getenv("EXEC_NICE")) setpriority(PRIO_PROCESS, 0, atoi(getenv("EXEC_NICE")));
    if (getenv("EXEC_POLL_US")) c.eo.poll_us = atof(getenv("EXEC_POLL_US"));
    if (getenv("EXEC_SLICE_MS")) c.eo.slice_ms = atof(getenv("EXEC_SLICE_MS"));
    op_exec_result res = {0};
    op_exec_cli_run_rank(&c, &x, &emu, &res);
    if (x.rank == 0) {
        FILE *f = fopen(argv[3], "w");
        OP_ASSERT(f, "cannot write %s", argv[3]);
        fprintf(f, "%.6f %.6f %.6f\n", res.makespan_ms, res.bubble_ratio, res.overhead_ms);
        fclose(f);
        int bad = op_exec_check_order(&res, &emu, &e);
        if (bad) fprintf(stderr, "bench_exec: %s\n", e.msg);
    }
    op_exec_result_free(&res);
    op_plan_free(&emu);
    op_xport_mpi_finalize(&x);
    return 0;
}

/* ---- the driver */
typedef struct row {
    char name[24];
    double pred, meas, pbub, mbub, over;
    int runs;
} row;

static int run_once(const op_plan *emu, const char *dir, row *r);

/* Other work on a shared machine only ever makes a run slower, and shows as a high per-op
 * overhead (late wake-ups): a run whose overhead is above 0.1 ms per op is repeated, up to 3
 * runs, and the fastest kept.  r->runs says how many it took. */
static int run_one(const op_plan *emu, const char *dir, row *r) {
    row b;
    if (run_once(emu, dir, r)) return -1;
    r->runs = 1;
    while (r->over > 0.1 && r->runs < 3 && run_once(emu, dir, &b) == 0) {
        r->runs++;
        if (b.meas < r->meas) {
            r->meas = b.meas;
            r->mbub = b.mbub;
            r->over = b.over;
        }
    }
    return 0;
}

static int run_once(const op_plan *emu, const char *dir, row *r) {
    if (getenv("EXEC_THREADS")) { /* experiment: the same run over the thread transport */
        op_compute c = op_compute_emulate();
        op_exec_opts eo = {0};
        op_exec_result res;
        op_err e = {0};
        if (op_exec_run_threads(emu, &c, &eo, &res, &e)) return -1;
        r->meas = res.makespan_ms;
        r->mbub = res.bubble_ratio;
        r->over = res.overhead_ms;
        op_exec_result_free(&res);
        return 0;
    }
    char pf[256], of[256];
    snprintf(pf, sizeof pf, "%s/plan.bin", dir);
    snprintf(of, sizeof of, "%s/out.txt", dir);
    unlink(of);
    plan_dump(emu, pf);
    char *args[] = {"run", pf, of};
    op_err e = {0};
    int code = op_exec_launch(emu->P, args, 3, 120, NULL, &e);
    FILE *f = fopen(of, "r");
    if (code || !f || fscanf(f, "%lf %lf %lf", &r->meas, &r->mbub, &r->over) != 3) {
        fprintf(stderr, "bench_exec: %s P=%d failed: %s\n", emu->name, emu->P, e.msg);
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* The plan as emulated: scaled compute, measured links, dispatch cost; simulated into pred. */
static void emulated(const op_plan *p, double ts, double bs, const op_comm *link, double dispatch,
                     op_plan *emu, op_plan *pred) {
    op_exec_emulated_plan(emu, p, ts, bs, link, 0);
    op_plan_copy(pred, emu);
    pred->op_overhead_ms += dispatch;
    op_err e = {0};
    OP_ASSERT(op_sim_replay(pred, NULL, &e) == OP_OK, "sim: %s", e.msg);
}

/* The executor's per-op dispatch cost at this P: the smallest of 3 runs of the plan emulated
 * with none (a load spike from other work must not become the model). */
static double calibrate_dispatch(const op_plan *plan, double ts, double bs, const op_comm *link,
                                 const char *dir, int P) {
    op_plan emu, pred;
    emulated(plan, ts, bs, link, 0, &emu, &pred);
    double dispatch = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        row cal;
        if (run_once(&emu, dir, &cal) == 0 && cal.over < dispatch) dispatch = cal.over;
    }
    if (dispatch > 1e8 || dispatch < 0) dispatch = 0;
    printf("%3d calibration: dispatch cost %.4f ms per op\n", P, dispatch);
    op_plan_free(&emu);
    op_plan_free(&pred);
    return dispatch;
}

static int random_never_hang(int n) {
    op_rng rng;
    op_rng_seed(&rng, 2026);
    int ok = 0;
    op_compute c = op_compute_emulate();
    op_exec_opts eo = {0};
    eo.watchdog_s = 20;
    for (int i = 0; i < n; i++) {
        int P = 2 + op_rng_int(&rng, 15);
        op_plan p;
        xp_random(&p, &rng, P, P + op_rng_int(&rng, 2 * P), 1 + op_rng_int(&rng, 8), 0.005,
                  1 + op_rng_int(&rng, 1 << 16));
        op_exec_result r;
        op_err e = {0};
        if (op_exec_run_threads(&p, &c, &eo, &r, &e) == OP_OK && op_exec_check_order(&r, &p, &e) == OP_OK)
            ok++;
        else
            fprintf(stderr, "random plan %d: %s\n", i, e.msg);
        op_exec_result_free(&r);
        op_plan_free(&p);
    }
    return ok;
}

/* Mixed cluster: nemotron-h-8b on 4 H100 + 4 A100 (devices 0-3, 4-7; one node of 8), each
 * device type with its own analytic costs, M = 16.  Each rank sleeps its own type's op times;
 * the prediction is the simulator's on the same per-type costs.  Prints rows like the table
 * above; returns the worst |error| in %. */
static double mixed_rows(const op_model *m, const op_train_cfg *tc, const op_comm *link,
                         const char *dir) {
    const int P = 8;
    op_err e = {0};
    const char *tname[2] = {"h100-80gb", "a100-80gb"};
    char names[2][32];
    op_layer_cost *rows = op_xcalloc((size_t)2 * m->n_layers, sizeof *rows);
    for (int t = 0; t < 2; t++) {
        op_device dev;
        OP_ASSERT(op_device_preset(tname[t], &dev, &e) == OP_OK, "%s", e.msg);
        OP_ASSERT(op_cost_layers(m, tc, &dev, rows + (size_t)t * m->n_layers, &e) == OP_OK, "%s", e.msg);
        snprintf(names[t], sizeof names[t], "%s", tname[t]);
    }
    int dev_type[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    op_problem pr = {0};
    pr.model = "nemotron-h-8b";
    pr.layers = rows;
    pr.n_layers = m->n_layers;
    pr.P = P;
    pr.M = 2 * P;
    op_comm_default(&pr.comm, 8);
    pr.tokens_per_mb = tc->seq * tc->mbs;
    pr.n_types = 2;
    pr.type_layers = rows;
    pr.dev_type = dev_type;
    pr.type_name = (const char(*)[32])names;
    int64_t maxb = 1;
    for (int l = 0; l < m->n_layers; l++)
        if (rows[l].out_bytes > maxb) maxb = rows[l].out_bytes;
    double bs = (double)(64 << 10) / (double)maxb;
    if (bs > 1) bs = 1;
    const char *pn[] = {"1f1b", "zbv", "octopipe"};
    op_plan plans[3];
    int have[3] = {0};
    double ts = 0, longest = 0, worst = 0, dispatch = 0;
    for (int k = 0; k < 3; k++) {
        int rc;
        if (k < 2) rc = op_sched_build(pn[k], &pr, &plans[k], &e);
        else {
            op_tune_opts to;
            op_tune_opts_default(&to);
            rc = op_tune(&pr, &to, &plans[k], &e);
        }
        if (rc) {
            fprintf(stderr, "bench_exec: mixed %s: %s\n", pn[k], e.msg);
            continue;
        }
        have[k] = 1;
        double work = 0;
        int nops = 0;
        for (int d = 0; d < P; d++)
            for (int i = 0; i < plans[k].n_ops[d]; i++, nops++)
                work += op_stage_ms(&plans[k], plans[k].ops[d][i].stage, (op_kind)plans[k].ops[d][i].kind);
        if (10.0 / (work / nops) > ts) ts = 10.0 / (work / nops);
        if (plans[k].pred.makespan_ms > longest) longest = plans[k].pred.makespan_ms;
    }
    if (ts * longest > 6000) ts = 6000 / longest;
    printf("\nmixed cluster: nemotron-h-8b on 4 h100-80gb (ranks 0-3) + 4 a100-80gb (ranks 4-7), M = 16,\n"
           "each rank sleeping its own type's op times; messages x%.3g\n", bs);
    printf("%3s %-10s %7s %6s %10s %10s %8s %8s %8s %9s %4s\n", "P", "plan", "scale", "ops", "pred ms",
           "meas ms", "err %", "bub p%", "bub m%", "ovh ms", "runs");
    for (int k = 0; k < 3; k++) {
        if (!have[k]) continue;
        op_plan emu, pred;
        if (k == 0) /* dispatch cost at this P, as the uniform table does */
            dispatch = calibrate_dispatch(&plans[k], ts, bs, link, dir, P);
        emulated(&plans[k], ts, bs, link, dispatch, &emu, &pred);
        row r;
        snprintf(r.name, sizeof r.name, "%s", pn[k]);
        r.pred = pred.pred.makespan_ms;
        r.pbub = op_exec_pred_bubble(&pred, NULL);
        if (run_one(&emu, dir, &r) == 0) {
            double err = 100 * (r.meas - r.pred) / r.pred;
            if (fabs(err) > worst) worst = fabs(err);
            int nops = 0;
            for (int d = 0; d < P; d++) nops += plans[k].n_ops[d];
            printf("%3d %-10s %7.3f %6d %10.1f %10.1f %+8.2f %8.1f %8.1f %9.4f %4d\n", P, r.name, ts,
                   nops, r.pred, r.meas, err, 100 * r.pbub, 100 * r.mbub, r.over, r.runs);
            fflush(stdout);
        }
        op_plan_free(&emu);
        op_plan_free(&pred);
        op_plan_free(&plans[k]);
    }
    printf("mixed: worst makespan error %.2f%% (target 2%%)\n", worst);
    free(rows);
    return worst;
}

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return child(argc, argv);
    ba_args args = {"bench_exec", "   (no options; environment: EXEC_P=2..64 one pipeline size, "
                 "EXEC_MIXED_ONLY=1 the mixed table alone; EXEC_NICE, EXEC_POLL_US and "
                 "EXEC_SLICE_MS tune the ranks)",
                 argc, argv, 0, 0, 0};
    while (ba_next(&args)) ba_unknown(&args);
    if (ba_status(&args) >= 0) return ba_status(&args);
    long envP = 0; /* EXEC_P: one pipeline size instead of 4, 8, 16 */
    if (getenv("EXEC_P") && (op_parse_long(getenv("EXEC_P"), &envP) || envP < 2 || envP > 64)) {
        fprintf(stderr, "bench_exec: EXEC_P needs a whole number from 2 to 64 (got '%.40s')\n",
                getenv("EXEC_P"));
        return 2;
    }
    char dir[] = "/tmp/octopipe-bench-exec-XXXXXX";
    OP_ASSERT(mkdtemp(dir), "mkdtemp");
    char cl[300];
    snprintf(cl, sizeof cl, "%s/cluster.json", dir);
    op_err e = {0};
    char *pp[] = {"pingpong", cl};
    op_comm link;
    if (op_exec_launch(2, pp, 2, 60, NULL, &e) || op_cluster_read(cl, &link, &e)) {
        fprintf(stderr, "bench_exec: profile comm failed: %s\n", e.msg);
        return 1;
    }
    printf("links (ping-pong, executor waits): latency %.4f ms, bandwidth %.2f GB/s\n\n",
           link.intra_lat_ms, link.intra_bw_GBps);

    op_model m;
    OP_ASSERT(op_model_preset("nemotron-h-8b", &m, &e) == OP_OK, "%s", e.msg);
    op_train_cfg tc;
    op_train_cfg_default(&tc);
    op_device dev;
    OP_ASSERT(op_device_preset("h100-80gb", &dev, &e) == OP_OK, "%s", e.msg);
    op_layer_cost *L = op_xcalloc((size_t)m.n_layers, sizeof *L);
    OP_ASSERT(op_cost_layers(&m, &tc, &dev, L, &e) == OP_OK, "%s", e.msg);
    int64_t maxb = 1;
    for (int l = 0; l < m.n_layers; l++)
        if (L[l].out_bytes > maxb) maxb = L[l].out_bytes;
    /* messages <= 64 KiB: on 2 shared cores every transfer is a CPU copy competing with every
     * other one, which the per-link model cannot see; small messages keep that out of the way */
    double bs = (double)(64 << 10) / (double)maxb;
    if (bs > 1) bs = 1;

    const char *names[] = {"1f1b", "i1f1b", "zbh1", "zbv", "octopipe"};
    int nn = 5;
    double dispatch = 0, worst_err = 0, worst_sp = 0;
    int P0 = envP ? (int)envP : 4, P1 = envP ? P0 : 16;
    const int mixed_only = getenv("EXEC_MIXED_ONLY") != NULL; /* only the mixed table */
    if (mixed_only) P1 = 0;
    if (!mixed_only) {
        printf("nemotron-h-8b, H100 costs, M = 2P, emulated on %ld cores; messages x%.3g\n",
               sysconf(_SC_NPROCESSORS_ONLN), bs);
        printf("%3s %-10s %7s %6s %10s %10s %8s %8s %8s %9s %4s\n", "P", "plan", "scale", "ops", "pred ms",
               "meas ms", "err %", "bub p%", "bub m%", "ovh ms", "runs");
    }
    for (int P = P0; P <= P1; P *= 2) {
        op_problem pr = {0};
        pr.model = "nemotron-h-8b";
        pr.layers = L;
        pr.n_layers = m.n_layers;
        pr.P = P;
        pr.M = 2 * P;
        op_comm_default(&pr.comm, 8);
        pr.tokens_per_mb = tc.seq * tc.mbs;
        op_plan plans[5];
        int have[5] = {0}, built[5] = {0};
        memset(plans, 0, sizeof plans);
        for (int k = 0; k < nn; k++) {
            int rc;
            if (k < 4) rc = op_sched_build(names[k], &pr, &plans[k], &e);
            else {
                op_tune_opts to;
                op_tune_opts_default(&to);
                rc = op_tune(&pr, &to, &plans[k], &e);
            }
            have[k] = built[k] = rc == OP_OK;
            if (!have[k]) fprintf(stderr, "bench_exec: %s P=%d: %s\n", names[k], P, e.msg);
        }
        /* time scale: the plan with the shortest ops gets a mean op of 10 ms, so scheduler noise
         * on a shared 2-core box (~0.1 ms per wake-up) stays small against it; no run longer
         * than 6 s */
        double ts = 0, longest = 0;
        for (int k = 0; k < nn; k++) {
            if (!have[k]) continue;
            double work = 0;
            int nops = 0;
            for (int d = 0; d < P; d++)
                for (int i = 0; i < plans[k].n_ops[d]; i++) {
                    const op_op *o = &plans[k].ops[d][i];
                    work += op_stage_ms(&plans[k], o->stage, (op_kind)o->kind);
                    nops++;
                }
            double t = 10.0 / (work / nops);
            if (t > ts) ts = t;
            if (plans[k].pred.makespan_ms > longest) longest = plans[k].pred.makespan_ms;
        }
        if (ts * longest > 6000) ts = 6000 / longest;
        row rows[5];
        for (int k = 0; k < nn; k++) {
            if (!have[k]) continue;
            op_plan emu, pred;
            if (k == 0) /* calibrate the executor's per-op dispatch cost at this P */
                dispatch = calibrate_dispatch(&plans[k], ts, bs, &link, dir, P);
            emulated(&plans[k], ts, bs, &link, dispatch, &emu, &pred);
            if (getenv("EXEC_DUMP")) { /* debugging: the emulated plans as plan files */
                char pth[512];
                snprintf(pth, sizeof pth, "%s/%s-P%d.json", getenv("EXEC_DUMP"), names[k], P);
                op_plan_write(&pred, pth, &e);
            }
            row *r = &rows[k];
            snprintf(r->name, sizeof r->name, "%s", names[k]);
            r->pred = pred.pred.makespan_ms;
            r->pbub = op_exec_pred_bubble(&pred, NULL);
            if (run_one(&emu, dir, r)) have[k] = 0;
            else {
                double err = 100 * (r->meas - r->pred) / r->pred;
                if (fabs(err) > worst_err) worst_err = fabs(err);
                int nops = 0;
                for (int d = 0; d < P; d++) nops += plans[k].n_ops[d];
                printf("%3d %-10s %7.3f %6d %10.1f %10.1f %+8.2f %8.1f %8.1f %9.4f %4d\n", P, r->name,
                       ts, nops, r->pred, r->meas, err, 100 * r->pbub, 100 * r->mbub, r->over, r->runs);
                fflush(stdout);
            }
            op_plan_free(&emu);
            op_plan_free(&pred);
        }
        if (have[1] && have[4]) {
            double sp = rows[1].pred / rows[4].pred, sm = rows[1].meas / rows[4].meas;
            double d = 100 * (sm - sp) / sp;
            if (fabs(d) > worst_sp) worst_sp = fabs(d);
            printf("%3d speedup octopipe / i1f1b: predicted %.3fx, measured %.3fx (%+.2f%%)\n", P, sp, sm, d);
        }
        for (int k = 0; k < nn; k++)
            if (built[k]) op_plan_free(&plans[k]);
    }
    mixed_rows(&m, &tc, &link, dir);
    double load[3] = {0};
    getloadavg(load, 3);
    printf("\ndispatch cost: measured per P on a 1f1b calibration run, added to every op's prediction\n");
    /* (the mixed table's own calibration run is on its 1f1b plan) */
    printf("machine load average during the bench: %.1f %.1f %.1f (other work shares these cores)\n",
           load[0], load[1], load[2]);
    if (!mixed_only)
        printf("worst makespan error %.2f%% (target 2%%), worst speedup error %.2f%% (target 3%%)\n",
               worst_err, worst_sp);
    double t = op_now_s();
    int ok = random_never_hang(envP || mixed_only ? 0 : 1000);
    if (!mixed_only)
        printf("random valid plans (P 2..16, thread transport): %d / 1000 ran to completion in plan order (%.1f s)\n",
               ok, op_now_s() - t);
    op_model_free(&m);
    free(L);
    char path[300];
    snprintf(path, sizeof path, "%s/plan.bin", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/out.txt", dir);
    unlink(path);
    unlink(cl);
    rmdir(dir);
    return 0;
}
