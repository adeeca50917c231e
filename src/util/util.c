/* util.c: errors, allocation, arenas, buffers, files, RNG, clock (see common.h). */
#include "octopipe/common.h"
#include "octopipe/out.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Control characters (C0, DEL, and C1 as UTF-8 U+0080..U+009F) to '?', byte by byte: names and
 * error lines are one line each, and an escape sequence from an input file (a plan's device
 * type name, a key of a config) reached the terminal as it was and acted there. */
static void scrub_controls(char *s) {
    unsigned char *u = (unsigned char *)s;
    for (size_t i = 0; u[i]; i++)
        if (u[i] < 0x20 || u[i] == 0x7F) u[i] = '?';
        else if (u[i] == 0xC2 && u[i + 1] >= 0x80 && u[i + 1] < 0xA0) u[i] = u[i + 1] = '?', i++;
}

int op_errf(op_err *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        scrub_controls(err->msg);
        err->code = code;
    }
    return code;
}

int op_err_prefix(op_err *err, const char *fmt, ...) {
    if (!err) return OP_EINVAL;
    char pre[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%.400s: %.600s", pre, old);
    scrub_controls(err->msg); /* the prefix is often a file name */
    return err->code ? err->code : OP_EINVAL;
}

void op_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "octopipe: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *op_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    OP_ASSERT(p, "out of memory allocating %zu bytes", n);
    return p;
}
void *op_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    OP_ASSERT(p, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}
void *op_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    OP_ASSERT(q, "out of memory reallocating %zu bytes", n);
    return q;
}
char *op_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(op_xmalloc(n), s, n);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when none starts there. */
static int utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    int n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
          : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

const char *op_show_char(char c, char out[12]) {
    unsigned char u = (unsigned char)c;
    if (u >= 0x20 && u < 0x7f) snprintf(out, 12, "'%c'", c);
    else snprintf(out, 12, "byte 0x%02X", u);
    return out;
}

void op_copy_name(char *out, size_t n, const char *s) {
    snprintf(out, n, "%s", s ? s : "");
    unsigned char *u = (unsigned char *)out;
    size_t len = strlen(out);
    for (size_t i = 0; i < len;) {
        int k = utf8_len(u + i); /* stops at the terminating 0: a cut sequence gives 0 */
        if (k) {
            i += (size_t)k;
            continue;
        }
        /* a sequence cut at the end of the buffer: drop it; any other bad byte: '?' */
        size_t j = i + 1;
        while (j < len && (u[j] & 0xC0) == 0x80 && j - i < 4) j++;
        if (j == len && strlen(s ? s : "") > len) {
            u[i] = 0;
            break;
        }
        u[i++] = '?';
    }
    scrub_controls(out);
}

struct op_arena_chunk {
    op_arena_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char mem[];
};

void *op_arena_alloc(op_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    op_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (1u << 16) ? n : (1u << 16);
        c = op_xmalloc(sizeof *c + cap);
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    a->used_bytes += n;
    memset(p, 0, n);
    return p;
}

char *op_arena_strdup(op_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(op_arena_alloc(a, n), s, n);
}

void op_arena_free(op_arena *a) {
    op_arena_chunk *c = a->head;
    while (c) {
        op_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

/* Kept for callers that predate out.h: the same rules as op_out_write. */
int op_write_file_atomic(const char *path, const void *data, size_t len, op_err *err) {
    return op_out_write(path, data, len, err);
}

static void buf_reserve(op_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = op_xrealloc(b->data, cap);
    b->cap = cap;
}

void op_buf_printf(op_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    OP_ASSERT(n >= 0, "vsnprintf failed");
    buf_reserve(b, (size_t)n);
    if ((size_t)n < sizeof small) {
        memcpy(b->data + b->len, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void op_buf_put(op_buf *b, const void *data, size_t n) {
    buf_reserve(b, n);
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
}

void op_buf_json_str(op_buf *b, const char *s) {
    op_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int k = c >= 0x80 ? utf8_len((const unsigned char *)s) : 1;
        if (c == '"' || c == '\\') op_buf_printf(b, "\\%c", c);
        else if (c < 0x20) op_buf_printf(b, "\\u%04x", c);
        else if (!k) op_buf_printf(b, "\\ufffd"); /* not UTF-8 (a Latin-1 file name): JSON must be */
        else {
            op_buf_put(b, s, (size_t)k);
            s += k - 1;
        }
    }
    op_buf_put(b, "\"", 1);
}

void op_buf_free(op_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int op_parse_decimal(const char *s, size_t n, double *out) {
    char buf[64];
    if (!s || !n || n >= sizeof buf || isspace((unsigned char)s[0]) || memchr(s, 'x', n) ||
        memchr(s, 'X', n))
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end = NULL;
    errno = 0;
    double x = strtod(buf, &end);
    if (errno || end != buf + n || !isfinite(x)) return -1;
    *out = x == 0 ? 0 : x; /* "-0" is 0: run --bytes-scale -0 printed "message bytes x-0" */
    return 0;
}

int op_parse_long(const char *s, long *out) {
    if (!s || !*s || isspace((unsigned char)s[0])) return -1;
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = x;
    return 0;
}

double op_gap(double makespan_ms, double bound_ms) {
    if (!(bound_ms > 0)) return 0;
    double g = makespan_ms / bound_ms - 1;
    return g < 0 && g > -1e-12 ? 0 : g;
}

int op_gcd(int a, int b) {
    while (b) {
        int r = a % b;
        a = b, b = r;
    }
    return a;
}

double op_shown(double x) { return isnan(x) ? fabs(x) : x; }

const char *op_gib_text(double bytes, char *buf, size_t n) {
    const double g = bytes / 1073741824.0;
    snprintf(buf, n, fabs(g) >= 0.125 || g == 0 ? "%.2f" : "%.3g", g);
    return buf;
}

int op_read_file(const char *path, char **out, size_t *len, op_err *err) {
    FILE *f = fopen(path, "rb");
    /* '-' is standard output for every output flag, so users try it for inputs too: an input
     * is a file, and a pipe reaches one through /dev/stdin */
    if (!f && errno == ENOENT && !strcmp(path, "-"))
        return op_errf(err, OP_EIO, "-: no such file (inputs are files; '-' means standard output "
                       "for output flags only: read standard input as /dev/stdin)");
    if (!f) return op_errf(err, OP_EIO, "%s: cannot open: %s", path, strerror(errno));
    /* fopen succeeds on a directory and only the read fails: say what is wrong up front */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return op_errf(err, OP_EIO, "%s: is a directory", path);
    }
    const int stream = !(fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode));
    op_buf b = {0};
    char chunk[65536];
    size_t n;
    errno = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (stream && b.len + n > OP_MAX_STREAM_BYTES) {
            fclose(f);
            op_buf_free(&b);
            return op_errf(err, OP_EINVAL, "%s: more than %zu MiB from a pipe or device, with no end in "
                           "sight: not an input this tool reads", path, OP_MAX_STREAM_BYTES >> 20);
        }
        op_buf_put(&b, chunk, n);
    }
    int bad = ferror(f), e = errno; /* fclose may overwrite errno */
    fclose(f);
    if (bad) {
        op_buf_free(&b);
        return op_errf(err, OP_EIO, "%s: read error: %s", path, e ? strerror(e) : "unknown cause");
    }
    if (!b.data) op_buf_put(&b, "", 0);
    *out = b.data;
    if (len) *len = b.len;
    return OP_OK;
}

void op_rng_seed(op_rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 0x2545F4914F6CDD1Dull;
}
uint64_t op_rng_u64(op_rng *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
double op_rng_uniform(op_rng *r) { return (double)(op_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
int op_rng_int(op_rng *r, int n) { return n <= 1 ? 0 : (int)(op_rng_u64(r) % (uint64_t)n); }

double op_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int op_past(double deadline) { return deadline > 0 && op_now_s() > deadline; }

/* Edit distance (insert, delete, replace) of a[0..na) and b[0..nb), both under 64 chars. */
static int edit_distance(const char *a, int na, const char *b, int nb) {
    int row[65];
    for (int j = 0; j <= nb; j++) row[j] = j;
    for (int i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

const char *op_flag_suggest(const char *usage, const char *typed, char *out, size_t n) {
    if (n) out[0] = 0;
    if (!usage || !typed || strncmp(typed, "--", 2)) return out;
    int nt = (int)strcspn(typed, "="); /* "--device=4" is "--device" */
    if (nt < 3 || nt > 63) return out;
    /* candidates: closest by edit distance (at most a quarter of the name, at least 1, at most
     * 2), else the flags the typed one begins */
    int lim = nt / 4 < 1 ? 1 : nt / 4 > 2 ? 2 : nt / 4;
    const char *pick[2] = {0}, *pre[2] = {0};
    int plen[2] = {0}, prelen[2] = {0}, best = lim + 1, npre = 0;
    for (const char *p = strstr(usage, "--"); p; p = strstr(p + 2, "--")) {
        if (p > usage && (isalnum((unsigned char)p[-1]) || p[-1] == '-')) continue;
        int k = 2;
        while (isalnum((unsigned char)p[k]) || (p[k] == '-' && isalnum((unsigned char)p[k + 1]))) k++;
        if (k < 3 || k > 63 || (k == nt && !strncmp(p, typed, (size_t)nt))) continue;
        int dup = 0; /* a flag named twice in the text counts once */
        for (int i = 0; i < 2; i++)
            dup |= (pick[i] && plen[i] == k && !strncmp(pick[i], p, (size_t)k)) ||
                   (pre[i] && prelen[i] == k && !strncmp(pre[i], p, (size_t)k));
        if (dup) continue;
        int d = edit_distance(typed, nt, p, k);
        if (d < best) best = d, pick[0] = p, plen[0] = k, pick[1] = NULL;
        else if (d == best && !pick[1]) pick[1] = p, plen[1] = k;
        if (k > nt && !strncmp(p, typed, (size_t)nt)) {
            if (npre < 2) pre[npre] = p, prelen[npre] = k;
            npre++;
        }
    }
    const char **c = pick[0] ? pick : npre >= 1 && npre <= 2 ? pre : NULL;
    int *cl = pick[0] ? plen : prelen;
    if (!c) return out;
    if (c[1]) snprintf(out, n, ": did you mean %.*s or %.*s?", cl[0], c[0], cl[1], c[1]);
    else snprintf(out, n, ": did you mean %.*s?", cl[0], c[0]);
    return out;
}
