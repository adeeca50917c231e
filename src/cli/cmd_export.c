/* cmd_export.c: `octopipe export PLAN [--torch-csv FILE] [--torch-comms-csv FILE]
 * [--torch-stage-map FILE] [--torch-fqns FILE] [--megatron-layout [FILE]]
 * [--chrome-trace FILE] [--svg FILE]`.
 *
 * Every requested output is built in memory first; only when all of them succeeded are the
 * files written (octopipe/out.h: regular files atomically, devices/FIFOs/symlink targets in
 * place, '-' to stdout), so a refused export leaves no file behind.  Every path is checked
 * before the plan is even read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_out.h"
#include "octopipe/out.h"
#include "cli/cli_common.h"
#include "octopipe/export.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: octopipe export PLAN [--torch-csv FILE] [--torch-comms-csv FILE]\n"
            "                            [--torch-stage-map FILE] [--torch-fqns FILE]\n"
            "                            [--megatron-layout [FILE]] [--chrome-trace FILE]\n"
            "                            [--svg FILE] [--check-csv FILE]\n"
            "\n"
            "Turns a plan file (octopipe plan / compare --plans-dir) into what other tools read.\n"
            "Give any number of outputs; FILE '-' means stdout.  Nothing is written unless every\n"
            "requested output could be made, and every path is checked first (exit 2 when one\n"
            "cannot be written).  Regular files are replaced atomically; a device, FIFO or\n"
            "symlink target is written in place.\n"
            "\n"
            "outputs:\n"
            "  --torch-csv FILE        torch.distributed.pipelining compute_only CSV: row d = rank d,\n"
            "                          cells like 2F0 1I3 1W3 0B7 in execution order.  Checked with a\n"
            "                          port of torch's own rules (_validate_schedule, the send/recv\n"
            "                          lowering and its dry run) before it is written; a plan torch\n"
            "                          cannot run is refused with torch's reason.  Any placement\n"
            "                          with a stage on every rank: torch's runtime reads the\n"
            "                          stage-to-rank map from the rows\n"
            "  --torch-comms-csv FILE  the same schedule as torch lowers it (compute_comms: SEND/RECV,\n"
            "                          waits, UNSHARD/RESHARD, REDUCE_GRAD), for\n"
            "                          _load_csv(FILE, format=\"compute_comms\")\n"
            "  --torch-stage-map FILE  stage-to-rank map and layer ranges (JSON) to build each rank's\n"
            "                          stages with (python/octopipe_torch reads it or the plan)\n"
            "  --torch-fqns FILE       torchtitan's module_fqns_per_model_part (JSON, one list per\n"
            "                          stage) for the plan's partition (transformer models)\n"
            "  --megatron-layout [FILE]  Megatron-LM flags: --pipeline-model-parallel-layout for\n"
            "                          transformer models (E t m L, '|' between stages, repeats\n"
            "                          compressed), --hybrid-layer-pattern with '|' segments for\n"
            "                          hybrid models (M * - E).  Only loop placement maps; V and\n"
            "                          irregular placements are refused with the reason.  A plan\n"
            "                          made with --tp or --ep adds --tensor-model-parallel-size\n"
            "                          (with --sequence-parallel, as costed) and\n"
            "                          --expert-model-parallel-size; the plan's batch adds\n"
            "                          --seq-length, --micro-batch-size and --global-batch-size\n"
            "                          (M x mbs x dp: Megatron then runs M microbatches),\n"
            "                          ZeRO-1 as --use-distributed-optimizer, recomputing\n"
            "                          stages --recompute-* (one setting for all stages: the\n"
            "                          strongest any stage has, with a note where they differ;\n"
            "                          Megatron's hybrid stack takes selective only).\n"
            "                          Default: stdout (put PLAN first when FILE is omitted)\n"
            "  --chrome-trace FILE     Chrome/Perfetto trace JSON: one row per device, ops in real\n"
            "                          time, per-device memory counters, arrows for messages\n"
            "  --svg FILE              SVG timeline: devices as rows, ops coloured by kind (F blue,\n"
            "                          I teal, W green, B orange), microbatch labels, ms axis\n"
            "\n"
            "other options:\n"
            "  --check-csv FILE        check an existing compute_only CSV against the plan's devices,\n"
            "                          stages and microbatches with the same torch rules\n"
            "  -h, --help              this help\n"
            "\n"
            "exit status: 0 ok, 1 an export was refused or a file could not be written,\n"
            "2 bad flags, or a plan or --check-csv file that cannot be read\n"
            "\n"
            "examples:\n"
            "  octopipe plan --model nemotron-h-8b --devices 8 --microbatches 32 --placement loop \\\n"
            "                --out plan.json\n"
            "  octopipe export plan.json --svg plan.svg --chrome-trace plan.trace.json\n"
            "  octopipe export plan.json --megatron-layout\n"
            "(Megatron places stages only in a loop: --megatron-layout needs a loop placement)\n"
            "  octopipe plan --model llama2-7b --devices 4 --microbatches 8 --placement loop \\\n"
            "                --out llama.json\n"
            "  octopipe export llama.json --torch-csv sched.csv --torch-fqns parts.json\n"
            "(--torch-fqns names torchtitan's modules: transformer models only)\n");
}

enum { O_CSV, O_FQNS, O_MEGATRON, O_TRACE, O_SVG, O_COMMS, O_MAP, O_N };
static const char *const out_flag[O_N] = {"--torch-csv", "--torch-fqns", "--megatron-layout",
                                          "--chrome-trace", "--svg", "--torch-comms-csv",
                                          "--torch-stage-map"};
static const char *const out_desc[O_N] = {"torch compute_only CSV", "torchtitan FQNs",
                                          "Megatron flags", "Chrome trace", "SVG timeline",
                                          "torch compute_comms CSV", "torch stage map"};

int cmd_export(int argc, char **argv) {
    const char *plan_path = NULL, *path[O_N] = {0}, *check_csv = NULL;
    int mega_stdout_at = -1; /* argv index of a --megatron-layout given before PLAN (stdout) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strncmp(a, "--megatron-layout", 17) && (a[17] == 0 || a[17] == '=')) {
            /* optional value: "=FILE", "-", or the next word once PLAN is known */
            if (a[17] == '=') path[O_MEGATRON] = a + 18;
            else if (i + 1 < argc && (!strcmp(argv[i + 1], "-") || (plan_path && argv[i + 1][0] != '-')))
                path[O_MEGATRON] = argv[++i];
            else path[O_MEGATRON] = "-", mega_stdout_at = plan_path ? -1 : i;
            if (!*path[O_MEGATRON]) {
                fprintf(stderr, "octopipe export: --megatron-layout= needs a file name\n");
                return 2;
            }
            continue;
        }
        int k = -1;
        for (int o = 0; o < O_N; o++)
            if (o != O_MEGATRON && !strcmp(a, out_flag[o])) k = o;
        if (k >= 0 || !strcmp(a, "--check-csv")) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "octopipe export: %s needs a file name\n", a);
                return 2;
            }
            if (k >= 0) path[k] = argv[++i];
            else op_out_protect(check_csv = argv[++i]); /* read, so no output may replace it */
            continue;
        }
        if (a[0] == '-' && a[1]) {
            char dym[160];
            fprintf(stderr, "octopipe export: unknown flag '%s'%s (octopipe export --help)\n", a,
                    op_cli_suggest(usage, a, dym, sizeof dym));
            return 2;
        }
        if (plan_path && mega_stdout_at >= 0 && argv[mega_stdout_at + 1] == plan_path) {
            /* `export --megatron-layout out.txt plan.json`: out.txt was read as PLAN */
            fprintf(stderr, "octopipe export: --megatron-layout before PLAN writes to stdout, so '%s' "
                    "was read as PLAN; put PLAN first (export %s --megatron-layout %s) or write "
                    "--megatron-layout=%s\n", plan_path, a, plan_path, plan_path);
            return 2;
        }
        if (plan_path) {
            fprintf(stderr, "octopipe export: one PLAN only (got '%s' and '%s')\n", plan_path, a);
            return 2;
        }
        plan_path = a;
        op_out_protect(a); /* `--svg` naming the plan itself would replace it */
    }
    if (!plan_path) {
        fprintf(stderr, "octopipe export: missing PLAN (octopipe export --help)\n");
        return 2;
    }
    int n_out = 0, n_stdout = 0;
    for (int o = 0; o < O_N; o++) {
        n_out += path[o] != NULL;
        /* /dev/stdout and /proc/self/fd/1 are stdout too: counted by name alone, "-" beside
         * them passed and both outputs ran together on stdout */
        n_stdout += path[o] && op_out_is_stdout(path[o]);
        for (int q = 0; q < o; q++)
            if (path[o] && path[q] && strcmp(path[o], "-") && op_out_same(path[o], path[q])) {
                fprintf(stderr, "octopipe export: %s '%s' and %s '%s' are the same file\n",
                        out_flag[q], path[q], out_flag[o], path[o]);
                return 2;
            }
    }
    if (!n_out && !check_csv) {
        fprintf(stderr, "octopipe export: nothing to export: give at least one of --torch-csv, "
                        "--torch-comms-csv, --torch-stage-map, --torch-fqns, --megatron-layout, --chrome-trace, --svg\n");
        return 2;
    }
    if (n_stdout > 1) {
        fprintf(stderr, "octopipe export: only one output can go to stdout ('-')\n");
        return 2;
    }
    for (int o = 0; o < O_N; o++) /* before any work: one line, exit 2 */
        if (op_cli_check_out("export", path[o])) return 2;
    op_plan p;
    op_err e = {0};
    if (op_plan_read(plan_path, &p, &e)) {
        fprintf(stderr, "octopipe export: %s\n", e.msg);
        return 2;
    }
    FILE *info = n_stdout ? stderr : stdout;
    op_buf buf[O_N] = {{0}}, notes = {0};
    int rc = OP_OK;
    char done[O_N][160] = {{0}};
    if (rc == OP_OK && check_csv) {
        char *text = NULL;
        op_torch_check_info ci;
        if (op_read_file(check_csv, &text, NULL, &e) != OP_OK) {
            /* an input that cannot be read is bad usage (exit 2), as an unreadable PLAN is;
             * exit 1 is for a CSV that was read and fails torch's checks */
            fprintf(stderr, "octopipe export: %s\n", e.msg);
            op_plan_free(&p);
            return 2;
        }
        if (op_export_torch_csv_check(text, p.P, p.S, p.M, &ci, &e) != OP_OK)
            rc = op_err_prefix(&e, "%s", check_csv);
        if (rc == OP_OK)
            fprintf(info, "%s: passes torch's checks (%d ranks, %d stages, %d microbatches, %d "
                          "compute actions, %d sends/recvs, %d unit steps)\n",
                    check_csv, ci.P, ci.S, ci.M, ci.n_compute, ci.n_comms, ci.sim_steps);
        free(text);
    }
    if (rc == OP_OK && path[O_CSV]) {
        rc = op_export_torch_csv(&p, &buf[O_CSV], &e);
        if (rc == OP_OK) {
            snprintf(done[O_CSV], sizeof done[O_CSV], "%d rows, passes torch's checks", p.P);
            op_export_torch_hint(&p, &notes);
        }
    }
    if (rc == OP_OK && path[O_COMMS]) {
        rc = op_export_torch_comms_csv(&p, &buf[O_COMMS], &e);
        snprintf(done[O_COMMS], sizeof done[O_COMMS], "%d rows, torch's own lowering", p.P);
    }
    if (rc == OP_OK && path[O_MAP]) {
        rc = op_export_torch_stage_map(&p, &buf[O_MAP], &e);
        snprintf(done[O_MAP], sizeof done[O_MAP], "%d stages on %d ranks", p.S, p.P);
    }
    if (rc == OP_OK && path[O_FQNS]) {
        rc = op_export_torch_fqns(&p, &buf[O_FQNS], &e);
        snprintf(done[O_FQNS], sizeof done[O_FQNS], "%d stages", p.S);
    }
    if (rc == OP_OK && path[O_MEGATRON]) {
        op_buf s = {0};
        op_megatron_kind kind;
        rc = op_export_megatron(&p, &s, &kind, &notes, &e);
        if (rc == OP_OK) {
            /* the degrees the plan's costs assume: TP with sequence parallelism, as costed */
            if (p.tp > 1)
                op_buf_printf(&buf[O_MEGATRON], "--tensor-model-parallel-size %d --sequence-parallel ",
                              p.tp);
            if (p.ep > 1) op_buf_printf(&buf[O_MEGATRON], "--expert-model-parallel-size %d ", p.ep);
            op_buf_printf(&buf[O_MEGATRON], "--pipeline-model-parallel-size %d %s '%s'", p.P,
                          op_megatron_flag(kind), s.data);
            op_export_megatron_settings(&p, kind, &buf[O_MEGATRON], &notes);
            op_buf_printf(&buf[O_MEGATRON], "\n");
            snprintf(done[O_MEGATRON], sizeof done[O_MEGATRON], "%s, VPP %d",
                     op_megatron_flag(kind), p.S / p.P);
        }
        op_buf_free(&s);
    }
    if (rc == OP_OK && path[O_TRACE]) rc = op_export_chrome_trace(&p, &buf[O_TRACE], &e);
    if (rc == OP_OK && path[O_SVG]) rc = op_export_svg(&p, &buf[O_SVG], &e);
    if (rc == OP_OK && (path[O_TRACE] || path[O_SVG])) {
        op_export_summary s;
        op_export_summarize(&p, &s);
        snprintf(done[O_TRACE], sizeof done[O_TRACE], "makespan %.3f ms, bubble %.1f%%",
                 s.makespan_ms, 100 * s.bubble_ratio);
        memcpy(done[O_SVG], done[O_TRACE], sizeof done[O_SVG]);
    }
    /* all outputs made: write them together, so that one that cannot be written (a full
     * disk, /dev/full) leaves none of the others behind either */
    if (rc == OP_OK) {
        const void *data[O_N];
        size_t len[O_N];
        for (int o = 0; o < O_N; o++) data[o] = buf[o].data ? buf[o].data : "", len[o] = buf[o].len;
        rc = op_out_write_n(O_N, path, data, len, &e);
    }
    for (int o = 0; o < O_N && rc == OP_OK; o++)
        if (path[o] && !op_out_is_stdout(path[o]))
            fprintf(info, "wrote %s (%s%s%s)\n", path[o], out_desc[o], done[o][0] ? ": " : "",
                    done[o]);
    if (rc == OP_OK && notes.len) fputs(notes.data, stderr);
    if (rc != OP_OK) fprintf(stderr, "octopipe export: %s\n", e.msg);
    for (int o = 0; o < O_N; o++) op_buf_free(&buf[o]);
    op_buf_free(&notes);
    op_plan_free(&p);
    return rc == OP_OK ? 0 : 1;
}
