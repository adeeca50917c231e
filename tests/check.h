/* check.h: the project's test harness.  One binary per tests/test_<topic>.c.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_NEAR(a, b, 1e-9); }
 *   int main(int argc, char **argv) { RUN(name); ...; return check_report("topic"); }
 *
 * A test passes when none of its CHECKs failed.  The binary's last line is
 * "<topic>: N passed, N failed" and it exits non-zero when any test failed.
 * `./test_x NAME` runs only the tests whose name contains NAME. */
#ifndef OCTOPIPE_TESTS_CHECK_H
#define OCTOPIPE_TESTS_CHECK_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_tests_passed, check_tests_failed, check_cur_failed;
static const char *check_filter;

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            check_cur_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) {                                                              \
            check_cur_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                          \
    do {                                                                            \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);             \
        if (check_a_ != check_b_) {                                                 \
            check_cur_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n",       \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_);                \
        }                                                                           \
    } while (0)

/* |a-b| <= tol * max(1, |b|) */
#define CHECK_NEAR(a, b, tol)                                                       \
    do {                                                                            \
        double check_a_ = (double)(a), check_b_ = (double)(b);                      \
        double check_s_ = fabs(check_b_) > 1.0 ? fabs(check_b_) : 1.0;              \
        if (!(fabs(check_a_ - check_b_) <= (tol) * check_s_)) {                     \
            check_cur_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s ~= %s (%.9g vs %.9g, tol %g)\n", \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_, (double)(tol)); \
        }                                                                           \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                             \
    do {                                                                            \
        const char *check_h_ = (hay), *check_n_ = (needle);                         \
        if (!check_h_ || !strstr(check_h_, check_n_)) {                            \
            check_cur_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: \"%s\" contains \"%s\"\n",        \
                    __FILE__, __LINE__, check_h_ ? check_h_ : "(null)", check_n_);  \
        }                                                                           \
    } while (0)

#define RUN(name)                                                                   \
    do {                                                                            \
        if (check_filter && !strstr(#name, check_filter)) break;                   \
        check_cur_failed = 0;                                                       \
        name();                                                                     \
        if (check_cur_failed) {                                                     \
            check_tests_failed++;                                                   \
            fprintf(stderr, "FAIL %s\n", #name);                                    \
        } else {                                                                    \
            check_tests_passed++;                                                   \
        }                                                                           \
    } while (0)

#define CHECK_INIT(argc, argv) (check_filter = (argc) > 1 ? (argv)[1] : NULL)

static inline int check_report(const char *topic) {
    printf("%s: %d passed, %d failed\n", topic, check_tests_passed, check_tests_failed);
    fflush(stdout);
    return check_tests_failed ? 1 : 0;
}
#endif
