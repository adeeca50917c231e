#!/usr/bin/env bash
# sh_make.sh: the Makefile's order on a fresh machine.  mpicc and pkg-config must only be asked
# for flags by the inner make (OP_STAGE=build), which starts after scripts/setup.sh has
# installed them: a flag read when the outer make parses the file is empty on a machine
# without the packages, and the first build fails.  Wrappers in front of the real tools log
# who calls them; dry runs (make -n) check the order, the SAN flags and the public targets.
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
finish() { echo "sh_make: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/octopipe-make-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
for tool in mpicc pkg-config; do
  real=$(command -v $tool) || { bad "$tool not installed (scripts/setup.sh installs it)"; continue; }
  # logs the command lines of its parent and grandparent: the make that asked is one of them
  cat >"$tmp/bin/$tool" <<WRAP
#!/bin/sh
gp=\$(awk '{print \$4}' /proc/\$PPID/stat)
echo "$tool [\$(tr '\\0' ' ' </proc/\$PPID/cmdline)] [\$(tr '\\0' ' ' </proc/\$gp/cmdline)]" >> "$tmp/calls"
exec "$real" "\$@"
WRAP
  chmod +x "$tmp/bin/$tool"
done
# a make started here is not part of the make running the tests
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PATH="$tmp/bin:$PATH" make --no-print-directory "$@"; }

# the outer make alone (a target that does not recurse) never asks
: >"$tmp/calls"
mk -n deps >/dev/null 2>&1
[ ! -s "$tmp/calls" ] && ok || bad "the outer make asked for flags: $(head -n 2 "$tmp/calls")"
mk -n clean >/dev/null 2>&1
[ ! -s "$tmp/calls" ] && ok || bad "make clean asked for flags: $(head -n 2 "$tmp/calls")"

# a build: setup first, then every flag query from the inner make
: >"$tmp/calls"
if mk -n all BUILD="$tmp/b" >"$tmp/all.out" 2>&1; then ok; else bad "make -n all: $(tail -n 3 "$tmp/all.out")"; fi
grep -q -- "-c src/plan/problem.c" "$tmp/all.out" && ok || bad "make -n all compiles nothing"
[ -s "$tmp/calls" ] && ok || bad "no flag query seen (wrappers not used?)"
if grep -v 'OP_STAGE=build' "$tmp/calls" >"$tmp/outer"; then bad "flags read before setup: $(head -n 2 "$tmp/outer")"; else ok; fi
first_setup=$(grep -n 'scripts/setup.sh' "$tmp/all.out" | head -n 1 | cut -d: -f1)
first_cc=$(grep -n -- ' -c ' "$tmp/all.out" | head -n 1 | cut -d: -f1)
[ -n "$first_setup" ] && [ -n "$first_cc" ] && [ "$first_setup" -lt "$first_cc" ] && ok \
  || bad "setup.sh is not run before the first compile (lines ${first_setup:-none} and ${first_cc:-none})"
# with -j2 too: one public target at a time, setup before the inner make
if mk -n -j2 test BUILD="$tmp/b" >"$tmp/j2.out" 2>&1; then ok; else bad "make -n -j2 test: $(tail -n 3 "$tmp/j2.out")"; fi
head -n 1 "$tmp/j2.out" | grep -q 'scripts/setup.sh --test' && ok || bad "make test does not start with setup.sh --test: $(head -n 1 "$tmp/j2.out")"

# SAN=1 catches float-to-integer overflow too (not part of gcc's -fsanitize=undefined)
mk -n all SAN=1 BUILD="$tmp/s" >"$tmp/san.out" 2>&1
grep -q -- '-fsanitize=address,undefined,float-cast-overflow' "$tmp/san.out" && ok || bad "SAN=1 flags lack float-cast-overflow"
# the shared library gets its SONAME, the version from version.h
V=$(sed -n 's/^#define OCTOPIPE_VERSION "\(.*\)"$/\1/p' include/octopipe/version.h)
grep -q -- "-Wl,-soname,liboctopipe.so.${V%%.*} .*-o $tmp/b/liboctopipe.so.$V" "$tmp/all.out" && ok \
  || bad "no liboctopipe.so.$V with SONAME liboctopipe.so.${V%%.*} in make -n all"
finish
