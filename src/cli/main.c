/* main.c: `octopipe` subcommand dispatch, and the flag syntax every command shares:
 * `--flag=value` is the same as `--flag value`, and `octopipe help CMD` is `octopipe CMD --help`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_out.h"
#include "octopipe/version.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} subcmd;

static const subcmd *subcmds(void) {
    static subcmd t[] = {
        {"models", NULL, "list built-in model presets and their layers"},
        {"compare", NULL, "simulate every classic schedule (and OctoPipe's plan) side by side"},
        {"plan", NULL, "tune partition x placement x schedule; write a plan file"},
        {"sim", NULL, "re-simulate a plan file and print its prediction"},
        {"export", NULL, "export a plan: torch CSV, Megatron layout, Chrome trace, SVG"},
        {"lower", NULL, "print a plan's per-rank instruction lists"},
        {"run", NULL, "run a plan over MPI (emulated compute) and compare to the prediction"},
        {"exec", NULL, "rank entry point under your own mpirun"},
        {"profile", NULL, "measure per-layer costs (or P2P links: profile comm)"},
        {"train", NULL, "train the reference hybrid model through a plan"},
        {NULL, NULL, NULL},
    };
    /* filled here, not in the initialiser: weak symbols are not constant expressions */
    t[0].fn = cmd_models;
    t[1].fn = cmd_compare;
    t[2].fn = cmd_plan;
    t[3].fn = cmd_sim;
    t[4].fn = cmd_export;
    t[5].fn = cmd_lower;
    t[6].fn = cmd_run;
    t[7].fn = cmd_exec;
    t[8].fn = cmd_profile;
    t[9].fn = cmd_train;
    return t;
}

static void usage(FILE *f) {
    fprintf(f,
            "octopipe: pipeline-parallel planner, simulator and executor for heterogeneous LLMs\n"
            "\nusage: octopipe <command> [options]   (octopipe help <command> for details)\n"
            "       octopipe --version\n\n"
            "commands:\n");
    for (const subcmd *c = subcmds(); c->name; c++)
        if (c->fn) fprintf(f, "  %-9s %s\n", c->name, c->help);
    fprintf(f, "\nA first look:\n"
               "  octopipe models\n"
               "  octopipe compare --model nemotron-h-8b --devices 8 --microbatches 32\n"
               "  octopipe plan --model nemotron-h-8b --devices 8 --microbatches 32 --out plan.json\n"
               "  octopipe export plan.json --svg plan.svg\n"
               "\nEvery flag takes its value as `--flag value` or `--flag=value`.  Every output flag\n"
               "takes '-' for standard output; a regular file is replaced atomically (never half\n"
               "written), a device, FIFO or symlink target is written in place, and every output\n"
               "path is checked before the work starts (exit 2 when it cannot be written).\n");
}

/* Splits every "--name=value" into "--name" "value" (at the first '=', so values may hold
 * '=' themselves), once for all commands: each parser then sees one syntax, and flags added
 * later get both forms for free.  Only entries shaped like a long flag are split; anything
 * after a bare "--" is left alone.  Returns a new argv (argc in *n); entries point into the
 * original strings or a private copy. */
/* Flags whose value is optional keep "=value" attached: split, the value could not be told
 * from the next positional argument. */
static int value_optional(const char *a, const char *eq) {
    static const char *const names[] = {"--megatron-layout", NULL};
    for (const char *const *f = names; *f; f++)
        if ((size_t)(eq - a) == strlen(*f) && !strncmp(a, *f, (size_t)(eq - a))) return 1;
    return 0;
}

/* Switches take no value: split, "--json=1" handed "1" on as a positional argument, and the
 * error named that ("unknown option '1'", "one plan file at a time (got 'plan.json' and '1')",
 * models looked for a model named '1'), never the switch. */
static int value_none(const char *a, const char *eq) {
    static const char *const names[] = {
        "--help", "--json", "--quiet", "--progress", "--zero1", "--no-tune", "--mem-sweep",
        "--device-sweep", "--emulate", "--threads", "--pairs", "--no-pairs", "--resume", "--pin",
        "--progress-thread", "--no-progress-thread", NULL};
    for (const char *const *f = names; *f; f++)
        if ((size_t)(eq - a) == strlen(*f) && !strncmp(a, *f, (size_t)(eq - a))) return 1;
    return 0;
}

/* A usage error of exec in a rank other than 0 of the user's mpirun: rank 0 alone reports it,
 * the others exit 0 (cmd_exec.c: the first rank to exit non-zero ends the job, and rank 0's
 * line with it). */
static int exec_other_rank(const char *cmd) { return !strcmp(cmd, "exec") && op_cli_mpi_other_rank(); }

/* *n is -1 after a usage error, printed unless exec_other_rank (the entries so far stay
 * reachable from the result). */
static char **split_flag_values(int argc, char **argv, int *n) {
    char **out = calloc((size_t)argc * 2 + 1, sizeof *out);
    if (!out) return NULL;
    int k = 0, done = 0;
    for (int i = 0; i < argc; i++) {
        char *a = argv[i], *eq = NULL;
        if (!done && !strcmp(a, "--")) done = 1;
        if (!done && a[0] == '-' && a[1] == '-' && a[2] && a[2] != '=') {
            eq = strchr(a, '=');
            for (const char *c = a + 2; eq && c < eq; c++)
                if (!(c[0] == '-' || (c[0] >= 'a' && c[0] <= 'z') || (c[0] >= 'A' && c[0] <= 'Z') ||
                      (c[0] >= '0' && c[0] <= '9')))
                    eq = NULL;
            if (eq && value_optional(a, eq)) eq = NULL;
        }
        if (!eq) {
            out[k++] = a;
            continue;
        }
        if (i > 0 && value_none(a, eq)) { /* argv[0] is the command */
            if (!exec_other_rank(argv[0]))
                fprintf(stderr, "octopipe %s: %.*s takes no value (got '%s')\n", argv[0], (int)(eq - a), a, a);
            *n = -1;
            return out;
        }
        char *name = strdup(a);
        if (!name) return NULL;
        name[eq - a] = 0;
        out[k++] = name;
        out[k++] = eq + 1;
    }
    *n = k;
    return out;
}

/* What went to stdout through stdio must have reached it: a full disk or a closed pipe would
 * otherwise pass as success (`octopipe sim plan.json > /dev/full` exiting 0).  Outputs that a
 * command writes to the descriptor itself ('-' for an output flag) are checked where written;
 * they leave the stream clean, so nothing is reported twice.  A command that failed already
 * keeps its own exit status. */
static int stdout_checked(int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    int e = errno;
    if (!bad && !ferror(stdout)) return rc;
    /* glibc keeps unwritten buffered data and retries it in fflush, but a large write that
     * bypassed the buffer leaves nothing to retry: an empty write to the descriptor writes
     * nothing and still names the cause where it is lasting (/dev/full, a closed stdout) */
    if (!e && write(STDOUT_FILENO, "", 0) < 0) e = errno;
    if (e) fprintf(stderr, "octopipe: write error on standard output: %s\n", strerror(e));
    else fprintf(stderr, "octopipe: write error on standard output\n");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        (!strcmp(argv[1], "help") && argc == 2)) {
        usage(stdout);
        return stdout_checked(argc < 2 ? 2 : 0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("octopipe %s\n", op_version());
        return stdout_checked(0);
    }
    char *help_argv[4] = {argv[0], NULL, "--help", NULL};
    if (!strcmp(argv[1], "help")) { /* octopipe help CMD == octopipe CMD --help */
        if (argc > 3) {
            fprintf(stderr, "octopipe help: takes one command name (got '%s' and '%s'): octopipe help "
                            "<command>\n", argv[2], argv[3]);
            return 2;
        }
        help_argv[1] = argv[2];
        argc = 3, argv = help_argv;
    }
    int n = 0;
    static char **args; /* static: stays reachable to the end (leak checkers agree) */
    args = split_flag_values(argc - 1, argv + 1, &n);
    if (!args) {
        fprintf(stderr, "octopipe: out of memory reading the command line\n");
        return 1;
    }
    if (n < 0) return exec_other_rank(args[0]) ? 0 : 2;
    for (const subcmd *c = subcmds(); c->name; c++)
        if (!strcmp(args[0], c->name) && c->fn) return stdout_checked(c->fn(n, args));
    fprintf(stderr, "octopipe: unknown command '%s' (octopipe --help lists them)\n", args[0]);
    return 2;
}
