#!/usr/bin/env bash
# A mixed cluster measured on this machine: `octopipe train --slowdown` (rank 1 half as fast)
# trains bitwise the weights of the uniform run, in-process and over real mpirun ranks, says
# the slow-down it applied, and predicts a longer step; bad --slowdown lists are refused.
set -u
. "$(dirname "$0")/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="--model tiny --devices 2 --microbatches 4 --data copy --log-every 0 --repeats 1 --steps 3"

"$OP" train $T --plan 1f1b --threads --checkpoint "$tmp/u" > "$tmp/u.out" 2>&1 && ok || bad "uniform run: $(tail -n 3 "$tmp/u.out")"
if "$OP" train $T --plan 1f1b --threads --slowdown 1,2 --checkpoint "$tmp/s" > "$tmp/s.out" 2>&1 \
   && cmp -s "$tmp/u/model.ckpt" "$tmp/s/model.ckpt"; then ok
else bad "--slowdown 1,2 (threads) changed the weights: $(tail -n 3 "$tmp/s.out")"; fi
grep -q "^slow-down per rank (each op then waits k-1 times its time): 1,2$" "$tmp/s.out" && ok \
  || bad "no slow-down line: $(cat "$tmp/s.out")"

if timeout -k 5 120 "$OP" train $T --plan zbv --slowdown 1,2 --checkpoint "$tmp/m" --timeout 100 > "$tmp/m.out" 2>&1 \
   && cmp -s "$tmp/u/model.ckpt" "$tmp/m/model.ckpt"; then ok
else bad "--slowdown 1,2 over mpirun changed the weights: $(tail -n 5 "$tmp/m.out")"; fi

# a slowed run's saved plan is a mixed plan (types "x1", "x2"): trained from the file without
# --slowdown, rank 1 is slowed by the file's type ratio, weights still bitwise
if "$OP" train $T --plan 1f1b --threads --slowdown 1,2 --save-plan "$tmp/slow.json" > "$tmp/sv.out" 2>&1 \
   && "$OP" train $T --plan "$tmp/slow.json" --threads --checkpoint "$tmp/f" > "$tmp/f.out" 2>&1 \
   && cmp -s "$tmp/u/model.ckpt" "$tmp/f/model.ckpt"; then ok
else bad "train from a mixed plan file: $(tail -n 3 "$tmp/sv.out" "$tmp/f.out" 2>/dev/null)"; fi
grep -q "^slow-down per rank (each op then waits k-1 times its time): 1,2$" "$tmp/f.out" && ok \
  || bad "the plan file's ratio not applied: $(cat "$tmp/f.out")"
# the prediction sees rank 1 at half speed: in the saved plan, rank 1's type "x2" costs exactly
# twice the profiled layers (from one profile: two runs' profiles differ by noise on a busy
# machine), and the predicted step holds rank 1's slowed work
python3 - "$tmp/slow.json" > "$tmp/k.out" 2>&1 <<'PY' && ok || bad "prediction not slowed: $(cat "$tmp/k.out")"
import json, sys
p = json.load(open(sys.argv[1]))
t = {d["name"]: d for d in p["device_types"]}
assert p["device_type"] == [0, 1] and [d["name"] for d in p["device_types"]] == ["x1", "x2"], p["device_types"]
for a, b in zip(p["layers"], t["x2"]["layers"]):
    for k in ("F", "I", "W"):
        assert abs(b[k] - 2 * a[k]) <= 1e-9 * max(1.0, a[k]), (a["name"], k, a[k], b[k])
busy = p["predicted"]["busy_ms"]
assert p["predicted"]["makespan_ms"] >= busy[1] > 0, p["predicted"]
PY

# emulated runs of a mixed plan (4 h100 + 4 a100 costs): threads and mpirun, each rank at its
# own type's speed; the exports name each device's type
"$OP" plan --model nemotron-h-8b --gpus h100-80gb:2,a100-80gb:2 --microbatches 4 --placement loop \
  --out "$tmp/mx.json" > "$tmp/p.out" 2>&1 && ok || bad "mixed plan: $(tail -n 3 "$tmp/p.out")"
for tr in --threads ""; do
  if timeout -k 5 120 "$OP" run "$tmp/mx.json" --emulate $tr --time-scale 0.2 --bytes-scale 0.001 \
       --trace "$tmp/rt.json" > "$tmp/r.out" 2>&1 && grep -q "predicted makespan" "$tmp/r.out"; then ok
  else bad "run --emulate $tr on a mixed plan: $(tail -n 3 "$tmp/r.out")"; fi
done
grep -q '"name": "device 3 (a100-80gb)"' "$tmp/rt.json" && ok || bad "run trace rows without types"
if "$OP" export "$tmp/mx.json" --svg "$tmp/mx.svg" --torch-stage-map "$tmp/map.json" --chrome-trace "$tmp/ct.json" \
     --megatron-layout "$tmp/mg.txt" > "$tmp/x.out" 2> "$tmp/x.err"; then ok; else bad "export: $(cat "$tmp/x.err")"; fi
grep -q '"rank_types": \["h100-80gb", "h100-80gb", "a100-80gb", "a100-80gb"\]' "$tmp/map.json" && ok || bad "stage map: $(cat "$tmp/map.json")"
grep -q "pipeline rank 2: a100-80gb, stages 2 " "$tmp/x.err" && ok || bad "megatron notes: $(cat "$tmp/x.err")"
grep -q '"name":"device 1 (h100-80gb)"' "$tmp/ct.json" && ok || bad "chrome trace rows without types"
grep -q '>a100-80gb</tspan>' "$tmp/mx.svg" && grep -q '4 devices (2 h100-80gb + 2 a100-80gb)' "$tmp/mx.svg" && ok \
  || bad "SVG rows without types"

# a type name is the plan file's string: escaped, never dropped (a quote or backslash once lost
# its characters in the stage map and the run trace rows); a control character in it is '?'
jq '.device_types[1].name = "a1\"0\\\n"' "$tmp/mx.json" > "$tmp/mxq.json"
if "$OP" export "$tmp/mxq.json" --torch-stage-map "$tmp/mapq.json" > /dev/null 2>&1 \
   && jq -e '.rank_types[2] == "a1\"0\\?"' "$tmp/mapq.json" > /dev/null; then ok
else bad "stage map type name: $(cat "$tmp/mapq.json")"; fi
if timeout -k 5 60 "$OP" run "$tmp/mxq.json" --emulate --threads --time-scale 0.05 --bytes-scale 0.001 \
     --trace "$tmp/rtq.json" > /dev/null 2>&1 \
   && jq -e '[.traceEvents[] | select(.name == "thread_name") | .args.name] | index("rank 3 (a1\"0\\?)") != null' \
        "$tmp/rtq.json" > /dev/null; then ok
else bad "run trace row with a quoted type name: $(head -c 600 "$tmp/rtq.json")"; fi

for s in 1 1,2,3 1,0.5 a,b 1,2x; do
  "$OP" train $T --plan 1f1b --threads --slowdown "$s" > "$tmp/o" 2> "$tmp/e"; rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/e")" -eq 1 ] && grep -q -- "--slowdown" "$tmp/e"; then ok
  else bad "--slowdown $s -> rc=$rc: $(cat "$tmp/e")"; fi
done
"$OP" train --help | grep -q -- "--slowdown" && ok || bad "train --help has no --slowdown"

echo "sh_mixed_run: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
