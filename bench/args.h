/* args.h: the benchmarks' command lines.  Every flag is one the program knows and every number
 * is checked whole, so a mistyped flag (`--efort 30`) or value (`--effort 3O`) stops at once
 * with the usage instead of running minutes of the defaults.  Header only: each benchmark is
 * one program of one file.
 *
 *   ba_args args = {"bench_mixed", "[--quick] [--filter TEXT] [--effort 1..1000]", argc, argv};
 *   while (ba_next(&args)) {
 *       if (ba_flag(&args, "--quick")) quick = 1;
 *       else if (ba_str(&args, "--filter", &filter)) {}
 *       else if (ba_long(&args, "--effort", 1, 1000, &effort)) {}
 *       else ba_unknown(&args);
 *   }
 *   if (ba_status(&args) >= 0) return ba_status(&args);   (2 refused, 0 after --help)
 */
#ifndef OCTOPIPE_BENCH_ARGS_H
#define OCTOPIPE_BENCH_ARGS_H
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "octopipe/common.h"

typedef struct ba_args {
    const char *prog, *usage; /* "bench_mixed", its options after the name */
    int argc;
    char **argv;
    int i;   /* the argument being read (0 before the first) */
    int bad;  /* 1 after a message: the caller exits 2 */
    int help; /* 1 after --help printed the usage: the caller exits 0 */
} ba_args;

/* Moves to the next argument; 0 at the end, once an argument was refused, or after --help
 * (-h), which prints the usage on stdout. */
static inline int ba_next(ba_args *a) {
    if (a->bad || a->help || ++a->i >= a->argc) return 0;
    if (!strcmp(a->argv[a->i], "--help") || !strcmp(a->argv[a->i], "-h")) {
        printf("usage: %s %s\n", a->prog, a->usage);
        a->help = 1;
        return 0;
    }
    return 1;
}

/* After the arguments: -1 to run, else the exit status (2 refused, 0 after --help). */
static inline int ba_status(const ba_args *a) { return a->bad ? 2 : a->help ? 0 : -1; }

/* Refuses the command line: "PROG: what is wrong" and the usage on stderr. */
__attribute__((format(printf, 2, 3))) static inline void ba_fail(ba_args *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", a->prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s %s\n", a->prog, a->usage);
    a->bad = 1;
}

/* 1 when the argument is flag (a switch without a value). */
static inline int ba_flag(ba_args *a, const char *flag) { return !strcmp(a->argv[a->i], flag); }

/* The value of `flag` (`--flag V` or `--flag=V`): NULL when the argument is another flag;
 * a missing value is refused (a->bad) and returns "". */
static inline const char *ba_value(ba_args *a, const char *flag) {
    const char *s = a->argv[a->i];
    size_t n = strlen(flag);
    if (strncmp(s, flag, n)) return NULL;
    if (s[n] == '=') return s + n + 1;
    if (s[n]) return NULL;
    if (a->i + 1 >= a->argc) {
        ba_fail(a, "%s needs a value", flag);
        return "";
    }
    return a->argv[++a->i];
}

/* 1 when the argument is `flag`, its value in *out (text as given). */
static inline int ba_str(ba_args *a, const char *flag, const char **out) {
    const char *v = ba_value(a, flag);
    if (!v) return 0;
    if (!a->bad) *out = v;
    return 1;
}

/* 1 when the argument is `flag`; its value, a whole number in [lo, hi], in *out, or refused. */
static inline int ba_long(ba_args *a, const char *flag, long lo, long hi, long *out) {
    const char *v = ba_value(a, flag);
    if (!v) return 0;
    long x;
    if (a->bad) return 1;
    if (op_parse_long(v, &x) != 0 || x < lo || x > hi)
        ba_fail(a, "%s needs a whole number from %ld to %ld (got '%.40s')", flag, lo, hi, v);
    else *out = x;
    return 1;
}

/* 1 when the argument is `flag`; its value, a number in [lo, hi], in *out, or refused. */
static inline int ba_double(ba_args *a, const char *flag, double lo, double hi, double *out) {
    const char *v = ba_value(a, flag);
    if (!v) return 0;
    double x;
    if (a->bad) return 1;
    if (op_parse_decimal(v, strlen(v), &x) != 0 || !(x >= lo && x <= hi))
        ba_fail(a, "%s needs a number from %g to %g (got '%.40s')", flag, lo, hi, v);
    else *out = x;
    return 1;
}

/* The argument is none of the program's: refused with the usage. */
static inline void ba_unknown(ba_args *a) { ba_fail(a, "unknown argument '%.60s'", a->argv[a->i]); }

#endif
