/* train_args.h: `octopipe train`'s command line: the options (targs), its help text and the
 * parser that checks every flag before anything runs (train_args.c). */
#ifndef OCTOPIPE_CLI_TRAIN_ARGS_H
#define OCTOPIPE_CLI_TRAIN_ARGS_H
#include <stdio.h>

/* Per-op executor cost added to the prediction unless --overhead-ms says otherwise.  From an
 * emulated run of small's 1f1b plan (P=2, M=8) with ops of zero length on the thread
 * transport: 2.56 ms for 34 dependent hops, ~75 us each, of which the link model already
 * holds ~36 us.  bench_model_accuracy calibrates it on real compute (docs/training.md). */
#define DEFAULT_OVERHEAD_MS 0.05

typedef struct {
    const char *model, *plan, *data, *ckpt, *svg, *trace, *save_plan, *cluster, *slowdown;
    int P, M, steps, resume, threads, log_every, repeats, ckpt_every, progress_thread, wall_clock, pin;
    int calibrate; /* steps per calibration plan (0 = plan from the isolated profile) */
    int timeout_given; /* --timeout was on the command line */
    int recompute; /* --recompute: op_act_policy of every stage; -1 = as the plan says */
    double overhead_ms, lr, timeout_s, watchdog_s;
    long seed;
} targs;

/* The help text, to f (stdout for --help; a memory stream for "did you mean"). */
void train_usage(FILE *f);
/* Fills *a from argv: 0 to run, 1 after --help (exit 0), 2 after a message on stderr (bad
 * input).  Marks the inputs it names as ones no output may replace (op_out_protect). */
int train_parse(targs *a, int argc, char **argv);

#endif
