/* train_args.c: `octopipe train`'s help text and command line: every flag and value checked,
 * and the combinations that cannot run refused, before the command profiles, plans or starts a
 * rank. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/train_args.h"
#include "octopipe/cost.h"
#include "octopipe/out.h"
#include "octopipe/ptrain.h"

void train_usage(FILE *f) {
    fprintf(f,
           "usage: octopipe train --model PRESET|PATTERN --devices P --microbatches M [options]\n\n"
           "Trains the reference hybrid model (Mamba, attention, MLP, MoE layers in FP32) through a\n"
           "pipeline plan on P ranks of this machine, and shows how well the simulator predicted it.\n"
           "Steps: profile each layer kind (F, I, W, one thread), build the plan from those costs,\n"
           "then per training step run one executor iteration of the plan (every microbatch F, I, W\n"
           "as the plan orders them), AdamW on every rank, loss to rank 0.  Any plan gives bitwise\n"
           "the weights of one-process training.  By default the ranks are MPI processes started\n"
           "with mpirun (one per device); --threads runs them as threads of this process.\n\n"
           "options:\n"
           "  --model SPEC        tiny, small, or a layer pattern of E M * - # L with the small\n"
           "                      dimensions (E and L are added when missing), e.g. EM-M*-M#-L;\n"
           "                      PRESET:PATTERN takes that preset's dimensions (tiny:EM*-#M*-#L)\n"
           "  --devices P         pipeline ranks (1..64)\n"
           "  --microbatches M    microbatches per step (1..4096)\n"
           "  --plan SPEC         auto (profile, then tune; default), a schedule name (1f1b, i1f1b,\n"
           "                      zbh1, zbv, dualpipev, gpipe, ...) or a plan file for this model\n"
           "  --steps N           train until step N (default 100)\n"
           "  --data SPEC         text (the English corpus, default), copy, reverse, or a text file\n"
           "  --lr X              peak learning rate (default 3e-3)\n"
           "  --seed N            init and data seed (default 1)\n"
           "  --checkpoint DIR    write DIR/model.ckpt at the end (and every --checkpoint-every N)\n"
           "  --checkpoint-every N  also write DIR/model.ckpt every N steps (default 0: at the end\n"
           "                      only); each write is atomic, so a kill leaves the last whole one\n"
           "  --resume            continue from DIR/model.ckpt (bitwise the uninterrupted run\n"
           "                      with the same --lr, --data and --microbatches, which the\n"
           "                      file records: others are taken, with a note for each)\n"
           "  --svg FILE          measured timeline of the last step (SVG); like every output\n"
           "                      here: '-' is stdout, checked before anything starts\n"
           "  --trace FILE        Chrome trace of the last step: measured ranks + predicted devices\n"
           "  --save-plan FILE    write the plan that ran (with its prediction)\n"
           "  --recompute POLICY  activation policy of every stage: keep, selective (recompute the\n"
           "                      attention probabilities in I), full (keep the stage input, re-run\n"
           "                      the forward before I), offload (stash to host memory and back);\n"
           "                      default: what the plan says (a plan file's \"activation\")\n"
           "  --threads           in-process ranks (no mpirun)\n"
           "  --log-every N       progress line every N steps (default 10)\n"
           "  --repeats N         profile repeats per op, median (default 9, 1..1000)\n"
           "  --profile-clock C   cpu (thread CPU time, default: what a dedicated core would take,\n"
           "                      also on a busy machine) or wall (as `octopipe profile`)\n"
           "  --calibrate N       before planning, train 1f1b and zbv (zbh1 when zbv does not fit)\n"
           "                      N steps each, taking turns, on in-process ranks; fit the per-kind\n"
           "                      F/I/W times to what their ops cost there (least squares), and plan\n"
           "                      and predict with those and with the ranks' speed spread seen in\n"
           "                      those steps (default 0: the isolated profile, which on a busy or\n"
           "                      virtual CPU predicts 5-25%% low; 10 is enough for a few %%)\n"
           "  --overhead-ms X     executor cost per op in the prediction (default %.3g, measured;\n"
           "                      --calibrate fits its own)\n"
           "  --cluster FILE      link model from `octopipe profile comm` (default: a memcpy link)\n"
           "  --pin               bind rank r to core r (a dedicated machine: keeps each rank's\n"
           "                      caches on one core; not for a machine shared with other jobs)\n"
           "  --progress-thread   also progress messages from a thread while ops compute (off by\n"
           "                      default: its 50 us wake-ups slowed 2-core runs by ~40%%);\n"
           "                      --no-progress-thread turns it off again\n"
           "  --slowdown K1,K2,.. rank r computes K_r >= 1 times slower (waits K_r - 1 times each op's\n"
           "                      time after it): a mixed cluster on this machine; plan and\n"
           "                      prediction see each rank's speed.  A mixed plan file (device\n"
           "                      types) gets its types' time ratios unless this is given\n"
           "  --watchdog SEC      a rank waiting this long on one message stops the job (default\n"
           "                      30; many ranks sharing few cores wait longer than they would)\n"
           "  --timeout SEC       job limit: of the mpirun train starts (default 600), or,\n"
           "                      given under your own mpirun, each rank's (exit 124)\n"
           "                      (not with --threads)\n\n"
           "exit status: 0 ok, 1 failure, 2 bad input\n\n"
           "examples:\n"
           "  octopipe train --model small --devices 2 --microbatches 8 --plan auto --steps 200 \\\n"
           "      --svg train.svg --trace train.trace.json\n"
           "  octopipe train --model tiny --devices 2 --microbatches 4 --plan zbv --threads --data copy\n",
           DEFAULT_OVERHEAD_MS);
}

int train_parse(targs *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->plan = "auto", a->data = "text", a->steps = 100, a->log_every = 10, a->repeats = 9;
    a->overhead_ms = DEFAULT_OVERHEAD_MS, a->timeout_s = 600, a->seed = 1, a->recompute = -1;
    const char *C = "octopipe train";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **str = !strcmp(f, "--model")        ? &a->model
                           : !strcmp(f, "--plan")       ? &a->plan
                           : !strcmp(f, "--data")       ? &a->data
                           : !strcmp(f, "--checkpoint") ? &a->ckpt
                           : !strcmp(f, "--svg")        ? &a->svg
                           : !strcmp(f, "--trace")      ? &a->trace
                           : !strcmp(f, "--save-plan")  ? &a->save_plan
                           : !strcmp(f, "--cluster")    ? &a->cluster
                           : !strcmp(f, "--slowdown")   ? &a->slowdown
                                                        : NULL;
        int *iv = !strcmp(f, "--devices")            ? &a->P
                  : !strcmp(f, "--microbatches")     ? &a->M
                  : !strcmp(f, "--steps")            ? &a->steps
                  : !strcmp(f, "--log-every")        ? &a->log_every
                  : !strcmp(f, "--repeats")          ? &a->repeats
                  : !strcmp(f, "--checkpoint-every") ? &a->ckpt_every
                  : !strcmp(f, "--calibrate")        ? &a->calibrate
                                                     : NULL;
        /* --repeats as `octopipe profile` takes it: 1e8 repeats profiled silently for hours */
        long hi = !strcmp(f, "--devices") ? 64 : !strcmp(f, "--microbatches") ? 4096
                  : !strcmp(f, "--calibrate") ? OP_PTRAIN_MAX_STEPS - 1
                  : !strcmp(f, "--repeats")   ? 1000 : 100000000;
        long lo = !strcmp(f, "--log-every") || !strcmp(f, "--checkpoint-every") || !strcmp(f, "--calibrate") ? 0 : 1;
        double *dv = !strcmp(f, "--overhead-ms") ? &a->overhead_ms
                     : !strcmp(f, "--lr")        ? &a->lr
                     : !strcmp(f, "--timeout")   ? &a->timeout_s
                     : !strcmp(f, "--watchdog")  ? &a->watchdog_s
                                                 : NULL;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            train_usage(stdout);
            return 1;
        } else if (!strcmp(f, "--resume")) {
            a->resume = 1;
        } else if (!strcmp(f, "--profile-clock")) {
            if (!v || (strcmp(v, "cpu") && strcmp(v, "wall"))) {
                fprintf(stderr, "%s: --profile-clock needs cpu or wall (got '%s')\n", C, v ? v : "");
                return 2;
            }
            a->wall_clock = v[0] == 'w', i++;
        } else if (!strcmp(f, "--recompute")) {
            op_act_policy pol;
            op_err pe = {0};
            if (!v || op_act_policy_parse(v, &pol, &pe)) {
                fprintf(stderr, "%s: --recompute: %s\n", C, v ? pe.msg : "needs keep, selective, full or offload");
                return 2;
            }
            a->recompute = (int)pol, i++;
        } else if (!strcmp(f, "--threads")) {
            a->threads = 1;
        } else if (!strcmp(f, "--pin")) {
            a->pin = 1;
        } else if (!strcmp(f, "--progress-thread")) {
            a->progress_thread = 1;
        } else if (!strcmp(f, "--no-progress-thread")) {
            a->progress_thread = 0;
        } else if (str) {
            if (!v || !*v) {
                fprintf(stderr, "%s: %s needs a value\n", C, f);
                return 2;
            }
            *str = v, i++;
        } else if (iv) {
            long x = 0;
            if (op_parse_long(v, &x) || x < lo || x > hi) {
                fprintf(stderr, "%s: %s needs an integer in [%ld, %ld] (got '%s')\n", C, f, lo, hi, v ? v : "");
                return 2;
            }
            *iv = (int)x, i++;
        } else if (dv) {
            double x = 0;
            if (op_cli_decimal(v, &x) || !(x >= 0 && x <= 1e6) ||
                ((dv == &a->lr || dv == &a->watchdog_s) && x <= 0)) {
                /* the range itself: "non-negative" refused 0 (--lr, --watchdog) and 1e308 */
                fprintf(stderr, "%s: %s needs a number in %s0, 1e6] (got '%s')\n", C, f,
                        dv == &a->lr || dv == &a->watchdog_s ? "(" : "[", v ? v : "");
                return 2;
            }
            *dv = x, i++;
            a->timeout_given |= dv == &a->timeout_s;
        } else if (!strcmp(f, "--seed")) {
            long x = -1; /* beyond a long is refused: 2^70 would quietly be another seed */
            if (op_parse_long(v, &x) || x < 0) {
                fprintf(stderr, "%s: --seed needs a non-negative integer (got '%s')\n", C, v ? v : "");
                return 2;
            }
            a->seed = x, i++;
        } else {
            char dym[160];
            fprintf(stderr, "%s: unknown or incomplete flag '%s'%s (octopipe train --help)\n", C, f,
                    op_cli_suggest(train_usage, f, dym, sizeof dym));
            return 2;
        }
    }
    if (!a->model || !a->P || !a->M) {
        fprintf(stderr, "%s: --model, --devices and --microbatches are required (octopipe train --help)\n", C);
        return 2;
    }
    /* a misspelt schedule name was refused only after the profile (and --calibrate's steps,
     * seconds to minutes) */
    op_err se = {0};
    if (op_ptrain_plan_spec_check(a->plan, &se)) {
        fprintf(stderr, "%s: %s\n", C, se.msg);
        return 2;
    }
    double k[64];
    if (a->slowdown && op_ptrain_slowdown_parse(a->slowdown, a->P, k, &se)) {
        fprintf(stderr, "%s: %s\n", C, se.msg);
        return 2;
    }
    if (a->resume && !a->ckpt) {
        fprintf(stderr, "%s: --resume needs --checkpoint DIR\n", C);
        return 2;
    }
    /* flags that say nothing in this combination: refused, not dropped, so that a run the user
     * believes is checkpointed or time-limited is not quietly neither */
    if (a->ckpt_every && !a->ckpt) {
        fprintf(stderr, "%s: --checkpoint-every %d needs --checkpoint DIR (where to write model.ckpt)\n", C,
                a->ckpt_every);
        return 2;
    }
    if (a->threads && a->timeout_given) {
        fprintf(stderr, "%s: --timeout is the mpirun job's limit and --threads runs no mpirun; drop one "
                "(a stuck in-process run is stopped with Ctrl-C)\n", C);
        return 2;
    }
    /* no output (--svg, --trace, --save-plan) may replace a file this run reads */
    const char *inputs[] = {a->model, a->plan, a->data, a->cluster};
    for (int i = 0; i < 4; i++) op_out_protect(inputs[i]);
    return 0;
}
