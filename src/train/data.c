/* data.c: byte-level token batches over an English text, or synthetic copy / reverse tasks.
 * A batch is a pure function of (seed, step, microbatch): any rank can make any batch and a
 * resumed run sees exactly the data it would have seen. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "octopipe/train.h"

/* -1 on a read error, -2 when more than max bytes come (a stream without end: /dev/zero) */
static int read_all(FILE *f, unsigned char **out, size_t *len, size_t max) {
    size_t cap = 1 << 20, n = 0;
    unsigned char *b = op_xmalloc(cap);
    size_t r;
    while ((r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n > max) {
            free(b);
            *out = NULL;
            return -2;
        }
        if (n == cap) b = op_xrealloc(b, cap *= 2);
    }
    *out = b;
    *len = n;
    return ferror(f) ? -1 : 0;
}

static int load_text(op_train_data *d, const char *path, op_err *err) {
    size_t n = strlen(path);
    FILE *f = fopen(path, "rb");
    if (!f) return op_errf(err, OP_EIO, "%s: %s", path, strerror(errno));
    /* fopen succeeds on a directory and only the read fails: say what is wrong up front */
    struct stat st = {0};
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return op_errf(err, OP_EIO, "%s: is a directory", path);
    }
    int gz = n > 3 && !strcmp(path + n - 3, ".gz");
    /* a regular file ends; a pipe or device (and gzip's output) is capped: a corpus for the
     * reference model is megabytes, and /dev/zero never ends */
    const size_t max = gz ? 4 * OP_MAX_STREAM_BYTES : S_ISREG(st.st_mode) ? (size_t)-1 : OP_MAX_STREAM_BYTES;
    if (gz) {
        /* zlib is not linked; gzip is on every Debian system */
        fclose(f);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
        if (strchr(path, '\'')) return op_errf(err, OP_EINVAL, "%s: quote in file name", path);
        f = popen(cmd, "r");
        if (!f) return op_errf(err, OP_EIO, "%s: cannot run gzip -dc", path);
    }
    errno = 0;
    int rc = read_all(f, &d->text, &d->len, max), e = errno; /* closing may overwrite errno */
    int cst = gz ? pclose(f) : fclose(f);
    if (rc == -2)
        return op_errf(err, OP_EINVAL, "%s: more than %zu MiB%s, with no end in sight: not a corpus "
                       "this tool reads", path, max >> 20, gz ? " decompressed" : " from a pipe or device");
    if (rc || cst != 0) {
        free(d->text);
        d->text = NULL;
        if (gz) return op_errf(err, OP_EIO, "%s: read failed (gzip -dc)", path);
        return op_errf(err, OP_EIO, "%s: read failed: %s", path, e ? strerror(e) : "unknown cause");
    }
    if (d->len < (size_t)d->seq + 2) {
        free(d->text);
        d->text = NULL;
        return op_errf(err, OP_EINVAL, "%s: %zu bytes, need more than one sequence (%d)", path,
                       d->len, d->seq + 1);
    }
    snprintf(d->source, sizeof d->source, "%.255s", path);
    return OP_OK;
}

int op_train_data_open(op_train_data *d, const char *spec, const op_nn_cfg *c, uint64_t seed,
                       op_err *err) {
    memset(d, 0, sizeof *d);
    d->seq = c->seq, d->batch = c->batch, d->vocab = c->vocab, d->seed = seed;
    if (!spec || !strcmp(spec, "text")) {
        d->kind = OP_DATA_TEXT;
        int rc = load_text(d, OP_TRAIN_DEFAULT_TEXT, err);
        if (rc)
            return op_err_prefix(err, "default corpus missing (install it: scripts/setup.sh "
                                      "installs jargon-text; or pass a text file, or copy/reverse)");
        return OP_OK;
    }
    if (!strcmp(spec, "copy") || !strcmp(spec, "reverse")) {
        d->kind = spec[0] == 'c' ? OP_DATA_COPY : OP_DATA_REVERSE;
        if (c->vocab < 128 || c->seq < 5)
            return op_errf(err, OP_EINVAL, "data %s: needs vocab >= 128 and seq >= 5", spec);
        snprintf(d->source, sizeof d->source, "synthetic %s", spec);
        return OP_OK;
    }
    d->kind = OP_DATA_TEXT;
    if (c->vocab < 256)
        return op_errf(err, OP_EINVAL, "data %s: byte-level text needs vocab 256", spec);
    return load_text(d, spec, err);
}

void op_train_data_free(op_train_data *d) {
    free(d->text);
    d->text = NULL;
}

/* synthetic: BOS a_1..a_L SEP b_1..b_L [pad], b = a (copy) or reversed a; only b is scored */
enum { BOS = 1, SEP = 2, PAD = 3, ALPHA = 16, BASE = 'a' };

void op_train_data_batch(const op_train_data *d, int64_t step, int mb, int32_t *tokens,
                         int32_t *targets) {
    int T = d->seq;
    int32_t *row = op_xmalloc(sizeof(int32_t) * (size_t)(T + 1));
    for (int b = 0; b < d->batch; b++) {
        op_rng r;
        op_rng_seed(&r, d->seed ^ ((uint64_t)step * 0x9E3779B97F4A7C15ull) ^
                            ((uint64_t)(mb * 4096 + b + 1) * 0xC2B2AE3D27D4EB4Full));
        int lo_score = 0, hi_score = T; /* target positions scored: [lo, hi) */
        if (d->kind == OP_DATA_TEXT) {
            size_t off = (size_t)(op_rng_u64(&r) % (uint64_t)(d->len - (size_t)T));
            for (int t = 0; t <= T; t++) row[t] = d->text[off + (size_t)t];
        } else {
            int L = (T - 1) / 2;
            row[0] = BOS;
            for (int i = 0; i < L; i++) row[1 + i] = BASE + op_rng_int(&r, ALPHA);
            row[L + 1] = SEP;
            for (int i = 0; i < L; i++)
                row[L + 2 + i] = d->kind == OP_DATA_COPY ? row[1 + i] : row[L - i];
            for (int t = 2 * L + 2; t <= T; t++) row[t] = PAD;
            lo_score = L + 1; /* input SEP predicts b_1 */
            hi_score = 2 * L + 1;
        }
        for (int t = 0; t < T; t++) {
            tokens[b * T + t] = row[t];
            targets[b * T + t] = t >= lo_score && t < hi_score ? row[t + 1] : -1;
        }
    }
    free(row);
}
