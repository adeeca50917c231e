/* bench_plan.c: the tuner against every baseline (`make bench-plan`).
 *
 * Suite: every model of data/hf-configs (the presets of the same names) on H100-80GB
 * nodes of 8, seq 4096, mbs 1, tp 1, memory limit 80 GiB, P in {4, 8, 16}, M in {2P, 4P}; plus a
 * profile-driven Nemotron-H case built from measured per-layer times (the authors' SimPipe
 * profile: head ~9x a layer).  Per case: every baseline's makespan, the tuned makespan,
 * speedup over i1f1b and over the best baseline that fits, gap to the lower bound, tune time
 * (process CPU seconds: one core).  Geomeans at the bottom; then the tune-time cases
 * (P=8 M=32 ~60 layers, P=64 M=256 ~200 layers).  JSON goes to $BUILD/bench-results/plan.json.
 *
 * Usage: bench_plan [--quick | --tune-time]   (--quick: P in {4, 8} and no P=64 case;
 *        --tune-time: only the tune-time cases, for profiling the tuner;
 *        --tune-time-quick: only the first (P=8) tune-time case) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "octopipe/cost.h"
#include "octopipe/sched.h"
#include "octopipe/tune.h"

#include "args.h"

static const char *MODELS[] = {"deepseek-v2-lite", "gemma2-9b",  "jamba-v0.1", "llama2-7b",
                               "mixtral-8x7b",     "nemotron-h-8b", "qwen2-vl-7b", NULL};

typedef struct acc {
    double log_i1, log_best, log_gap, log_ceil;
    int n_i1, n_best, n_gap, slower;
} acc;

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

static void run_case(const char *model, const op_problem *pr, int hetero, acc *all, acc *het,
                     op_buf *js, int *first_json);

/* Runs one case; appends a JSON object to js.  hetero: counts toward the i1f1b geomean. */
static void run_case(const char *model, const op_problem *pr, int hetero, acc *all, acc *het,
                     op_buf *js, int *first_json) {
    const char *const *names = op_sched_names();
    double mk[16], best_bl = 0;
    char best_name[32] = "-";
    int nb = 0;
    double limit = pr->mem_limit_bytes;
    for (const char *const *n = names; *n; n++, nb++) {
        op_plan b;
        op_err e = {0};
        mk[nb] = 0;
        if (op_sched_build(*n, pr, &b, &e) == OP_OK) {
            int fits = limit <= 0 || (double)b.pred.peak_bytes_max <= limit;
            mk[nb] = fits ? b.pred.makespan_ms : -b.pred.makespan_ms; /* < 0: does not fit */
            if (fits && (best_bl == 0 || b.pred.makespan_ms < best_bl)) {
                best_bl = b.pred.makespan_ms;
                snprintf(best_name, sizeof best_name, "%s", *n);
            }
            op_plan_free(&b);
        }
    }
    if (best_bl == 0 && limit > 0) { /* nothing fits (Jamba-52B at P=4): compare without a limit */
        op_problem nl = *pr;
        nl.mem_limit_bytes = 0;
        char nm[40];
        snprintf(nm, sizeof nm, "%s*", model);
        run_case(nm, &nl, hetero, all, het, js, first_json);
        return;
    }
    printf("%-17s %3d %4d", model, pr->P, pr->M);
    for (int k = 0; k < nb; k++) {
        if (mk[k] > 0) printf(" %9.1f", mk[k]);
        else if (mk[k] < 0) printf(" %8.1f!", -mk[k]);
        else printf(" %9s", "-");
    }
    op_tune_opts o;
    op_tune_opts_default(&o);
    op_tune_stats st;
    o.stats = &st;
    op_plan p;
    op_err e = {0};
    double t0 = cpu_s();
    int rc = op_tune(pr, &o, &p, &e);
    double secs = cpu_s() - t0;
    if (rc != OP_OK) {
        printf("  tune failed: %s\n", e.msg);
        return;
    }
    double t = p.pred.makespan_ms, lb = p.pred.lower_bound_ms;
    double i1 = mk[2] > 0 ? mk[2] : 0; /* names[2] is i1f1b */
    for (int k = 0; k < nb; k++)
        if (!strcmp(names[k], "i1f1b")) i1 = mk[k] > 0 ? mk[k] : 0;
    double sp_i1 = i1 > 0 ? i1 / t : 0, sp_best = best_bl > 0 ? best_bl / t : 0;
    double gap = t / lb - 1;
    printf(" %9.1f %7.3f %7.3f %6.2f %6.2f %-10s %-9s %3d\n", t, sp_i1, sp_best, 100 * gap, secs,
           best_name, st.shape, p.S);
    acc *as[2] = {all, hetero ? het : NULL};
    for (int k = 0; k < 2; k++) {
        acc *a = as[k];
        if (!a) continue;
        if (sp_i1 > 0) a->log_i1 += log(sp_i1), a->log_ceil += log(i1 / lb), a->n_i1++;
        if (sp_best > 0) a->log_best += log(sp_best), a->n_best++;
        a->log_gap += log(1 + gap), a->n_gap++;
        if (sp_best > 0 && sp_best < 1 - 1e-9) a->slower++;
    }
    op_buf_printf(js, "%s\n  {\"model\": \"%s\", \"P\": %d, \"M\": %d, \"baselines\": {",
                  *first_json ? "" : ",", model, pr->P, pr->M);
    *first_json = 0;
    for (int k = 0; k < nb; k++) {
        op_buf_printf(js, "%s\"%s\": ", k ? ", " : "", names[k]);
        if (mk[k] > 0) op_buf_printf(js, "%.4f", mk[k]);
        else if (mk[k] < 0) op_buf_printf(js, "{\"makespan_ms\": %.4f, \"fits\": false}", -mk[k]);
        else op_buf_printf(js, "null");
    }
    op_buf_printf(js,
                  "}, \"octopipe_ms\": %.4f, \"lower_bound_ms\": %.4f, \"speedup_vs_i1f1b\": %.5f, "
                  "\"speedup_vs_best\": %.5f, \"best_baseline\": \"%s\", \"gap\": %.5f, "
                                    "\"tune_cpu_s\": %.3f, \"stages\": %d, \"shape\": \"%s\", \"sims\": %ld}",
                  t, lb, sp_i1, sp_best, best_name, gap, secs, p.S, st.shape, st.evals);
    op_plan_free(&p);
    fflush(stdout);
}

static int preset_problem(const char *name, int P, int M, op_model *m, op_layer_cost **costs,
                          op_problem *pr) {
    op_err e = {0};
    if (op_model_preset(name, m, &e) != OP_OK) {
        printf("%-17s skipped: %s\n", name, e.msg);
        return -1;
    }
    op_train_cfg t;
    op_train_cfg_default(&t);
    op_device dev;
    op_device_preset("h100-80gb", &dev, &e);
    *costs = calloc((size_t)m->n_layers, sizeof **costs);
    if (op_cost_layers(m, &t, &dev, *costs, &e) != OP_OK) {
        printf("%-17s skipped: %s\n", name, e.msg);
        free(*costs);
        op_model_free(m);
        return -1;
    }
    memset(pr, 0, sizeof *pr);
    pr->model = name;
    pr->layers = *costs;
    pr->n_layers = m->n_layers;
    pr->P = P;
    pr->M = M;
    pr->tokens_per_mb = t.seq * t.mbs;
    op_comm_default(&pr->comm, 8);
    pr->mem_limit_bytes = dev.mem_GiB * 1073741824.0;
    return 0;
}

/* Measured-style Nemotron-H-8B per-layer times (ms; authors' SimPipe profile, see
 * the OctoPipe paper, section 1.2): n_blocks of the nemotron pattern between E and L. */
static op_layer_cost *profile_layers(int n_mixers, int *L) {
    static const char *unit = "M-M-M-M*-";
    int n = n_mixers + 2;
    op_layer_cost *l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < n; i++) {
        char s = i == 0 ? 'E' : i == n - 1 ? 'L' : unit[(i - 1) % 9];
        double f, b, w;
        switch (s) {
        case 'E': f = 2.315, b = 0.4, w = 0.3; break;
        case 'L': f = 9.531, b = 7.319, w = 0.8; break;
        case 'M': f = 1.106, b = 2.152, w = 0.507; break;
        case '-': f = 0.966, b = 0.899, w = 0.868; break;
        default: f = 0.995, b = 0.913, w = 0.197; break;
        }
        snprintf(l[i].name, sizeof l[i].name, "%c%d", s, i);
        l[i].sym = s;
        l[i].f_ms = f, l[i].i_ms = b, l[i].w_ms = w;
        l[i].out_bytes = (int64_t)4096 * 4096 * 2;
    }
    *L = n;
    return l;
}

int main(int argc, char **argv) {
    int quick = 0, tt_quick = 0, tt_only = 0;
    ba_args args = {"bench_plan", "[--quick | --tune-time | --tune-time-quick]", argc, argv, 0, 0, 0};
    while (ba_next(&args)) {
        if (ba_flag(&args, "--quick")) quick = 1;
        else if (ba_flag(&args, "--tune-time")) tt_only = 1;
        else if (ba_flag(&args, "--tune-time-quick")) tt_only = tt_quick = 1;
        else ba_unknown(&args);
    }
    if (ba_status(&args) >= 0) return ba_status(&args);
    const char *const *names = op_sched_names();
    printf("tuned plan vs baselines: H100-80GB nodes of 8, seq 4096, mbs 1, tp 1, limit 80 GiB; "
           "makespans in ms, '!' = does not fit memory, model* = no schedule fits 80 GiB, so the "
           "case runs without a limit; gap = gap to the lower bound (op_lower_bound)\n");
    printf("%-17s %3s %4s", "model", "P", "M");
    for (const char *const *n = names; *n; n++) printf(" %9.9s", *n);
    printf(" %9s %7s %7s %6s %6s %-10s %-9s %3s\n", "octopipe", "vs_i1", "vs_best", "gap%",
           "cpu_s", "best_bl", "shape", "S");
    acc all = {0}, het = {0};
    op_buf js = {0};
    int first = 1;
    op_buf_printf(&js, "{\"suite\": [");
    int Ps[] = {4, 8, 16};
    for (int mi = 0; MODELS[mi] && !tt_only; mi++)
        for (int pi = 0; pi < (quick ? 2 : 3); pi++)
            for (int mm = 2; mm <= 4; mm += 2) {
                int P = Ps[pi], M = mm * P;
                op_model m;
                op_layer_cost *costs;
                op_problem pr;
                if (preset_problem(MODELS[mi], P, M, &m, &costs, &pr)) continue;
                run_case(MODELS[mi], &pr, strcmp(MODELS[mi], "llama2-7b") != 0, &all, &het, &js,
                         &first);
                free(costs);
                op_model_free(&m);
            }
    /* profile-driven case: measured per-layer times, no memory model */
    for (int P = 8; P <= 8 && !tt_only; P++)
        for (int mm = 2; mm <= 4; mm += 2) {
            int L;
            op_layer_cost *l = profile_layers(52, &L);
            op_problem pr = {0};
            pr.model = "profile-nemotron";
            pr.layers = l;
            pr.n_layers = L;
            pr.P = P;
            pr.M = mm * P;
            pr.tokens_per_mb = 4096;
            op_comm_default(&pr.comm, 8);
            run_case("profile-nemotron", &pr, 1, &all, &het, &js, &first);
            free(l);
        }
    op_buf_printf(&js, "\n], ");
    acc *sum[2] = {&het, &all};
    for (int k = 0; k < 2; k++) {
        acc *a = sum[k];
        int n = a->n_gap ? a->n_gap : 1;
        printf("%sgeomean over %s cases (%d): speedup vs i1f1b %.3fx (%d cases where i1f1b fits), "
               "at most %.3fx possible (i1f1b / lower bound), vs best baseline %.3fx, gap to "
               "lower bound %.2f%%; slower than a baseline: %d\n",
               k ? "" : "\n", k ? "all" : "heterogeneous", a->n_gap,
               exp(a->log_i1 / (a->n_i1 ? a->n_i1 : 1)), a->n_i1,
               exp(a->log_ceil / (a->n_i1 ? a->n_i1 : 1)),
               exp(a->log_best / (a->n_best ? a->n_best : 1)), 100 * (exp(a->log_gap / n) - 1),
               a->slower);
    }
    op_buf_printf(&js,
                  "\"geomean_hetero\": {\"speedup_vs_i1f1b\": %.5f, \"speedup_vs_best\": %.5f, "
                  "\"gap\": %.5f, \"slower\": %d, "
                  "\"max_possible_speedup_vs_i1f1b\": %.5f}, ",
                  exp(het.log_i1 / (het.n_i1 ? het.n_i1 : 1)),
                  exp(het.log_best / (het.n_best ? het.n_best : 1)),
                  exp(het.log_gap / (het.n_gap ? het.n_gap : 1)) - 1, het.slower,
                  exp(het.log_ceil / (het.n_i1 ? het.n_i1 : 1)));

    /* tune-time cases */
    printf("\ntune time (process CPU seconds, one core):\n");
    op_buf_printf(&js, "\"tune_time\": [");
    struct { const char *what; int P, M, mixers; } tt[] = {
        {"profile-nemotron 60 layers", 8, 32, 58}, {"profile-nemotron 200 layers", 64, 256, 198}};
    for (int k = 0; k < (quick || tt_quick ? 1 : 2); k++) {
        int L;
        op_layer_cost *l = profile_layers(tt[k].mixers, &L);
        op_problem pr = {0};
        pr.model = "profile-nemotron";
        pr.layers = l;
        pr.n_layers = L;
        pr.P = tt[k].P;
        pr.M = tt[k].M;
        pr.tokens_per_mb = 4096;
        op_comm_default(&pr.comm, 8);
        op_tune_opts o;
        op_tune_opts_default(&o);
        op_tune_stats st;
        o.stats = &st;
        op_plan p;
        op_err e = {0};
        double t0 = cpu_s();
        int rc = op_tune(&pr, &o, &p, &e);
        double secs = cpu_s() - t0;
        if (rc == OP_OK) {
            printf("  %-28s P=%-3d M=%-4d L=%-4d  %7.2f s  (%ld sims, S=%d %s, gap %.2f%%, "
                   "vs best baseline %s %.3fx)\n",
                   tt[k].what, pr.P, pr.M, L, secs, st.evals, p.S, st.shape,
                   100 * (p.pred.makespan_ms / p.pred.lower_bound_ms - 1), st.best_baseline,
                   st.best_baseline_ms > 0 ? st.best_baseline_ms / p.pred.makespan_ms : 0);
            op_buf_printf(&js, "%s{\"P\": %d, \"M\": %d, \"layers\": %d, \"cpu_s\": %.3f, "
                          "\"gap\": %.5f}", k ? ", " : "", pr.P, pr.M, L, secs,
                          p.pred.makespan_ms / p.pred.lower_bound_ms - 1);
            op_plan_free(&p);
        } else {
            printf("  %s: %s\n", tt[k].what, e.msg);
        }
        free(l);
        fflush(stdout);
    }
    op_buf_printf(&js, "]}\n");
    const char *build = getenv("BUILD");
    char path[512];
    /* the folder bench/run.sh makes; made here too, so a direct run also keeps its JSON */
    snprintf(path, sizeof path, "%s/bench-results", build ? build : "build");
    mkdir(path, 0777); /* EEXIST is fine; any other failure shows in the write below */
    snprintf(path, sizeof path, "%s/bench-results/plan.json", build ? build : "build");
    op_err e = {0};
    if (op_write_file_atomic(path, js.data, js.len, &e) != OP_OK)
        fprintf(stderr, "bench_plan: %s\n", e.msg);
    else
        printf("\nJSON: %s\n", path);
    op_buf_free(&js);
    return 0;
}
