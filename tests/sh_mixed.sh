#!/usr/bin/env bash
# CLI tests of mixed clusters: bad --gpus lists and cluster files are one line and exit 2 (an
# unknown type lists the known ones, counts that do not add up, a link matrix of the wrong
# size); a plan for h200 + h100 names each device's type, and sim reads it back with the types;
# a cluster file's devices give the same problem as --gpus; when nothing fits, the error names
# each device's own limit; the last trial keeps to --recompute none and selective.
set -u
. "$(dirname "$0")/lib.sh"

expect_err() { # expected-substring args...
  local want=$1; shift
  timeout -k 5 120 "$OP" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -qF -- "$want" "$tmp/err"; then ok
  else bad "octopipe $* -> rc=$rc (want 2) stderr: $(cat "$tmp/err")"; fi
}
base=(--model llama2-7b --microbatches 8)
expect_err "unknown device 'v100' (known: a100-40gb, a100-80gb" compare "${base[@]}" --gpus v100:4 --no-tune
expect_err "--gpus lists 4 devices but --devices is 8: the counts must add up" \
  compare "${base[@]}" --devices 8 --gpus h100:2,a100:2 --no-tune
expect_err "count 'two' of h100" plan "${base[@]}" --gpus h100:two --out "$tmp/x.json"
# --gpu beside listed devices names a profile's GPU; for an HF model or preset it would be dropped
expect_err "--gpu a100-80gb has no effect here: --gpus lists each device's GPU" plan "${base[@]}" --gpu a100-80gb --gpus h100:2,a100:2 --out "$tmp/x.json"
# B200 next to H100: each type with its own memory and limit
timeout -k 5 120 "$OP" compare "${base[@]}" --gpus b200:2,h100:2 --no-tune > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "2 x b200 (devices 0-1): 168 GiB, limit 150.87 GiB" "$tmp/out" \
   && grep -q "2 x h100-80gb (devices 2-3): 80 GiB, limit 72.00 GiB" "$tmp/out"; then ok
else bad "compare --gpus b200:2,h100:2: rc=$rc $(cat "$tmp/err") $(head -n 5 "$tmp/out")"; fi
cat > "$tmp/c4.json" <<'J'
{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 300,
 "inter_lat_ms": 0.03, "inter_bw_GBps": 40, "gpus": "h100-80gb:2,a100-80gb:2"}
J
expect_err "lists its devices already: give them once" compare "${base[@]}" --cluster "$tmp/c4.json" --gpus h100:4 --no-tune
expect_err "c4.json lists 4 devices but --devices is 6" compare "${base[@]}" --cluster "$tmp/c4.json" --devices 6 --no-tune
cat > "$tmp/m.json" <<'J'
{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 300,
 "inter_lat_ms": 0.03, "inter_bw_GBps": 40,
 "pair_lat_ms": [[0, 1], [1, 0]], "pair_bw_GBps": [[1, 9], [9, 1]]}
J
expect_err "m.json: pair_lat_ms/pair_bw_GBps are 2 x 2 but there are 4 devices" compare "${base[@]}" --cluster "$tmp/m.json" --devices 4 --no-tune
sed 's/"gpus": "h100-80gb:2,a100-80gb:2"/"devices": [{"gpu": "h100"}, {"gpu": "h100", "mem_GiB": 0}]/' "$tmp/c4.json" > "$tmp/bad.json"
expect_err "bad.json: devices[1].mem_GiB: expected a number in [0.001, 1e6]" compare "${base[@]}" --cluster "$tmp/bad.json" --no-tune

# --gpus alone gives the device count; the cluster file's devices give the same comparison
timeout -k 5 300 "$OP" compare "${base[@]}" --gpus h100-80gb:2,a100-80gb:2 --no-tune --json > "$tmp/g.json" 2>&1 || bad "compare --gpus: $(tail -n 3 "$tmp/g.json")"
timeout -k 5 300 "$OP" compare "${base[@]}" --cluster "$tmp/c4.json" --no-tune --json > "$tmp/f.json" 2>&1 || bad "compare --cluster with devices: $(tail -n 3 "$tmp/f.json")"
grep -q '"devices": 4' "$tmp/g.json" && ok || bad "--gpus h100-80gb:2,a100-80gb:2 is not 4 devices"
lb_g=$(sed -n 's/.*"lower_bound_ms": \([0-9.e+-]*\).*/\1/p' "$tmp/g.json" | head -n 1)
lb_f=$(sed -n 's/.*"lower_bound_ms": \([0-9.e+-]*\).*/\1/p' "$tmp/f.json" | head -n 1)
[ -n "$lb_g" ] && [ "$lb_g" = "$lb_f" ] && ok || bad "lower bounds differ: --gpus $lb_g, file $lb_f"
# --comm none frees the links only: the file is still read (a broken one is an error) and its
# devices still count
echo '{"format": "octopipe.cluster/1", "bogus' > "$tmp/broken.json"
expect_err "broken.json:1:" compare "${base[@]}" --devices 4 --comm none --cluster "$tmp/broken.json" --no-tune
timeout -k 5 300 "$OP" compare "${base[@]}" --comm none --cluster "$tmp/c4.json" --no-tune > "$tmp/cn.out" 2>&1 \
  && grep -q "2 x a100-80gb" "$tmp/cn.out" && ok || bad "--comm none --cluster c4.json: $(head -c 300 "$tmp/cn.out")"
# a uniform H100 cluster has a smaller bound than half of it replaced by A100s
timeout -k 5 300 "$OP" compare "${base[@]}" --devices 4 --no-tune --json > "$tmp/u.json" 2>&1
lb_u=$(sed -n 's/.*"lower_bound_ms": \([0-9.e+-]*\).*/\1/p' "$tmp/u.json" | head -n 1)
awk -v u="$lb_u" -v g="$lb_g" 'BEGIN { exit !(u > 0 && g > u) }' && ok || bad "mixed bound $lb_g not above uniform $lb_u"

# plan on H200 + H100: types in the output and the file; sim reads them back
timeout -k 5 300 "$OP" plan "${base[@]}" --gpus h200:2,h100-80gb:2 --quiet --out "$tmp/p.json" > "$tmp/p.out" 2>&1 || bad "plan --gpus: $(tail -n 3 "$tmp/p.out")"
grep -q "2 x h200 (devices 0-1): 131 GiB, limit 118.18 GiB" "$tmp/p.out" && ok || bad "no h200 line: $(head -n 5 "$tmp/p.out")"
grep -q "2 x h100-80gb (devices 2-3): 80 GiB, limit 72.00 GiB" "$tmp/p.out" && ok || bad "no h100 line"
grep -Eq "^  device  3: h100-80gb " "$tmp/p.out" && ok || bad "stage table without device types"
grep -q '"device_type": \[0, 0, 1, 1\]' "$tmp/p.json" && ok || bad "plan file without device_type"
grep -q '"device_mem_limit_bytes"' "$tmp/p.json" && ok || bad "plan file without per-device limits"
timeout -k 5 60 "$OP" sim "$tmp/p.json" > "$tmp/s.out" 2>&1 && grep -q "reproduces the file's prediction exactly" "$tmp/s.out" \
  && grep -Eq "^  2 +h100-80gb" "$tmp/s.out" && ok || bad "sim of the mixed plan: $(cat "$tmp/s.out")"

# nothing fits: the message names each device's own limit, not one that only the H100 has
timeout -k 5 120 "$OP" plan --model deepseek-v2-lite --gpus h200:1,h100-80gb:1 --microbatches 8 --seq 16384 \
  --quiet --out "$tmp/nf.json" > "$tmp/nf.out" 2> "$tmp/nf.err"; rc=$?
[ $rc -eq 1 ] && grep -qF "no plan fits each device's own limit (72.00 to 118.18 GiB)" "$tmp/nf.err" \
  && ! grep -q "per device" "$tmp/nf.err" && [ ! -e "$tmp/nf.json" ] && ok \
  || bad "no-fit message on h200 + h100: rc=$rc $(head -n 2 "$tmp/nf.err")"

# --recompute none / selective: the roomy trial (H200s that hold two of Jamba's MoE layers)
# keeps to the policy asked for; with auto it may choose policies per stage
for rc_mode in none selective; do
  timeout -k 5 300 "$OP" plan --model jamba-v0.1 --gpus h200:8,h100-80gb:8 --microbatches 32 \
    --recompute $rc_mode --quiet --out "$tmp/r.json" > "$tmp/r.out" 2>&1 || bad "plan --recompute $rc_mode: $(tail -n 3 "$tmp/r.out")"
  want="activations: keep" # selective: on every stage of the plan
  [ $rc_mode = selective ] && want=$(sed -n 's/^plan: \([0-9]*\) stages.*/activations: selective on \1 of \1 stages/p' "$tmp/r.out")
  grep -qx "$want" "$tmp/r.out" && ok || bad "--recompute $rc_mode: want '$want', got '$(grep '^activations' "$tmp/r.out")'"
done

echo "mixed: $pass passed, $fail failed"
[ $fail -eq 0 ]
