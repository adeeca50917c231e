/* fuzz_util.h: what every fuzz target needs: the input as a NUL-terminated string, and for
 * readers that take a path, a file to put it in. */
#ifndef OCTOPIPE_FUZZ_UTIL_H
#define OCTOPIPE_FUZZ_UTIL_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *txt = malloc(size + 1);
    if (!txt) abort();
    memcpy(txt, data, size);
    txt[size] = 0;
    return txt;
}

/* The process's own directory (one per process: libFuzzer's -jobs run several at once). */
static inline char *fuzz_dir_(void) {
    static char dir[64];
    return dir;
}

static inline void fuzz_rm_dir_(void) {
    DIR *d = opendir(fuzz_dir_());
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(path, sizeof path, "%s/%s", fuzz_dir_(), e->d_name), unlink(path);
    closedir(d);
    rmdir(fuzz_dir_());
}

/* out = NAME in that directory, made on first use and removed at exit (a crash leaves it).
 * tmpfs where there is one: millions of writes, and savers that fsync. */
static inline void fuzz_tmp_path(const char *name, char *out, size_t cap) {
    char *dir = fuzz_dir_();
    if (!*dir) {
        snprintf(dir, 64, "%s/octopipe-fuzz-XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
        if (!mkdtemp(dir)) abort();
        atexit(fuzz_rm_dir_);
    }
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Writes n bytes to path (the input, for a reader that takes a path); aborts when it cannot. */
static inline void fuzz_put_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
}
#endif
