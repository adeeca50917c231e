/* bench_baselines.c: every baseline against the peers' own schedulers and the closed forms
 * (`make bench-baselines`).
 *
 * Peer vectors: bench/data/peer-vectors.json holds, for presets at --comm none, the makespan
 * Zero Bubble's ZB-V auto-scheduler reaches on a given V partition (zbv_auto_ms) and its
 * heuristic with ZB-H1 memory on a given chain partition (zb_h1_ms).  Our zbv / zbh1 built on
 * exactly those partitions must not be slower (a baseline at its strongest is at least as good
 * as what its users get).  Uniform closed forms: 2P identical layers with F = I = W = 1 ms on
 * P devices, M microbatches (stage of one layer under V placement, two layers on a chain):
 *   gpipe 6(M+P-1), 1f1b / balanced-1f1b 6M+6(P-1), i1f1b (v=2) 6M+3(P-1),
 *   zbh1 = zbh2 6M+2(P-1) (the chain's start-up delay: the lower bound of any chain order),
 *   zbv = dualpipev 6M+P-1, vhalf at most 6M+3(P-1) (B/2 of 1F1B's B = 6(P-1)) holding at
 *   most (P+2)/2 microbatches, vmin at most 6M+4(P-1)+6 (about 2B/3) holding (P+4)/3.
 * One row per check with PASS / FAIL; exit status 1 if any check fails.
 *
 * Usage: bench_baselines [PEERS.json]   (default bench/data/peer-vectors.json) */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/cost.h"
#include "octopipe/sched.h"

#include "args.h"

static int n_pass, n_fail;

static void row(const char *what, const char *sched, double ours, double ref, const char *rel,
                const char *settings) {
    /* peer figures are rounded to 0.01 ms */
    int ok = !strcmp(rel, "<=") ? ours <= ref + 0.005 : fabs(ours - ref) <= 1e-6 * ref;
    ok ? n_pass++ : n_fail++;
    printf("%-34s %-10s %10.2f %2s %10.2f  %+6.2f%%  %s  %s\n", what, sched, ours, rel, ref,
           100 * (ours / ref - 1), ok ? "PASS" : "FAIL", settings);
}

static int build(const char *name, const op_problem *pr, const int *first, int S, op_plan *p,
                 op_sched_info *info) {
    op_sched_opts o = {0};
    o.stage_first = first;
    o.S = S;
    op_err e = {0};
    if (op_sched_build_opts(name, pr, first ? &o : NULL, p, info, &e) != OP_OK) {
        printf("%-34s %-10s failed: %s\n", "", name, e.msg);
        n_fail++;
        return -1;
    }
    return 0;
}

/* [[a, b], ...] -> first[S+1]; returns S or -1 */
static int stages_of(json_t *arr, int *first, int cap) {
    if (!json_is_array(arr)) return -1;
    int S = (int)json_array_size(arr);
    if (S < 1 || S + 1 > cap) return -1;
    for (int s = 0; s < S; s++) {
        json_t *st = json_array_get(arr, (size_t)s);
        first[s] = (int)json_integer_value(json_array_get(st, 0));
        first[s + 1] = (int)json_integer_value(json_array_get(st, 1));
    }
    return S;
}

static void peer_case(json_t *c) {
    const char *model = json_string_value(json_object_get(c, "model"));
    int P = (int)json_integer_value(json_object_get(c, "devices"));
    int M = (int)json_integer_value(json_object_get(c, "microbatches"));
    json_t *ml = json_object_get(c, "mem_limit");
    op_model m;
    op_err e = {0};
    if (!model || op_model_preset(model, &m, &e) != OP_OK) {
        printf("%s: %s\n", model ? model : "?", e.msg);
        n_fail++;
        return;
    }
    op_train_cfg t;
    op_train_cfg_default(&t);
    op_device dev;
    op_device_preset("h100-80gb", &dev, &e);
    op_layer_cost *costs = calloc((size_t)m.n_layers, sizeof *costs);
    op_cost_layers(&m, &t, &dev, costs, &e);
    op_problem pr = {0};
    pr.model = model;
    pr.layers = costs;
    pr.n_layers = m.n_layers;
    pr.P = P;
    pr.M = M;
    pr.tokens_per_mb = t.seq * t.mbs;
    pr.comm.none = 1;
    /* the CLI's default: 90% of the GPU's memory */
    pr.mem_limit_bytes = ml ? 0 : 0.9 * dev.mem_GiB * 1073741824.0;
    char what[80];
    snprintf(what, sizeof what, "%s P=%d M=%d%s", model, P, M, ml ? " nolimit" : "");
    int first[1100];
    op_plan p;
    op_sched_info info;
    int S = stages_of(json_object_get(c, "zbv_stages"), first, 1100);
    double ref = json_number_value(json_object_get(c, "zbv_auto_ms"));
    if (S > 0 && build("zbv", &pr, first, S, &p, &info) == 0) {
        row(what, "zbv", p.pred.makespan_ms, ref, "<=", info.settings);
        op_plan_free(&p);
    }
    S = stages_of(json_object_get(c, "zbh1_stages"), first, 1100);
    ref = json_number_value(json_object_get(c, "zb_h1_ms"));
    if (S > 0 && build("zbh1", &pr, first, S, &p, &info) == 0) {
        row(what, "zbh1", p.pred.makespan_ms, ref, "<=", info.settings);
        op_plan_free(&p);
    }
    free(costs);
    op_model_free(&m);
}

/* 2P layers (E and L free, 2P decoder layers of F = I = W = 1 ms), act bytes 1 GiB a layer. */
static void uniform_problem(int P, int M, op_layer_cost *l, op_problem *pr) {
    int n = 2 * P + 2;
    for (int i = 0; i < n; i++) {
        memset(&l[i], 0, sizeof l[i]);
        l[i].sym = i == 0 ? 'E' : i == n - 1 ? 'L' : 'T';
        snprintf(l[i].name, sizeof l[i].name, "%c%d", l[i].sym, i);
        if (l[i].sym == 'T') {
            l[i].f_ms = l[i].i_ms = l[i].w_ms = 1;
            l[i].act_bytes = l[i].act_w_bytes = 1 << 30;
        }
    }
    memset(pr, 0, sizeof *pr);
    pr->model = "uniform";
    pr->layers = l;
    pr->n_layers = n;
    pr->P = P;
    pr->M = M;
    pr->tokens_per_mb = 4096;
    pr->comm.none = 1;
}

static void uniform_cases(void) {
    static const char *names[] = {"gpipe", "1f1b", "balanced-1f1b", "i1f1b", "zbh1", "zbh2",
                                  "zbv", "dualpipev", "vhalf", "vmin", NULL};
    op_layer_cost l[40];
    for (int P = 2; P <= 16; P *= 2)
        for (int k = 2; k <= 4; k += 2) {
            int M = k * P;
            op_problem pr;
            uniform_problem(P, M, l, &pr);
            char what[80];
            snprintf(what, sizeof what, "uniform F=I=W=1 P=%d M=%d", P, M);
            double peak1f1b = 0;
            for (int i = 0; names[i]; i++) {
                op_plan p;
                op_sched_info info;
                if (build(names[i], &pr, NULL, 0, &p, &info)) continue;
                double ms = p.pred.makespan_ms, peak = (double)p.pred.peak_bytes_max;
                const char *n = names[i];
                if (!strcmp(n, "1f1b")) peak1f1b = peak;
                if (!strcmp(n, "gpipe")) row(what, n, ms, 6.0 * (M + P - 1), "==", info.settings);
                else if (!strcmp(n, "1f1b") || !strcmp(n, "balanced-1f1b"))
                    row(what, n, ms, 6.0 * M + 6 * (P - 1), "==", info.settings);
                else if (!strcmp(n, "i1f1b"))
                    row(what, n, ms, 6.0 * M + 3 * (P - 1), "==", info.settings);
                else if (!strcmp(n, "zbh1") || !strcmp(n, "zbh2"))
                    row(what, n, ms, 6.0 * M + 2 * (P - 1), "==", info.settings);
                else if (!strcmp(n, "zbv") || !strcmp(n, "dualpipev"))
                    row(what, n, ms, 6.0 * M + P - 1, "==", info.settings);
                else if (!strcmp(n, "vhalf") || !strcmp(n, "vmin")) {
                    int half = !strcmp(n, "vhalf");
                    row(what, n, ms, half ? 6.0 * M + 3 * (P - 1) : 6.0 * M + 4 * (P - 1) + 6,
                        "<=", info.settings);
                    /* activation memory in microbatches of a device's layers (2 GiB) */
                    double mb = peak / (2.0 * (1 << 30));
                    double cap = half ? (P + 2) / 2 : (P + 4) / 3;
                    char s2[80];
                    snprintf(s2, sizeof s2, "peak %.2f of 1F1B's %.2f microbatches", mb,
                             peak1f1b / (2.0 * (1 << 30)));
                    row(what, half ? "vhalf mem" : "vmin mem", mb, cap, "<=", s2);
                }
                op_plan_free(&p);
            }
        }
}

int main(int argc, char **argv) {
    const char *path = NULL;
    ba_args args = {"bench_baselines", "[PEERS.json]   (default bench/data/peer-vectors.json)", argc, argv, 0, 0, 0};
    while (ba_next(&args)) {
        if (!path && argv[args.i][0] != '-') path = argv[args.i];
        else ba_unknown(&args);
    }
    if (!path) path = "bench/data/peer-vectors.json";
    if (ba_status(&args) >= 0) return ba_status(&args);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "bench_baselines: %s: %s (line %d)\n", path, je.text, je.line);
        return 2;
    }
    printf("baselines vs the peers' own schedulers (%s, --comm none) and the uniform closed "
           "forms; ms; a baseline passes when it is not slower than the reference\n", path);
    printf("%-34s %-10s %10s %2s %10s  %7s  %s  %s\n", "case", "schedule", "ours", "", "reference",
           "diff", "verdict", "settings");
    json_t *cases = json_object_get(root, "cases");
    for (size_t i = 0; i < json_array_size(cases); i++) peer_case(json_array_get(cases, i));
    uniform_cases();
    json_decref(root);
    printf("\nbaselines: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
