/* plan.c: OctoPipe as a C library.  Builds the planning problem for a preset the way
 * `octopipe compare` does, simulates classic 1F1B, tunes a plan, prints both.
 *
 *   cc plan.c $(pkg-config --cflags --libs octopipe) -o plan
 *   ./plan [MODEL [DEVICES [MICROBATCHES]]]      (default: nemotron-h-8b 4 8) */
#include <octopipe/octopipe.h>
#include <stdio.h>
#include <stdlib.h>

static void show(const op_plan *p) {
    printf("%-9s stages %3d  makespan_ms %.6f  bubble %.4f  peak_GiB %.2f\n", p->name, p->S,
           p->pred.makespan_ms, p->pred.bubble_ratio, p->pred.peak_bytes_max / 1073741824.0);
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "nemotron-h-8b";
    int P = argc > 2 ? atoi(argv[2]) : 4, M = argc > 3 ? atoi(argv[3]) : 8;
    op_err err = {0};
    op_problem_built b; /* model, costs on the GPU, links, 90% memory limit */
    if (op_problem_build(&b, model, "h100-80gb", P, M, NULL, &err) != OP_OK) {
        fprintf(stderr, "plan: %s\n", err.msg);
        return 2;
    }
    printf("octopipe %s: %s, %d layers on %d x %s, %d microbatches\n", op_version(),
           b.model.name, b.model.n_layers, P, b.dev.name, M);

    int rc = 1;
    op_plan base, tuned;
    if (op_sched_build("1f1b", &b.pr, &base, &err) != OP_OK) {
        fprintf(stderr, "plan: 1f1b: %s\n", err.msg);
        goto out_problem;
    }
    if (op_sim_replay(&base, NULL, &err) != OP_OK) {
        fprintf(stderr, "plan: simulate 1f1b: %s\n", err.msg);
        goto out_base;
    }
    show(&base);
    op_tune_opts o;
    op_tune_opts_default(&o); /* seed 1, no time cap: the same plan every run */
    if (op_tune(&b.pr, &o, &tuned, &err) != OP_OK) {
        fprintf(stderr, "plan: tune: %s\n", err.msg);
        goto out_base;
    }
    show(&tuned);
    printf("speedup %.3fx\n", base.pred.makespan_ms / tuned.pred.makespan_ms);
    op_plan_free(&tuned);
    rc = 0;
out_base:
    op_plan_free(&base);
out_problem:
    op_problem_built_free(&b);
    return rc;
}
