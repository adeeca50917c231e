/* cli.h: the `octopipe` command-line tool.  Each subcommand lives in src/cli/cmd_<name>.c and
 * exports `int cmd_<name>(int argc, char **argv)` (argv[0] is the subcommand name); it returns
 * the process exit code (0 ok, 1 runtime failure, 2 bad usage/input) and prints errors as one
 * line "octopipe <name>: <what is wrong>" on stderr. */
#ifndef OCTOPIPE_CLI_H
#define OCTOPIPE_CLI_H

#define CLI_WEAK __attribute__((weak))

int cmd_models(int argc, char **argv) CLI_WEAK;
int cmd_compare(int argc, char **argv) CLI_WEAK;
int cmd_plan(int argc, char **argv) CLI_WEAK;
int cmd_sim(int argc, char **argv) CLI_WEAK;
int cmd_export(int argc, char **argv) CLI_WEAK;
int cmd_lower(int argc, char **argv) CLI_WEAK;
int cmd_run(int argc, char **argv) CLI_WEAK;
int cmd_exec(int argc, char **argv) CLI_WEAK;
int cmd_profile(int argc, char **argv) CLI_WEAK;
int cmd_train(int argc, char **argv) CLI_WEAK;

#endif
