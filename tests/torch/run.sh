#!/usr/bin/env bash
# The PyTorch interop suite (`make test-torch`), in .venv-torch.  Each part prints its own
# `tests: N passed, N failed`; the last line sums them.  Usage: tests/torch/run.sh [filter]
# (OCTOPIPE_TORCH_VERBOSE=1 prints every check, not just each part's summary)
#   nn_vs_torch   the C reference model vs torch autograd, layer by layer
#   check_vs_torch  the C port of torch's CSV rules vs torch's loader on random schedules
#   pipeline      plans run in torch.distributed.pipelining (gloo, 2 and 4 processes)
#   suite_plans   every default tuned plan of the bench suite at P in {4, 8} loads in torch
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PY=${OCTOPIPE_TORCH_VENV:-.venv-torch}/bin/python
work=$(mktemp -d "${TMPDIR:-/tmp}/octopipe-torch.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
pass=0 fail=0 t0=$SECONDS
run() { # name timeout_s cmd...
  local name=$1 lim=$2; shift 2
  [ -n "${FILTER:-}" ] && [[ "$name" != *"$FILTER"* ]] && return
  local s=$SECONDS out="$work/$name.log"
  timeout -k 10 "$lim" "$@" >"$out" 2>&1
  local rc=$?
  local line; line=$(grep -E '^tests: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
  local p f
  p=$(sed -E 's/tests: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed/\1/' <<<"$line")
  if [ -z "$line" ] || [ "$rc" -ne 0 ]; then
    [ -z "$line" ] && p=0 f=1
    [ "$f" -eq 0 ] && f=1
    grep -E 'FAIL|Error|error' "$out" | head -20
    tail -5 "$out"
  fi
  if [ -n "${OCTOPIPE_TORCH_VERBOSE:-}" ]; then grep -vE '^tests: ' "$out"
  else grep -E '^(verdicts|placements): ' "$out"; fi
  printf '%-14s %4d passed %3d failed %6ds\n' "$name" "$p" "$f" $((SECONDS - s))
  pass=$((pass + p)) fail=$((fail + f))
}
FILTER=${1:-}
run nn_vs_torch 300 "$PY" tests/torch/test_nn_vs_torch.py "$BUILD/torch/nn_ref" "$work/nn"
run check_vs_torch 300 "$PY" tests/torch/test_check_vs_torch.py "$BUILD/torch/csv_check" "$work/diff" 300
run pipeline 900 "$PY" tests/torch/test_pipeline.py "$BUILD/octopipe" "$work/pipe"
run suite_plans 1200 "$PY" tests/torch/test_suite_plans.py "$BUILD/octopipe" "$work/suite"
echo "total time: $((SECONDS - t0))s"
echo "tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
