#!/usr/bin/env bash
# `make run`: OctoPipe's main job on a built-in default, end to end:
#   1. the hybrid model preset (Nemotron-H 8B) and its layers,
#   2. every classic schedule vs OctoPipe's tuned plan, simulated on 8 H100s,
#   3. the tuned plan written and exported (SVG timeline, Chrome trace, torch CSV),
#   4. the plan run on real MPI ranks with emulated compute: measured vs predicted,
#   5. the small reference hybrid model profiled, calibrated, planned and trained on 2 ranks.
# Outputs go to $OUT (default build/run/).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OP=${OCTOPIPE:-$BUILD/octopipe}
OUT=${OUT:-$BUILD/run}
mkdir -p "$OUT"
MODEL=${MODEL:-nemotron-h-8b}
P=${P:-8}
M=${M:-32}
has() { "$OP" --help | grep -q "^  $1 "; }
step() { printf '\n== %s\n' "$*"; }

step "1. model: $MODEL"
"$OP" models "$MODEL" > "$OUT/model.txt"
head -n 12 "$OUT/model.txt"
echo "   ... (octopipe models $MODEL prints every layer)"

step "2. classic schedules vs OctoPipe: $MODEL on $P x H100-80GB, $M microbatches, seq 4096"
"$OP" compare --model "$MODEL" --devices "$P" --microbatches "$M" --plans-dir "$OUT" --time-budget 5

step "3. the tuned plan: $OUT/octopipe.json"
"$OP" sim "$OUT/octopipe.json" > "$OUT/sim.txt"
cat "$OUT/sim.txt"
"$OP" export "$OUT/octopipe.json" --svg "$OUT/octopipe.svg" --chrome-trace "$OUT/octopipe.trace.json"
"$OP" export "$OUT/i1f1b.json" --svg "$OUT/i1f1b.svg"
echo "   wrote $OUT/octopipe.svg, $OUT/i1f1b.svg (open in a browser) and $OUT/octopipe.trace.json (ui.perfetto.dev)"

if has run; then
  step "4. run the tuned plan on $P MPI ranks of this machine, emulated compute"
  echo "   (each op sleeps for its modelled time; messages shrunk 512x so 2 cores can copy them;"
  echo "    the prediction uses the links measured here by profile comm)"
  # on a busy machine a rank's wake-up can cost milliseconds and swamp the ping-pong times:
  # profile comm then refuses the fit ("fit no link", exit 1) and is run again, up to 5 times
  for try in 1 2 3 4 5; do
    rc=0; "$OP" profile comm --out "$OUT/cluster.json" > "$OUT/profile-comm.txt" 2> "$OUT/profile-comm.err" || rc=$?
    [ $rc -eq 1 ] && grep -q "fit no link" "$OUT/profile-comm.err" && [ $try -lt 5 ] || break
    echo "   (try $try: $(cat "$OUT/profile-comm.err"); measuring again)"
  done
  cat "$OUT/profile-comm.err" >&2
  [ $rc -eq 0 ] || exit $rc
  tail -n 1 "$OUT/profile-comm.txt"
  "$OP" run "$OUT/octopipe.json" --emulate --bytes-scale 0.001953125 --cluster "$OUT/cluster.json" \
    --trace "$OUT/octopipe.measured.json"
fi

if has train; then
  step "5. the small reference hybrid model: profile, calibrate, plan, train on 2 ranks"
  # --calibrate: 1f1b and zbv train a few steps first; the per-kind times are fitted to what
  # their ops cost, so the prediction is that of this machine under load, not of a lone layer
  "$OP" train --model small --devices 2 --microbatches 8 --plan auto --steps "${STEPS:-300}" --pin \
    --calibrate "${CALIBRATE:-10}" --log-every 25 --svg "$OUT/train.svg" --trace "$OUT/train.trace.json"
fi
