/* out.c: writing output files without destroying what is there (see out.h). */
#include "octopipe/out.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when path is a symbolic link to what descriptor fd already has open (/dev/stdout,
 * /proc/self/fd/1, a user's link to the same file): such a path means that descriptor, as
 * for a shell redirection; renaming a file over it would lose what else goes there. */
static int link_to_fd(const char *path, int fd) {
    struct stat l, a, b;
    return lstat(path, &l) == 0 && S_ISLNK(l.st_mode) && stat(path, &a) == 0 && fstat(fd, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int op_out_is_stdout(const char *path) {
    return path && (!strcmp(path, "-") || link_to_fd(path, STDOUT_FILENO));
}

/* Follows symbolic links (also dangling ones: writing through a link to a missing file
 * creates that file, as a shell redirection does) and returns the final path in a malloc'd
 * string; *st holds its lstat, *exists whether it exists.  A kernel link under /proc (what
 * /dev/fd/N and /dev/stdout lead to) names an open file, not a path: *kernel is then set,
 * *st is the kernel's stat and the path itself is returned, to be opened in place.  NULL on
 * a loop or a bad link. */
static char *resolve(const char *path, struct stat *st, int *exists, int *kernel, int *eno) {
    *kernel = 0;
    char *p = op_xstrdup(path);
    for (int hop = 0; hop < 40; hop++) {
        if (lstat(p, st) != 0) {
            *exists = 0;
            if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: said by check_new */
                *eno = errno;
                free(p);
                return NULL;
            }
            return p;
        }
        *exists = 1;
        if (!S_ISLNK(st->st_mode)) return p;
        if (!strncmp(p, "/proc/", 6)) {
            free(p);
            *kernel = 1;
            if (stat(path, st) != 0) {
                *eno = errno;
                return NULL;
            }
            return op_xstrdup(path);
        }
        char link[PATH_MAX];
        ssize_t n = readlink(p, link, sizeof link - 1);
        if (n < 0) {
            *eno = errno;
            free(p);
            return NULL;
        }
        link[n] = 0;
        char *next;
        const char *slash = strrchr(p, '/');
        if (link[0] == '/' || !slash) {
            next = op_xstrdup(link);
        } else { /* relative to the link's own directory */
            size_t dl = (size_t)(slash - p) + 1, ll = strlen(link);
            next = op_xmalloc(dl + ll + 1);
            memcpy(next, p, dl);
            memcpy(next + dl, link, ll + 1);
        }
        free(p);
        p = next;
    }
    *eno = ELOOP;
    free(p);
    return NULL;
}

/* The directory part of path ("." when there is none), malloc'd. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return op_xstrdup(".");
    if (slash == path) return op_xstrdup("/");
    size_t n = (size_t)(slash - path);
    char *d = op_xmalloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

static char *tmp_name(const char *final, const char *tag) {
    size_t n = strlen(final) + 48;
    char *t = op_xmalloc(n);
    snprintf(t, n, "%s.%s.%ld", final, tag, (long)getpid());
    return t;
}

static int write_all(int fd, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Can a new file appear at final (i.e. in its directory)?  OP_OK or one line in err. */
static int check_new(const char *path, const char *final, op_err *err) {
    char *dir = dir_of(final);
    struct stat ds;
    int rc = OP_OK;
    if (stat(dir, &ds) != 0) {
        rc = op_errf(err, OP_EIO, "%s: cannot write: directory %s %s", path, dir,
                     errno == ENOENT ? "does not exist" : strerror(errno));
    } else if (!S_ISDIR(ds.st_mode)) {
        rc = op_errf(err, OP_EIO, "%s: cannot write: %s is not a directory", path, dir);
    } else {
        /* a real probe: permission bits do not stop root, a read-only mount does */
        char *probe = tmp_name(final, "probe");
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            rc = op_errf(err, OP_EIO, "%s: cannot write: cannot create files in %s: %s", path,
                         dir, strerror(errno));
        } else {
            close(fd);
            unlink(probe);
        }
        free(probe);
    }
    free(dir);
    return rc;
}

/* Files this process read as inputs (op_out_protect).  A fixed table: a command reads a
 * handful (model, cluster, plan); beyond its size the rest go unprotected, never refused. */
enum { PROT_MAX = 32 };
static struct {
    dev_t dev;
    ino_t ino;
    char path[256];
} prot[PROT_MAX];
static int n_prot;
static pthread_mutex_t prot_mu = PTHREAD_MUTEX_INITIALIZER;

void op_out_protect(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return; /* presets, "-", pipes */
    pthread_mutex_lock(&prot_mu);
    int i = 0;
    while (i < n_prot && !(prot[i].dev == st.st_dev && prot[i].ino == st.st_ino)) i++;
    if (i == n_prot && n_prot < PROT_MAX) {
        prot[n_prot].dev = st.st_dev;
        prot[n_prot].ino = st.st_ino;
        snprintf(prot[n_prot].path, sizeof prot[n_prot].path, "%s", path);
        n_prot++;
    }
    pthread_mutex_unlock(&prot_mu);
}

/* OP_OK, or the error for an output that is an input of this process (st: the file it would
 * replace or write into). */
static int check_protected(const char *path, const struct stat *st, op_err *err) {
    int rc = OP_OK;
    pthread_mutex_lock(&prot_mu);
    for (int i = 0; i < n_prot; i++)
        if (prot[i].dev == st->st_dev && prot[i].ino == st->st_ino) {
            rc = op_errf(err, OP_EIO, "%s: cannot write: it is the input %s; give another output path",
                         path, prot[i].path);
            break;
        }
    pthread_mutex_unlock(&prot_mu);
    return rc;
}

/* Where path would be written: (dev, ino) of an existing file; else of its directory, with
 * the last name, so two spellings of one new file compare equal. */
typedef struct {
    dev_t dev;
    ino_t ino;
    int exists;
    char name[256];
} out_id;

static int out_id_of(const char *path, out_id *id) {
    memset(id, 0, sizeof *id);
    struct stat st;
    int exists = 0, kernel = 0, eno = 0;
    char *final = resolve(path, &st, &exists, &kernel, &eno);
    if (!final) return 0;
    int ok = 1;
    if (exists) {
        id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
    } else {
        char *dir = dir_of(final);
        struct stat ds;
        const char *slash = strrchr(final, '/');
        ok = stat(dir, &ds) == 0;
        id->dev = ds.st_dev;
        id->ino = ds.st_ino;
        snprintf(id->name, sizeof id->name, "%s", slash ? slash + 1 : final);
        free(dir);
    }
    free(final);
    return ok;
}

int op_out_same(const char *a, const char *b) {
    if (!a || !b) return 0;
    int sa = op_out_is_stdout(a), sb = op_out_is_stdout(b);
    if (sa || sb) return sa && sb;
    if (!strcmp(a, b)) return 1;
    out_id x, y;
    if (!out_id_of(a, &x) || !out_id_of(b, &y)) return 0;
    return x.exists == y.exists && x.dev == y.dev && x.ino == y.ino && !strcmp(x.name, y.name);
}

int op_out_check(const char *path, op_err *err) {
    if (!path || !path[0]) return op_errf(err, OP_EIO, "an output path is empty");
    if (op_out_is_stdout(path) || link_to_fd(path, STDERR_FILENO)) return OP_OK;
    struct stat st;
    int exists = 0, kernel = 0, eno = 0;
    char *final = resolve(path, &st, &exists, &kernel, &eno);
    if (!final) return op_errf(err, OP_EIO, "%s: cannot write: %s", path, strerror(eno));
    int rc = OP_OK;
    if (exists && S_ISDIR(st.st_mode))
        rc = op_errf(err, OP_EIO, "%s: cannot write: is a directory", path);
    else if (exists && (rc = check_protected(path, &st, err)) != OP_OK)
        ;
    else if (!kernel && (!exists || S_ISREG(st.st_mode)))
        rc = check_new(path, final, err);
    else if (access(final, W_OK) != 0)
        rc = op_errf(err, OP_EIO, "%s: cannot write: %s", path, strerror(errno));
    free(final);
    return rc;
}

/* Temp file beside final, written and fsync'd, not yet renamed (op_out_write_n renames it):
 * *tmp_out (malloc'd) is its name.  The old file (if any) keeps its mode.  On failure nothing
 * stays behind. */
static int stage_atomic(const char *path, const char *final, const struct stat *old,
                        const void *data, size_t len, char **tmp_out, op_err *err) {
    char *tmp = tmp_name(final, "tmp");
    *tmp_out = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return op_errf(err, OP_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    if (old) fchmod(fd, old->st_mode & 07777);
    const char *what = NULL;
    if (write_all(fd, data, len) != 0) what = "write failed";
    else if (fsync(fd) != 0) what = "fsync failed";
    int e = errno;
    if (close(fd) != 0 && !what) what = "close failed", e = errno;
    if (what) {
        unlink(tmp);
        free(tmp);
        return op_errf(err, OP_EIO, "%s: %s: %s", path, what, strerror(e));
    }
    *tmp_out = tmp;
    return OP_OK;
}

/* Devices, FIFOs, terminals, open files named by /dev/fd/N: written in place, never
 * replaced (a regular file reached that way is truncated first, as a shell's '>' does). */
static int write_direct(const char *path, const char *final, const struct stat *st,
                        const void *data, size_t len, op_err *err) {
    int fd = open(final, O_WRONLY | O_CLOEXEC | (S_ISREG(st->st_mode) ? O_TRUNC : 0));
    if (fd < 0) return op_errf(err, OP_EIO, "%s: cannot write: %s", path, strerror(errno));
    int bad = write_all(fd, data, len);
    int e = errno;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    return bad ? op_errf(err, OP_EIO, "%s: write failed: %s", path, strerror(e)) : OP_OK;
}

/* The descriptor path names (stdout for '-' and its aliases, stderr), or -1. */
static int out_fd(const char *path) {
    return op_out_is_stdout(path) ? STDOUT_FILENO : link_to_fd(path, STDERR_FILENO) ? STDERR_FILENO : -1;
}

/* The descriptor itself: what was printed before stays, in order. */
static int write_fd(const char *path, int fd, const void *data, size_t len, op_err *err) {
    fflush(fd == STDOUT_FILENO ? stdout : stderr);
    if (write_all(fd, data, len) != 0)
        return op_errf(err, OP_EIO, "%s: write failed: %s", path, strerror(errno));
    return OP_OK;
}

int op_out_write(const char *path, const void *data, size_t len, op_err *err) {
    if (!path) return op_errf(err, OP_EIO, "an output path is empty");
    return op_out_write_n(1, &path, &data, &len, err);
}

/* Several outputs of one command, all or nothing as far as a file system allows: every
 * regular (or new) file is first written to its temporary file; only when all of those and
 * every in-place output (devices, FIFOs, and last stdout) were written are the temporary files
 * renamed into place.  One failing output (a full disk, /dev/full) thus leaves none of the
 * regular files behind; written one by one, the ones before it stayed. */
int op_out_write_n(int n, const char *const *paths, const void *const *data, const size_t *lens,
                   op_err *err) {
    char **final = op_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *final);
    char **tmp = op_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    struct stat *st = op_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *st);
    int *direct = op_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *direct);
    int rc = OP_OK;
    for (int i = 0; i < n; i++) final[i] = tmp[i] = NULL, direct[i] = 0;
    /* 1: resolve and stage the regular files */
    for (int i = 0; i < n && rc == OP_OK; i++) {
        const char *path = paths[i];
        if (!path) continue;
        if (!path[0]) {
            rc = op_errf(err, OP_EIO, "an output path is empty");
            break;
        }
        if (out_fd(path) >= 0) {
            direct[i] = 2; /* a descriptor: written after the devices */
            continue;
        }
        int exists = 0, kernel = 0, eno = 0;
        final[i] = resolve(path, &st[i], &exists, &kernel, &eno);
        int same = -1; /* an earlier output of the same file: the second rename found it gone */
        for (int j = 0; j < i && final[i] && same < 0; j++)
            if (final[j] && !strcmp(final[j], final[i])) same = j;
        if (!final[i]) rc = op_errf(err, OP_EIO, "%s: cannot write: %s", path, strerror(eno));
        else if (same >= 0)
            rc = op_errf(err, OP_EIO, "%s and %s are the same file: two outputs cannot share it",
                         paths[same], path);
        else if (exists && S_ISDIR(st[i].st_mode))
            rc = op_errf(err, OP_EIO, "%s: cannot write: is a directory", path);
        else if (exists && (rc = check_protected(path, &st[i], err)) != OP_OK)
            ;
        else if (!kernel && (!exists || S_ISREG(st[i].st_mode)))
            rc = stage_atomic(path, final[i], exists ? &st[i] : NULL, data[i], lens[i], &tmp[i], err);
        else
            direct[i] = 1;
    }
    /* 2: devices and FIFOs, then the descriptors */
    for (int pass = 1; pass <= 2; pass++)
        for (int i = 0; i < n && rc == OP_OK; i++) {
            if (direct[i] != pass) continue;
            if (pass == 1) rc = write_direct(paths[i], final[i], &st[i], data[i], lens[i], err);
            else rc = write_fd(paths[i], out_fd(paths[i]), data[i], lens[i], err);
        }
    /* 3: rename, or drop every temporary file */
    for (int i = 0; i < n; i++) {
        if (!tmp[i]) continue;
        if (rc == OP_OK && rename(tmp[i], final[i]) != 0)
            rc = op_errf(err, OP_EIO, "%s: rename failed: %s", paths[i], strerror(errno));
        if (rc != OP_OK) unlink(tmp[i]);
        free(tmp[i]);
    }
    for (int i = 0; i < n; i++) free(final[i]);
    free(final);
    free(tmp);
    free(st);
    free(direct);
    return rc;
}
