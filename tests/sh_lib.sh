#!/usr/bin/env bash
# sh_lib.sh: OctoPipe as a library people link.  `make install` into a temporary prefix (and
# with DESTDIR), then, against that installed tree only: the file layout (static library,
# shared library with its SONAME and links, headers, octopipe.pc), every header compiled alone
# as C17 and as C++, the examples built with the README's link lines (shared, static, C++),
# run, and their 1F1B and tuned makespans checked against `octopipe compare` on the same
# problem (the library's op_problem_build must build what the CLI builds).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OCTOPIPE=${OCTOPIPE:-$BUILD/octopipe}
CC=${CC:-cc}
case "$CC" in *clang*) CXX=${CXX:-clang++} ;; *) CXX=${CXX:-c++} ;; esac
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
finish() { echo "sh_lib: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/octopipe-lib-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# programs here build warning-free; under SAN=1 or SAN=thread the installed library is the
# sanitized one, so they need the sanitizer runtime too
XFLAGS="-Wall -Wextra -Werror"
[ "${SAN:-}" = 1 ] && XFLAGS="$XFLAGS -fsanitize=address,undefined"
[ "${SAN:-}" = thread ] && XFLAGS="$XFLAGS -fsanitize=thread"
# a make started here is not part of the make running the tests
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="$BUILD" SAN="${SAN:-}" CC="$CC" "$@"; }

# --- install -------------------------------------------------------------------------------
P=$tmp/prefix
if mk install PREFIX="$P" >"$tmp/install.log" 2>&1; then ok; else bad "make install: $(tail -n 5 "$tmp/install.log")"; finish; fi
V=$(sed -n 's/^#define OCTOPIPE_VERSION "\(.*\)"$/\1/p' include/octopipe/version.h)
MAJ=${V%%.*}
for f in bin/octopipe lib/liboctopipe.a "lib/liboctopipe.so.$V" include/octopipe/octopipe.h \
         include/octopipe/problem.h include/octopipe/version.h lib/pkgconfig/octopipe.pc; do
  [ -f "$P/$f" ] && ok || bad "not installed: $f"
done
[ "$(readlink "$P/lib/liboctopipe.so.$MAJ")" = "liboctopipe.so.$V" ] && ok || bad "SONAME link liboctopipe.so.$MAJ"
[ "$(readlink "$P/lib/liboctopipe.so")" = "liboctopipe.so.$MAJ" ] && ok || bad "dev link liboctopipe.so"
readelf -d "$P/lib/liboctopipe.so.$V" >"$tmp/dyn" 2>&1
grep -q "SONAME.*\[liboctopipe.so.$MAJ\]" "$tmp/dyn" && ok || bad "SONAME is not liboctopipe.so.$MAJ: $(grep SONAME "$tmp/dyn")"
for dep in libjansson libopenblas libmpi; do
  grep -q "NEEDED.*\[$dep" "$tmp/dyn" && ok || bad "liboctopipe.so does not record its dependency $dep"
done
[ "$("$P/bin/octopipe" --version)" = "octopipe $V" ] && ok || bad "installed octopipe --version: $("$P/bin/octopipe" --version)"

# a packager's install: DESTDIR stages, the paths inside name the final PREFIX
if mk install PREFIX=/usr DESTDIR="$tmp/stage" >"$tmp/stage.log" 2>&1 \
   && [ -f "$tmp/stage/usr/lib/liboctopipe.so.$V" ] \
   && grep -qx 'prefix=/usr' "$tmp/stage/usr/lib/pkgconfig/octopipe.pc"; then ok
else bad "make install DESTDIR: $(tail -n 3 "$tmp/stage.log")"; fi

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
[ "$(pkg-config --modversion octopipe)" = "$V" ] && ok || bad "pkg-config --modversion: $(pkg-config --modversion octopipe 2>&1)"
pkg-config --static --libs octopipe | grep -q -- '-ljansson' && ok || bad "pkg-config --static lacks the private dependencies"

# --- headers: each alone, as C17 and as C++ --------------------------------------------------
CFL=$(pkg-config --cflags octopipe)
for h in "$P"/include/octopipe/*.h; do
  n=octopipe/$(basename "$h")
  printf '#include <%s>\n' "$n" | $CC -std=c17 -Wall -Wextra -Werror $CFL -fsyntax-only -x c - 2>"$tmp/h.err" \
    && ok || bad "$n as C17: $(head -n 3 "$tmp/h.err")"
  printf '#include <%s>\n' "$n" | $CXX -std=c++17 -Wall -Wextra -Werror $CFL -fsyntax-only -x c++ - 2>"$tmp/h.err" \
    && ok || bad "$n as C++17: $(head -n 3 "$tmp/h.err")"
done
# the version macros and op_version() agree
cat >"$tmp/ver.c" <<'EOF'
#include <octopipe/octopipe.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    printf("%s %d\n", op_version(), OCTOPIPE_VERSION_NUMBER);
    return strcmp(op_version(), OCTOPIPE_VERSION) != 0;
}
EOF
$CC $XFLAGS "$tmp/ver.c" $(pkg-config --cflags --libs octopipe) -o "$tmp/ver" 2>"$tmp/cc.err" \
  && LD_LIBRARY_PATH="$P/lib" "$tmp/ver" >"$tmp/ver.out" \
  && [ "$(cat "$tmp/ver.out")" = "$V $(( ${V%%.*} * 10000 + $(echo "$V" | cut -d. -f2) * 100 + ${V##*.} ))" ] \
  && ok || bad "version program: $(cat "$tmp/cc.err" "$tmp/ver.out" 2>/dev/null | head -n 3)"

# --- the examples, with the README's link lines ------------------------------------------------
# shared (the default line), static (liboctopipe.a + its private dependencies), C++
$CC $XFLAGS examples/plan.c $(pkg-config --cflags --libs octopipe) -o "$tmp/plan_shared" 2>"$tmp/cc.err" \
  && ok || bad "C example, shared link: $(head -n 5 "$tmp/cc.err")"
$CC $XFLAGS examples/plan.c $(pkg-config --cflags octopipe) "$(pkg-config --variable=libdir octopipe)/liboctopipe.a" \
  -Wl,--as-needed $(pkg-config --static --libs octopipe) -o "$tmp/plan_static" 2>"$tmp/cc.err" \
  && ok || bad "C example, static link: $(head -n 5 "$tmp/cc.err")"
$CXX $XFLAGS examples/plan.cpp $(pkg-config --cflags --libs octopipe) -o "$tmp/plan_cpp" 2>"$tmp/cc.err" \
  && ok || bad "C++ example: $(head -n 5 "$tmp/cc.err")"
# the shared builds load the installed library; the static one needs none
LD_LIBRARY_PATH="$P/lib" ldd "$tmp/plan_shared" 2>&1 | grep -q "liboctopipe.so.$MAJ => $P/lib/" \
  && ok || bad "plan_shared does not load $P/lib/liboctopipe.so.$MAJ"
readelf -d "$tmp/plan_static" 2>/dev/null | grep -q 'NEEDED.*liboctopipe' \
  && bad "the static build still needs liboctopipe.so" || ok

# reference: the CLI on the same problem (deterministic: seed 1, no time budget)
MODEL=nemotron-h-8b DEV=4 MB=8
"$OCTOPIPE" compare --model $MODEL --devices $DEV --microbatches $MB --json >"$tmp/ref.json" 2>"$tmp/ref.err" \
  && ok || bad "compare: $(head -n 3 "$tmp/ref.err")"
ref() { jq -r --arg n "$1" '.plans[] | select(.name == $n) | .makespan_ms' "$tmp/ref.json"; }
ref_1f1b=$(ref 1f1b); ref_tuned=$(ref octopipe)
# same makespan to the printed 6 decimals (relative 1e-9 of ~1 s)
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-6 + 1e-9 * b) }'; }
for ex in plan_shared plan_static plan_cpp; do
  if ! LD_LIBRARY_PATH="$P/lib" "$tmp/$ex" $MODEL $DEV $MB >"$tmp/$ex.out" 2>"$tmp/$ex.err"; then
    bad "$ex: exit $?: $(head -n 3 "$tmp/$ex.err")"; continue
  fi
  ms() { awk -v n="$1" '$1 == n { for (i = 1; i < NF; i++) if ($i == "makespan_ms") print $(i + 1) }' "$tmp/$ex.out"; }
  got_1f1b=$(ms 1f1b); got_tuned=$(ms octopipe)
  same "$got_1f1b" "$ref_1f1b" && ok || bad "$ex: 1f1b makespan $got_1f1b, compare says $ref_1f1b"
  same "$got_tuned" "$ref_tuned" && ok || bad "$ex: tuned makespan $got_tuned, compare says $ref_tuned"
  awk -v t="$got_tuned" -v b="$got_1f1b" 'BEGIN { exit !(t > 0 && t <= b) }' && ok || bad "$ex: tuned $got_tuned slower than 1f1b $got_1f1b"
  grep -q "^octopipe $V.*$MODEL, 54 layers on $DEV x h100-80gb, $MB microbatches" "$tmp/$ex.out" \
    && ok || bad "$ex header: $(head -n 1 "$tmp/$ex.out")"
done
# C and C++ print the same plans
diff <(tail -n +2 "$tmp/plan_shared.out") <(tail -n +2 "$tmp/plan_cpp.out") >/dev/null 2>&1 \
  && ok || bad "C and C++ examples differ"

# bad input through the library: one message, exit 2, no abort (C and C++)
for ex in plan_shared plan_cpp; do
  LD_LIBRARY_PATH="$P/lib" "$tmp/$ex" no-such-model 4 8 >/dev/null 2>"$tmp/e.err"; rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/e.err")" -eq 1 ] && grep -q 'no-such-model' "$tmp/e.err" \
    && ok || bad "$ex unknown model: exit $rc: $(head -n 3 "$tmp/e.err")"
  LD_LIBRARY_PATH="$P/lib" "$tmp/$ex" $MODEL 0 8 >/dev/null 2>"$tmp/e.err"; rc=$?
  [ $rc -eq 2 ] && grep -q 'devices must be at least 1' "$tmp/e.err" \
    && ok || bad "$ex 0 devices: exit $rc: $(head -n 3 "$tmp/e.err")"
done
finish
