#!/usr/bin/env bash
# Runs every test binary ($BUILD/tests/test_*) and shell test (tests/sh_*.sh), each under a
# timeout, and sums their closing "N passed, N failed" lines.  A binary that crashes, times out
# or prints no closing line counts as one failed test.  Optional argument: a name filter.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FILTER=${1:-}
export BUILD OCTOPIPE=${OCTOPIPE:-$BUILD/octopipe}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# Under SAN=1 leaks are checked, except in tests that start MPI ranks: Open MPI's own
# allocations stay reachable only through its internals, so LeakSanitizer flags them in every
# rank.  Such tests carry the marker OCTOPIPE_SAN_NO_LEAK_CHECK in their source.
san_opts() {
  # SAN=thread: a report makes the binary exit 66 (a failure); suppressions for third-party
  # libraries only (tests/tsan.supp)
  if [ "${SAN:-}" = thread ]; then export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"; return 0; fi
  [ "${SAN:-}" = 1 ] || return 0
  local src="tests/$1.c"; [ -e "$src" ] || src="tests/$1.sh"
  if grep -q OCTOPIPE_SAN_NO_LEAK_CHECK "$src" 2>/dev/null; then export ASAN_OPTIONS=detect_leaks=0
  else export ASAN_OPTIONS=detect_leaks=1; fi
}
logdir=$BUILD/test-logs; mkdir -p "$logdir"
total_p=0; total_f=0; failed_units=(); skipped=()
start_all=$(date +%s)
# binaries only for sources that exist: a stale binary of a removed test must not run
for t in tests/test_*.c tests/sh_*.sh; do
  [ -e "$t" ] || continue
  case "$t" in *.c) t="$BUILD/tests/$(basename "$t" .c)";; esac
  name=$(basename "$t"); name=${name%.sh}
  [ -n "$FILTER" ] && [[ "$name" != *"$FILTER"* ]] && continue
  log="$logdir/$name.log"
  san_opts "$name"
  t0=$(date +%s.%N)
  if [[ "$t" == *.sh ]]; then timeout -k 10 600 bash "$t" >"$log" 2>&1; rc=$?
  else timeout -k 10 600 "$t" >"$log" 2>&1; rc=$?; fi
  t1=$(date +%s.%N)
  line=$(grep -E '^[A-Za-z0-9_-]*:? ?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  p=$(echo "$line" | sed -nE 's/^(.*[^0-9])?([0-9]+) passed, ([0-9]+) failed.*/\2/p')
  f=$(echo "$line" | sed -nE 's/^(.*[^0-9])?([0-9]+) passed, ([0-9]+) failed.*/\3/p')
  [ -z "$p" ] && p=0
  [ -z "$f" ] && f=0
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  total_p=$((total_p + p)); total_f=$((total_f + f))
  printf '%-28s %4d passed %3d failed  %6.1fs%s\n' "$name" "$p" "$f" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" \
    "$([ "$rc" -ne 0 ] && echo "  (exit $rc, log: $log)")"
  # a test that could not run something says "skip: why" on a line of its own
  while IFS= read -r sk; do skipped+=("$name: ${sk#skip: }"); done < <(grep -E '^skip: ' "$log")
  if [ "$f" -ne 0 ]; then failed_units+=("$name"); grep -E 'FAIL|CHECK failed|ERROR|error' "$log" | head -n 20 | sed 's/^/    /'; fi
done
echo "total time: $(( $(date +%s) - start_all ))s"
if [ ${#skipped[@]} -gt 0 ]; then
  echo "SKIPPED, not run (where a tool is missing, scripts/setup.sh --test installs it):"
  printf '  %s\n' "${skipped[@]}"
fi
[ ${#failed_units[@]} -gt 0 ] && echo "failing: ${failed_units[*]}"
echo "tests: $total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
