/* test_out.c: the output rules of octopipe/out.h on real file system objects in a temp dir:
 * regular files replaced atomically (mode kept, no temporary left), FIFOs and symlink targets
 * written in place, directories and missing parents refused by op_out_check before any write. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/out.h"

static char dir[64];

static const char *at(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int slurp_eq(const char *path, const char *want) {
    char *txt = NULL;
    size_t n = 0;
    op_err e = {0};
    if (op_read_file(path, &txt, &n, &e) != OP_OK) return 0;
    int eq = n == strlen(want) && !memcmp(txt, want, n);
    free(txt);
    return eq;
}

/* Names in dir that look like leftovers of a write (".tmp." or ".probe."). */
static int leftovers(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += strstr(de->d_name, ".tmp.") || strstr(de->d_name, ".probe.");
    if (d) closedir(d);
    return n;
}

TEST(regular_file_replaced_whole) {
    op_err e = {0};
    const char *p = at("r.json");
    CHECK(op_out_check(p, &e) == OP_OK);
    CHECK(op_out_write(p, "one", 3, &e) == OP_OK);
    chmod(p, 0600);
    struct stat a, b;
    stat(p, &a);
    CHECK(op_out_write(p, "second", 6, &e) == OP_OK);
    stat(p, &b);
    CHECK(slurp_eq(p, "second"));
    CHECK(a.st_ino != b.st_ino);              /* renamed over, never truncated in place */
    CHECK_EQ_INT(b.st_mode & 07777, 0600);    /* the old file's mode is kept */
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(fifo_written_in_place) {
    const char *p = at("fifo");
    CHECK(mkfifo(p, 0644) == 0);
    /* hold the read end (non-blocking) so the writer's open does not wait for a reader */
    int rd = open(p, O_RDONLY | O_NONBLOCK);
    CHECK(rd >= 0);
    op_err e = {0};
    CHECK(op_out_check(p, &e) == OP_OK);
    CHECK(op_out_write(p, "through the pipe", 16, &e) == OP_OK);
    char buf[64] = {0};
    CHECK_EQ_INT(read(rd, buf, sizeof buf - 1), 16);
    CHECK(!strcmp(buf, "through the pipe"));
    close(rd);
    struct stat st;
    CHECK(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode));
    unlink(p);
}

TEST(symlink_kept_target_written) {
    op_err e = {0};
    const char *t = at("target.txt"), *l = at("link.txt");
    CHECK(op_out_write(t, "old", 3, &e) == OP_OK);
    CHECK(symlink("target.txt", l) == 0); /* relative: resolved from the link's directory */
    CHECK(op_out_write(l, "new", 3, &e) == OP_OK);
    struct stat st;
    CHECK(lstat(l, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(slurp_eq(t, "new"));
    /* dangling: the target appears, the link stays */
    const char *d = at("dangling.txt");
    CHECK(symlink("made.txt", d) == 0);
    CHECK(op_out_check(d, &e) == OP_OK);
    CHECK(op_out_write(d, "made", 4, &e) == OP_OK);
    CHECK(lstat(d, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(slurp_eq(at("made.txt"), "made"));
    /* a loop is an error, not a hang */
    const char *a = at("loop_a"), *b = at("loop_b");
    CHECK(symlink("loop_b", a) == 0 && symlink("loop_a", b) == 0);
    CHECK(op_out_check(a, &e) == OP_EIO);
    CHECK(op_out_write(a, "x", 1, &e) == OP_EIO);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(refused_before_writing) {
    op_err e = {0};
    CHECK(op_out_check(at("missing/f.json"), &e) == OP_EIO);
    CHECK(strstr(e.msg, "missing/f.json: cannot write") && strstr(e.msg, "does not exist"));
    CHECK(op_out_write(at("missing/f.json"), "x", 1, &e) == OP_EIO);
    const char *f = at("plainfile");
    CHECK(op_out_write(f, "x", 1, &e) == OP_OK);
    CHECK(op_out_check(at("plainfile/sub.json"), &e) == OP_EIO);
    CHECK(strstr(e.msg, "is not a directory") != NULL);
    CHECK(op_out_check(dir, &e) == OP_EIO);
    CHECK(strstr(e.msg, "is a directory") != NULL);
    CHECK(op_out_write(dir, "x", 1, &e) == OP_EIO);
    CHECK(op_out_check("", &e) == OP_EIO);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(dash_is_stdout) {
    op_err e = {0};
    CHECK(op_out_is_stdout("-") && !op_out_is_stdout("./-") && !op_out_is_stdout(NULL));
    CHECK(op_out_check("-", &e) == OP_OK);
    /* stdout redirected into a file for the test */
    fflush(stdout);
    int saved = dup(1), fd = open(at("stdout.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    int rc = op_out_write("-", "to stdout\n", 10, &e);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    CHECK(rc == OP_OK);
    CHECK(slurp_eq(at("stdout.txt"), "to stdout\n"));
    CHECK(access("-", F_OK) != 0 && access(at("-"), F_OK) != 0); /* no file named '-' */
}

static void cleanup(void) {
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (de->d_name[0] != '.') unlink(at(de->d_name));
    if (d) closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/octopipe-out-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(regular_file_replaced_whole);
    RUN(fifo_written_in_place);
    RUN(symlink_kept_target_written);
    RUN(refused_before_writing);
    RUN(dash_is_stdout);
    cleanup();
    return check_report("out");
}
