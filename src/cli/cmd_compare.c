/* cmd_compare.c: `octopipe compare`: every classic schedule (and OctoPipe's tuned plan) on one
 * model and cluster, side by side, simulated by the same simulator. */
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "cli/cli_out.h"
#include "octopipe/sched.h"
#include "octopipe/sched_mem.h"
#include "octopipe/sim.h"
#include "octopipe/tune.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: octopipe compare --model FILE|PRESET --devices P --microbatches M [options]\n"
            "\n"
            "Simulates every classic schedule at its strongest settings (gpipe, 1f1b, i1f1b,\n"
            "zbh1, zbh2, zbv, dualpipev, vhalf, vmin, balanced-1f1b) and OctoPipe's tuned\n"
            "plan on the same per-layer costs and links, and prints one row each: makespan,\n"
            "tokens/s, bubble, peak memory per device, whether it fits, speedup over\n"
            "interleaved 1F1B (i1f1b, Megatron's default for large models) and the gap to\n"
            "the lower bound.  A schedule that does not fit memory as it is runs with the\n"
            "cheapest uniform recomputation that fits (selective, else full; the settings\n"
            "block says which).\n\n"
            "%s"
            "output:\n"
            "  --json                print {\"lower_bound_ms\", \"plans\": [...]} instead of a table\n"
            "                        (\"bound_devices\": the fewest devices with the same bound)\n"
            "  --plans-dir DIR       also write each plan as DIR/<name>.json (octopipe.plan/1);\n"
            "                        DIR is created when missing; DIR and every plan file in it\n"
            "                        are checked before any work\n"
            "  --no-tune             leave out the octopipe row (then --seed, --effort and\n"
            "                        --time-budget, which steer the tuner, are refused)\n"
            "  --time-budget S       tuner wall-time cap in seconds, from the tuner's start (the\n"
            "                        other rows, simulated before it, are not counted; default:\n"
            "                        none; the search is bounded by simulations, so results are\n"
            "                        deterministic)\n"
            "  --seed N              tuner seed (default 1)\n"
            "  --effort N            tuner effort (1..1000, default 1): as octopipe plan --effort\n"
            "  --progress            the tuner's progress line on stderr (best plan so far, its\n"
            "                        gap, simulations, time; with --time-budget the time left)\n"
            "                        even when stderr is not a terminal; with --json too, which\n"
            "                        stays alone on stdout\n"
            "  --quiet               no progress lines\n"
            "\nexample:\n"
            "  octopipe compare --model nemotron-h-8b --devices 8 --microbatches 32\n",
            op_cli_setup_help());
}

typedef struct row {
    const char *name;
    int ok;
    char reason[1100];
    char settings[160];
    op_plan plan;
} row;

/* Where --plans-dir puts the plan of schedule `name`. */
static const char *plan_path(char *buf, size_t cap, const char *dir, const char *name) {
    snprintf(buf, cap, "%s/%s.json", dir, name);
    return buf;
}

/* Every plan file checked before any work, as every output is (op_cli_check_out: not a
 * directory, not a file this command reads), so that a run never stops after writing some of
 * them.  A directory still to be made holds none of them (op_cli_check_out_dir checks it). */
static int check_plan_paths(const char *dir, int tune) {
    struct stat st;
    if (stat(dir, &st) != 0) return 0;
    char path[4096];
    for (const char *const *n = op_sched_names(); *n; n++)
        if (op_cli_check_out("compare", plan_path(path, sizeof path, dir, *n))) return 2;
    return tune ? op_cli_check_out("compare", plan_path(path, sizeof path, dir, "octopipe")) : 0;
}

static int write_plan(const char *dir, const op_plan *p) {
    char path[4096];
    plan_path(path, sizeof path, dir, p->name);
    op_err e = {0};
    if (op_plan_write(p, path, &e) != OP_OK) {
        fprintf(stderr, "octopipe compare: %s\n", e.msg);
        return -1;
    }
    return 0;
}

int cmd_compare(int argc, char **argv) {
    op_cli_setup s;
    op_cli_setup_init(&s);
    int json = 0, tune = 1, seed = 1, seed_given = 0, progress = 0, quiet = 0, effort = 0;
    double budget = 0;
    const char *plans_dir = NULL;
    for (int i = 1; i < argc; i++) {
        int r = op_cli_setup_flag(&s, argc, argv, &i, "compare");
        if (r < 0) return 2;
        if (r > 0) continue;
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--json")) {
            json = 1;
        } else if (!strcmp(f, "--progress")) {
            progress = 1;
        } else if (!strcmp(f, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(f, "--no-tune")) {
            tune = 0;
        } else if (!strcmp(f, "--plans-dir")) {
            if (!(plans_dir = op_cli_value("compare", argc, argv, &i))) return 2;
        } else if (!strcmp(f, "--time-budget")) {
            const char *v = op_cli_value("compare", argc, argv, &i);
            if (!v || op_cli_double("compare", f, v, 0.01, 86400, &budget)) return 2;
        } else if (!strcmp(f, "--seed")) {
            const char *v = op_cli_value("compare", argc, argv, &i);
            if (!v || op_cli_int("compare", f, v, 0, 2147483647, &seed)) return 2;
            seed_given = 1;
        } else if (!strcmp(f, "--effort")) {
            const char *v = op_cli_value("compare", argc, argv, &i);
            if (!v || op_cli_int("compare", f, v, 1, 1000, &effort)) return 2;
        } else {
            char dym[160];
            fprintf(stderr, "octopipe compare: unknown flag '%s'%s (octopipe compare --help)\n", f,
                    op_cli_suggest(usage, f, dym, sizeof dym));
            return 2;
        }
    }
    /* both steer the tuner only: with --no-tune a user would compare seeds or budgets that
     * change nothing */
    if (!tune && (seed_given || budget > 0 || effort)) {
        fprintf(stderr, "octopipe compare: %s steers the tuner, and --no-tune leaves it out; drop one\n",
                seed_given ? "--seed" : effort ? "--effort" : "--time-budget");
        return 2;
    }
    if (plans_dir && op_out_is_stdout(plans_dir)) {
        fprintf(stderr, "octopipe compare: --plans-dir needs a directory ('-' cannot hold one file per plan)\n");
        return 2;
    }
    /* checked before the inputs, created after them: a bad --model leaves no new directory */
    if (plans_dir && (op_cli_check_out_dir("compare", plans_dir) || check_plan_paths(plans_dir, tune)))
        return 2;
    if (op_cli_setup_finish(&s, "compare")) {
        op_cli_setup_free(&s);
        return 2;
    }
    struct stat st;
    if (plans_dir && stat(plans_dir, &st) != 0 && mkdir(plans_dir, 0755) != 0) {
        fprintf(stderr, "octopipe compare: --plans-dir %s cannot be created: %s\n", plans_dir,
                strerror(errno));
        op_cli_setup_free(&s);
        return 2;
    }
    const char *const *names = op_sched_names();
    int n = 0;
    while (names[n]) n++;
    row *rows = op_xcalloc((size_t)n + 1, sizeof *rows);
    op_sim_ws *ws = op_sim_ws_new();
    int nrows = 0, i1 = -1, prog = op_cli_progress_wanted(progress, quiet);
    double t0 = op_now_s();
    /* the problem's memory-aware bound, beside the schedules and the tune (a second or so on
     * large mixed problems) */
    op_cli_bound_bg lbm_bg;
    op_cli_bound_bg_start(&lbm_bg, &s.pr);
    for (int k = 0; k < n; k++) {
        double el = op_now_s() - t0; /* only long runs (many layers or devices) say anything */
        if (prog && k > 0 && el > 1.0)
            fprintf(stderr, "octopipe compare: schedules %d/%d simulated, %.1f s, about %.0f s left (next: %s)\n",
                    k, n, el, el / k * (n - k), names[k]);
        row *r = &rows[nrows++];
        r->name = names[k];
        op_err e = {0};
        op_sched_info info = {0};
        /* each at its strongest under memory: the cheapest uniform recomputation that fits */
        if (op_sched_build_fit(names[k], &s.pr, NULL, &r->plan, &info, &e) != OP_OK) {
            snprintf(r->reason, sizeof r->reason, "%s", e.msg);
            continue;
        }
        if (op_sim_replay(&r->plan, ws, &e) != OP_OK) {
            snprintf(r->reason, sizeof r->reason, "simulation failed: %s", e.msg);
            op_plan_free(&r->plan);
            continue;
        }
        r->ok = 1;
        snprintf(r->settings, sizeof r->settings, "%s", info.settings);
        if (!strcmp(names[k], "i1f1b")) i1 = nrows - 1;
    }
    if (tune) {
        row *r = &rows[nrows++];
        r->name = "octopipe";
        op_tune_opts o;
        op_tune_opts_default(&o);
        o.time_budget_s = budget;  /* 0: deterministic, bounded by simulations */
        o.seed = (uint64_t)seed;
        o.effort = effort;
        o.verbose = prog;
        o.label = "octopipe compare: tuning";
        op_err e = {0};
        op_tune_stats ts = {0};
        o.stats = &ts;
        if (op_tune(&s.pr, &o, &r->plan, &e) != OP_OK) {
            snprintf(r->reason, sizeof r->reason, "%s", e.msg);
        } else {
            r->ok = 1;
            snprintf(r->settings, sizeof r->settings, "%d stages, %s placement, from %s, %ld simulations in %.1f s",
                     ts.S, ts.shape, ts.source, ts.evals, ts.seconds);
            size_t len = strlen(r->settings);
            if (ts.n_recompute && len + 16 < sizeof r->settings) /* which stages recompute */
                snprintf(r->settings + len, sizeof r->settings - len, ", %s", ts.policies);
        }
    }
    double lb;
    {
        /* the lower bound does not depend on the schedule: compute it from the problem */
        op_plan tmp;
        op_plan_init_problem(&tmp, "lb", &s.pr, 1);
        lb = op_plan_lower_bound(&tmp);
        op_plan_free(&tmp);
    }
    double ref = i1 >= 0 ? rows[i1].plan.pred.makespan_ms : 0;
    double limit = s.pr.mem_limit_bytes;
    int mem = op_cli_mem_modelled(s.pr.layers, s.pr.n_layers);
    char lim[32];
    double best = 0; /* fastest classic schedule that fits memory */
    for (int k = 0; k < nrows; k++) {
        const op_plan *pl = &rows[k].plan;
        if (!rows[k].ok || !strcmp(rows[k].name, "octopipe")) continue;
        if (!op_plan_fits(pl)) continue; /* each device against its own limit */
        if (best == 0 || pl->pred.makespan_ms < best) best = pl->pred.makespan_ms;
    }
    /* the problem's memory-aware bound: each device against its own limit (plan.h) */
    double lbm = fmax(lb, op_cli_bound_bg_join(&lbm_bg));
    /* where a layer that runs whole sets the bound, fewer devices have it too (plan.h) */
    double lb_few = lb;
    const int few = op_problem_bound_devices(&s.pr, 1e-3, NULL, &lb_few);
    int rc = 0;
    if (json) {
        json_t *root = json_object(), *arr = json_array(), *skipped = json_array();
        json_object_set_new(root, "model", json_string(s.model.name));
        json_object_set_new(root, "devices", json_integer(s.P));
        json_object_set_new(root, "microbatches", json_integer(s.M));
        /* the settings the costs were made at, as the text header says them */
        json_object_set_new(root, "seq", json_integer(s.train.seq));
        json_object_set_new(root, "mbs", json_integer(s.train.mbs));
        json_object_set_new(root, "tp", json_integer(s.train.tp));
        json_object_set_new(root, "ep", json_integer(s.train.ep));
        json_object_set_new(root, "lower_bound_ms", json_real(lb));
        /* +inf (no plan fits) has no JSON number: null, as for the other absent values */
        json_object_set_new(root, "lower_bound_mem_ms", isinf(lbm) ? json_null() : json_real(lbm));
        json_object_set_new(root, "bound_devices", json_integer(few));
        /* whole bytes, as plan files write them: a real at the dump's 10 digits rounded
         * 77309411328 up to 7.730941133e10, above the limit "fits" was judged against */
        json_object_set_new(root, "mem_limit_bytes", json_integer((json_int_t)floor(limit)));
        if (s.pr.dev_mem_limit) { /* a mixed cluster: each device's own limit, as "fits" uses */
            json_t *dl = json_array();
            for (int d = 0; d < s.P; d++)
                json_array_append_new(dl, json_integer((json_int_t)floor(s.pr.dev_mem_limit[d])));
            json_object_set_new(root, "device_mem_limit_bytes", dl);
        }
        json_object_set_new(root, "memory_modelled", json_boolean(mem));
        for (int k = 0; k < nrows; k++) {
            row *r = &rows[k];
            if (!r->ok) {
                json_array_append_new(skipped, json_pack("{s:s, s:s}", "name", r->name, "reason", r->reason));
                continue;
            }
            const op_pred *p = &r->plan.pred;
            json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:I, s:b, s:f}", "name", r->name,
                                  "makespan_ms", p->makespan_ms, "tokens_per_s", p->tokens_per_s,
                                  "bubble_ratio", p->bubble_ratio, "peak_bytes_max",
                                  (json_int_t)p->peak_bytes_max, "fits",
                                  op_plan_fits(&r->plan), "gap_to_lower_bound",
                                  op_gap(p->makespan_ms, lb));
            if (ref > 0) json_object_set_new(o, "speedup_vs_i1f1b", json_real(ref / p->makespan_ms));
            else json_object_set_new(o, "speedup_vs_i1f1b", json_null());
            if (best > 0) json_object_set_new(o, "speedup_vs_best_baseline", json_real(best / p->makespan_ms));
            else json_object_set_new(o, "speedup_vs_best_baseline", json_null());
            json_object_set_new(o, "stages", json_integer(r->plan.S));
            json_object_set_new(o, "settings", json_string(r->settings));
            json_array_append_new(arr, o);
        }
        json_object_set_new(root, "plans", arr);
        json_object_set_new(root, "skipped", skipped);
        char *txt = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        printf("%s\n", txt);
        free(txt);
        json_decref(root);
    } else {
        printf("model %s: %d layers (%s)\n", s.model.name, s.model.n_layers,
               strlen(s.model.pattern) > 72 ? "pattern: octopipe models NAME" : s.model.pattern);
        char ep[64] = "", z1[40];
        if (s.train.ep > 1) snprintf(ep, sizeof ep, ", ep %d", s.train.ep);
        snprintf(ep + strlen(ep), sizeof ep - strlen(ep), "%s", op_cli_zero1_text(s.train.zero1, s.train.dp, z1, sizeof z1));
        printf("%d devices (%s, nodes of %d), %d microbatches, seq %d, mbs %d, tp %d%s, %s%s\n",
               s.P, op_cli_mixed(&s) ? "mixed" : s.dev.name, s.pr.comm.none ? s.nodes_of : s.pr.comm.nodes_of, s.M, s.train.seq, s.train.mbs, s.train.tp, ep,
               !mem ? "memory not modelled (the profile has no memory fields)"
               : s.pr.dev_mem_limit ? "memory limits per device type (below)" : "memory limit ",
               !mem || s.pr.dev_mem_limit ? "" : (limit > 0 ? (snprintf(lim, sizeof lim, limit >= 1073741824.0 ? "%.1f GiB" : "%.3g GiB", limit / 1073741824.0), lim) : "none"));
        op_cli_print_types(stdout, &s);
        if (mem && isinf(lbm)) /* the bound is +inf exactly when it proves that no plan fits */
            printf("lower bound %.2f ms; memory-aware bound: none (gap%% below is to the first)\n"
                   "  no plan fits: static memory plus what one microbatch must hold even with "
                   "every activation recomputed exceeds the devices' limits combined\n", lb);
        else if (mem && limit > 0 && op_cli_mem_bound_shows(lb, lbm)) /* memory binds every plan: the bound that knows it */
            printf("lower bound %.2f ms; memory-aware %.2f ms (gap%% below is to the first)\n", lb, lbm);
        else
            printf("lower bound %.2f ms\n", lb);
        if (few < s.P)
            printf("fewer devices: %d devices have the same lower bound, %.2f ms (within 0.1%%): the "
                   "other %d cannot lower it (octopipe plan says which layer sets it)\n",
                   few, lb_few, s.P - few);
        printf("\n");
        printf("%-14s %6s %12s %11s %8s %10s %5s %9s %8s %7s\n", "schedule", "stages", "makespan_ms",
               "tokens/s", "bubble%", "peak_GiB", "fits", "vs_i1f1b", "vs_best", "gap%");
        for (int k = 0; k < nrows; k++) {
            row *r = &rows[k];
            if (!r->ok) {
                printf("%-14s  n/a: %s\n", r->name, r->reason);
                continue;
            }
            const op_pred *p = &r->plan.pred;
            char sp[16] = "-", sb[16] = "-";
            if (ref > 0) snprintf(sp, sizeof sp, "%.3fx", ref / p->makespan_ms);
            if (best > 0) snprintf(sb, sizeof sb, "%.3fx", best / p->makespan_ms);
            char pk[24] = "-";
            if (mem) snprintf(pk, sizeof pk, "%.2f", (double)p->peak_bytes_max / 1073741824.0);
            printf("%-14s %6d %12.2f %11.0f %8.2f %10s %5s %9s %8s %7.2f\n", r->name, r->plan.S,
                   p->makespan_ms, p->tokens_per_s, 100 * p->bubble_ratio, pk,
                   !mem ? "-" : op_plan_fits(&r->plan) ? "yes" : "NO", sp, sb,
                   100 * op_gap(p->makespan_ms, lb));
        }
    }
    if (!json) {
        printf("\nsettings each schedule ran with:\n");
        for (int k = 0; k < nrows; k++)
            if (rows[k].ok && rows[k].settings[0]) printf("  %-14s %s\n", rows[k].name, rows[k].settings);
    }
    if (plans_dir)
        for (int k = 0; k < nrows; k++)
            if (rows[k].ok && write_plan(plans_dir, &rows[k].plan)) { /* one line, not one per plan */
                rc = 1;
                break;
            }
    for (int k = 0; k < nrows; k++)
        if (rows[k].ok) op_plan_free(&rows[k].plan);
    free(rows);
    op_sim_ws_free(ws);
    op_cli_setup_free(&s);
    return rc;
}
