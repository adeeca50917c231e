/* libFuzzer target: command-line flags.  The input is argv, one argument per line (or NUL).
 * It goes through the model/cluster flags every planning command shares (op_cli_setup_flag,
 * op_cli_setup_finish: model, costs, problem validation), then, when a problem is accepted,
 * through a schedule builder; and through the run/exec flags (op_exec_cli_parse) applied to a
 * test plan (op_exec_cli_plans: scaling, lowering, re-simulation).  Files are not opened:
 * --model takes presets only (a path could name a device that never ends) and --cluster is
 * dropped (its parser has its own target). */
#include <stdio.h>
#include <string.h>

#include "cli/cli_common.h"
#include "exec/exec_cli.h"
#include "fuzz_util.h"
#include "octopipe/sched.h"

#define MAX_ARGS 48

/* the plan the run/exec flags are applied to: a test plan, read once */
static char *plan_text;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    op_err e = {0};
    if (op_read_file("../tests/data/plans/v-split-comm-p4-m8.json", &plan_text, NULL, &e) != OP_OK) {
        fprintf(stderr, "fuzz_flags: %s (run from build-fuzz/)\n", e.msg);
        abort();
    }
    return 0;
}

static int is_preset(const char *s) {
    for (const char *const *p = op_model_preset_names(); *p; p++)
        if (!strcmp(*p, s)) return 1;
    return 0;
}

static void setup_flags(int argc, char **argv) {
    op_cli_setup s;
    op_cli_setup_init(&s);
    for (int i = 1; i < argc; i++) {
        int r = op_cli_setup_flag(&s, argc, argv, &i, "fuzz");
        if (r < 0) return;
    }
    if (s.model_arg && !is_preset(s.model_arg)) s.model_arg = "llama2-7b";
    s.cluster_file = NULL;
    if (op_cli_setup_finish(&s, "fuzz") == 0) {
        /* a problem the validation accepts must build without aborting; keep it small */
        if ((long)s.pr.P * s.pr.M * s.pr.n_layers <= 200000) {
            op_plan p;
            op_err e = {0};
            if (op_sched_build("1f1b", &s.pr, &p, &e) == OP_OK) op_plan_free(&p);
        }
    }
    op_cli_setup_free(&s);
}

static void exec_flags(int argc, char **argv) {
    op_exec_cli c;
    if (op_exec_cli_parse(&c, argc, argv, "fuzz", 1) != 0) return;
    c.cluster_path = NULL;
    c.trace_path = NULL;
    op_plan emu, pred;
    int have = 0;
    if (op_exec_cli_plans(&c, "fuzz", plan_text, &emu, &pred, &have) == 0) {
        op_plan_free(&emu);
        if (have) op_plan_free(&pred);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *txt = fuzz_cstr(data, size);
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (char *p = txt; argc < MAX_ARGS && p < txt + size;) {
        argv[argc++] = p;
        size_t n = strcspn(p, "\n");
        p[n] = 0;
        p += n + 1;
    }
    argv[argc] = NULL;
    if (argc > 1 && argv[1][0] == 'x') exec_flags(argc, argv); /* first line picks the parser */
    else setup_flags(argc, argv);
    free(txt);
    return 0;
}
