/* main.c: `octopipe` subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
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
        {"run", NULL, "run a plan over MPI (emulated or real compute) and compare to prediction"},
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
            "\nusage: octopipe <command> [options]   (octopipe <command> --help for details)\n\n"
            "commands:\n");
    for (const subcmd *c = subcmds(); c->name; c++)
        if (c->fn) fprintf(f, "  %-9s %s\n", c->name, c->help);
    fprintf(f, "\nA first look:\n"
               "  octopipe models\n"
               "  octopipe compare --model nemotron-h-8b --devices 8 --microbatches 32\n"
               "  octopipe plan --model nemotron-h-8b --devices 8 --microbatches 32 --out plan.json\n"
               "  octopipe export plan.json --svg plan.svg\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("octopipe %s\n", op_version());
        return 0;
    }
    for (const subcmd *c = subcmds(); c->name; c++)
        if (!strcmp(argv[1], c->name) && c->fn) return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "octopipe: unknown command '%s' (octopipe --help lists them)\n", argv[1]);
    return 2;
}
