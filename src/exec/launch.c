/* launch.c: `octopipe run` starting mpirun on this binary with the flags this machine needs
 * (c-platform.md 2.1, 2.6): root allowed, oversubscribed, no core binding, waiting ranks yield,
 * mpirun's own timeout plus ours (TERM, then KILL of the whole process group).  mpirun's stderr
 * goes to a file, never a pipe (a closed pipe wedges mpirun), and is relayed afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/exec_internal.h"

/* Finds "process rank N" in mpirun's report of a dead rank, and how it died. */
static int dead_rank(const char *log, char *how, size_t cap) {
    const char *p = strstr(log, "process rank ");
    if (!p) return -1;
    int r = atoi(p + 13);
    const char *sig = strstr(p, "exited on signal");
    const char *code = strstr(p, "exited with status");
    if (sig) snprintf(how, cap, "killed by signal %d", atoi(sig + 17));
    else if (code) snprintf(how, cap, "exited with status %d", atoi(code + 19));
    else snprintf(how, cap, "failed");
    return r;
}

int op_exec_launch(int P, char *const *args, int nargs, double timeout_s, op_buf *logbuf,
                   op_err *err) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return op_errf(err, OP_EIO, "cannot find this binary (/proc/self/exe)");
    self[n] = 0;
    char logpath[] = "/tmp/octopipe-mpirun-XXXXXX";
    int logfd = mkstemp(logpath);
    if (logfd < 0) return op_errf(err, OP_EIO, "cannot create a log file in /tmp");
    char np[16], tmo[32];
    snprintf(np, sizeof np, "%d", P);
    int mpi_timeout = (int)(timeout_s + 0.5);
    snprintf(tmo, sizeof tmo, "%d", mpi_timeout < 1 ? 1 : mpi_timeout);
    const char *fixed[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                           "--mca", "mpi_yield_when_idle", "1", "--timeout", tmo, "-np", np, self};
    int nf = (int)(sizeof fixed / sizeof fixed[0]);
    char **argv = op_xcalloc((size_t)(nf + nargs + 1), sizeof(char *));
    for (int i = 0; i < nf; i++) argv[i] = (char *)fixed[i];
    for (int i = 0; i < nargs; i++) argv[nf + i] = args[i];
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd);
        unlink(logpath);
        free(argv);
        return op_errf(err, OP_EIO, "fork failed");
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(logfd, 2);
        close(logfd);
        int devnull = open("/dev/null", 0);
        if (devnull >= 0) dup2(devnull, 0);
        /* ranks under ASan: Open MPI's own allocations look leaked (c-platform.md 2.7), so
         * leak checking stays with single-process tests; address checks stay on */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        execvp("mpirun", argv);
        fprintf(stderr, "octopipe: cannot start mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    free(argv);
    setpgid(pid, pid);
    /* our own limit a little after mpirun's, in case mpirun itself wedges */
    double deadline = op_now_s() + timeout_s + 10, killed_at = 0;
    int status = 0, timed_out = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        double now = op_now_s();
        if (!killed_at && now > deadline) {
            kill(-pid, SIGTERM);
            killed_at = now;
            timed_out = 1;
        } else if (killed_at && now > killed_at + 5) {
            kill(-pid, SIGKILL);
            killed_at = now + 1e9;
        }
        usleep(20000);
    }
    /* relay mpirun's stderr and find a dead rank in it */
    char *log = NULL;
    size_t len = 0;
    op_err e2 = {0};
    if (op_read_file(logpath, &log, &len, &e2) == OP_OK && len) {
        if (logbuf) op_buf_put(logbuf, log, len);
        else fwrite(log, 1, len, stderr);
    }
    close(logfd);
    unlink(logpath);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    char how[64];
    int dead = log ? dead_rank(log, how, sizeof how) : -1;
    if (timed_out || (log && strstr(log, "time limit for job execution")))
        op_errf(err, OP_ETIMEOUT, "the job ran past its %.0f s limit and was stopped", timeout_s);
    else if (dead >= 0 && !(log && strstr(log, "octopipe exec: watchdog")))
        op_errf(err, OP_EPEER, "rank %d %s; the job was brought down", dead, how);
    else if (code == 3)
        op_errf(err, OP_ETIMEOUT, "the watchdog stopped the job (a rank made no progress; see above)");
    else if (code)
        op_errf(err, OP_EPEER, "mpirun exited with status %d", code);
    free(log);
    if (timed_out && !code) code = 124;
    return code;
}
