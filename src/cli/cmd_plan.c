/* cmd_plan.c: `octopipe plan`: tune partition x placement x schedule for a model and cluster
 * and write the plan file (octopipe.plan/1). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "cli/cli_out.h"
#include "cli/plan_sweep.h"
#include "octopipe/tune.h"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* The advice's searches, one line each (they take seconds on large models); ctx: its start. */
static void advice_trying(void *ctx, const char *what) {
    fprintf(stderr, "octopipe plan: trying %s (%.0f s so far)\n", what, op_now_s() - *(double *)ctx);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: octopipe plan --model FILE|PRESET --devices P --microbatches M --out PLAN.json\n"
            "                     [options]\n"
            "\n"
            "Co-optimizes the partition (how many stages, which layers each), the placement\n"
            "(which device runs each stage: sequential, looped, V or irregular) and the schedule\n"
            "(per-device order of F / I / W with warm-up depth and deferred W filling bubbles)\n"
            "against the simulator, within the per-device memory limit.  Every classic schedule\n"
            "is simulated too; the plan returned is never slower than the best of them that\n"
            "fits (under --placement loop|v, of those with that layout; the summary still\n"
            "names the fastest of all).  Prints the prediction, the lower bound and the gap\n"
            "to it, and where fewer devices have the same bound (a layer that runs whole on\n"
            "one device, such as a large-vocabulary head, sets it), how many: the others\n"
            "cannot lower it.\n\n"
            "%s"
            "tuner:\n"
            "  --out FILE|-          where to write the plan (required; '-' is stdout, and the\n"
            "                        summary then goes to stderr).  Checked before the search\n"
            "                        starts; a regular file is replaced atomically\n"
            "  --placement MODE      any (default) | loop | v.  loop and v keep torchtitan's\n"
            "                        layouts (v stages per device, stage s on device s %% P, or\n"
            "                        the V zig-zag), the ones torchtitan's trainer builds itself\n"
            "                        (export --torch-csv takes any placement with a stage on\n"
            "                        every rank; other ones need a launcher: docs/torch.md)\n"
            "  --time-budget S       stop the tuner after S seconds, all its work included\n"
            "                        (default: none; the search is bounded by a number of\n"
            "                        simulations, so it is deterministic); exit 1 when no plan\n"
            "                        that fits was found by then.  Where nothing can fit, the\n"
            "                        search for what would (--tp, --devices, ...) stops there too\n"
            "  --seed N              search seed (default 1); same seed, same plan\n"
            "  --effort N            search harder (1..1000, default 1): after the search at the\n"
            "                        default budget, one with N times its simulations (in all\n"
            "                        about N + 1 times the time), and the faster plan: never\n"
            "                        slower than effort 1, deterministic; pays most on mixed\n"
            "                        clusters and large P (docs/tuner.md)\n"
            "  --progress            a progress line a second on stderr (best plan so far, its\n"
            "                        gap, simulations, time; with --time-budget the time left)\n"
            "                        even when stderr is not a terminal\n"
            "  --quiet               no progress lines on stderr\n"
            "memory:\n"
            "  --recompute MODE      auto (default) | none | selective | full.  auto: no\n"
            "                        recomputation where memory does not bind; where it does,\n"
            "                        per stage the cheapest policy that fits (Megatron's\n"
            "                        selective, then full); the others put one policy on\n"
            "                        every stage, as Megatron's --recompute-granularity does\n"
            "  --offload MODE        auto (default) | none: whether stages may copy their\n"
            "                        stashed activations to host memory instead\n"
            "  --mem-sweep           tune at several memory limits and print makespan against\n"
            "                        the limit (a Pareto table for sizing a cluster), the set\n"
            "                        limit among them (marked *); --out is then optional and\n"
            "                        gets that row's plan; --time-budget S covers the whole\n"
            "                        sweep, each row an equal share of what is left\n"
            "sizing:\n"
            "  --device-sweep        tune on P devices, on halves of P down to the fewest whose\n"
            "                        static memory fits, and on the fewest with P's lower bound;\n"
            "                        print makespan and tokens/s per device for each (sizing a\n"
            "                        job: where tokens/s per device falls, added devices wait);\n"
            "                        on a mixed cluster: each kind of GPU alone, and all; --out\n"
            "                        gets the plan on all P\n"
            "Ctrl-C stops the search: the best plan found so far is written and the exit\n"
            "status is 130.  Flags take `--flag value` or `--flag=value`.\n"
            "exit status: 0 a plan written, 1 no plan fits (what would fit is printed) or\n"
            "the output could not be written, 2 bad input, 130 interrupted\n"
            "\nexample:\n"
            "  octopipe plan --model nemotron-h-8b --devices 8 --microbatches 32 --out plan.json\n"
            "  octopipe plan --model gemma2-9b --devices 4 --microbatches 16 --placement v \\\n"
            "                --mem-limit 60 --out gemma-v.json\n"
            "  octopipe plan --model jamba-v0.1 --devices 8 --microbatches 16 --tp 2 \\\n"
            "                --mem-sweep\n"
            "  octopipe plan --model gemma2-9b --devices 16 --microbatches 32 --device-sweep\n",
            op_cli_setup_help());
}

/* Where a layer that runs whole (or one microbatch's chain) sets the bound, fewer devices have
 * the same bound: say how many, and what the busiest device runs (plan.h,
 * op_problem_bound_devices), so a job is not sized past what it can use. */
static void print_fewer_devices(FILE *info, const op_problem *pr, const op_plan *p) {
    double lb_p, lb_k;
    const int k = op_problem_bound_devices(pr, 1e-3, &lb_p, &lb_k);
    if (k >= pr->P || !p->pred.busy_ms) return;
    fprintf(info, "fewer devices: %d devices have the same lower bound, %.2f ms (%.2f on these %d, "
                  "within 0.1%%): the other %d cannot lower it\n",
            k, lb_k, lb_p, pr->P, pr->P - k);
    int busiest = 0;
    for (int d = 1; d < p->P; d++)
        if (p->pred.busy_ms[d] > p->pred.busy_ms[busiest]) busiest = d;
    int first = -1, n = 0;
    for (int st = 0; st < p->S; st++)
        if (p->stage_dev[st] == busiest) {
            n += p->stage_first[st + 1] - p->stage_first[st];
            if (first < 0) first = p->stage_first[st];
        }
    if (n == 1) {
        const op_layer_cost *l = &p->layers[first];
        fprintf(info, "  the busiest, device %d, runs layer %d (%s) alone: %.2f ms a microbatch, "
                      "%.2f ms for %d\n",
                busiest, first, l->name, l->f_ms + l->i_ms + l->w_ms,
                p->M * (l->f_ms + l->i_ms + l->w_ms), p->M);
    }
    fprintf(info, "  --devices %d tunes the smaller job: its makespan and memory, to compare\n", k);
}

/* Ctrl-C during a sweep: the rows done are printed; the plan --out names is not written (its
 * row may be among those not tuned), and nothing half-written is left. */
static int sweep_interrupted(op_cli_setup *s, op_plan *p, const struct sigaction *old_sa) {
    sigaction(SIGINT, old_sa, NULL);
    if (p) op_plan_free(p);
    op_cli_setup_free(s);
    fprintf(stderr, "octopipe plan: interrupted: the sweep stopped after the row it was in; no plan "
                    "written\n");
    return 130;
}

int cmd_plan(int argc, char **argv) {
    op_cli_setup s;
    op_cli_setup_init(&s);
    op_tune_opts o;
    op_tune_opts_default(&o);
    const char *out = NULL;
    int seed = 1, progress = 0, quiet = 0, sweep = 0, dsweep = 0;
    for (int i = 1; i < argc; i++) {
        int r = op_cli_setup_flag(&s, argc, argv, &i, "plan");
        if (r < 0) return 2;
        if (r > 0) continue;
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--out")) {
            if (!(out = op_cli_value("plan", argc, argv, &i))) return 2;
        } else if (!strcmp(f, "--placement")) {
            const char *v = op_cli_value("plan", argc, argv, &i);
            if (!v) return 2;
            if (op_tune_placement_parse(v, &o.placement)) {
                fprintf(stderr, "octopipe plan: --placement must be any, loop or v, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--time-budget")) {
            const char *v = op_cli_value("plan", argc, argv, &i);
            if (!v || op_cli_double("plan", f, v, 0.01, 86400, &o.time_budget_s)) return 2;
        } else if (!strcmp(f, "--seed")) {
            const char *v = op_cli_value("plan", argc, argv, &i);
            if (!v || op_cli_int("plan", f, v, 0, 2147483647, &seed)) return 2;
        } else if (!strcmp(f, "--effort")) {
            const char *v = op_cli_value("plan", argc, argv, &i);
            if (!v || op_cli_int("plan", f, v, 1, 1000, &o.effort)) return 2;
        } else if (!strcmp(f, "--recompute")) {
            const char *v = op_cli_value("plan", argc, argv, &i);
            if (!v) return 2;
            if (op_tune_recompute_parse(v, &o.recompute)) {
                fprintf(stderr, "octopipe plan: --recompute must be auto, none, selective or full, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--offload")) {
            const char *v = op_cli_value("plan", argc, argv, &i);
            if (!v) return 2;
            if (strcmp(v, "auto") && strcmp(v, "none")) {
                fprintf(stderr, "octopipe plan: --offload must be auto or none, got '%s'\n", v);
                return 2;
            }
            o.no_offload = !strcmp(v, "none");
        } else if (!strcmp(f, "--mem-sweep")) {
            sweep = 1;
        } else if (!strcmp(f, "--device-sweep")) {
            dsweep = 1;
        } else if (!strcmp(f, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(f, "--progress")) {
            progress = 1;
        } else {
            char dym[160];
            fprintf(stderr, "octopipe plan: unknown flag '%s'%s (octopipe plan --help)\n", f,
                    op_cli_suggest(usage, f, dym, sizeof dym));
            return 2;
        }
    }
    if (sweep && dsweep) {
        fprintf(stderr, "octopipe plan: --mem-sweep and --device-sweep are separate runs: give one\n");
        return 2;
    }
    if (!out && !sweep && !dsweep) {
        fprintf(stderr, "octopipe plan: --out PLAN.json is required (see octopipe plan --help)\n");
        return 2;
    }
    if (op_cli_check_out("plan", out)) return 2;
    o.verbose = op_cli_progress_wanted(progress, quiet);
    if (op_cli_setup_finish(&s, "plan")) {
        op_cli_setup_free(&s);
        return 2;
    }
    o.seed = (uint64_t)seed;
    op_tune_stats st;
    op_plan p;
    op_err e = {0};
    /* a sweep tunes at every row what a plain plan would refuse at once (--placement v with
     * fewer than 2 layers per device): every row of --mem-sweep said "no plan fits", even
     * without a limit, and with --out the exit was 2 after the table */
    if ((sweep || dsweep) && op_tune_check(&s.pr, &o, &e) != OP_OK) {
        fprintf(stderr, "octopipe plan: %s\n", e.msg);
        op_cli_setup_free(&s);
        return 2;
    }
    int swept = 0; /* 1: p is the sweep's plan at the set limit (its row), not tuned again */
    /* Ctrl-C: the tuner stops at its next check and returns its best plan (a sweep stops after
     * the row it is in); a second Ctrl-C (the handler resets itself) stops the process the usual
     * way */
    interrupted = 0;
    o.cancel = &interrupted;
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    if (sweep || dsweep) {
        int v = o.verbose;
        if (sweep) o.verbose = 0; /* the device sweep names its rows' progress lines, this one not */
        /* the table goes where the summary goes: stderr for --out - */
        if (o.time_budget_s > 0) o.started_s = op_now_s(); /* the sweep and the plan after it */
        swept = dsweep ? op_cli_device_sweep(&s, &o, op_cli_info(out), out ? &p : NULL, &st)
                       : op_cli_mem_sweep(&s, &o, op_cli_info(out), out ? &p : NULL, &st);
        o.verbose = v;
        if (interrupted) return sweep_interrupted(&s, swept ? &p : NULL, &old_sa);
        if (!out) {
            sigaction(SIGINT, &old_sa, NULL);
            op_cli_setup_free(&s);
            return 0;
        }
    }
    o.stats = &st;
    const double t_tune = o.started_s > 0 ? o.started_s : op_now_s(); /* what --time-budget counts from */
    /* the memory-aware bound printed below is the problem's: computed beside the tune, so the
     * --time-budget holds for it too (a sweep's plan needs it only after its table) */
    op_cli_bound_bg lbm_bg;
    op_cli_bound_bg_start(&lbm_bg, &s.pr);
    int rc = swept ? OP_OK : op_tune(&s.pr, &o, &p, &e);
    double lbm = op_cli_bound_bg_join(&lbm_bg);
    /* a sweep's Ctrl-C writes no plan, also where it came in the tune for --out after the
     * table (the set limit not among the rows): that plan was the search's best so far */
    if ((sweep || dsweep) && interrupted)
        return sweep_interrupted(&s, rc == OP_OK ? &p : NULL, &old_sa);
    sigaction(SIGINT, &old_sa, NULL);
    if (rc != OP_OK) {
        fprintf(stderr, "octopipe plan: %s\n", e.msg);
        /* Ctrl-C before any plan fitted: the search ran on to its end for one, and the advice
         * after it (a search per change, minutes on a large model) ran too, ending in exit 1;
         * the user asked to stop */
        if (interrupted && rc != OP_EINVAL) {
            fprintf(stderr, "octopipe plan: interrupted: no plan that fits was found; no plan "
                            "written\n");
            op_cli_setup_free(&s);
            return 130;
        }
        if (rc == OP_ENOMEM) {
            char adv[2048];
            /* each suggestion is a short search of its own: on a large model that takes a
             * while, and a silent wait after an error looks like a hang */
            if (!quiet)
                fprintf(stderr, "octopipe plan: looking for the smallest change that fits "
                                "(a short search for each of --tp, --ep, --zero1, --devices, --mem-limit)...\n");
            double t_adv = op_now_s();
            /* --time-budget covers the advice too: its searches stop where the budget ends */
            op_tune_advise_progress pg = {o.verbose ? advice_trying : NULL, &t_adv,
                                          o.time_budget_s > 0 ? t_tune + o.time_budget_s : 0, &o};
            op_device ad = s.dev; /* a --mem-limit to suggest is one for every device */
            ad.mem_GiB = op_cli_min_mem_GiB(&s);
            if (op_tune_advise_with(&s.model, &s.train, &ad, &s.pr, adv, sizeof adv, &pg) > 0)
                fprintf(stderr, "what would fit:\n%s", adv);
            else if (adv[0]) /* only what was searched without a fit */
                fprintf(stderr, "%s", adv);
            if (pg.deadline > 0 && op_now_s() >= pg.deadline)
                fprintf(stderr, "octopipe plan: the --time-budget ended the search for what would fit; "
                                "without it, each change gets its search\n");
        }
        op_cli_setup_free(&s);
        return rc == OP_EINVAL ? 2 : 1;
    }
    if (op_plan_write(&p, out, &e) != OP_OK) {
        fprintf(stderr, "octopipe plan: %s\n", e.msg);
        op_plan_free(&p);
        op_cli_setup_free(&s);
        return 1;
    }
    FILE *info = op_cli_info(out);
    const op_pred *q = &p.pred;
    double limit = s.pr.mem_limit_bytes;
    int mem = op_cli_mem_modelled(s.pr.layers, s.pr.n_layers);
    char lim[32];
    char par[48] = "", z1[40]; /* the degrees inside each stage, where any is above 1 */
    if (s.train.tp > 1 || s.train.ep > 1)
        snprintf(par, sizeof par, ", tp %d, ep %d", s.train.tp, s.train.ep);
    fprintf(info, "model %s: %d layers on %d devices (%s), %d microbatches%s%s\n", s.model.name,
           s.model.n_layers, s.P, op_cli_mixed(&s) ? "mixed" : s.dev.name, s.M, par,
           op_cli_zero1_text(s.train.zero1, s.train.dp, z1, sizeof z1));
    op_cli_print_types(info, &s);
    fprintf(info, "plan: %d stages, placement %s, %s\n", p.S, st.shape,
           p.stage_split[0] ? "split backward (I + W)" : "fused backward (B)");
    for (int d = 0; d < p.P; d++) {
        fprintf(info, "  device %2d:", d);
        if (op_cli_dev_type(&s, d)) fprintf(info, " %-9s", op_cli_dev_type(&s, d));
        for (int k = 0; k < p.S; k++)
            if (p.stage_dev[k] == d)
                fprintf(info, " s%d[%d,%d)%s", k, p.stage_first[k], p.stage_first[k + 1],
                        p.stage_act[k] == OP_ACT_SELECTIVE ? ":sel"
                        : p.stage_act[k] == OP_ACT_FULL    ? ":full"
                        : p.stage_act[k] == OP_ACT_OFFLOAD ? ":offload"
                                                           : "");
        if (mem) fprintf(info, "   peak %.2f GiB\n", (double)q->peak_bytes[d] / 1073741824.0);
        else fprintf(info, "\n");
    }
    fprintf(info, "makespan %.2f ms, %.0f tokens/s, bubble %.2f%%\n", q->makespan_ms, q->tokens_per_s,
           100 * q->bubble_ratio);
    fprintf(info, "lower bound %.2f ms, gap %.2f%%\n", q->lower_bound_ms,
           100 * op_gap(q->makespan_ms, q->lower_bound_ms));
    if (limit > 0 && op_cli_mem_bound_shows(q->lower_bound_ms, lbm)) /* memory binds every plan */
        fprintf(info, "memory-aware lower bound %.2f ms (least recomputation any fitting plan needs), "
               "gap %.2f%%\n", lbm, 100 * (q->makespan_ms / lbm - 1));
    if (!interrupted) print_fewer_devices(info, &s.pr, &p);
    if (st.best_baseline_ms > 0)
        fprintf(info, "best baseline %s %.2f ms: speedup %.3fx\n", st.best_baseline, st.best_baseline_ms,
               st.best_baseline_ms / q->makespan_ms);
    fprintf(info, "activations: %s%s\n", st.policies,
            st.n_recompute         ? ""
            : st.mem_binds == 2    ? " (memory binds; no recomputation was faster)"
            : st.mem_binds == 1    ? " (memory binds, but the plan is within 5% of the bound)"
                                   : "");
    if (mem)
        fprintf(info, "peak memory %.2f GiB per device (limit %s)\n",
                (double)q->peak_bytes_max / 1073741824.0,
                s.pr.dev_mem_limit ? "per device, above" : op_cli_mem_limit_str(limit, lim, sizeof lim));
    else
        fprintf(info, "memory not modelled (the profile has no memory fields; limit %s unchecked)\n",
                op_cli_mem_limit_str(limit, lim, sizeof lim));
    char eff[32] = "";
    if (o.effort > 1) snprintf(eff, sizeof eff, ", effort %d", o.effort);
    fprintf(info, "tuned in %.2f s (%ld simulations, seed %d%s); wrote %s\n", st.seconds, st.evals, seed,
            eff, op_out_is_stdout(out) ? "the plan to stdout" : out);
    op_plan_free(&p);
    op_cli_setup_free(&s);
    if (interrupted) {
        fprintf(stderr, "octopipe plan: interrupted: wrote the best plan found in %ld simulations\n",
                st.evals);
        return 130;
    }
    return 0;
}
