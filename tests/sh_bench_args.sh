#!/usr/bin/env bash
# The benchmarks' command lines (bench/args.h): a flag a benchmark does not know, or a value out
# of its range, stops it at once with its usage and exit 2 (a typo must not run minutes of the
# defaults), --help prints the usage and exits 0, and a flag it knows is taken as given.
set -u
. "$(dirname "$0")/lib.sh"
B=${BUILD:-build}/bench
benches=(bench_baselines bench_exec bench_memory bench_mixed bench_model bench_model_accuracy
         bench_model_mixed bench_plan bench_sim)
for b in "${benches[@]}"; do
  [ -x "$B/$b" ] || { bad "$B/$b not built (make tests-build builds the benchmarks)"; continue; }
  timeout -k 5 20 "$B/$b" --bogus > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q "^$b: unknown argument '--bogus'" "$tmp/err" &&
    grep -q "^usage: $b" "$tmp/err" && ok || bad "$b --bogus: rc=$rc $(head -c 300 "$tmp/err")"
  timeout -k 5 20 "$B/$b" --help > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc -eq 0 ] && grep -q "^usage: $b" "$tmp/out" && [ ! -s "$tmp/err" ] && ok ||
    bad "$b --help: rc=$rc $(head -c 300 "$tmp/out" "$tmp/err")"
done

# values: whole numbers whole, within the range the usage names; a flag's value present
refuse() { # refuse EXPECTED-TEXT BENCH ARGS...: exit 2 before any table, EXPECTED-TEXT on stderr
  local want=$1 b=$2; shift 2
  timeout -k 5 20 "$B/$b" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -qF -- "$want" "$tmp/err" && ok ||
    bad "$b $*: rc=$rc want '$want', got $(head -c 300 "$tmp/err")"
}
refuse "--effort needs a whole number from 1 to 1000 (got '3x')" bench_mixed --effort 3x
refuse "--effort needs a whole number from 1 to 1000 (got '0')" bench_mixed --effort=0
refuse "--effort needs a value" bench_mixed --quick --effort
refuse "--effort needs a whole number from 1 to 1000 (got '1001')" bench_memory --effort 1001
refuse "--seed needs a whole number" bench_memory --seed -1
refuse "--repeats needs a whole number from 3 to 100000 (got '2')" bench_model --repeats 2
refuse "--rounds needs a whole number from 5 to 254 (got '300')" bench_model_mixed --rounds 300
refuse "--quiet needs a number from 0 to 1 (got 'x')" bench_model_mixed --quiet x
refuse "--fit is speed, ops or overhead" bench_model_accuracy --fit spd
refuse "--profile-clock is cpu or wall" bench_model_accuracy --profile-clock gpu
refuse "unknown argument '--quick=1'" bench_plan --quick=1
refuse "unknown argument 'extra'" bench_plan --quick extra
# EXEC_P sets one pipeline size: 0 looped for ever at P = 0 (P *= 2)
EXEC_P=0 timeout -k 5 20 "$B/bench_exec" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF "EXEC_P needs a whole number from 2 to 64 (got '0')" "$tmp/err" && ok ||
  bad "EXEC_P=0 bench_exec: rc=$rc $(head -c 300 "$tmp/err")"

# what it knows is taken: bench_baselines reads the peers file named
echo '{"cases": []}' > "$tmp/peers.json"
timeout -k 5 60 "$B/bench_baselines" "$tmp/peers.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] && grep -qF "($tmp/peers.json, --comm none)" "$tmp/out" &&
  grep -q "^baselines: [1-9][0-9]* passed, 0 failed" "$tmp/out" && ok ||
  bad "bench_baselines FILE: rc=$rc $(tail -c 300 "$tmp/out" "$tmp/err")"
refuse "$tmp/nothing.json: unable to open" bench_baselines "$tmp/nothing.json"
refuse "unknown argument 'b.json'" bench_baselines a.json b.json

echo "sh_bench_args: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
