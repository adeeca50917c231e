/* bound_bg.c: the memory-aware lower bound computed on a second thread while the tuner runs.
 *
 * The bound depends on the problem alone, not on the plan the tuner returns, and on a large
 * mixed problem its search takes about a second after the tune (Nemotron-H 8B on three GPU
 * types at --seq 32768: 1.5 s, which `--time-budget 3` did not count).  The tuner is one
 * thread, so on any machine with a second core the bound is ready when the tune ends.  Both
 * only read the problem; the bound's search state is per call (its counters thread-local). */
#include <pthread.h>
#include <signal.h>

#include "cli/cli_common.h"

static void *bound_main(void *arg) {
    op_cli_bound_bg *b = arg;
    b->value = op_problem_lower_bound_mem(b->pr);
    return NULL;
}

void op_cli_bound_bg_start(op_cli_bound_bg *b, const op_problem *pr) {
    b->pr = pr;
    b->value = 0;
    /* the thread starts with every signal blocked (it inherits the mask), so Ctrl-C's handler
     * runs on the tuner's thread, the one that reads the flag it sets (cmd_plan.c): a
     * volatile sig_atomic_t is safe between a thread and its own handler, not across threads */
    sigset_t all, old;
    sigfillset(&all);
    int masked = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
    b->running = pthread_create(&b->thread, NULL, bound_main, b) == 0;
    if (masked) pthread_sigmask(SIG_SETMASK, &old, NULL);
}

double op_cli_bound_bg_join(op_cli_bound_bg *b) {
    if (b->running) pthread_join(b->thread, NULL);
    else b->value = op_problem_lower_bound_mem(b->pr); /* no thread: here, as before */
    b->running = 0;
    return b->value;
}
