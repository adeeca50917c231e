#!/usr/bin/env bash
# CLI tests of the memory flags of `octopipe plan`: --recompute / --offload values, the advice
# when nothing fits, --mem-sweep's table, and policies recorded in the plan file.
set -u
. "$(dirname "$0")/lib.sh"

expect_err() { # expected-substring args...
  local want=$1; shift
  "$OP" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok
  else bad "octopipe $* -> rc=$rc stderr: $(cat "$tmp/err")"; fi
}
base=(--model llama2-7b --devices 4 --microbatches 8 --quiet)
expect_err "--recompute must be auto, none, selective or full" plan "${base[@]}" --recompute keep --out "$tmp/a.json"
expect_err "--offload must be auto or none" plan "${base[@]}" --offload yes --out "$tmp/a.json"
expect_err "needs a value" plan "${base[@]}" --recompute

# nothing fits 2 GiB: exit 1, no file, static memory named, a computed limit that fits
"$OP" plan "${base[@]}" --mem-limit 2 --out "$tmp/x.json" > /dev/null 2> "$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "static memory (weights, gradients, optimizer state) alone" "$tmp/err" \
   && grep -q "^--mem-limit [0-9.]*: a plan fits" "$tmp/err"; then ok
else bad "advice: rc=$rc $(cat "$tmp/err")"; fi
[ ! -e "$tmp/x.json" ] && ok || bad "refused plan left a file"
# the limit it names really fits
lim=$(sed -n 's/^--mem-limit \([0-9.]*\): a plan fits.*/\1/p' "$tmp/err" | head -n 1)
if [ -n "$lim" ] && "$OP" plan "${base[@]}" --mem-limit "$lim" --out "$tmp/y.json" > "$tmp/y.out" 2>&1; then ok
else bad "advised --mem-limit $lim does not fit: $(tail -n 2 "$tmp/y.out")"; fi

# forced full recomputation: recorded per stage in the plan file, and no slower than none is
# never claimed: full re-runs every forward
"$OP" plan "${base[@]}" --recompute full --mem-limit none --out "$tmp/f.json" > "$tmp/f.out" 2>&1 &&
"$OP" plan "${base[@]}" --recompute none --mem-limit none --out "$tmp/n.json" > "$tmp/n.out" 2>&1 || bad "plan runs failed"
if jq -e '.activation | length > 0' "$tmp/f.json" > /dev/null 2>&1 || ! jq -e 'has("activation")' "$tmp/n.json" > /dev/null 2>&1; then ok
else bad "activation key: $(jq -c .activation "$tmp/f.json" 2>&1)"; fi
grep -q "^activations: keep" "$tmp/n.out" && ok || bad "none: $(grep activations "$tmp/n.out")"
# forced under the default limit, where memory does not need it: still every stage (the plan
# said "activations: keep" and recorded no policy for a job the user runs with recomputation)
"$OP" plan "${base[@]}" --recompute full --out "$tmp/f2.json" > "$tmp/f2.out" 2>&1 || bad "forced full run failed"
if jq -e '.activation | length > 0 and all(. == "full")' "$tmp/f2.json" > /dev/null 2>&1 &&
   grep -q "^activations: full on \([0-9]*\) of \1 stages" "$tmp/f2.out"; then ok
else bad "forced full under a limit: $(grep activations "$tmp/f2.out") $(jq -c .activation "$tmp/f2.json" 2>&1)"; fi

# the exports carry the recomputation: Megatron's full recompute (the stages hold 1 or 2
# decoder layers, so one checkpoint per layer, said in a note), ZeRO-1 as the distributed
# optimizer, the batch; torchtitan's full activation checkpointing
"$OP" plan "${base[@]}" --recompute full --placement loop --dp 2 --zero1 --out "$tmp/fl.json" > "$tmp/fl.plan" 2>&1 &&
"$OP" export "$tmp/fl.json" --megatron-layout - --torch-csv "$tmp/fl.csv" > "$tmp/fl.out" 2> "$tmp/fl.err" || bad "loop full plan/export failed"
if grep -q "^--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout '[^']*' --seq-length 4096 --micro-batch-size 1 --global-batch-size 16 --use-distributed-optimizer --recompute-granularity full --recompute-method uniform --recompute-num-layers 1$" "$tmp/fl.out" &&
   grep -q "^torchtitan: training.seq_len=4096, training.local_batch_size=8, parallelism.pipeline_parallel_microbatch_size=1, activation_checkpoint.mode=full, " "$tmp/fl.err" &&
   [ "$(grep -c "^note:" "$tmp/fl.err")" -eq 1 ] && grep -q "^note: the stages hold different numbers of layers, and --recompute-num-layers 1 divides them all" "$tmp/fl.err"; then ok
else bad "recompute in the exports: $(cat "$tmp/fl.out" "$tmp/fl.err")"; fi
# ZeRO-1 named where the settings are: plan's first line, sim's header
grep -q "^model llama2-7b: 34 layers on 4 devices (h100-80gb), 8 microbatches, ZeRO-1 over dp 2$" "$tmp/fl.plan" \
  && "$OP" sim "$tmp/fl.json" | grep -q "layers (costed at tp 1, ep 1, ZeRO-1 over dp 2)$" \
  && ok || bad "ZeRO-1 in plan/sim headers: $(head -n 1 "$tmp/fl.plan") / $("$OP" sim "$tmp/fl.json" | head -n 1)"

# --mem-sweep: one row per limit, makespans never rise as the limit grows (a Pareto front); the
# set limit is a marked row, and with --out the plan written is that row's, recorded at that
# limit (--out -: the plan alone on stdout, the table on stderr)
"$OP" plan --model llama2-7b --devices 4 --microbatches 4 --quiet --mem-sweep --mem-limit 38 \
    --out - > "$tmp/s.json" 2> "$tmp/s.err"; rc=$?
awk '/^\* the limit/ { exit } NR > 2 && $2 ~ /^[0-9.]+$/' "$tmp/s.err" > "$tmp/s.rows"
rows=$(wc -l < "$tmp/s.rows")
if [ $rc -eq 0 ] && [ "$rows" -ge 5 ] && grep -q "limit_GiB" "$tmp/s.err"; then ok
else bad "mem-sweep rc=$rc rows=$rows: $(head -n 4 "$tmp/s.err")"; fi
if awk '$1 != "none" { if (seen && $2 > last * 1.0001) exit 1; last = $2; seen = 1 }' "$tmp/s.rows"; then ok
else bad "mem-sweep makespan rises with the limit: $(cat "$tmp/s.rows")"; fi
marked=$(awk '$1 ~ /\*$/ { print $1, $2 }' "$tmp/s.rows")
written=$(jq -r '"\(.mem_limit_bytes / 1073741824 * 100 | round / 100) \(.predicted.makespan_ms * 100 | round / 100)"' "$tmp/s.json" 2>&1)
if [ "$(echo "$marked" | wc -l)" -eq 1 ] && [ "$(echo "$marked" | awk '{ printf "%g %.2f", $1 + 0, $2 }')" = "$(echo "$written" | awk '{ printf "%g %.2f", $1, $2 }')" ]; then ok
else bad "mem-sweep marked row '$marked' vs written plan (limit GiB, makespan) '$written'"; fi
# --mem-limit none is the last row's: it was unmarked, and the plan for --out tuned once more
"$OP" plan --model llama2-7b --devices 2 --microbatches 4 --quiet --mem-sweep --mem-limit none --time-budget 2 \
    --out - > "$tmp/sn.json" 2> "$tmp/sn.err"; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '\*  *[0-9]' "$tmp/sn.err")" -eq 1 ] && grep -q "^ *none\*  *[0-9]" "$tmp/sn.err" \
   && [ "$(jq .mem_limit_bytes "$tmp/sn.json" 2>&1)" = 0 ]; then ok
else bad "mem-sweep --mem-limit none: rc=$rc $(grep -E '\*|none' "$tmp/sn.err")"; fi

# --time-budget bounds the whole sweep and the plan written after it (each of the 12 rows once
# had a budget of its own: 10 s for a budget of 5); rows whose share found nothing say so
t0=$(date +%s.%N)
"$OP" plan --model mixtral-8x7b --devices 16 --microbatches 32 --quiet --mem-sweep --time-budget 3 \
    --out "$tmp/sb.json" > "$tmp/sb.out" 2>&1; rc=$?
el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
if [ $rc -eq 0 ] && awk -v x="$el" 'BEGIN { exit !(x < 5) }' && grep -q "^ *none  *[0-9]" "$tmp/sb.out"; then ok
else bad "mem-sweep --time-budget 3: rc=$rc after $el s: $(head -n 6 "$tmp/sb.out")"; fi
grep -q "no plan fits" "$tmp/sb.out" && bad "a row out of time reads as no plan fits: $(head -n 5 "$tmp/sb.out")" || ok

# the advice keeps the user's --recompute: with selective forced, the smallest peak found was
# 34.93 GiB and the advice once said "--mem-limit 32.63: a plan fits" (found with auto)
"$OP" plan --model llama2-7b --devices 4 --microbatches 8 --mem-limit 33 --recompute selective \
    --out "$tmp/sel.json" > "$tmp/sel.out" 2>&1; rc=$?
need=$(sed -n 's/.*the smallest peak found needs \([0-9.]*\) GiB.*/\1/p' "$tmp/sel.out")
sug=$(sed -n 's/^--mem-limit \([0-9.]*\): a plan fits.*/\1/p' "$tmp/sel.out")
if [ $rc -eq 1 ] && [ -n "$need" ] && [ -n "$sug" ] && awk -v a="$sug" -v b="$need" 'BEGIN { exit !(a + 0.01 >= b) }'; then ok
else bad "advice under --recompute selective: needs '$need', suggests '$sug': $(cat "$tmp/sel.out")"; fi

# the limits swept end at the devices' own memory: a cluster file's 40 GiB H100s are not swept to
# the preset's 80 GiB, and one limit for a mixed cluster ends at its smallest device, whichever
# type is listed first (h200:2,h100:2 went to 141 GiB, h100:2,h200:2 to 80)
cat > "$tmp/c40.json" <<EOF
{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 360,
 "inter_lat_ms": 0.025, "inter_bw_GBps": 40,
 "devices": [{"gpu": "h100", "mem_GiB": 40}, {"gpu": "h100", "mem_GiB": 40}]}
EOF
"$OP" plan --model tests/data/profiles/tiny.json --cluster "$tmp/c40.json" --microbatches 4 --mem-sweep \
    --quiet > "$tmp/c40.out" 2>&1; rc=$?
top=$(awk '$1 ~ /^[0-9.]+\*?$/ { t = $1 } END { print t }' "$tmp/c40.out")
[ $rc -eq 0 ] && [ "$top" = "40.00" ] && ok || bad "mem-sweep on 40 GiB devices: rc=$rc, top limit '$top'"
"$OP" plan --model tests/data/profiles/tiny.json --gpus h200:2,h100:2 --microbatches 4 --mem-sweep --quiet \
    2>&1 | awk 'NR > 1 { print $1 }' > "$tmp/l1"
"$OP" plan --model tests/data/profiles/tiny.json --gpus h100:2,h200:2 --microbatches 4 --mem-sweep --quiet \
    2>&1 | awk 'NR > 1 { print $1 }' > "$tmp/l2"
if cmp -s "$tmp/l1" "$tmp/l2" && grep -qx "80.00" "$tmp/l1" && ! grep -q "141" "$tmp/l1"; then ok
else bad "mem-sweep limits depend on the device order: $(tr '\n' ' ' < "$tmp/l1") / $(tr '\n' ' ' < "$tmp/l2")"; fi

# what a plain plan refuses at once, a sweep refuses before its first row: --placement v with
# fewer than 2 layers per device once filled --mem-sweep's table with "no plan fits" (the row
# without a limit too) and exited 0, or 2 after the table with --out
for sw in --mem-sweep --device-sweep; do
  expect_err "--placement v needs >= 2 layers per device (6 < 8)" plan --model tests/data/hf/llama.json \
      --devices 4 --microbatches 8 --placement v --quiet $sw
  [ ! -s "$tmp/out" ] && ok || bad "$sw --placement v refused after a table: $(head -n 3 "$tmp/out")"
done

# a set limit at an end of the sweep is its marked row too (--mem-limit 80 on 80 GiB devices was
# an unmarked row, and the plan for --out was searched again after the table)
"$OP" plan --model tests/data/profiles/tiny.json --devices 2 --microbatches 4 --mem-sweep --mem-limit 80 \
    --quiet --out "$tmp/m80.json" > "$tmp/m80.out" 2>&1; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -cE '^ +80\.00\* ' "$tmp/m80.out")" -eq 1 ] && grep -q "^\* the limit" "$tmp/m80.out" \
   && [ "$(jq .mem_limit_bytes "$tmp/m80.json")" = 85899345920 ]; then ok
else bad "--mem-sweep --mem-limit 80: rc=$rc $(grep -E '80\.00|^\*' "$tmp/m80.out")"; fi

# the advice's limit ladder starts above the limit that failed: a lower limit is no advice, and
# each rung is a search (gemma2-9b at --seq 131072 on two H200s tried five below 118.18 GiB)
cat > "$tmp/adv.json" <<'JSON'
{"pattern": "M-M*-", "forward_ms": {"E": 0.5, "M": 1, "-": 0.75, "*": 1.25, "L": 3},
 "backward_ms": {"E": 0, "M": 2, "-": 0.5, "*": 1, "L": 2.5},
 "weight_ms": {"E": 0.25, "M": 0.5, "-": 0.5, "*": 0.125, "L": 1},
 "act_bytes": {"M": 1073741824, "-": 1073741824, "*": 1073741824},
 "param_bytes": {"E": 100000000, "M": 100000000, "-": 100000000, "*": 100000000, "L": 100000000},
 "out_bytes": 268435456}
JSON
"$OP" plan --model "$tmp/adv.json" --devices 2 --microbatches 8 --mem-limit 3.5 --progress \
    --out "$tmp/adv.plan" > /dev/null 2> "$tmp/adv.err"; rc=$?
low=$(sed -n 's/.*trying --mem-limit \([0-9.]*\) .*/\1/p' "$tmp/adv.err" | awk '$1 <= 3.5' | head -n 1)
if [ $rc -eq 1 ] && [ -z "$low" ] && grep -q "^--mem-limit [0-9.]*: a plan fits" "$tmp/adv.err"; then ok
else bad "advice ladder at --mem-limit 3.5: rc=$rc, tried $low: $(grep -E 'trying --mem|fits' "$tmp/adv.err")"; fi

echo "plan_mem: $pass passed, $fail failed"
[ $fail -eq 0 ]
