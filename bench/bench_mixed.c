/* bench_mixed.c: the tuner against the baselines on mixed clusters (`make bench-mixed`).
 *
 * Clusters (devices in this order, nodes of 8 joined by the inter-node fabric):
 *   h100+a100 1x8   4 x H100-80GB + 4 x A100-80GB in one node            (P = 8)
 *   h100+a100 2x8   8 x H100-80GB + 8 x A100-80GB, one node of each      (P = 16)
 *   h200+h100 2x8   8 x H200 + 8 x H100-80GB, one node of each           (P = 16)
 * Models: the bench-plan models (the presets of data/hf-configs), seq 4096, mbs 1, tp 1,
 * M = 2P; problems built as `octopipe compare --gpus` builds them (op_problem_build: each
 * device limited to 90% of its own memory; a case nothing fits runs without limits, marked
 * model*).  Baselines: every schedule of sched.h as its
 * users run it on such a cluster: Megatron's even split (and its other split options) or the
 * speed-proportional split (Metis-style), with the cheapest uniform recomputation that fits
 * (op_sched_build_fit), the best that fits per baseline; the best of all
 * baselines is the bar.  Per case: tuned makespan, best baseline and its split, lower bound,
 * and the bytes per step each plan sends over the slow inter-node link.
 * Exit 1 if the tuned plan is ever slower than a baseline that fits.
 *
 * Usage: bench_mixed [--quick] [--filter S] [--effort N]   (--quick: three models; --effort:
 * the tuner's, as `octopipe plan --effort N`: what a longer search buys, at N + 1 times the time) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "octopipe/cost.h"
#include "octopipe/problem.h"
#include "octopipe/sched.h"
#include "octopipe/sched_mem.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

#include "args.h"

static const char *MODELS[] = {"deepseek-v2-lite", "gemma2-9b",  "jamba-v0.1", "llama2-7b",
                               "mixtral-8x7b",     "nemotron-h-8b", "qwen2-vl-7b", NULL};

typedef struct cluster {
    const char *name, *gpus; /* --gpus */
    int P;
} cluster;

static const cluster CLUSTERS[] = {
    {"h100+a100 1x8", "h100-80gb:4,a100-80gb:4", 8},
    {"h100+a100 2x8", "h100-80gb:8,a100-80gb:8", 16},
    {"h200+h100 2x8", "h200:8,h100-80gb:8", 16},
};

/* Bytes one step sends over the inter-node link: each stage boundary whose two stages sit in
 * different nodes carries the activation forward and its gradient back, per microbatch.  -1
 * when the cluster is a single node. */
static double slow_bytes(const op_plan *p) {
    int n = p->comm.nodes_of;
    if (n <= 0 || p->P <= n) return -1;
    double b = 0;
    for (int s = 0; s + 1 < p->S; s++)
        if (p->stage_dev[s] / n != p->stage_dev[s + 1] / n)
            b += 2.0 * p->M * (double)op_stage_out_bytes(p, s);
    return b;
}

static int effort = 1; /* --effort */

typedef struct acc {
    double log_best, log_gap, log_gapm;
    int cases, n, slower, fewer, links;
} acc;

/* One case: the problem as `octopipe compare --gpus` builds it (nodes of 8, default links,
 * each device limited to OP_MEM_HEADROOM of its own memory; no_limit: none). */
static void run_case(const cluster *c, const char *model, int no_limit, acc *a) {
    op_problem_opts po;
    op_problem_opts_default(&po);
    po.gpus = c->gpus;
    po.nodes_of = 8;
    if (no_limit) po.mem_limit_bytes = -1;
    op_problem_built bp;
    op_err e = {0};
    if (op_problem_build(&bp, model, NULL, c->P, 2 * c->P, &po, &e) != OP_OK) {
        printf("%-14s %-17s skipped: %s\n", c->name, model, e.msg);
        return;
    }
    const op_problem *pr = &bp.pr;
    char nm[40];
    snprintf(nm, sizeof nm, "%s%s", model, no_limit ? "*" : "");
    double best = 0, best_slow = -1;
    char best_name[32] = "-", best_set[64] = "";
    for (const char *const *n = op_sched_names(); *n; n++) {
        op_plan b;
        op_sched_info info;
        if (op_sched_build_fit(*n, pr, NULL, &b, &info, &e) != OP_OK) continue;
        if (op_plan_fits(&b) && (best == 0 || b.pred.makespan_ms < best)) {
            best = b.pred.makespan_ms;
            best_slow = slow_bytes(&b);
            const char *rc = strstr(info.settings, "recompute=");
            snprintf(best_name, sizeof best_name, "%s%s%s", *n, rc ? "+" : "", rc ? rc + 10 : "");
            const char *sp = strstr(info.settings, "split=");
            snprintf(best_set, sizeof best_set, "%.40s", sp ? sp + 6 : info.settings);
            char *sp_end = strpbrk(best_set, " ,;");
            if (sp_end) *sp_end = 0;
        }
        op_plan_free(&b);
    }
    if (best == 0 && !no_limit) { /* nothing fits (Jamba-52B on 8 devices): run without limits */
        op_problem_built_free(&bp);
        run_case(c, model, 1, a);
        return;
    }
    op_tune_opts o;
    op_tune_opts_default(&o);
    o.effort = effort;
    op_tune_stats st;
    o.stats = &st;
    op_plan p;
    if (op_tune(pr, &o, &p, &e) != OP_OK) {
        printf("%-14s %-17s tune failed: %s\n", c->name, nm, e.msg);
        a->slower += best > 0;
        op_problem_built_free(&bp);
        return;
    }
    double t = p.pred.makespan_ms, lb = op_problem_lower_bound(pr), sp = best > 0 ? best / t : 0;
    double lbm = fmax(lb, op_problem_lower_bound_mem(pr)); /* the limits the plans must keep */
    double gap = t / lb - 1, gapm = t / lbm - 1, sb = slow_bytes(&p);
    char link[16] = "-";
    if (sb >= 0 && best_slow >= 0) {
        int fewer = sb < best_slow;
        snprintf(link, sizeof link, "%s", fewer ? "fewer" : sb == best_slow ? "same" : "more");
        a->links++;
        a->fewer += fewer;
    }
    printf("%-14s %-17s %3d %4d %9.1f %9.1f %-13s %-25s %7.3f %9.1f %6.2f %9.1f %6.2f %-9s %3d %7.2f %7.2f %-5s\n",
           c->name, nm, pr->P, pr->M, t, best, best_name, best_set, sp, lb, 100 * gap, lbm, 100 * gapm,
           st.shape, p.S, sb >= 0 ? sb / 1e9 : 0, best_slow >= 0 ? best_slow / 1e9 : 0, link);
    if (sp > 0) {
        a->log_best += log(sp);
        a->n++;
        if (sp < 1 - 1e-9) a->slower++;
    }
    a->log_gap += log(1 + gap);
    a->log_gapm += log(1 + gapm);
    a->cases++;
    op_plan_free(&p);
    op_problem_built_free(&bp);
    fflush(stdout);
}

int main(int argc, char **argv) {
    /* --quick: the first 3 models; --filter S: only cases whose cluster or model name holds S
     * (to rerun a subset; the geomean line then covers those cases only) */
    int quick = 0;
    const char *filter = NULL;
    long eff = 1;
    ba_args args = {"bench_mixed", "[--quick] [--filter TEXT] [--effort 1..1000]", argc, argv, 0, 0, 0};
    while (ba_next(&args)) {
        if (ba_flag(&args, "--quick")) quick = 1;
        else if (ba_str(&args, "--filter", &filter)) {}
        else if (ba_long(&args, "--effort", 1, 1000, &eff)) {}
        else ba_unknown(&args);
    }
    if (ba_status(&args) >= 0) return ba_status(&args);
    effort = (int)eff;
    if (effort > 1) printf("tuner effort %d (octopipe plan --effort %d)\n", effort, effort);
    printf("tuned plan vs baselines on mixed clusters: seq 4096, mbs 1, tp 1, M = 2P, each device "
           "limited to 90%% of its own memory (as octopipe compare --gpus); makespans in ms; model* = nothing fits, run without limits; best_bl = the "
           "fastest baseline that fits, split = its partition (speed-proportional = Metis-style), +full/+selective = its recomputation; "
           "bound = op_lower_bound_mixed (each layer at its fastest type's speed; work over unequal speeds, with the warm-up; whole layers counted per type; each device's layers at its own type's times with its warm-up and drain); mem_bound = also what each device's limit allows (op_problem_lower_bound_mem: whole layers' static bytes per device; stashes, recompute and offload in memory x time, over all devices and per group of like devices; per device, the recompute its limit forces at its deepest I), gapm%% = tuned / mem_bound - 1; slowGB = GB per "
           "step over the inter-node link (tuned, best baseline)\n");
    printf("%-14s %-17s %3s %4s %9s %9s %-13s %-25s %7s %9s %6s %9s %6s %-9s %3s %7s %7s %-5s\n", "cluster",
           "model", "P", "M", "octopipe", "best_bl", "baseline", "split", "speedup", "bound",
           "gap%", "mem_bound", "gapm%", "shape", "S", "slowGB", "bl_GB", "link");
    acc a = {0};
    for (int ci = 0; ci < (int)(sizeof CLUSTERS / sizeof *CLUSTERS); ci++)
        for (int mi = 0; MODELS[mi] && (!quick || mi < 3); mi++)
            if (!filter || strstr(CLUSTERS[ci].name, filter) || strstr(MODELS[mi], filter))
                run_case(&CLUSTERS[ci], MODELS[mi], 0, &a);
    int nm = a.cases;
    int n = a.n ? a.n : 1;
    printf("\ngeomean over %d cases: speedup vs best baseline %.3fx (target >= 1.15x), gap to "
           "bound %.2f%% (target <= 5%%), to the memory-aware bound %.2f%%; fewer slow-link bytes than the best baseline in %d of "
           "%d multi-node cases; slower than a baseline: %d\n",
           nm, exp(a.log_best / n), 100 * (exp(a.log_gap / (nm ? nm : 1)) - 1),
           100 * (exp(a.log_gapm / (nm ? nm : 1)) - 1), a.fewer, a.links,
           a.slower);
    return a.slower ? 1 : 0;
}
