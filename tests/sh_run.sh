#!/usr/bin/env bash
# `make run` end to end on a small setting (4 devices, 8 microbatches, 2 calibration and 5
# training steps): every step succeeds and leaves its files.  Starts MPI ranks: OCTOPIPE_SAN_NO_LEAK_CHECK.
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export BUILD=${BUILD:-build}
if OUT="$tmp/run" P=4 M=8 STEPS=5 CALIBRATE=2 timeout -k 10 300 bash scripts/run.sh > "$tmp/log" 2>&1; then ok
else bad "scripts/run.sh exited non-zero: $(tail -n 5 "$tmp/log")"; fi
for f in octopipe.json i1f1b.json octopipe.svg i1f1b.svg octopipe.trace.json cluster.json train.svg; do
  if [ -s "$tmp/run/$f" ]; then ok; else bad "make run left no $f"; fi
done
grep -q "reproduces the file's prediction exactly" "$tmp/log" && ok || bad "sim step did not reproduce the plan"
grep -qE "measured +makespan" "$tmp/log" && ok || bad "run step printed no measured makespan"
grep -qE "trained 5 steps .*loss" "$tmp/log" && ok || bad "training step printed no loss summary"
grep -qE "^calibration: 1f1b and zbv, 2 steps each" "$tmp/log" && ok || bad "training step did not calibrate"
echo "run: $pass passed, $fail failed"
[ $fail -eq 0 ]
