/* cli_common.h: the model and cluster flags shared by `compare`, `plan` and friends, turned
 * into an op_problem (per-layer costs on a device, devices, microbatches, links, memory). */
#ifndef OCTOPIPE_CLI_COMMON_H
#define OCTOPIPE_CLI_COMMON_H
#include <pthread.h>
#include <stdio.h>

#include "octopipe/cost.h"
#include "octopipe/plan.h"
#include "octopipe/problem.h"

/* Default memory limit as a fraction of the device's memory. */
#define OP_CLI_MEM_HEADROOM OP_MEM_HEADROOM

typedef struct op_cli_setup {
    /* flags */
    const char *model_arg;    /* --model FILE|PRESET */
    int P, M;                 /* --devices, --microbatches */
    op_train_cfg train;       /* --seq --mbs --tp --dp --zero1 */
    const char *gpu;          /* --gpu NAME */
    int gpu_given;            /* --gpu was on the command line (not the default) */
    int batch_given;          /* --seq or --mbs was on the command line */
    int nodes_of_given;       /* --nodes-of was on the command line */
    const char *gpus;         /* --gpus NAME:COUNT,... (mixed clusters, in rank order) */
    int nodes_of;             /* --nodes-of N (devices per node) */
    int comm_none;            /* --comm none */
    const char *cluster_file; /* --cluster FILE (from `octopipe profile comm`) */
    double mem_limit_gib;     /* --mem-limit GiB (0: the device's memory) */
    int no_mem_limit;         /* --mem-limit none */
    double op_overhead_ms;    /* --op-overhead MS */
    /* results of op_cli_setup_finish */
    op_model model;
    op_device dev;            /* the GPU (mixed clusters: device 0's) */
    op_cluster cluster;       /* device types, per-type costs and limits (mixed clusters) */
    op_layer_cost *costs;
    op_problem pr;
} op_cli_setup;

/* The problem's memory-aware lower bound (op_problem_lower_bound_mem) on a thread of its own
 * beside the tuner (bound_bg.c); pr must stay unchanged until the join. */
typedef struct op_cli_bound_bg {
    const op_problem *pr;
    pthread_t thread;
    int running; /* the thread was started and not joined */
    double value;
} op_cli_bound_bg;
void op_cli_bound_bg_start(op_cli_bound_bg *b, const op_problem *pr);
double op_cli_bound_bg_join(op_cli_bound_bg *b); /* waits; computes it here if no thread ran */

void op_cli_setup_init(op_cli_setup *s);
/* Consumes argv[*i] (and its value, advancing *i) if it is one of the shared flags.
 * Returns 1 if consumed, 0 if not a shared flag, -1 after printing an error line. */
int op_cli_setup_flag(op_cli_setup *s, int argc, char **argv, int *i, const char *cmd);
/* Loads the model, computes costs and fills s->pr.  Returns 0, or -1 after printing. */
int op_cli_setup_finish(op_cli_setup *s, const char *cmd);
void op_cli_setup_free(op_cli_setup *s);
/* Mixed clusters: 1 when the devices are of more than one GPU type or have their own limits;
 * then one line per device type to f ("  4 x h100-80gb (devices 0-3): 80 GiB, limit 72.00 GiB"),
 * and the label of device d's type for stage tables (NULL on a uniform cluster). */
int op_cli_mixed(const op_cli_setup *s);
/* ", ZeRO-1 over dp N" where ZeRO-1 shards the optimizer state over dp > 1 (it changes
 * memory); "" else.  Returns buf. */
const char *op_cli_zero1_text(int zero1, int dp, char *buf, size_t cap);
/* The smallest memory among the listed devices (a cluster file's or --gpus'), else the GPU's:
 * the most one limit for every device can be. */
double op_cli_min_mem_GiB(const op_cli_setup *s);
/* Whether the memory-aware bound lbm is worth a line beside the memory-free bound lb: above it
 * by at least what the 2 printed decimals show (a bound above by 1e-6 ms read as two equal
 * figures side by side). */
int op_cli_mem_bound_shows(double lb, double lbm);
void op_cli_print_types(FILE *f, const op_cli_setup *s);
const char *op_cli_dev_type(const op_cli_setup *s, int d);
/* Help text for the shared flags (for each command's --help). */
const char *op_cli_setup_help(void);

/* ": did you mean --devices?" for a flag the command does not know, from the flags its help
 * text names (op_flag_suggest), or "": usage is the command's own help printer, run into a
 * buffer. */
const char *op_cli_suggest(void (*usage)(FILE *), const char *flag, char *out, size_t n);

/* `octopipe profile --model ...` (cmd_profile_model.c): the command, and its help, which
 * `octopipe profile --help` prints after profile comm's. */
int cmd_profile_model(int argc, char **argv);
void cmd_profile_model_help(FILE *f);

/* Value parsers: print "octopipe <cmd>: <flag> ..." and return -1 on bad values. */
int op_cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, int *out);
int op_cli_double(const char *cmd, const char *flag, const char *v, double lo, double hi,
                  double *out);
/* A finite decimal number filling all of v (strtod alone also takes hex, "inf" and ""); 0 when
 * it is one, -1 otherwise.  Prints nothing: for commands with their own messages. */
int op_cli_decimal(const char *v, double *out);
/* Fetches the value of flag argv[*i]; prints an error when it is missing. */
const char *op_cli_value(const char *cmd, int argc, char **argv, int *i);

#endif
