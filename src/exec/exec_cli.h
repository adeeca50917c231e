/* exec_cli.h: the flags `octopipe run` and `octopipe exec` share, and their common report.
 * Lives in exec/ because run, exec, the bench and the tests all use it. */
#ifndef OCTOPIPE_EXEC_CLI_H
#define OCTOPIPE_EXEC_CLI_H
#include "octopipe/exec.h"

typedef struct op_exec_cli {
    const char *plan_path;
    int emulate, json, threads;
    double time_scale, bytes_scale;
    const char *cluster_path, *trace_path;
    double extra_overhead_ms; /* --dispatch-ms: per-op cost the prediction adds */
    double timeout_s;         /* run: job time limit; 0 = automatic */
    op_exec_opts eo;
} op_exec_cli;

/* Parses argv[1..] (argv[0] = command name).  Prints one line and returns 2 on a bad flag or
 * value; returns 1 after printing help for --help; 0 when ok. */
int op_exec_cli_parse(op_exec_cli *c, int argc, char **argv, const char *cmd, int allow_run_flags);
const char *op_exec_cli_help(void);

/* Loads the plan (text given, or c->plan_path), then builds the emulated plan `emu` (what ranks
 * sleep for) and the prediction `pred` (emu + dispatch cost, simulated).  Prints and returns 2
 * for bad input, 0 ok.  *have_pred = 0 when the simulator is not built. */
int op_exec_cli_plans(const op_exec_cli *c, const char *cmd, const char *text, op_plan *emu,
                      op_plan *pred, int *have_pred);

/* Runs this rank of emu (emulated compute) over x.  On success returns 0 (rank 0's result in
 * res).  On failure prints this rank's line, waits 1 s so every rank can print, then takes the
 * whole job down (exit 3 for the watchdog, 1 otherwise): it does not return. */
int op_exec_cli_run_rank(const op_exec_cli *c, op_xport *x, const op_plan *emu,
                         op_exec_result *res);

/* Prints the outcome (text or --json) and writes --trace.  Returns 0, or 1 if writing failed. */
int op_exec_cli_report(const op_exec_cli *c, const char *cmd, const op_exec_result *r,
                       const op_plan *pred, int have_pred);
#endif
