/* test_util.c: arenas, buffers, atomic writes, RNG determinism. */
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "octopipe/common.h"

TEST(arena_zeroed_aligned) {
    op_arena a = {0};
    for (int i = 1; i < 1000; i += 37) {
        unsigned char *p = op_arena_alloc(&a, (size_t)i);
        CHECK(((uintptr_t)p & 15) == 0);
        for (int j = 0; j < i; j++) CHECK(p[j] == 0);
        memset(p, 0xab, (size_t)i);
    }
    void *big = op_arena_alloc(&a, 1 << 20);
    CHECK(big != NULL);
    op_arena_free(&a);
    CHECK(a.head == NULL);
}

TEST(buf_printf_grows) {
    op_buf b = {0};
    for (int i = 0; i < 1000; i++) op_buf_printf(&b, "%d,", i);
    CHECK(b.len > 3000);
    CHECK(!strncmp(b.data, "0,1,2,", 6));
    char longs[1000];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = 0;
    op_buf_printf(&b, "%s", longs);
    CHECK(b.data[b.len - 1] == 'x' && b.data[b.len] == 0);
    op_buf_free(&b);
}

TEST(atomic_write_and_read) {
    char dir[] = "/tmp/octopipe-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/f.txt", dir);
    op_err e = {0};
    CHECK(op_write_file_atomic(path, "hello", 5, &e) == OP_OK);
    char *txt = NULL;
    size_t n = 0;
    CHECK(op_read_file(path, &txt, &n, &e) == OP_OK);
    CHECK(n == 5 && !strcmp(txt, "hello"));
    free(txt);
    /* a directory that does not exist: error, nothing written */
    snprintf(path, sizeof path, "%s/nodir/f.txt", dir);
    CHECK(op_write_file_atomic(path, "x", 1, &e) == OP_EIO);
    CHECK_STR_CONTAINS(e.msg, "nodir/f.txt");
    /* a directory where a file is expected says so, not "read error" */
    CHECK(op_read_file(dir, &txt, &n, &e) == OP_EIO);
    CHECK_STR_CONTAINS(e.msg, ": is a directory");
    CHECK(strstr(e.msg, dir) == e.msg);
    snprintf(path, sizeof path, "%s/f.txt", dir);
    unlink(path);
    rmdir(dir);
}

TEST(rng_deterministic) {
    op_rng a, b;
    op_rng_seed(&a, 42);
    op_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) CHECK(op_rng_u64(&a) == op_rng_u64(&b));
    op_rng_seed(&b, 43);
    CHECK(op_rng_u64(&a) != op_rng_u64(&b));
    double s = 0;
    for (int i = 0; i < 10000; i++) s += op_rng_uniform(&a);
    CHECK_NEAR(s / 10000, 0.5, 0.02);
}

/* flag values: whole and decimal numbers, nothing strtol/strtod would also take */
TEST(parse_numbers) {
    long x = 7;
    CHECK(op_parse_long("42", &x) == 0 && x == 42);
    CHECK(op_parse_long("-3", &x) == 0 && x == -3);
    x = 7;
    CHECK(op_parse_long(" 4", &x) == -1 && x == 7);
    CHECK(op_parse_long("4 ", &x) == -1);
    CHECK(op_parse_long("", &x) == -1);
    CHECK(op_parse_long(NULL, &x) == -1);
    CHECK(op_parse_long("4k", &x) == -1);
    CHECK(op_parse_long("99999999999999999999999", &x) == -1 && x == 7);
    double d = 1;
    CHECK(op_parse_decimal("2.5", 3, &d) == 0 && d == 2.5);
    CHECK(op_parse_decimal(" 2.5", 4, &d) == -1);
    CHECK(op_parse_decimal("0x10", 4, &d) == -1);
    CHECK(op_parse_decimal("1e999", 5, &d) == -1 && d == 2.5);
}

/* Names and error lines: valid UTF-8 one line long; control characters from an input file (an
 * escape sequence in a plan's device type name, a config's key) become '?' before they reach a
 * terminal. */
TEST(names_and_errors_scrubbed) {
    char out[32];
    op_copy_name(out, sizeof out, "h1\x1b[2J00\nx\x7f");
    CHECK_MSG(!strcmp(out, "h1?[2J00?x?"), "got %s", out);
    op_copy_name(out, sizeof out, "a\xc2\x9b" "31mb\xc2\xa0" "c"); /* C1 CSI as UTF-8; U+00A0 stays */
    CHECK_MSG(!strcmp(out, "a??31mb\xc2\xa0" "c"), "got %s", out);
    op_copy_name(out, sizeof out, "caf\xe9"); /* Latin-1 as before */
    CHECK_MSG(!strcmp(out, "caf?"), "got %s", out);
    op_err e = {0};
    CHECK_EQ_INT(op_errf(&e, OP_EINVAL, "unknown key \"%s\"", "k\x1b]0;t\x07"), OP_EINVAL);
    CHECK_MSG(!strcmp(e.msg, "unknown key \"k?]0;t?\""), "got %s", e.msg);
    op_err_prefix(&e, "%s", "f\tile.json");
    CHECK_MSG(!strcmp(e.msg, "f?ile.json: unknown key \"k?]0;t?\""), "got %s", e.msg);
}

/* a gap of rounding alone is 0; a real one (either sign) stays as it is */
TEST(gap) {
    CHECK(op_gap(1408.4, 1408.4 * (1 + 2.2e-16)) == 0);
    CHECK_NEAR(op_gap(110, 100), 0.1, 1e-15);
    CHECK_NEAR(op_gap(99, 100), -0.01, 1e-15); /* a bound above a plan must show */
    CHECK(op_gap(5, 0) == 0);
}

/* GiB in messages: two decimals, and three significant digits where those would read 0.00 */
TEST(gcd) {
    CHECK_EQ_INT(op_gcd(12, 18), 6);
    CHECK_EQ_INT(op_gcd(18, 12), 6);
    CHECK_EQ_INT(op_gcd(0, 64), 64); /* the fold's start: gcd over a list begins at 0 */
    CHECK_EQ_INT(op_gcd(64, 0), 64);
    CHECK_EQ_INT(op_gcd(0, 0), 0);
    CHECK_EQ_INT(op_gcd(7, 5), 1);
}

TEST(gib_text) {
    char b[32];
    CHECK(!strcmp(op_gib_text(72.0 * 1073741824.0, b, sizeof b), "72.00"));
    CHECK(!strcmp(op_gib_text(0.125 * 1073741824.0, b, sizeof b), "0.12"));
    CHECK(!strcmp(op_gib_text(0.001 * 1073741824.0, b, sizeof b), "0.001"));
    CHECK(!strcmp(op_gib_text(1048576.0, b, sizeof b), "0.000977"));
    CHECK(!strcmp(op_gib_text(0, b, sizeof b), "0.00"));
}

/* An unknown flag gets the closest ones its usage text names: by edit distance first, else the
 * flags it begins; "--name=value" is "--name"; nothing when none is close, or for a flag the
 * text has (a misplaced one, not a typo), and a flag named twice counts once. */
TEST(flag_suggest) {
    const char *usage = "usage: x --devices P --microbatches M [--device-sweep] [--out FILE]\n"
                        "  --megatron-layout [FILE]  --mem-limit GiB  --mem-sweep\n"
                        "  --out FILE  (again)  --json  --jsonl\n";
    char b[128];
#define SUGGEST(t) op_flag_suggest(usage, t, b, sizeof b)
    CHECK_MSG(!strcmp(SUGGEST("--device"), ": did you mean --devices?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--device=4"), ": did you mean --devices?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--microbatch"), ": did you mean --microbatches?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--megatron"), ": did you mean --megatron-layout?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--mem-limt"), ": did you mean --mem-limit?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--jsn"), ": did you mean --json?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--mem"), ": did you mean --mem-limit or --mem-sweep?"), "%s", b);
    CHECK_MSG(!strcmp(SUGGEST("--ot"), ": did you mean --out?"), "%s", b);
    CHECK(!strcmp(SUGGEST("--zzzzzz"), ""));
    CHECK(!strcmp(SUGGEST("--json"), ": did you mean --jsonl?")); /* not itself */
    CHECK(!strcmp(SUGGEST("-x"), ""));
    CHECK(!strcmp(op_flag_suggest(NULL, "--device", b, sizeof b), ""));
    CHECK(!strcmp(op_flag_suggest(usage, "--device", b, 1), "")); /* no room: empty, in bounds */
#undef SUGGEST
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(arena_zeroed_aligned);
    RUN(buf_printf_grows);
    RUN(atomic_write_and_read);
    RUN(rng_deterministic);
    RUN(parse_numbers);
    RUN(names_and_errors_scrubbed);
    RUN(gap);
    RUN(gcd);
    RUN(gib_text);
    RUN(flag_suggest);
    return check_report("util");
}
