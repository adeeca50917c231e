/* bench_memory.c: the tuner where memory binds (`make bench-memory`).
 *
 * Suite: every preset of bench_plan on H100-80GB nodes of 8 at the default memory limit (90% of
 * 80 GiB, as the CLI), seq 4096, mbs 1, P in {4, 8, 16}, M in {2P, 4P}; tp = the smallest of
 * 1, 2, 4, 8 at which static memory (weights + gradients + optimizer state) can fit: some
 * device holds at least max(total/P, heaviest layer) of it.  Per case: whether memory binds (the
 * tuner's own test: keep does not fit, or its plan peaks at the limit while more than 2% above
 * the memory-free lower bound), the tuned makespan and its activation policies, the memory-free
 * lower bound and the gap to it, the best classic schedule with its cheapest uniform
 * recomputation that fits (op_sched_build_fit) and the speedup over it, the peak against the
 * limit, and the tune time (process CPU seconds).  Summary: cases with a plan, geomean and worst
 * tuned / bound where memory binds and where it does not, plans slower than a baseline, plans
 * over the limit.  Where memory binds, also the memory-aware lower bound (op_plan_lower_bound_mem:
 * what any plan under the limit must take) and the same problem tuned without a limit: the
 * gap to the memory-free bound splits into the part memory forces (memory-aware / memory-free
 * bound), the part it costs this tuner beyond that (tuned / tuned without a limit, less the
 * forced part) and the tuner's own gap where nothing binds (tuned without a limit / bound).
 *
 * Usage: bench_memory [--quick] [--filter TEXT] [--seed N] [--effort N]   (--quick: P in {4, 8};
 * --filter: only the models whose name contains TEXT, e.g. while working on one case; --effort:
 * the tuner's, as `octopipe plan --effort N`, for both tunings of a row) */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "octopipe/cost.h"
#include "octopipe/sched_mem.h"
#include "octopipe/tune.h"

#include "args.h"

#define GIB 1073741824.0

static const char *MODELS[] = {"deepseek-v2-lite", "gemma2-9b",  "jamba-v0.1", "llama2-7b",
                               "mixtral-8x7b",     "nemotron-h-8b", "qwen2-vl-7b", NULL};

typedef struct acc {
    double log_gap, worst, log_gapm, worstm, log_bl;
    double log_forced, log_nolim; /* binding cases: log(mem bound / bound), log(no limit / bound) */
    int n, n_bl, n_forced;
} acc;

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* Costs `name` at the smallest tp whose static memory can fit; *tp 0 if none does. */
static op_layer_cost *cost_fit(const op_model *m, int P, double lim, int *tp) {
    op_device dev;
    op_err e = {0};
    op_device_preset("h100-80gb", &dev, &e);
    op_layer_cost *lc = calloc((size_t)m->n_layers, sizeof *lc);
    for (int t = 1; t <= 8; t *= 2) {
        op_train_cfg tc;
        op_train_cfg_default(&tc);
        tc.tp = t;
        if (op_cost_layers(m, &tc, &dev, lc, &e) != OP_OK) continue;
        if (op_problem_static_floor(lc, m->n_layers, P) <= lim) {
            *tp = t;
            return lc;
        }
    }
    *tp = 0;
    return lc;
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *filter = NULL;
    long seed = 1;   /* the tuner's search seed (octopipe plan --seed): how much a row owes to it */
    long effort = 1; /* the tuner's effort (octopipe plan --effort): what a longer search buys */
    ba_args args = {"bench_memory", "[--quick] [--filter TEXT] [--seed N] [--effort 1..1000]", argc, argv, 0, 0, 0};
    while (ba_next(&args)) {
        if (ba_flag(&args, "--quick")) quick = 1;
        else if (ba_str(&args, "--filter", &filter)) {}
        else if (ba_long(&args, "--seed", 0, LONG_MAX, &seed)) {}
        else if (ba_long(&args, "--effort", 1, 1000, &effort)) {}
        else ba_unknown(&args);
    }
    if (ba_status(&args) >= 0) return ba_status(&args);
    double lim = 0.9 * 80 * GIB;
    op_device h100;
    op_err de = {0};
    if (op_device_preset("h100-80gb", &h100, &de) != OP_OK) {
        fprintf(stderr, "bench_memory: %s\n", de.msg);
        return 2;
    }
    printf("tuned plan under memory: H100-80GB nodes of 8, limit %.1f GiB, seq 4096, mbs 1; "
           "tp = smallest that lets static memory fit; ms; binds = memory binds the keep plan; "
           "gap = tuned / memory-free lower bound - 1; best_bl = fastest classic schedule with its "
           "cheapest recomputation that fits\n", lim / GIB);
    if (seed != 1) printf("tuner seed %ld (default 1)\n", seed);
    if (effort != 1) printf("tuner effort %ld (octopipe plan --effort %ld)\n", effort, effort);
    printf("%-17s %3s %4s %2s %5s %10s %10s %7s %10s %7s %10s %-24s %7s %7s %6s  %s\n", "model", "P",
           "M", "tp", "binds", "octopipe", "bound", "gap%", "mem_bound", "gapm%", "no_limit",
           "best_bl", "vs_bl", "peakGiB", "cpu_s", "activations");
    acc bind = {0}, free_ = {0};
    int cases = 0, static_ok = 0, planned = 0, slower = 0, over = 0, nobl = 0;
    int Ps[] = {4, 8, 16};
    for (int mi = 0; MODELS[mi]; mi++)
        if (!filter || strstr(MODELS[mi], filter))
        for (int pi = 0; pi < (quick ? 2 : 3); pi++)
            for (int mm = 2; mm <= 4; mm += 2) {
                int P = Ps[pi], M = mm * P, tp;
                op_model m;
                op_err e = {0};
                if (op_model_preset(MODELS[mi], &m, &e) != OP_OK) continue;
                cases++;
                op_layer_cost *lc = cost_fit(&m, P, lim, &tp);
                if (!tp) {
                    printf("%-17s %3d %4d  - static memory does not fit at tp <= 8\n", MODELS[mi], P, M);
                    free(lc);
                    op_model_free(&m);
                    continue;
                }
                static_ok++;
                op_problem pr = {0};
                pr.model = MODELS[mi];
                pr.layers = lc;
                pr.n_layers = m.n_layers;
                pr.P = P;
                pr.M = M;
                pr.tokens_per_mb = 4096;
                op_comm_default(&pr.comm, 8);
                op_comm_set_host(&pr.comm, &h100); /* offload over the H100's own host link, as
                                                     * `octopipe plan` builds it */
                pr.mem_limit_bytes = lim;
                /* baselines, each with its cheapest recomputation that fits */
                double bl = 0;
                char blname[48] = "-";
                for (const char *const *n = op_sched_names(); *n; n++) {
                    op_plan b;
                    op_sched_info info = {0};
                    if (op_sched_build_fit(*n, &pr, NULL, &b, &info, &e) != OP_OK) continue;
                    if ((double)b.pred.peak_bytes_max <= lim && (bl == 0 || b.pred.makespan_ms < bl)) {
                        bl = b.pred.makespan_ms;
                        const char *rc = strstr(info.settings, "recompute=");
                        snprintf(blname, sizeof blname, "%s%s%s", *n, rc ? "+" : "", rc ? rc + 10 : "");
                    }
                    op_plan_free(&b);
                }
                op_tune_opts o;
                op_tune_opts_default(&o);
                o.seed = seed;
                o.effort = (int)effort;
                op_tune_stats st;
                o.stats = &st;
                op_plan p;
                double t0 = cpu_s();
                int rc = op_tune(&pr, &o, &p, &e);
                double secs = cpu_s() - t0;
                if (rc != OP_OK) {
                    printf("%-17s %3d %4d %2d  no plan: %s\n", MODELS[mi], P, M, tp, e.msg);
                    free(lc);
                    op_model_free(&m);
                    continue;
                }
                planned++;
                double t = p.pred.makespan_ms, lb = p.pred.lower_bound_ms, g = t / lb;
                int fits = (double)p.pred.peak_bytes_max <= lim;
                if (!fits) over++;
                if (bl > 0 && t > bl * (1 + 1e-9)) slower++;
                if (bl == 0) nobl++;
                double lbm = op_plan_lower_bound_mem(&p), gm = t / lbm;
                acc *a = st.mem_binds ? &bind : &free_;
                char nolim[16] = "-";
                if (st.mem_binds) { /* the same problem without a limit: what memory costs */
                    op_problem q = pr;
                    q.mem_limit_bytes = 0;
                    op_tune_opts o2;
                    op_tune_opts_default(&o2);
                    o2.seed = seed;
                    o2.effort = (int)effort;
                    op_plan u;
                    if (op_tune(&q, &o2, &u, &e) == OP_OK) {
                        snprintf(nolim, sizeof nolim, "%.1f", u.pred.makespan_ms);
                        a->log_nolim += log(u.pred.makespan_ms / lb);
                        a->log_forced += log(lbm / lb);
                        a->n_forced++;
                        op_plan_free(&u);
                    }
                }
                a->log_gap += log(g);
                a->log_gapm += log(gm);
                a->n++;
                if (g > a->worst) a->worst = g;
                if (gm > a->worstm) a->worstm = gm;
                if (bl > 0) a->log_bl += log(bl / t), a->n_bl++;
                char vs[16] = "-";
                if (bl > 0) snprintf(vs, sizeof vs, "%.3fx", bl / t);
                printf("%-17s %3d %4d %2d %5s %10.1f %10.1f %7.2f %10.1f %7.2f %10s %-24s %7s %7.2f %6.2f  %s\n",
                       MODELS[mi], P, M, tp, st.mem_binds ? "yes" : "no", t, lb, 100 * (g - 1), lbm,
                       100 * (gm - 1), nolim, blname, vs, (double)p.pred.peak_bytes_max / GIB, secs,
                       st.policies);
                fflush(stdout);
                op_plan_free(&p);
                free(lc);
                op_model_free(&m);
            }
    printf("\ncases %d, static memory fits in %d, plans %d (target: every case whose static fits)\n",
           cases, static_ok, planned);
    acc *as[2] = {&bind, &free_};
    for (int k = 0; k < 2; k++) {
        acc *a = as[k];
        if (!a->n) continue;
        printf("memory %s in %d: tuned / memory-free bound geomean %.3fx, worst %.3fx%s; "
               "/ memory-aware bound geomean %.3fx, worst %.3fx; speedup over the best baseline "
               "geomean %.3fx\n", k ? "does not bind" : "binds", a->n, exp(a->log_gap / a->n),
               a->worst, k ? "" : " (targets 1.08x, 1.30x)", exp(a->log_gapm / a->n), a->worstm,
               a->n_bl ? exp(a->log_bl / a->n_bl) : 0);
    }
    if (bind.n_forced) {
        double lg = bind.log_gap / bind.n, lf = bind.log_forced / bind.n_forced,
               ln = bind.log_nolim / bind.n_forced;
        printf("where memory binds, of the gap to the memory-free bound (geomean %.3fx): forced by "
               "memory (memory-aware / memory-free bound) %.3fx, %.0f%%; the same problems tuned "
               "without a limit %.3fx above the memory-free bound, %.0f%%; the rest, %.0f%%, is "
               "what memory costs this tuner beyond what it forces\n", exp(lg), exp(lf),
               lg > 0 ? 100 * lf / lg : 0, exp(ln), lg > 0 ? 100 * ln / lg : 0,
               lg > 0 ? 100 * (lg - lf - ln) / lg : 0);
    }
    printf("plans slower than a baseline with its recomputation: %d (target 0); over the limit: %d "
           "(target 0); cases where no baseline fits: %d\n", slower, over, nobl);
    return 0;
}
