/* cmd_sim.c: `octopipe sim PLAN [--json]`: reads a plan file (which checks it and re-simulates
 * it), prints the prediction and says whether it reproduces the file's own prediction. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_common.h"
#include "cli/cli_out.h"
#include "octopipe/out.h"
#include "octopipe/plan_io.h"
#include "octopipe/sim.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: octopipe sim PLAN [--json]\n"
            "\n"
            "Re-simulates a plan file (octopipe.plan/1) and prints its prediction: makespan,\n"
            "tokens/s, bubble ratio, per-device busy time, idle split (warm-up before the first\n"
            "backward starts anywhere, cool-down after the last forward ends anywhere, residual\n"
            "in between), peak memory, and the lower bound with the gap to it.  Reading the file\n"
            "checks it completely (stages, placement, every op once, durations, dependencies,\n"
            "deadlock); the command then says whether the simulation reproduces the prediction\n"
            "stored in the file exactly.\n"
            "\n"
            "  PLAN      plan file, as written by `octopipe plan` or `octopipe compare --plans-dir`\n"
            "  --json    print the same as one JSON object (with the setup the plan records:\n"
            "            tp, ep, dp, zero1, seq, mbs; seq and mbs null where not recorded)\n"
            "  --help    this text\n"
            "\n"
            "exit status: 0 ok, 2 bad usage or a plan file that does not check out.\n"
            "\n"
            "example:\n"
            "  octopipe sim tests/data/plans/1f1b-p4-m8.json\n");
}

static const char *verdict(const op_plan_file_info *in) {
    if (!in->has_times && !in->has_pred) return "no prediction in the file (simulated now)";
    return in->exact ? "reproduces the file's prediction exactly"
                     : "matches the file's prediction within rounding (hand-edited numbers?)";
}

/* " 3 5" for the devices whose peak is above their own limit. */
static const char *over_list(const op_plan *p) {
    static char buf[256];
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < p->P && n + 16 < sizeof buf; d++) {
        double lim = op_plan_dev_mem_limit(p, d);
        if (lim > 0 && (double)p->pred.peak_bytes[d] > lim) n += (size_t)snprintf(buf + n, sizeof buf - n, " %d", d);
    }
    return buf;
}

static void print_text(const char *path, const op_plan *p, const op_plan_file_info *in) {
    const op_pred *r = &p->pred;
    const double GiB = 1024.0 * 1024 * 1024;
    double gap = op_gap(r->makespan_ms, r->lower_bound_ms);
    char par[80] = "", z1[40]; /* the degrees the costs assume, as the plan records them */
    if (p->tp > 1 || p->ep > 1 || p->zero1)
        snprintf(par, sizeof par, " (costed at tp %d, ep %d%s)", p->tp, p->ep,
                 op_cli_zero1_text(p->zero1, p->dp, z1, sizeof z1));
    printf("plan %s: \"%s\" for %s: %d devices, %d microbatches, %d stages over %d layers%s\n",
           path, p->name, p->model[0] ? p->model : "(no model name)", p->P, p->M, p->S,
           p->n_layers, par);
    printf("  makespan      %.6g ms\n", r->makespan_ms);
    printf("  lower bound   %.6g ms (gap %.2f%%)\n", r->lower_bound_ms, 100 * gap);
    printf("  tokens/s      %.6g\n", r->tokens_per_s);
    printf("  bubble ratio  %.2f%%\n", 100 * r->bubble_ratio);
    if (op_cli_mem_modelled(p->layers, p->n_layers))
        printf("  peak memory   %.3f GiB (max over devices)\n", r->peak_bytes_max / GiB);
    else
        printf("  peak memory   not modelled (the plan's layers carry no memory figures)\n");
    const int mixed = op_plan_is_mixed(p);
    if (!op_plan_fits(p)) /* each device against its own limit (the plan's mem_limit_bytes) */
        printf("  memory        over the limit of device(s):%s\n", over_list(p));
    printf("\n  %-6s %s%-20s %10s %10s %10s %10s %10s %10s\n", "device", mixed ? "type       " : "", "stages", "busy_ms",
           "warmup_ms", "resid_ms", "cool_ms", "peak_GiB", "static_GiB");
    for (int d = 0; d < p->P; d++) {
        char st[24] = "";
        size_t n = 0;
        int k = 0;
        for (int s = 0; s < p->S; s++) {
            if (p->stage_dev[s] != d) continue;
            char one[16];
            int w = snprintf(one, sizeof one, "%s%d", k++ ? "," : "", s);
            if (n + (size_t)w > 17) { /* keep the column: "0,5,7,..." */
                snprintf(st + n, sizeof st - n, ",...");
                break;
            }
            memcpy(st + n, one, (size_t)w + 1);
            n += (size_t)w;
        }
        if (mixed) printf("  %-6d %-10.10s %-20s", d, p->type_name[p->dev_type[d]][0] ? p->type_name[p->dev_type[d]] : "?", k ? st : "-");
        else printf("  %-6d %-20s", d, k ? st : "-");
        printf(" %10.4g %10.4g %10.4g %10.4g %10.3f %10.3f\n",
               r->busy_ms[d], r->warmup_ms[d], r->residual_ms[d], r->cooldown_ms[d],
               r->peak_bytes[d] / GiB, r->static_bytes[d] / GiB);
    }
    printf("\n%s\n", verdict(in));
}

/* JSON has no inf: a figure that overflowed (tokens/s of a plan whose tokens_per_mb is near
 * DBL_MAX, or whose makespan is a few denormals) is null, where op_json_num alone left the
 * value out and the line did not parse. */
static void num(op_buf *b, double x) {
    if (!op_json_num(b, x)) op_buf_put(b, "null", 4);
}

static void darr(op_buf *b, const char *key, const double *v, int n) {
    op_buf_printf(b, ", \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        if (i) op_buf_put(b, ", ", 2);
        num(b, v[i]);
    }
    op_buf_put(b, "]", 1);
}

static void print_json(const char *path, const op_plan *p, const op_plan_file_info *in) {
    const op_pred *r = &p->pred;
    op_buf b = {0};
    /* escaped as JSON: control characters were dropped and a file name that is not UTF-8
     * made a line no JSON parser takes */
    op_buf_printf(&b, "{\"file\": ");
    op_buf_json_str(&b, path);
    op_buf_printf(&b, ", \"devices\": %d, \"microbatches\": %d, \"stages\": %d, \"tp\": %d, \"ep\": %d",
                  p->P, p->M, p->S, p->tp, p->ep);
    /* the rest of the setup the costs assume, as the plan records it (null: not recorded) */
    op_buf_printf(&b, ", \"dp\": %d, \"zero1\": %s", p->dp, p->zero1 ? "true" : "false");
    if (p->seq > 0 && p->mbs > 0) op_buf_printf(&b, ", \"seq\": %d, \"mbs\": %d", p->seq, p->mbs);
    else op_buf_printf(&b, ", \"seq\": null, \"mbs\": null");
    const char *k[] = {"makespan_ms", "lower_bound_ms", "gap", "tokens_per_s", "bubble_ratio"};
    double v[] = {r->makespan_ms, r->lower_bound_ms,
                  op_gap(r->makespan_ms, r->lower_bound_ms),
                  r->tokens_per_s, r->bubble_ratio};
    for (int i = 0; i < 5; i++) {
        op_buf_printf(&b, ", \"%s\": ", k[i]);
        num(&b, v[i]);
    }
    op_buf_printf(&b, ", \"peak_bytes_max\": %lld, \"peak_bytes\": [", (long long)r->peak_bytes_max);
    for (int d = 0; d < p->P; d++)
        op_buf_printf(&b, "%s%lld", d ? ", " : "", (long long)r->peak_bytes[d]);
    op_buf_printf(&b, "], \"static_bytes\": [");
    for (int d = 0; d < p->P; d++)
        op_buf_printf(&b, "%s%lld", d ? ", " : "", (long long)r->static_bytes[d]);
    op_buf_put(&b, "]", 1);
    darr(&b, "busy_ms", r->busy_ms, p->P);
    darr(&b, "warmup_ms", r->warmup_ms, p->P);
    darr(&b, "residual_ms", r->residual_ms, p->P);
    darr(&b, "cooldown_ms", r->cooldown_ms, p->P);
    op_buf_printf(&b, ", \"file_has_prediction\": %s, \"reproduces_exactly\": %s, "
                      "\"max_time_diff_ms\": ",
                  in->has_pred || in->has_times ? "true" : "false",
                  (in->has_pred || in->has_times) && in->exact ? "true" : "false");
    num(&b, in->max_time_diff_ms);
    op_buf_printf(&b, "}\n");
    fwrite(b.data, 1, b.len, stdout);
    op_buf_free(&b);
}

int cmd_sim(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] == '-' && a[1]) {
            char dym[160];
            fprintf(stderr, "octopipe sim: unknown flag '%s'%s (octopipe sim --help)\n", a,
                    op_cli_suggest(usage, a, dym, sizeof dym));
            return 2;
        } else if (path) {
            fprintf(stderr, "octopipe sim: one plan file at a time (got '%s' and '%s')\n", path, a);
            return 2;
        } else {
            path = a;
            op_out_protect(a);
        }
    }
    if (!path) {
        fprintf(stderr, "octopipe sim: missing PLAN (usage: octopipe sim PLAN [--json])\n");
        return 2;
    }
    op_plan p;
    op_plan_file_info info;
    op_err err = {0};
    if (op_plan_read_ex(path, &p, &info, &err) != OP_OK) {
        fprintf(stderr, "octopipe sim: %s\n", err.msg);
        return 2;
    }
    if (json) print_json(path, &p, &info);
    else print_text(path, &p, &info);
    op_plan_free(&p);
    return 0;
}
