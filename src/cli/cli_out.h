/* cli_out.h: what every command does the same way with outputs, progress and memory lines. */
#ifndef OCTOPIPE_CLI_OUT_H
#define OCTOPIPE_CLI_OUT_H
#include <stdio.h>

#include "octopipe/out.h"
#include "octopipe/plan.h"

/* Checks output path (NULL: nothing to check) before any work; prints
 * "octopipe <cmd>: <path>: cannot write: <why>" and returns 2, else 0. */
int op_cli_check_out(const char *cmd, const char *path);
/* The same for a directory that the command creates (one level) and fills with files. */
int op_cli_check_out_dir(const char *cmd, const char *dir);
/* Where a command's human-readable lines go: stderr when an output goes to stdout ("-"). */
FILE *op_cli_info(const char *out_path);
/* 1 in a rank other than 0 of the user's own mpirun (OMPI_COMM_WORLD_RANK): such a rank leaves
 * rank 0 to say what is wrong, and a usage error it exits with 0 (cmd_exec.c says why). */
int op_cli_mpi_other_rank(void);
/* Progress lines: asked for (--progress), or stderr is a terminal; never with --quiet. */
int op_cli_progress_wanted(int asked, int quiet);
/* 0 when no layer carries a memory figure (a profile without memory fields): peaks are then
 * all zero and "fits" says nothing, so commands print "memory not modelled" instead. */
int op_cli_mem_modelled(const op_layer_cost *layers, int n_layers);
/* 1 when the layer carries any memory figure (weights, static or stashed bytes) */
int op_cli_layer_has_mem(const op_layer_cost *c);
/* "none" or "%.2f GiB" of a memory limit in bytes (<= 0: none), into buf. */
const char *op_cli_mem_limit_str(double limit_bytes, char *buf, size_t cap);

#endif
