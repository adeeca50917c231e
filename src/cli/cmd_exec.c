/* cmd_exec.c: `octopipe exec PLAN --emulate ...`, one rank of a job under mpirun (yours, with
 * your hostfile, or the one `octopipe run` starts). */
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_out.h"
#include "exec/exec_cli.h"
#include "exec/exec_internal.h"

static void help(void) {
    printf("usage: mpirun -np P octopipe exec PLAN --emulate [options]\n\n"
           "One rank of a pipeline job: reads PLAN (rank 0 reads, every rank gets it), checks that\n"
           "mpirun started as many ranks as the plan has devices, refuses a deadlocking plan, runs\n"
           "this rank's instruction list (see `octopipe lower`) and, on rank 0, prints measured vs\n"
           "predicted.  On this machine prefer `octopipe run`, which adds the mpirun flags.\n\n"
           "options:\n%s"
           "  --timeout SEC       each rank stops the job SEC s after it started, saying what it was\n"
           "                      doing (exit 3; default: none, the watchdog alone); keep your\n"
           "                      mpirun's own --timeout a little later\n\n"
           "exit status: 0 ok, 1 failure, 2 bad input or refused plan, 3 watchdog or --timeout\n\n"
           "example:\n"
           "  octopipe plan --model nemotron-h-8b --devices 8 --microbatches 32 --out plan.json\n"
           "  octopipe profile comm --out cluster.json\n"
           "  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 8 \\\n"
           "      build/octopipe exec plan.json --emulate --bytes-scale 0.002 --cluster cluster.json\n"
           "(on one machine messages are memory copies by the ranks' CPUs: --bytes-scale shrinks\n"
           "them; across hosts drop it)\n",
           op_exec_cli_help());
}

/* stderr to /dev/null where `on` (ranks other than 0 repeating rank 0's message); returns the
 * descriptor unhush restores, or -1 */
static int hush(int on) {
    if (!on) return -1;
    fflush(stderr);
    int saved = dup(2), nul = open("/dev/null", O_WRONLY);
    if (saved >= 0 && nul >= 0) dup2(nul, 2);
    if (nul >= 0) close(nul);
    return saved;
}

static void unhush(int saved) {
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

int cmd_exec(int argc, char **argv) {
    op_exec_cli c;
    /* every rank parses the same flags: rank 0 alone says what is wrong with them (one line,
     * not one per rank) */
    const int not_rank0 = op_cli_mpi_other_rank();
    int saved = hush(not_rank0);
    int rc = op_exec_cli_parse(&c, argc, argv, "exec", 0);
    unhush(saved);
    if (rc == 1) {
        if (!not_rank0) help(); /* once, not once per rank */
        return 0;
    }
    /* the other ranks leave quietly with 0 and rank 0's status is the job's: the first rank to
     * exit non-zero makes mpirun abort the job, and one that beat rank 0 to it took rank 0's line
     * down with the job (seen under load: the error printed 0 times, exit 2 all the same) */
    if (rc) return not_rank0 ? 0 : rc;
    c.eo.timeout_s = c.timeout_s;
    { /* every rank checks (same file system), rank 0 alone says why: before MPI starts */
        op_err oe = {0};
        if (c.trace_path && op_out_check(c.trace_path, &oe)) {
            if (!not_rank0) fprintf(stderr, "octopipe exec: %s\n", oe.msg);
            return not_rank0 ? 0 : 2; /* as for a flag error */
        }
    }
    op_xport x;
    op_err e = {0};
    if (op_xport_mpi_init(&x, &argc, &argv, &e)) {
        fprintf(stderr, "octopipe exec: %s\n", e.msg);
        return 1;
    }
    /* rank 0 reads the plan; every rank parses the same bytes, so all agree on errors */
    char *text = NULL;
    size_t n = 0;
    int64_t len = -1;
    if (x.rank == 0) {
        if (op_read_file(c.plan_path, &text, &n, &e)) fprintf(stderr, "octopipe exec: %s\n", e.msg);
        else len = (int64_t)n;
    }
    x.bcast(&x, &len, sizeof len);
    if (len < 0) {
        op_xport_mpi_finalize(&x);
        return 2;
    }
    if (x.rank != 0) text = op_xcalloc((size_t)len + 1, 1);
    x.bcast(&x, text, len);
    op_plan emu, pred;
    int have_pred = 0;
    /* every rank checks the same bytes; only rank 0 prints what is wrong */
    saved = hush(x.rank != 0);
    rc = op_exec_cli_plans(&c, "exec", text, &emu, &pred, &have_pred);
    unhush(saved);
    free(text);
    if (rc) {
        op_xport_mpi_finalize(&x);
        return rc;
    }
    if (emu.P != x.size) {
        if (x.rank == 0)
            fprintf(stderr, "octopipe exec: %s has %d devices but mpirun started %d ranks (use -np %d)\n",
                    c.plan_path, emu.P, x.size, emu.P);
        op_plan_free(&emu);
        op_plan_free(&pred);
        op_xport_mpi_finalize(&x);
        return 2;
    }
    op_exec_result res = {0};
    op_exec_cli_run_rank(&c, &x, &emu, &res); /* does not return on failure */
    int out = 0;
    if (x.rank == 0) out = op_exec_cli_report(&c, "exec", &res, &pred, have_pred);
    op_exec_result_free(&res);
    op_plan_free(&emu);
    op_plan_free(&pred);
    op_xport_mpi_finalize(&x);
    return out;
}
