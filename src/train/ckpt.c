/* ckpt.c: checkpoints of the model's parameters and AdamW state.
 * Layout (little-endian, as written by this machine):
 *   "OPCKPT01" | u32 version | u32 pattern length | pattern bytes | cfg block (op_nn_cfg
 *   fields, fixed order) | i64 next step | u64 n params | f32 params[n] | f32 m[n] | f32 v[n]
 *   | run block (version 2: i32 microbatches | f32 lr, beta1, beta2, eps, wd | i32 warmup |
 *   u32 data length | data spec bytes) | u64 FNV-1a of everything before.
 * Version 1 files (no run block) still load.
 * Written through op_out_write (octopipe/out.h: temp file, fsync, rename for a regular file),
 * so a crash leaves the old checkpoint whole; the next save removes temp files whose writer is
 * gone.  Floats are stored bit for bit: resuming continues bitwise. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "octopipe/out.h"
#include "octopipe/train.h"

#define MAGIC "OPCKPT01"
#define VERSION 2u
#define RUN_FIXED 32 /* the run block before its data bytes */

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void put_cfg(op_buf *b, const op_nn_cfg *c) {
    int32_t v[] = {c->vocab,      c->d,          c->seq,        c->batch,      c->n_heads,
                   c->window,     c->ssm_inner,  c->ssm_state,  c->ssm_conv,   c->ssm_dt_rank,
                   c->ffn,        c->n_experts,  c->top_k,      c->expert_dim, c->shared_dim};
    op_buf_put(b, v, sizeof v);
    op_buf_put(b, &c->aux_coef, sizeof c->aux_coef);
    op_buf_put(b, &c->norm_eps, sizeof c->norm_eps);
    op_buf_put(b, &c->seed, sizeof c->seed);
}

/* The cfg block's fields in put_cfg's order: 15 int32, 2 float, the u64 seed. */
static const char *const CFG_NAMES[] = {
    "vocab", "d", "seq", "batch", "n_heads", "window", "ssm_inner", "ssm_state", "ssm_conv",
    "ssm_dt_rank", "ffn", "n_experts", "top_k", "expert_dim", "shared_dim", "aux_coef", "norm_eps",
    "init seed (--seed)"};
#define CFG_FIELDS ((int)(sizeof CFG_NAMES / sizeof *CFG_NAMES))

/* Field k of a cfg block at b, as text (floats with prec digits). */
static void cfg_field(const unsigned char *b, int k, int prec, char *out, size_t cap) {
    int32_t i;
    float f;
    uint64_t u;
    if (k < 15) memcpy(&i, b + 4 * k, 4), snprintf(out, cap, "%d", (int)i);
    else if (k < 17) memcpy(&f, b + 4 * k, 4), snprintf(out, cap, "%.*g", prec, (double)f);
    else memcpy(&u, b + 68, 8), snprintf(out, cap, "%llu", (unsigned long long)u);
}

static int check_cover(const op_nn_model *m, op_nn_stage *const *st, int n, op_err *err) {
    int next = 0;
    for (int i = 0; i < n; i++) {
        if (st[i]->first != next) break;
        next = st[i]->last;
    }
    if (next != m->n_layers)
        return op_errf(err, OP_EINVAL, "checkpoint: stages do not cover layers [0,%d) in order",
                       m->n_layers);
    return OP_OK;
}

/* Removes PATH.tmp.<pid> files that writers killed mid-write left behind (op_write_file_atomic
 * names its temporary file so): those whose pid is gone.  A live writer's file is kept. */
static void remove_stale_temps(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    const char *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path) snprintf(dir, sizeof dir, "/");
    DIR *d = opendir(dir);
    if (!d) return;
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, bl) != 0 || strncmp(e->d_name + bl, ".tmp.", 5) != 0) continue;
        char *end = NULL;
        long pid = strtol(e->d_name + bl + 5, &end, 10);
        if (pid <= 0 || !end || *end || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        unlink(full);
    }
    closedir(d);
}

/* A checkpoint is a regular file: it is replaced by rename, and a resume reads it twice (the
 * launcher checks it, the ranks load it).  A FIFO there blocked the second read, or the save
 * at the end of the run, forever; a device such as /dev/zero was read for 1 GiB first. */
int op_ckpt_check_file(const char *path, op_err *err) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return op_errf(err, OP_EINVAL, "%s: %s, not a checkpoint (checkpoints are regular files)", path,
                       S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    return OP_OK;
}

/* The first of np parameters, np first and np second AdamW moments (as a checkpoint lays them
 * out from `at`) that no run should write or resume: a parameter or first moment not finite,
 * a second moment negative or NaN; 3 np when there is none (*x: its value). */
static size_t bad_value(const unsigned char *at, size_t np, float *x) {
    for (size_t i = 0; i < 3 * np; i++) {
        memcpy(x, at + i * sizeof *x, sizeof *x);
        if (i < 2 * np ? !isfinite(*x) : !(*x >= 0)) return i;
    }
    return 3 * np;
}

static const char *value_name(size_t i, uint64_t np) {
    return i < np ? "parameter" : i < 2 * np ? "AdamW first moment of parameter"
                                             : "AdamW second moment of parameter";
}

void op_ckpt_run_set(op_ckpt_run *r, int microbatches, const op_adamw *opt, const char *data) {
    memset(r, 0, sizeof *r);
    r->microbatches = microbatches;
    if (opt) r->opt = *opt;
    snprintf(r->data, sizeof r->data, "%s", data ? data : "text");
}

static void put_run(op_buf *b, const op_ckpt_run *r) {
    int32_t mb = r ? r->microbatches : 0, warm = r ? r->opt.warmup : 0;
    float f[5] = {0, 0, 0, 0, 0};
    if (r) f[0] = r->opt.lr, f[1] = r->opt.beta1, f[2] = r->opt.beta2, f[3] = r->opt.eps, f[4] = r->opt.wd;
    uint32_t dl = r ? (uint32_t)strnlen(r->data, sizeof r->data - 1) : 0;
    op_buf_put(b, &mb, 4);
    op_buf_put(b, f, sizeof f);
    op_buf_put(b, &warm, 4);
    op_buf_put(b, &dl, 4);
    if (dl) op_buf_put(b, r->data, dl);
}

int op_ckpt_save(const char *path, const op_nn_model *m, op_nn_stage *const *stages, int n,
                 int64_t next_step, op_err *err) {
    return op_ckpt_save_run(path, m, stages, n, next_step, NULL, err);
}

int op_ckpt_save_run(const char *path, const op_nn_model *m, op_nn_stage *const *stages, int n,
                     int64_t next_step, const op_ckpt_run *run, op_err *err) {
    int rc = check_cover(m, stages, n, err);
    if (rc || (rc = op_ckpt_check_file(path, err))) return rc;
    remove_stale_temps(path);
    op_buf b = {0};
    op_buf_put(&b, MAGIC, 8);
    uint32_t ver = VERSION, plen = (uint32_t)strlen(m->pattern);
    op_buf_put(&b, &ver, 4);
    op_buf_put(&b, &plen, 4);
    op_buf_put(&b, m->pattern, plen);
    put_cfg(&b, &m->cfg);
    op_buf_put(&b, &next_step, 8);
    uint64_t np = m->off[m->n_layers];
    op_buf_put(&b, &np, 8);
    const size_t at = b.len;
    for (int which = 0; which < 3; which++)
        for (int i = 0; i < n; i++) {
            const float *a = which == 0 ? stages[i]->params : which == 1 ? stages[i]->adam_m
                                                                         : stages[i]->adam_v;
            op_buf_put(&b, a, stages[i]->n_params * sizeof(float));
        }
    /* a diverged run's weights: written, they replaced the last good checkpoint with one no
     * resume accepts */
    float x;
    size_t bad = bad_value((const unsigned char *)b.data + at, (size_t)np, &x);
    if (bad < 3 * (size_t)np) {
        op_buf_free(&b);
        return op_errf(err, OP_EIO, "%s: not written: %s %zu is %g (training diverged); the file "
                                    "keeps what it held", path, value_name(bad, np),
                       (size_t)(bad % np), op_shown(x));
    }
    put_run(&b, run);
    uint64_t h = fnv1a((const unsigned char *)b.data, b.len);
    op_buf_put(&b, &h, 8);
    rc = op_out_write(path, b.data, b.len, err);
    op_buf_free(&b);
    return rc;
}

/* Checks a checkpoint image against the model: magic, checksum, version, pattern and
 * dimensions, parameter count.  On success *next_step is read and *params_at is where the
 * parameters start. */
static int check_image(const unsigned char *p, size_t len, const char *path, const op_nn_model *m,
                       int64_t *next_step, size_t *params_at, op_ckpt_run *run, op_err *err) {
    int rc = OP_EINVAL;
    if (len < 24 || memcmp(p, MAGIC, 8))
        return op_errf(err, rc, "%s: not an OctoPipe checkpoint (bad magic or too short)", path);
    uint64_t h;
    memcpy(&h, p + len - 8, 8);
    if (fnv1a(p, len - 8) != h)
        return op_errf(err, rc, "%s: checksum mismatch: the checkpoint is corrupted or truncated; "
                                "refusing to resume from it", path);
    uint32_t ver, plen;
    memcpy(&ver, p + 8, 4);
    memcpy(&plen, p + 12, 4);
    if (ver != 1 && ver != VERSION)
        return op_errf(err, rc, "%s: checkpoint version %u, this build reads 1 and %u", path, ver,
                       VERSION);
    op_buf want = {0};
    put_cfg(&want, &m->cfg);
    size_t off = 16;
    int same = plen == strlen(m->pattern) && off + plen + want.len + 16 <= len &&
               !memcmp(p + off, m->pattern, plen) && !memcmp(p + off + plen, want.data, want.len);
    size_t wl = want.len;
    /* the same pattern: name the dimension that differs (a --seed other than the one the file
     * was written with said "pattern \"EM*-#L\" or dimensions differ from \"EM*-#L\"") */
    if (!same && plen == strlen(m->pattern) && off + plen + wl + 16 <= len && !memcmp(p + off, m->pattern, plen)) {
        const unsigned char *a = p + off + plen, *b = (const unsigned char *)want.data;
        int k = 0;
        while (k < CFG_FIELDS - 1 && !memcmp(a + 4 * k, b + 4 * k, 4)) k++; /* the seed: 8 bytes at 68 */
        char has[40], is[40];
        for (int prec = 6; prec <= 9; prec += 3) { /* more digits where 6 show no difference */
            cfg_field(a, k, prec, has, sizeof has);
            cfg_field(b, k, prec, is, sizeof is);
            if (strcmp(has, is)) break;
        }
        op_buf_free(&want);
        return op_errf(err, rc, "%s: written for another model: %s %s, this model's is %s (pattern \"%s\")",
                       path, CFG_NAMES[k], has, is, m->pattern);
    }
    op_buf_free(&want);
    if (!same) /* the pattern shown stops before the checksum */
        return op_errf(err, rc, "%s: written for another model (pattern \"%.*s\" or dimensions differ "
                                "from \"%s\")", path, (int)(plen < 256 && plen <= len - 8 - off ? plen : 0),
                       (const char *)p + off, m->pattern);
    off += plen + wl;
    uint64_t np;
    memcpy(next_step, p + off, 8);
    memcpy(&np, p + off + 8, 8);
    off += 16;
    if (np != m->off[m->n_layers])
        return op_errf(err, rc, "%s: holds %llu parameters, the model has %zu", path,
                       (unsigned long long)np, m->off[m->n_layers]);
    /* the count is right but the bytes are not (said "holds N parameters, the model has N") */
    size_t end = off + 3 * (size_t)np * sizeof(float), tail = 0; /* tail: the run block */
    if (ver >= 2 && end + RUN_FIXED + 8 <= len) {
        uint32_t dl;
        memcpy(&dl, p + end + RUN_FIXED - 4, 4);
        tail = RUN_FIXED + (size_t)dl;
        if (dl >= sizeof run->data || end + tail + 8 != len)
            return op_errf(err, rc, "%s: %zu bytes, but %llu parameters with their AdamW state and "
                                    "a run block of %u data bytes take %zu", path, len,
                           (unsigned long long)np, dl, end + RUN_FIXED + (size_t)dl + 8);
        int32_t mb;
        memcpy(&mb, p + end, 4);
        if (mb < 0 || memchr(p + end + RUN_FIXED, 0, dl))
            return op_errf(err, rc, "%s: the run block %s", path,
                           mb < 0 ? "has a negative microbatch count" : "has a NUL in its data spec");
    } else if (ver >= 2) {
        return op_errf(err, rc, "%s: %zu bytes, but %llu parameters with their AdamW state and "
                                "the run block take at least %zu", path, len, (unsigned long long)np,
                       end + RUN_FIXED + 8);
    }
    if (end + tail + 8 != len)
        return op_errf(err, rc, "%s: %zu bytes, but %llu parameters with their AdamW state take %zu",
                       path, len, (unsigned long long)np, end + 8);
    if (*next_step < 0)
        return op_errf(err, rc, "%s: step %lld is negative", path, (long long)*next_step);
    /* The checksum only says the bytes are the ones written: a run that diverged wrote NaN
     * weights, and a NaN in a row the data never reads (or a negative second moment) trained
     * on with a finite loss. */
    float x;
    size_t i = bad_value(p + off, (size_t)np, &x);
    if (i < 3 * (size_t)np)
        return op_errf(err, rc, "%s: %s %zu is %g: the run that wrote it diverged or the file was "
                                "altered; refusing to resume from it", path, value_name(i, np),
                       (size_t)(i % np), op_shown(x));
    *params_at = off;
    if (run) {
        memset(run, 0, sizeof *run);
        if (tail) {
            const unsigned char *q = p + end;
            int32_t mb, warm;
            float f[5];
            memcpy(&mb, q, 4), memcpy(f, q + 4, sizeof f), memcpy(&warm, q + 24, 4);
            run->microbatches = mb;
            run->opt.lr = f[0], run->opt.beta1 = f[1], run->opt.beta2 = f[2];
            run->opt.eps = f[3], run->opt.wd = f[4], run->opt.warmup = warm;
            memcpy(run->data, q + RUN_FIXED, tail - RUN_FIXED);
            run->data[tail - RUN_FIXED] = 0;
        }
    }
    return OP_OK;
}

int op_ckpt_check_run(const char *path, const op_nn_model *m, int64_t *next_step,
                      op_ckpt_run *run, op_err *err) {
    char *data = NULL;
    size_t len = 0, at;
    int rc = op_ckpt_check_file(path, err);
    if (rc == OP_OK) rc = op_read_file(path, &data, &len, err);
    if (rc) return rc;
    rc = check_image((const unsigned char *)data, len, path, m, next_step, &at, run, err);
    free(data);
    return rc;
}

int op_ckpt_check(const char *path, const op_nn_model *m, int64_t *next_step, op_err *err) {
    return op_ckpt_check_run(path, m, next_step, NULL, err);
}

int op_ckpt_load(const char *path, const op_nn_model *m, op_nn_stage *const *stages, int n,
                 int64_t *next_step, op_err *err) {
    int rc = check_cover(m, stages, n, err);
    if (rc) return rc;
    char *data = NULL;
    size_t len = 0, off = 0;
    if ((rc = op_ckpt_check_file(path, err)) == OP_OK) rc = op_read_file(path, &data, &len, err);
    if (rc) return rc;
    const unsigned char *p = (const unsigned char *)data;
    rc = check_image(p, len, path, m, next_step, &off, NULL, err);
    if (rc == OP_OK)
        for (int which = 0; which < 3; which++)
            for (int i = 0; i < n; i++) {
                float *a = which == 0 ? stages[i]->params : which == 1 ? stages[i]->adam_m
                                                                       : stages[i]->adam_v;
                memcpy(a, p + off, stages[i]->n_params * sizeof(float));
                off += stages[i]->n_params * sizeof(float);
            }
    free(data);
    return rc;
}
