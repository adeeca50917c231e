/* cmd_run.c: `octopipe run PLAN --emulate ...`: checks the plan, then starts mpirun on this
 * binary's `exec` (or runs every rank as a thread with --threads). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_out.h"
#include "exec/exec_cli.h"

static void help(void) {
    printf("usage: octopipe run PLAN --emulate [options]\n\n"
           "Runs a plan on this machine, one MPI rank per device, and prints the measured makespan,\n"
           "busy time and bubble ratio next to the simulator's prediction.  The plan is validated\n"
           "and simulated first: a deadlocking plan is refused with the cycle of ops named.  It\n"
           "starts `mpirun --allow-run-as-root --oversubscribe --bind-to none --timeout T` itself;\n"
           "on a cluster use `mpirun -np P octopipe exec PLAN ...` with your hostfile instead.\n\n"
           "options:\n%s"
           "  --threads           run the ranks as threads of this process (no mpirun); --watchdog,\n"
           "                      --timeout and --inject-hang work there, --inject-crash needs MPI\n"
           "                      ranks and is refused\n"
           "  --timeout SEC       stop the job after SEC s (default 60 + 3x the predicted time),\n"
           "                      also where no rank waits on the stuck one (the watchdog's\n"
           "                      blind spot: a rank's last ops, a one-rank plan)\n\n"
           "exit status: 0 ok, 1 failure (a rank crashed: named), 2 bad input or refused plan,\n"
           "             3 watchdog or --timeout (every rank reports what it was doing)\n\n"
           "On one machine every message is a memory copy by the ranks' CPUs, which the link model\n"
           "does not see: shrink messages (--bytes-scale 0.002: tens of KiB) and predict with this\n"
           "machine's links (--cluster), or measured times run far above the prediction.\n\n"
           "examples:\n"
           "  octopipe profile comm --out cluster.json\n"
           "  octopipe run plan.json --emulate --bytes-scale 0.002 --cluster cluster.json\n"
           "  octopipe run plan.json --emulate --bytes-scale 0.002 --cluster cluster.json \\\n"
           "      --trace run.trace.json          # open in ui.perfetto.dev; '-' for stdout\n",
           op_exec_cli_help());
}

int cmd_run(int argc, char **argv) {
    op_exec_cli c;
    int rc = op_exec_cli_parse(&c, argc, argv, "run", 1);
    if (rc == 1) {
        help();
        return 0;
    }
    if (rc) return rc;
    if (op_cli_check_out("run", c.trace_path)) return 2; /* before any rank starts */
    op_plan emu, pred;
    int have_pred = 0;
    rc = op_exec_cli_plans(&c, "run", NULL, &emu, &pred, &have_pred);
    if (rc) return rc;
    op_err e = {0};
    double t = c.timeout_s;
    if (t <= 0) t = 60 + 3 * (have_pred ? pred.pred.makespan_ms : 0) / 1e3;
    if (c.threads) {
        op_compute comp = op_compute_emulate();
        c.eo.timeout_s = t;
        op_exec_result res;
        rc = op_exec_run_threads(&emu, &comp, &c.eo, &res, &e);
        if (rc) {
            if (res.wait_report[0]) fputs(res.wait_report, stderr);
            fprintf(stderr, "octopipe run: %s\n", e.msg);
            rc = rc == OP_ETIMEOUT ? 3 : 1;
        } else {
            rc = op_exec_cli_report(&c, "run", &res, &pred, have_pred);
        }
        op_exec_result_free(&res);
    } else {
        /* forward the flags: exec accepts everything but --threads; the ranks keep the time
         * limit themselves (each then says what it was doing), mpirun's 5 s later is the
         * backstop for a rank that never looks */
        char **args = calloc((size_t)argc + 3, sizeof(char *));
        char tmo[32];
        snprintf(tmo, sizeof tmo, "%.17g", t);
        int n = 0;
        args[n++] = "exec";
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--timeout") || !strncmp(argv[i], "--timeout=", 10)) {
                i += argv[i][9] == 0; /* "--timeout SEC" skips its value, "--timeout=SEC" not */
                continue;
            }
            args[n++] = argv[i];
        }
        args[n++] = "--timeout";
        args[n++] = tmo;
        int code = op_exec_launch(emu.P, args, n, t + 5, NULL, &e);
        free(args);
        if (code) {
            fprintf(stderr, "octopipe run: %s\n", e.msg[0] ? e.msg : "the job failed");
            rc = code == 2 ? 2 : code == 3 || e.code == OP_ETIMEOUT ? 3 : 1;
        }
    }
    op_plan_free(&emu);
    op_plan_free(&pred);
    return rc;
}
