/* common.h: what every OctoPipe module shares: the two error tiers, checked allocation,
 * arenas, atomic file output and a seeded RNG.
 *
 * Error tiers:
 *  - impossible states (a bug): OP_ASSERT(cond, fmt, ...) prints file:line and aborts; never
 *    compiled out.
 *  - bad input (file, flag, value): functions return a negative code and fill an op_err with
 *    one line a user can act on ("plan.json:12:5: ...").  Callers print it and exit non-zero. */
#ifndef OCTOPIPE_COMMON_H
#define OCTOPIPE_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OP_OK 0
#define OP_EINVAL (-1) /* bad input */
#define OP_EIO (-2)    /* file system */
#define OP_EDEADLOCK (-3)
#define OP_ENOMEM (-4) /* does not fit a memory limit */
#define OP_ETIMEOUT (-5)
#define OP_EPEER (-6) /* another rank failed */

typedef struct op_err {
    int code;
    char msg[1024];
} op_err;

/* Formats msg into err (when err is non-NULL) and returns code. */
int op_errf(op_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes an existing message: "<prefix>: <old message>". Returns err->code. */
int op_err_prefix(op_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* C's _Noreturn is not C++: one spelling for both, so every header compiles as C++ too. */
#if defined(__cplusplus)
#define OP_NORETURN [[noreturn]]
#else
#define OP_NORETURN _Noreturn
#endif
OP_NORETURN void op_abort(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define OP_ASSERT(cond, ...) \
    do { if (!(cond)) op_abort(__FILE__, __LINE__, __VA_ARGS__); } while (0)

void *op_xmalloc(size_t n);
void *op_xcalloc(size_t n, size_t size);
void *op_xrealloc(void *p, size_t n);
char *op_xstrdup(const char *s);
/* Copies s into out[n] (n > 0) as snprintf "%s" does, then makes the result valid UTF-8: a
 * multi-byte character cut by the size limit is dropped whole, and a byte that starts no valid
 * sequence (a file name in Latin-1) becomes '?', as does each byte of a control character
 * (C0, DEL, C1).  Names copied into fixed buffers reach JSON and XML outputs (plan files,
 * traces, SVG), which must be UTF-8, and the terminal, where an escape sequence would act. */
void op_copy_name(char *out, size_t n, const char *s);
/* One character of user input, quoted for a message: "'x'" for printable ASCII, else "byte
 * 0xC3" (a stray byte of a multi-byte character would reach the terminal alone).  out holds
 * at least 12 bytes; returns out. */
const char *op_show_char(char c, char out[12]);

/* Arena: bump allocation in chunks; everything is freed at once by op_arena_free.
 * Memory from op_arena_alloc is zeroed and 16-byte aligned. */
typedef struct op_arena_chunk op_arena_chunk;
typedef struct op_arena {
    op_arena_chunk *head;
    size_t used_bytes; /* total handed out, for memory accounting */
} op_arena;
void *op_arena_alloc(op_arena *a, size_t n);
char *op_arena_strdup(op_arena *a, const char *s);
void op_arena_free(op_arena *a);
#define OP_ARENA_NEW(a, type, count) ((type *)op_arena_alloc((a), sizeof(type) * (size_t)(count)))

/* Writes len bytes to path by the output rules of octopipe/out.h (op_out_write): "-" is
 * stdout; regular files and new paths atomically (temp file beside it, fsync, rename; on
 * failure an old file stays as it was); devices, FIFOs and symlink targets in place. */
int op_write_file_atomic(const char *path, const void *data, size_t len, op_err *err);

/* A growable byte buffer for building output (JSON, CSV, SVG) before the atomic write. */
typedef struct op_buf {
    char *data;
    size_t len, cap;
} op_buf;
void op_buf_printf(op_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void op_buf_put(op_buf *b, const void *data, size_t n);
void op_buf_free(op_buf *b);
/* Appends s as a JSON string, quotes included: '"' and '\\' escaped, control characters as
 * \u00XX.  Names come from input files (a plan's "name" may hold any of them). */
void op_buf_json_str(op_buf *b, const char *s);

/* The first n characters of s as a finite decimal number (strtod's syntax without its hex:
 * "0x10" would be 16, and a flag's value never means that).  0, or -1 when they are not one
 * (empty, trailing text, out of range).  s may be NULL (-1). */
int op_parse_decimal(const char *s, size_t n, double *out);

/* s as a whole decimal number: 0, or -1 when it is not one (NULL, empty, leading space, which
 * strtol skips while trailing space is refused, trailing text, or beyond a long). */
int op_parse_long(const char *s, long *out);

/* bytes as GiB for messages: two decimals ("72.00"), or three significant digits below an
 * eighth of a GiB, where two decimals would print a limit of 1 MiB as "0.00".  Returns buf. */
const char *op_gib_text(double bytes, char *buf, size_t n);
/* makespan / bound - 1 (0 where bound <= 0), and 0 where the two differ by rounding alone: a
 * bound summed in another order than the makespan came out 1 ulp above it (one device: the
 * bound is the work itself), and the gap read "-0.00%". */
double op_gap(double makespan_ms, double bound_ms);
/* Greatest common divisor of a, b >= 0 (gcd(0, b) = b; 0 when both are 0). */
int op_gcd(int a, int b);
/* x for printf: a NaN without its sign bit.  The sign of a NaN is whatever the arithmetic that
 * made it left (the same diverged run printed "nan" on one CPU and "-nan" on another, since
 * OpenBLAS picks its kernels per CPU), and "-nan" means nothing more than "nan". */
double op_shown(double x);
/* The flags of a usage text (every "--name" in it) closest to one a user typed: those within
 * a small edit distance ("--microbatch" -> --microbatches), else those it begins ("--megatron"
 * -> --megatron-layout); at most two, written as ": did you mean --a?" or ": did you mean --a
 * or --b?" into out, or "" when none is close. */
const char *op_flag_suggest(const char *usage, const char *typed, char *out, size_t n);

/* Most an input that is not a regular file (a pipe, /dev/stdin, a device) may hold: a regular
 * file has a size and ends, /dev/zero does not (it grew memory until the machine ran out). */
#define OP_MAX_STREAM_BYTES ((size_t)1 << 30)

/* Reads a whole file into a NUL-terminated malloc'd buffer (a stream: at most
 * OP_MAX_STREAM_BYTES, else an error naming the path). */
int op_read_file(const char *path, char **out, size_t *len, op_err *err);

/* Deterministic RNG (splitmix64 seeded xorshift64*). */
typedef struct op_rng {
    uint64_t s;
} op_rng;
void op_rng_seed(op_rng *r, uint64_t seed);
uint64_t op_rng_u64(op_rng *r);
double op_rng_uniform(op_rng *r);            /* [0, 1) */
int op_rng_int(op_rng *r, int n);            /* [0, n) */

/* Monotonic wall clock in seconds. */
double op_now_s(void);
/* 1 once op_now_s() is past deadline (an op_now_s() time); 0 for deadline <= 0 (none). */
int op_past(double deadline);

#ifdef __cplusplus
}
#endif
#endif
