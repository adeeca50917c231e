/* cmd_profile_model.c: `octopipe profile --model ...`, the reference model's layer profiler
 * (src/train/profile.c measures; this file reads the flags and writes the table and file).
 * Its help is part of `octopipe profile --help`, so the flags a user types are the ones the
 * help lists and an unknown one gets the nearest of them. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "octopipe/out.h"
#include "octopipe/train.h"

void cmd_profile_model_help(FILE *f) {
    fprintf(f,
            "octopipe profile --model PRESET|PATTERN [--out FILE] [--repeats N]\n\n"
            "Measures the reference model's layers on this machine: each layer kind alone, one\n"
            "microbatch, forward (F), backward for inputs (I) and backward for weights (W), the\n"
            "median of N repeats on one thread, and the activation bytes each holds.  Writes the\n"
            "profile file (pattern + forward_ms/backward_ms/weight_ms per symbol) that `plan`\n"
            "and `compare` read with --model FILE.\n\n"
            "options:\n"
            "  --model SPEC      tiny, small, or a pattern of E M * - # L (small dimensions),\n"
            "                    e.g. EM-M*-M#-L; PRESET:PATTERN takes that preset's\n"
            "                    dimensions (tiny:EM*-#M*-#L)\n"
            "  --out FILE        profile file to write (default: print the table only)\n"
            "  --repeats N       timed repeats per op, median reported (default 9, 1..1000)\n\n"
            "example:\n  octopipe profile --model small --out small.profile.json\n"
            "  octopipe compare --model small.profile.json --devices 2 --microbatches 8\n");
}

int cmd_profile_model(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    int repeats = 9;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cmd_profile_model_help(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && v) {
            if (!*v) {
                fprintf(stderr, "octopipe profile: --model needs a value (a preset or a pattern)\n");
                return 2;
            }
            model = v, i++;
        } else if (!strcmp(a, "--out") && v) {
            out = v, i++;
        } else if (!strcmp(a, "--repeats") && v) {
            if (op_cli_int("profile", "--repeats", v, 1, 1000, &repeats)) return 2;
            i++;
        } else {
            char dym[64];
            fprintf(stderr, "octopipe profile: unknown or incomplete flag '%s'%s (octopipe profile --help)\n",
                    a, op_cli_suggest(cmd_profile_model_help, a, dym, sizeof dym));
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "octopipe profile: --model PRESET|PATTERN is required (octopipe profile --help)\n");
        return 2;
    }
    op_nn_model m;
    op_err e = {0};
    if (out && op_out_check(out, &e)) { /* before the measuring starts */
        fprintf(stderr, "octopipe profile: %s\n", e.msg);
        return 2;
    }
    if (op_nn_model_from_spec(&m, model, &e)) {
        fprintf(stderr, "octopipe profile: %s\n", e.msg);
        return 2;
    }
    op_layer_prof p[8];
    int n = op_train_profile(&m, repeats, p);
    FILE *info = op_out_is_stdout(out) ? stderr : stdout; /* --out -: the profile alone */
    fprintf(info, "model %s: %s, %zu parameters, microbatch %d x %d tokens, median of %d\n", m.name,
            m.pattern, m.off[m.n_layers], m.cfg.batch, m.cfg.seq, repeats);
    fprintf(info, "%-5s %9s %9s %9s %12s %12s %12s\n", "layer", "F_ms", "I_ms", "W_ms", "act_bytes",
            "act_w_bytes", "param_bytes");
    for (int k = 0; k < n; k++)
        fprintf(info, "%-5c %9.3f %9.3f %9.3f %12zu %12zu %12zu\n", p[k].sym, p[k].f_ms, p[k].i_ms,
                p[k].w_ms, p[k].act_bytes, p[k].act_w_bytes, p[k].param_bytes);
    if (out) {
        op_buf b = {0};
        op_train_profile_json(&m, p, n, repeats, &b);
        int rc = op_out_write(out, b.data, b.len, &e);
        op_buf_free(&b);
        if (rc) {
            fprintf(stderr, "octopipe profile: %s\n", e.msg);
            return 1;
        }
        if (!op_out_is_stdout(out)) printf("wrote %s\n", out);
    }
    return 0;
}
