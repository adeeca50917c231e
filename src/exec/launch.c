/* launch.c: `octopipe run` starting mpirun on this binary with the flags a machine with more
 * ranks than cores, run as root, needs: root allowed, oversubscribed, no core binding, waiting
 * ranks yield, mpirun's own timeout plus ours (TERM, then KILL of the whole process group).
 * mpirun's stderr goes to a file, never a pipe (a closed pipe wedges mpirun), and is relayed
 * afterwards without Open MPI's banners.
 *
 * Stopping the launcher stops the job: SIGTERM, SIGINT or SIGHUP while mpirun runs is forwarded
 * to mpirun's process group (mpirun and every rank it forked), which gets a few seconds to end
 * before SIGKILL; then the launcher's log is removed and the signal is raised again under the
 * caller's own disposition, so the process ends as it would have (130 for Ctrl-C).  A launcher
 * killed outright (SIGKILL) cannot forward anything: mpirun then gets SIGTERM from the kernel
 * (PR_SET_PDEATHSIG), so the job ends with it rather than run on, unseen, writing its outputs
 * (a checkpoint a resumed run is writing too); its log stays behind, and the next launch
 * removes logs whose launcher is gone (the pid is in the name). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/exec_internal.h"

#define LOG_PREFIX "octopipe-mpirun-"
#define GRACE_S 3.0 /* between forwarding TERM and KILL */

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

/* Removes /tmp/octopipe-mpirun-<pid>-* left by launchers that are gone (files, or empty
 * directories of older versions).  Names without a pid are left alone: their owner is unknown. */
static void remove_stale_logs(void) {
    DIR *d = opendir("/tmp");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, LOG_PREFIX, strlen(LOG_PREFIX)) != 0) continue;
        char *end = NULL;
        long pid = strtol(e->d_name + strlen(LOG_PREFIX), &end, 10);
        if (pid <= 0 || !end || *end != '-' || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to ask */
        char path[512];
        snprintf(path, sizeof path, "/tmp/%s", e->d_name);
        if (unlink(path) != 0 && (errno == EISDIR || errno == EPERM)) rmdir(path);
    }
    closedir(d);
}

/* Open MPI's banners are blocks between lines of dashes, and its aggregated help messages start
 * with "[host:pid]".  Everything else (the ranks' own lines, sanitizer reports) is kept, each
 * distinct line once. */
static void strip_banners(const char *log, op_buf *out) {
    int in_banner = 0;
    for (const char *p = log; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        size_t dashes = 0;
        while (dashes < n && p[dashes] == '-') dashes++;
        int rule = dashes >= 20 && (dashes == n || p[dashes] == '\n');
        if (rule) in_banner = !in_banner;
        else if (!in_banner && p[0] != '[' && n > 1) {
            int seen = 0;
            for (const char *q = out->data; q && !seen && (q = memmem(q, out->len - (size_t)(q - out->data), p, n));
                 q += n)
                seen = q == out->data || q[-1] == '\n';
            if (!seen) op_buf_put(out, p, n);
        }
        p += n;
    }
}

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

/* A rank that failed on its own said why in a line "octopipe <cmd>: <why>": that line, without
 * its prefix, becomes the error (taken out of the relayed text), so the user reads one line
 * rather than the rank's and then "mpirun exited with status 1".  0 when there is none. */
static int rank_line(op_buf *clean, op_err *err) {
    for (size_t at = 0; at < clean->len;) {
        char *p = clean->data + at, *nl = memchr(p, '\n', clean->len - at);
        size_t n = nl ? (size_t)(nl - p) + 1 : clean->len - at;
        char *colon = memchr(p, ':', n);
        if (!strncmp(p, "octopipe ", 9) && colon && colon + 2 < p + n && colon[1] == ' ') {
            int w = (int)(n - (size_t)(colon + 2 - p)) - (nl ? 1 : 0);
            op_errf(err, OP_EPEER, "%.*s", w, colon + 2);
            memmove(p, p + n, clean->len - at - n);
            clean->len -= n;
            return 1;
        }
        at += n;
    }
    return 0;
}

int op_exec_launch(int P, char *const *args, int nargs, double timeout_s, op_buf *logbuf,
                   op_err *err) {
    if (P < 1 || P > OP_EXEC_MAX_RANKS)
        return op_errf(err, OP_EINVAL, "ranks must be in 1..%d (got %d)", OP_EXEC_MAX_RANKS, P);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return op_errf(err, OP_EIO, "cannot find this binary (/proc/self/exe)");
    self[n] = 0;
    remove_stale_logs();
    char logpath[64];
    snprintf(logpath, sizeof logpath, "/tmp/" LOG_PREFIX "%ld-XXXXXX", (long)getpid());
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
    /* handlers before the fork: a signal between fork and the wait loop is not lost */
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    got_signal = 0;
    for (int i = 0; i < 3; i++) { /* an ignored signal stays ignored (nohup) */
        sigaction(sigs[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
        close(logfd);
        unlink(logpath);
        free(argv);
        return op_errf(err, OP_EIO, "fork failed");
    }
    if (pid == 0) {
        for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
        setpgid(0, 0);
        /* the launcher killed outright: mpirun stops the job (its own group) on SIGTERM; a
         * launcher already gone before this line gets the same */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != launcher) _exit(128 + SIGTERM);
        dup2(logfd, 2);
        close(logfd);
        int devnull = open("/dev/null", 0);
        if (devnull >= 0) dup2(devnull, 0);
        /* ranks under ASan: Open MPI's own allocations look leaked to LeakSanitizer, so
         * leak checking stays with single-process tests; address checks stay on */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        setenv(OP_EXEC_LAUNCHED_ENV, "1", 1);
        execvp("mpirun", argv);
        fprintf(stderr, "octopipe: cannot start mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    free(argv);
    setpgid(pid, pid);
    /* our own limit a little after mpirun's, in case mpirun itself wedges */
    double deadline = op_now_s() + timeout_s + 10, killed_at = 0;
    int status = 0, timed_out = 0, stop_sig = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        double now = op_now_s();
        if (!stop_sig && got_signal) { /* the user stops us: stop the job first */
            stop_sig = got_signal;
            kill(-pid, SIGTERM);
            killed_at = now - 5 + GRACE_S;
        } else if (!killed_at && now > deadline) {
            kill(-pid, SIGTERM);
            killed_at = now;
            timed_out = 1;
        } else if (killed_at && now > killed_at + 5) {
            kill(-pid, SIGKILL);
            killed_at = now + 1e9;
        }
        usleep(20000);
    }
    /* ranks that outlived mpirun (it died first, or ignored TERM) are still in its group */
    kill(-pid, SIGKILL);
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (stop_sig) {
        close(logfd);
        unlink(logpath);
        raise(stop_sig); /* the caller's disposition: by default the process ends here */
        op_errf(err, OP_EPEER, "stopped by signal %d; the job was stopped too", stop_sig);
        return 128 + stop_sig;
    }
    /* relay mpirun's stderr and find a dead rank in it */
    char *log = NULL;
    size_t len = 0;
    op_err e2 = {0};
    op_buf clean = {0};
    if (op_read_file(logpath, &log, &len, &e2) == OP_OK && len) {
        if (logbuf) op_buf_put(logbuf, log, len);
        else strip_banners(log, &clean);
    }
    close(logfd);
    unlink(logpath);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    char how[64];
    int dead = log ? dead_rank(log, how, sizeof how) : -1;
    if (timed_out || (log && strstr(log, "time limit for job execution")))
        op_errf(err, OP_ETIMEOUT, "the job ran past its %.0f s limit and was stopped", timeout_s);
    else if (dead >= 0 && !(log && (strstr(log, "octopipe exec: watchdog") || strstr(log, "octopipe exec: time limit"))))
        op_errf(err, OP_EPEER, "rank %d %s; the job was brought down", dead, how);
    else if (code == 3 && log && strstr(log, "octopipe exec: time limit"))
        op_errf(err, OP_ETIMEOUT, "the job passed its --timeout and stopped (what each rank was doing is above)");
    else if (code == 3)
        op_errf(err, OP_ETIMEOUT, "the watchdog stopped the job (a rank made no progress; see above)");
    else if (code && !rank_line(&clean, err))
        op_errf(err, OP_EPEER, "mpirun exited with status %d", code);
    if (clean.len) fwrite(clean.data, 1, clean.len, stderr);
    op_buf_free(&clean);
    free(log);
    if (timed_out && !code) code = 124;
    return code;
}
