#!/usr/bin/env bash
# CLI-level tests: compare on every bench config, JSON shape, bad input handling.
set -u
. "$(dirname "$0")/lib.sh"

# every bench config (as preset and as file) for P in {4,8,16}
# the configs in the repository (data/hf-configs) and the built-in presets made from them
models=(data/hf-configs/*.json deepseek-v2-lite gemma2-9b jamba-v0.1 llama2-7b mixtral-8x7b nemotron-h-8b qwen2-vl-7b)
[ -e "${models[0]}" ] || { bad "no configs in data/hf-configs"; models=("${models[@]:1}"); }
for f in "${models[@]}"; do
  for P in 4 8 16; do
    M=$((2*P))
    if "$OP" compare --model "$f" --devices $P --microbatches $M --json --no-tune > "$tmp/c.json" 2> "$tmp/c.err" \
       && jq -e '.lower_bound_ms > 0 and ([.plans[].name] | index("1f1b") != null)
               and all(.plans[]; .makespan_ms >= $lb*0.999999 and .bubble_ratio >= 0 and .bubble_ratio < 1
                   and has("name") and has("peak_bytes_max") and has("fits") and has("speedup_vs_i1f1b"))' \
            --argjson lb "$(jq .lower_bound_ms "$tmp/c.json")" "$tmp/c.json" > /dev/null 2> "$tmp/py.err"; then ok; else bad "compare $f P=$P: $(cat "$tmp/c.err" "$tmp/py.err" | tail -n 3)"; fi
  done
done

# bad input: one line on stderr, exit 2, nothing written
expect_err() { # expected-substring args...
  local want=$1; shift
  "$OP" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok
  else bad "octopipe $* -> rc=$rc stderr: $(cat "$tmp/err")"; fi
}
expect_err "--devices must be between" compare --model llama2-7b --devices 0 --microbatches 8
expect_err "expects a whole number" compare --model llama2-7b --devices x --microbatches 8
expect_err "unknown flag" compare --model llama2-7b --devices 4 --microbatches 8 --bogus
# a near miss names the flag the command's own help has (one line still, nothing on stdout)
expect_err "unknown flag '--device': did you mean --devices? (octopipe plan --help)" plan --model llama2-7b --device 4 --microbatches 8 --out "$tmp/p.json"
expect_err "did you mean --megatron-layout?" export tests/data/plans/1f1b-p4-m8.json --megatron
expect_err "did you mean --steps?" train --model tiny --devices 2 --microbatches 4 --step 3
[ ! -s "$tmp/out" ] && ok || bad "train --step: the help it was matched against leaked to stdout"
expect_err "did you mean --emulate?" run tests/data/plans/1f1b-p4-m8.json --emulat
grep -q "did you mean" "$tmp/err" && [ ! -s "$tmp/out" ] && ok || bad "run --emulat: the help leaked to stdout"
expect_err "--model is required" compare --devices 4 --microbatches 8
expect_err "nosuch" compare --model nosuch --devices 4 --microbatches 8
expect_err "/no/such does not exist" compare --model llama2-7b --devices 4 --microbatches 8 --plans-dir "$tmp/no/such/dir"
# the inputs are checked before the directory is made
expect_err "nosuch" compare --model nosuch --devices 4 --microbatches 8 --plans-dir "$tmp/newdir"
[ ! -e "$tmp/newdir" ] && ok || bad "compare with a bad --model created --plans-dir"
touch "$tmp/afile"
expect_err "is not a directory" compare --model llama2-7b --devices 4 --microbatches 8 --plans-dir "$tmp/afile"
expect_err "unknown command" frobnicate
# --zero1 and --dp act only together: either alone is said to change nothing; together, no note
for a in "--zero1" "--dp 4"; do
  "$OP" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune $a > /dev/null 2> "$tmp/err"; rc=$?
  [ $rc -eq 0 ] && grep -q "^octopipe compare: note: .*\(saves nothing\|changes nothing without --zero1\)" "$tmp/err" \
    && ok || bad "compare $a: rc=$rc no note: $(cat "$tmp/err")"
done
"$OP" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune --dp 4 --zero1 > /dev/null 2> "$tmp/err" \
  && [ ! -s "$tmp/err" ] && ok || bad "compare --dp 4 --zero1 printed: $(cat "$tmp/err")"
# --ep: its ranks are data-parallel ranks holding whole experts; a dense model gains nothing
expect_err "--ep 8 needs a data-parallel degree it divides" compare --model mixtral-8x7b --devices 4 --microbatches 8 --no-tune --ep 8
expect_err "give --dp as a multiple of 4, such as 8" compare --model mixtral-8x7b --devices 4 --microbatches 8 --no-tune --ep 4 --dp 6
expect_err "--ep 16 does not divide the routed experts of every MoE layer of mixtral-8x7b (their common divisor is 8)" \
  compare --model mixtral-8x7b --devices 4 --microbatches 8 --no-tune --ep 16 --dp 16
"$OP" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune --ep 2 --dp 2 > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] && [ "$(cat "$tmp/err")" = "octopipe compare: note: --ep 2 changes nothing: llama2-7b has no MoE layer whose experts the cost model sizes" ] \
  && ok || bad "compare llama2-7b --ep 2: rc=$rc $(cat "$tmp/err")"
# Mixtral's experts split over 8 ranks: no note, and the header says ep 8
"$OP" compare --model mixtral-8x7b --devices 16 --microbatches 32 --no-tune --ep 8 --dp 8 > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && grep -q "mbs 1, tp 1, ep 8, memory limit" "$tmp/out" \
  && ok || bad "compare mixtral --ep 8: rc=$rc $(cat "$tmp/err") $(head -n 3 "$tmp/out")"
"$OP" compare --model mixtral-8x7b --devices 16 --microbatches 32 --no-tune --ep 8 --dp 8 --tp 2 --json 2> /dev/null \
  | python3 -c 'import json, sys; d = json.load(sys.stdin); sys.exit(not (d["seq"], d["mbs"], d["tp"], d["ep"]) == (4096, 1, 2, 8))' \
  && ok || bad "compare --json settings"
# what would fit: Mixtral on 8 devices at tp 1 does not; experts over 2 DP ranks do
"$OP" plan --model mixtral-8x7b --devices 8 --microbatches 16 --quiet --out "$tmp/mx.json" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 1 ] && [ ! -e "$tmp/mx.json" ] && grep -q "^--ep 2 --dp 2: each MoE layer's routed experts split over 2 data-parallel ranks, a plan fits" "$tmp/err" \
  && ok || bad "plan mixtral P=8 advice: rc=$rc $(cat "$tmp/err")"
# the plan records the TP, EP and DP degrees and the batch its costs assume; the Megatron
# export passes them on (global batch = 8 microbatches x mbs 1 x dp 4)
"$OP" plan --model mixtral-8x7b --devices 4 --microbatches 8 --tp 2 --ep 4 --dp 4 --placement loop --quiet \
  --out "$tmp/tpep.json" > "$tmp/out" 2> "$tmp/err" && grep -q '"parallel": {"tp": 2, "ep": 4, "dp": 4}' "$tmp/tpep.json" \
  && grep -q '"batch": {"seq": 4096, "mbs": 1}' "$tmp/tpep.json" \
  && grep -q "^model mixtral-8x7b: 34 layers on 4 devices (h100-80gb), 8 microbatches, tp 2, ep 4$" "$tmp/out" \
  && "$OP" export "$tmp/tpep.json" --megatron-layout - 2> /dev/null \
     | grep -q "^--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 4 --pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'E.*' --seq-length 4096 --micro-batch-size 1 --global-batch-size 32$" \
  && ok || bad "plan --tp 2 --ep 4 export: $(cat "$tmp/err")"
"$OP" export "$tmp/tpep.json" --torch-csv "$tmp/tpep.csv" > "$tmp/out" 2>&1 \
  && grep -q "^torchtitan: parallelism.tensor_parallel_degree=2, parallelism.expert_parallel_degree=4, training.seq_len=4096, training.local_batch_size=8, parallelism.pipeline_parallel_microbatch_size=1, parallelism.pipeline_parallel_degree=4," "$tmp/out" \
  && ok || bad "torchtitan hint with --tp 2 --ep 4: $(cat "$tmp/out")"
"$OP" sim "$tmp/tpep.json" 2>&1 | grep -q "^plan .*tpep.json: \"octopipe\" for mixtral-8x7b: 4 devices, 8 microbatches, .* layers (costed at tp 2, ep 4)$" \
  && ok || bad "sim header of a tp 2 ep 4 plan: $("$OP" sim "$tmp/tpep.json" 2>&1 | head -n 1)"
"$OP" sim "$tmp/tpep.json" --json 2>&1 | grep -q '"stages": [0-9]*, "tp": 2, "ep": 4, "dp": 4, "zero1": false, "seq": 4096, "mbs": 1,' \
  && "$OP" sim tests/data/plans/1f1b-p4-m8.json --json 2>&1 | grep -q '"stages": 4, "tp": 1, "ep": 1, "dp": 1, "zero1": false, "seq": null, "mbs": null,' \
  && ok || bad "sim --json setup: $("$OP" sim "$tmp/tpep.json" --json 2>&1 | head -c 300)"
# --placement loop is kept even where a baseline of another layout is faster (ZB-V's V plan was
# returned here, which the Megatron export then refused): the summary says what it costs
"$OP" plan --model mixtral-8x7b --devices 16 --microbatches 32 --ep 8 --dp 8 --placement loop --quiet \
  --out "$tmp/mxl.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "^plan: 32 stages, placement loop," "$tmp/out" \
   && grep -q "^best baseline zbv [0-9.]* ms: speedup 0\.[0-9]*x" "$tmp/out" \
   && "$OP" export "$tmp/mxl.json" --megatron-layout - > /dev/null 2>&1; then ok
else bad "plan --placement loop returned another layout: rc=$rc $(cat "$tmp/err") $(grep -v '^  device' "$tmp/out")"; fi
# models NAME: the parameter count under its header, active per token for MoE models, MTP
# blocks apart; none for a profile whose layers have no dimensions
[ "$("$OP" models mixtral-8x7b | sed -n 2p)" = "parameters 46.70B (12.88B active per token)" ] \
  && [ "$("$OP" models llama2-7b | sed -n 2p)" = "parameters 6.74B" ] \
  && [ "$("$OP" models tests/data/hf/glm4_5_air.json | sed -n 2p)" = "parameters 106.85B (13.42B active per token), and 3.62B in MTP blocks" ] \
  && "$OP" models nemotron-h-8b-profile | sed -n 2p | grep -q "^pattern " \
  && ok || bad "models parameter line: $("$OP" models mixtral-8x7b | sed -n 2p)"
# the image's 256 merged tokens sit inside each sample's sequence: --seq 128 cannot carry them
expect_err "hands 256 image tokens per sample to the language model, more than --seq 128 holds" \
  compare --model qwen2-vl-7b --devices 4 --microbatches 8 --seq 128 --no-tune
"$OP" compare --model qwen2-vl-7b --devices 4 --microbatches 8 --seq 256 --no-tune > /dev/null 2> "$tmp/err" \
  && ok || bad "qwen2-vl-7b at --seq 256 (the image alone) refused: $(cat "$tmp/err")"
# help takes one command name: a second word is refused, not ignored
expect_err "octopipe help: takes one command name (got 'plan' and 'extra')" help plan extra
expect_err "octopipe help: takes one command name" help plan --out x.json
if "$OP" help plan > "$tmp/out" 2> "$tmp/err" && grep -q "usage: octopipe plan" "$tmp/out"; then ok
else bad "help plan: $(cat "$tmp/err")"; fi
# flags that steer the tuner, with the tuner left out: refused, not ignored
expect_err "--seed steers the tuner, and --no-tune leaves it out" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune --seed 2
expect_err "--time-budget steers the tuner" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune --time-budget 5
expect_err "--effort steers the tuner, and --no-tune leaves it out" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune --effort 2
expect_err "--effort must be between 1 and 1000, got 0" plan --model llama2-7b --devices 4 --microbatches 8 --out "$tmp/e.json" --effort 0
expect_err "--effort must be between 1 and 1000, got 1001" compare --model llama2-7b --devices 4 --microbatches 8 --effort 1001
# --effort 2: the summary names it, and the plan is never slower than the default search's
"$OP" plan --model nemotron-h-8b --devices 4 --microbatches 8 --out "$tmp/e1.json" --quiet > /dev/null 2>&1
"$OP" plan --model nemotron-h-8b --devices 4 --microbatches 8 --out "$tmp/e2.json" --quiet --effort 2 > "$tmp/e2.out" 2>&1
if grep -q "seed 1, effort 2); wrote" "$tmp/e2.out" \
   && jq -e --slurpfile a "$tmp/e1.json" '.predicted.makespan_ms <= $a[0].predicted.makespan_ms' "$tmp/e2.json" > /dev/null
then ok; else bad "plan --effort 2: $(tail -n 1 "$tmp/e2.out")"; fi
# --time-budget bounds all of the tuner's work (its memory trials, the classic schedules it must
# beat, its polish): each phase checks the clock at its next simulation.  These runs once took
# 17 s (a plan found), 29 s (none fits, then the advice's searches) and 17 s more than the
# classic rows alone for a budget of 2 s; the slack below is generous for a loaded machine.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
below() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }
t0=$(date +%s.%N)
"$OP" plan --model mixtral-8x7b --devices 16 --microbatches 32 --time-budget 2 --quiet --out "$tmp/tb.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
el=$(since "$t0")
if [ $rc -eq 0 ] && [ -s "$tmp/tb.json" ] && below "$el" 4.5; then ok
else bad "plan --time-budget 2: rc=$rc after $el s: $(tail -n 2 "$tmp/err")"; fi
# out of time before any plan fitted: one clear line, exit 1, no file, no advice searched (at
# 50 GiB static memory fits, 48.93 GiB at least, and the stashes never do: 53 s unbudgeted)
t0=$(date +%s.%N)
"$OP" plan --model mixtral-8x7b --devices 16 --microbatches 32 --mem-limit 50 --time-budget 2 --quiet --out "$tmp/tb2.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
el=$(since "$t0")
if [ $rc -eq 1 ] && below "$el" 4.5 && [ ! -e "$tmp/tb2.json" ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] \
   && grep -q "no plan that fits 50.00 GiB per device was found within the 2 s time budget" "$tmp/err"; then ok
else bad "plan --time-budget 2 (nothing fits): rc=$rc after $el s: $(head -n 3 "$tmp/err")"; fi
# static memory alone does not fit: the advice's searches run inside the same budget (they took
# 8.7 s after a budget of 2 once), and the user hears that the budget cut them
t0=$(date +%s.%N)
"$OP" plan --model nemotron-h-8b --devices 4 --microbatches 8 --mem-limit 20 --time-budget 2 --out "$tmp/tb3.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
el=$(since "$t0")
if [ $rc -eq 1 ] && below "$el" 4.5 && [ ! -e "$tmp/tb3.json" ] && grep -q "^what would fit:" "$tmp/err" \
   && grep -q "the --time-budget ended the search for what would fit" "$tmp/err"; then ok
else bad "plan --time-budget 2 (static does not fit): rc=$rc after $el s: $(cat "$tmp/err")"; fi
# compare: the budget is the tuner's (help); the classic rows before it are timed alone
t0=$(date +%s.%N)
"$OP" compare --model mixtral-8x7b --devices 16 --microbatches 32 --no-tune > /dev/null 2>&1
ref=$(since "$t0")
t0=$(date +%s.%N)
"$OP" compare --model mixtral-8x7b --devices 16 --microbatches 32 --json --time-budget 2 > "$tmp/out" 2> "$tmp/err"; rc=$?
el=$(since "$t0")
if [ $rc -eq 0 ] && below "$el" "$(awk -v r="$ref" 'BEGIN { print r + 4 }')" \
   && jq -e '[.plans[].name] | index("octopipe") != null' "$tmp/out" > /dev/null; then ok
else bad "compare --time-budget 2: rc=$rc after $el s, $ref s without the tuner: $(head -n 2 "$tmp/err")"; fi
# --progress with --json: the lines on stderr (the tuner's, or on a slow build the classic
# rows' before it), the JSON alone on stdout (--json dropped them);
# the tuner out of time before a plan fitted: its row skipped with the reason
"$OP" compare --model mixtral-8x7b --devices 16 --microbatches 32 --mem-limit 50 --json --progress --time-budget 2 > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc -eq 0 ] && jq -e '.plans | length > 0' "$tmp/out" > /dev/null && grep -Eq "^octopipe compare: (tuning: |schedules )" "$tmp/err" \
   && jq -e '.skipped | map(select(.name == "octopipe" and (.reason | test("within the 2 s time budget")))) | length == 1' "$tmp/out" > /dev/null
then ok; else bad "compare --json --progress: rc=$rc, stderr: $(head -n 2 "$tmp/err"), skipped: $(jq -c .skipped "$tmp/out")"; fi
# numbers are decimal: strtod alone reads "0x40" as 64 and "" as 0
expect_err "--mem-limit expects a number (0.001 to 1000000), got '0x40'" compare --model llama2-7b --devices 4 --microbatches 8 --mem-limit 0x40
expect_err "--rank needs an integer in \\[0, 1000000\\] (got '')" lower tests/data/plans/1f1b-p4-m8.json --rank ""
expect_err "--bytes-scale needs a number" lower tests/data/plans/1f1b-p4-m8.json --bytes-scale 0x1
expect_err "--lr needs a number in (0, 1e6] (got '0x1p-8')" train --lr 0x1p-8
expect_err "--time-scale needs a decimal number in" run tests/data/plans/1f1b-p4-m8.json --emulate --threads --time-scale 0x1p-4
expect_err "--recv-window needs a whole number in" run tests/data/plans/1f1b-p4-m8.json --emulate --threads --recv-window 2.5
# a leading space: strtol/strtod skip it while a trailing one is refused; both are refused now
expect_err "--devices expects a whole number (1 to" compare --model llama2-7b --devices " 4" --microbatches 8
expect_err "--mem-limit expects a number (0.001 to 1000000), got ' 40'" compare --model llama2-7b --devices 4 --microbatches 8 --mem-limit " 40"
expect_err "count ' 2' of h100 must be a whole number" compare --model llama2-7b --gpus "h100: 2,a100:2" --microbatches 8
expect_err "--rank needs an integer in \\[0, 1000000\\] (got ' 1')" lower tests/data/plans/1f1b-p4-m8.json --rank " 1"
expect_err "--seed needs a non-negative integer (got ' 3')" train --seed " 3"
# past the limit: the line gives the range (it read "needs a non-negative integer" for 2000000)
expect_err "--rank needs an integer in \\[0, 1000000\\] (got '2000000')" lower tests/data/plans/1f1b-p4-m8.json --rank 2000000
expect_err "--recv-window needs an integer in \\[1, 1000000\\] (got '0')" lower tests/data/plans/1f1b-p4-m8.json --recv-window 0

expect_err "--repeats expects a whole number (1 to 1000), got ' 2'" profile --model tests/data/plans/1f1b-p4-m8.json --repeats " 2"
# profile --model: its flags are in `profile --help` and a typo gets the nearest; a model of
# embedding and head alone is refused (it profiled "EL" and wrote a file)
"$OP" profile --help | grep -q -- "--repeats N" && ok || bad "profile --help lacks the model profiler's --repeats"
expect_err "did you mean --repeats?" profile --model tiny --repeat 3
expect_err "did you mean --iters?" profile comm --iter 3
expect_err "--model needs a value" profile --model ""
expect_err 'pattern "": no layers' profile --model tiny:
expect_err 'pattern "EL": no layers' train --model EL --devices 1 --microbatches 1 --steps 1
# a model where a plan goes and a plan where a model goes: said as such (it read "unknown key
# \"_name_or_path\"" and "missing required field 'model_type'")
expect_err "tests/data/hf/llama.json: an HF config.json, not a plan file" sim tests/data/hf/llama.json
expect_err "tests/data/profiles/tiny.json: a profile, not a plan file" sim tests/data/profiles/tiny.json
expect_err "an octopipe.plan/1 file, not a model" models tests/data/plans/1f1b-p4-m8.json
# a byte of a multi-byte character is named as a byte, not written to the terminal alone
expect_err "unknown layer symbol byte 0xC3" train --model "EM$(printf '\303\251')L" --devices 1 --microbatches 1 --threads
# a --plan file that is missing is said before profiling and calibrating (it came after both)
expect_err "$tmp/none.json: cannot open" train --model small --devices 2 --microbatches 4 --threads --steps 2 --plan "$tmp/none.json" --calibrate 10
[ -s "$tmp/out" ] && bad "train --plan missing: worked first: $(head -n 2 "$tmp/out")" || ok
# RANK:OPINDEX was read by sscanf: spaces taken, a rank past INT_MAX undefined
expect_err "--inject-hang needs RANK:OPINDEX (got '1: 3')" run tests/data/plans/1f1b-p4-m8.json --emulate --inject-hang "1: 3"
expect_err "--inject-crash needs RANK:OPINDEX (got '99999999999:1')" run tests/data/plans/1f1b-p4-m8.json --emulate --inject-crash 99999999999:1
expect_err "--bytes-scale needs a decimal number in" exec tests/data/plans/1f1b-p4-m8.json --emulate --bytes-scale 0x1
# "-0" is 0: the run's header said "message bytes x-0"
"$OP" run tests/data/plans/1f1b-p4-m8.json --emulate --threads --time-scale 0.001 --bytes-scale -0 > "$tmp/out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "message bytes x0," "$tmp/out" && ok || bad "run --bytes-scale -0: rc=$rc $(head -n 1 "$tmp/out")"
# '-' for an input (it is stdout for output flags): one line that points to /dev/stdin, the same
# for every command (lower and run took it for an unknown flag)
for c in "sim -" "lower -" "export - --svg $tmp/x.svg" "run - --emulate --threads" "compare --model llama2-7b --devices 4 --microbatches 8 --cluster -"; do
  # shellcheck disable=SC2086 # c holds several words
  expect_err "read standard input as /dev/stdin" $c < tests/data/plans/1f1b-p4-m8.json
done
[ ! -e "$tmp/x.svg" ] && ok || bad "export - wrote its output"
if "$OP" sim /dev/stdin < tests/data/plans/1f1b-p4-m8.json | grep -q "reproduces the file's prediction exactly"; then ok
else bad "sim /dev/stdin"; fi
# TP wider than a node: priced at NVLink speed, which it would not get; said once
"$OP" compare --model llama2-7b --devices 2 --microbatches 4 --tp 16 --no-tune > /dev/null 2> "$tmp/err"
[ "$(grep -c "note: --tp 16 spans more than the 8 GPUs of a node" "$tmp/err")" -eq 1 ] && ok || bad "wide TP note: $(cat "$tmp/err")"
# a profile with memory sizes for some layers only: the peaks leave the others out, and say so
"$OP" compare --model nemotron-h-8b-profile --devices 4 --microbatches 8 --no-tune > /dev/null 2> "$tmp/err"
grep -q "note: 28 of 54 layers ('-' '\*') have no memory sizes" "$tmp/err" && ok || bad "partial memory note: $(cat "$tmp/err")"
"$OP" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune > /dev/null 2> "$tmp/err"
! grep -q "no memory sizes" "$tmp/err" && ok || bad "partial memory note on a full model: $(cat "$tmp/err")"
# tokens per microbatch near the largest double: refused on reading as the planner refuses it
# (sim --json printed '"tokens_per_s": ,', then null, for tokens/s past the largest double)
sed 's/"tokens_per_mb": 4096/"tokens_per_mb": 1e308/' tests/data/plans/1f1b-p4-m8.json > "$tmp/huge-tokens.json"
expect_err "tokens per microbatch 1e+308 is not in .0, 2^53." sim "$tmp/huge-tokens.json" --json
# a plan file name with a control character or a byte that is not UTF-8: sim --json is still
# JSON (the name was copied raw, the control character dropped)
cp tests/data/plans/1f1b-p4-m8.json "$tmp/lat$(printf '\351\001')in.json"
if "$OP" sim "$tmp/lat$(printf '\351\001')in.json" --json > "$tmp/out" 2> "$tmp/err" \
   && jq -e '.file | endswith("lat\ufffd\u0001in.json")' "$tmp/out" > /dev/null; then ok
else bad "sim --json, file name not UTF-8: $(head -c 300 "$tmp/out" "$tmp/err")"; fi
# a directory where a file is expected: named as such, not "read error"
mkdir -p "$tmp/adir"
expect_err "$tmp/adir: is a directory" sim "$tmp/adir"
expect_err "$tmp/adir: is a directory" models "$tmp/adir"
expect_err "$tmp/adir: is a directory" compare --model llama2-7b --devices 4 --microbatches 8 --cluster "$tmp/adir"

# a write error on stdout (a full disk) fails the command with one line, never exit 0
P1=tests/data/plans/1f1b-p4-m8.json
for args in "sim $P1" "models" "lower $P1"; do
  # shellcheck disable=SC2086 # args holds several words
  "$OP" $args > /dev/full 2> "$tmp/err"; rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] \
     && grep -q "^octopipe: write error on standard output: No space left on device$" "$tmp/err"; then ok
  else bad "octopipe $args > /dev/full -> rc=$rc stderr: $(cat "$tmp/err")"; fi
done
# an output flag's '-' is checked where written: reported once, not again at exit
"$OP" export "$P1" --svg - > /dev/full 2> "$tmp/err"; rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "write failed" "$tmp/err"; then ok
else bad "export --svg - > /dev/full -> rc=$rc stderr: $(cat "$tmp/err")"; fi

# a memory limit no plan can meet: the memory-aware bound is "none", never "inf ms"
"$OP" compare --model llama2-7b --devices 4 --microbatches 8 --mem-limit 10 --no-tune > "$tmp/out" 2>&1
if grep -q "memory-aware bound: none" "$tmp/out" && ! grep -qi "inf ms" "$tmp/out"; then ok
else bad "compare --mem-limit 10: $(grep -i "bound" "$tmp/out")"; fi
"$OP" compare --model llama2-7b --devices 4 --microbatches 8 --mem-limit 10 --no-tune --json > "$tmp/out" 2>&1
if jq -e 'has("lower_bound_mem_ms") and .lower_bound_mem_ms == null' "$tmp/out" > /dev/null; then ok
else bad "compare --mem-limit 10 --json: lower_bound_mem_ms is not null"; fi

# compare --json's limits are whole bytes, as the plan files write them (at the dump's 10
# digits 77309411328 came out as 7.730941133e10, above the limit "fits" was judged against),
# and a mixed cluster lists each device's own limit
"$OP" compare --model llama2-7b --gpus h200:2,h100-80gb:2 --microbatches 8 --no-tune --json \
  --plans-dir "$tmp/cl" > "$tmp/out" 2>&1
if grep -q '"mem_limit_bytes": 77309411328,' "$tmp/out" \
   && jq -e --slurpfile p "$tmp/cl/1f1b.json" '.mem_limit_bytes == $p[0].mem_limit_bytes
      and .device_mem_limit_bytes == $p[0].device_mem_limit_bytes' "$tmp/out" > /dev/null; then ok
else bad "compare --json limits differ from the plan file's: $(grep -A5 mem_limit "$tmp/out" | tr -d '\n ')"; fi

# a memory-aware bound above the other by less than the printed 0.01 ms is not a second line
# (llama2-7b P=4 M=8 printed "lower bound 747.09 ms; memory-aware 747.09 ms")
"$OP" compare --model llama2-7b --devices 4 --microbatches 8 --no-tune > "$tmp/out" 2>&1
if grep -q "^lower bound 747.09 ms$" "$tmp/out"; then ok
else bad "compare llama2-7b P=4: $(grep -i "bound" "$tmp/out")"; fi

# --plans-dir writes one plan per schedule, each re-simulates to its prediction
mkdir -p "$tmp/plans"
if "$OP" compare --model nemotron-h-8b --devices 4 --microbatches 8 --no-tune --plans-dir "$tmp/plans" > /dev/null 2>&1 \
   && [ -s "$tmp/plans/1f1b.json" ] && [ -s "$tmp/plans/i1f1b.json" ]; then ok; else bad "plans-dir"; fi
for p in "$tmp"/plans/*.json; do
  [ -e "$p" ] || continue
  if "$OP" sim "$p" > "$tmp/sim.out" 2>&1; then ok; else bad "sim $p: $(tail -n 2 "$tmp/sim.out")"; fi
done

# plan: deterministic for a seed, valid, re-simulates exactly; refusals leave no file
if "$OP" plan --model nemotron-h-8b --devices 4 --microbatches 8 --quiet --out "$tmp/a.json" > /dev/null 2>&1 \
   && "$OP" plan --model nemotron-h-8b --devices 4 --microbatches 8 --quiet --out "$tmp/b.json" > /dev/null 2>&1 \
   && cmp -s "$tmp/a.json" "$tmp/b.json"; then ok; else bad "plan is not deterministic for a seed"; fi
if "$OP" sim "$tmp/a.json" 2>&1 | grep -q "reproduces the file's prediction exactly"; then ok; else bad "tuned plan does not re-simulate exactly"; fi
# a plan whose peak is over its own limit (a hand-edited limit): sim names the devices
jq '.mem_limit_bytes = 1' "$tmp/a.json" > "$tmp/lim.json"
if "$OP" sim "$tmp/lim.json" 2>&1 | grep -q "over the limit of device(s): 0 1"; then ok; else bad "sim does not flag a plan over its limit"; fi
"$OP" sim "$tmp/a.json" 2>&1 | grep -q "over the limit" && bad "sim flags a plan that fits" || ok
expect_err "--out PLAN.json is required" plan --model nemotron-h-8b --devices 4 --microbatches 8
expect_err "placement" plan --model nemotron-h-8b --devices 4 --microbatches 8 --placement diagonal --out "$tmp/x.json"
"$OP" plan --model jamba-v0.1 --devices 4 --microbatches 8 --quiet --out "$tmp/nofit.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
# static memory alone is over the limit: said as such, the fixes computed (--tp 4), and no
# --mem-limit above the 80 GiB the GPU has (216 GiB was the ladder's first rung)
if [ $rc -eq 1 ] && grep -q "static memory .* alone does not" "$tmp/err" && grep -q -- "^--tp 4: a plan fits" "$tmp/err" \
   && ! grep -q -- "--mem-limit" "$tmp/err" && [ ! -e "$tmp/nofit.json" ]; then ok
else bad "plan that fits nowhere: rc=$rc, $(cat "$tmp/err")"; fi
# a limit above what any device has is taken, with a note (a slip of a digit, 800 for 80)
"$OP" plan --model llama2-7b --devices 4 --microbatches 8 --mem-limit 800 --quiet --out "$tmp/big.json" > /dev/null 2> "$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "note: --mem-limit 800 GiB is more than any device has (80 GiB)" "$tmp/err"; then ok
else bad "--mem-limit above the GPU: rc=$rc, $(cat "$tmp/err")"; fi
[ ! -e "$tmp/x.json" ] && ok || bad "refused plan left a file"

# a tiny limit is echoed as given, not as 0.00
"$OP" plan --model llama2-7b --devices 4 --microbatches 8 --mem-limit 0.001 --quiet --out "$tmp/x.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "^octopipe plan: no plan fits 0.001 GiB per device" "$tmp/err" && grep -q "over the 0.001 GiB limit" "$tmp/err" \
   && [ ! -e "$tmp/x.json" ]; then ok
else bad "--mem-limit 0.001: rc=$rc $(head -n 3 "$tmp/err")"; fi
# an input without end (a device, a pipe) is refused after 1 GiB, not read until memory runs out
expect_err "/dev/zero: more than 1024 MiB from a pipe or device" sim /dev/zero
# one device: the bound is the work itself, summed in another order; the gap is 0.00, not -0.00
"$OP" compare --model llama2-7b --devices 1 --microbatches 4 --mem-limit none --quiet > "$tmp/out" 2>&1
if grep -q "^octopipe .* 0.00$" "$tmp/out" && ! grep -q -- "-0.00" "$tmp/out"; then ok
else bad "compare --devices 1 gap: $(grep "^octopipe" "$tmp/out")"; fi

# devices the bound cannot use: gemma2-9b's 256k-vocabulary head runs whole on one device, so
# 16 H100s at M = 32 have the bound of fewer; plan says how many, names the layer and the flag
# (and the count it names has that bound: rerun there, the same bound is printed)
if "$OP" plan --model gemma2-9b --devices 16 --microbatches 32 --quiet --time-budget 5 --out "$tmp/g.json" > "$tmp/out" 2> "$tmp/err" \
   && k=$(sed -n 's/^fewer devices: \([0-9]*\) devices have the same lower bound, \([0-9.]*\) ms .*/\1/p' "$tmp/out") \
   && lb=$(sed -n 's/^fewer devices: [0-9]* devices have the same lower bound, \([0-9.]*\) ms .*/\1/p' "$tmp/out") \
   && [ -n "$k" ] && [ "$k" -lt 16 ] && grep -q "^  the busiest, device [0-9]*, runs layer 43 (head) alone" "$tmp/out" \
   && grep -q "^  --devices $k tunes the smaller job" "$tmp/out" \
   && "$OP" plan --model gemma2-9b --devices "$k" --microbatches 32 --quiet --time-budget 5 --out "$tmp/g2.json" > "$tmp/out2" 2>&1 \
   && grep -q "^lower bound $lb ms" "$tmp/out2"; then ok
else bad "plan's fewer-devices line: $(grep -A2 '^fewer' "$tmp/out") / $(grep '^lower' "$tmp/out2" 2>/dev/null) $(tail -n 2 "$tmp/err")"; fi
# compare says the same: in its JSON (bound_devices) and under its bound line
if "$OP" compare --model gemma2-9b --devices 16 --microbatches 32 --no-tune --json > "$tmp/c.json" 2> "$tmp/err" \
   && [ "$(jq .bound_devices "$tmp/c.json")" = "$k" ] \
   && "$OP" compare --model gemma2-9b --devices 16 --microbatches 32 --no-tune > "$tmp/out" 2> "$tmp/err" \
   && grep -q "^fewer devices: $k devices have the same lower bound, $lb ms" "$tmp/out" \
   && "$OP" compare --model llama2-7b --devices 8 --microbatches 16 --no-tune --json > "$tmp/c.json" 2> "$tmp/err" \
   && [ "$(jq .bound_devices "$tmp/c.json")" = 8 ]; then ok
else bad "compare's bound_devices: $(grep '^fewer' "$tmp/out") $(jq .bound_devices "$tmp/c.json") $(tail -n 2 "$tmp/err")"; fi
# --device-sweep: P, its halves while static memory fits (the first that does not is a row),
# and the bound's count; the P row is the plan --out gets, the same as plan without the sweep
"$OP" plan --model gemma2-9b --devices 16 --microbatches 32 --device-sweep --out "$tmp/ds.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
mk16=$(sed -n 's/^ *16\* *\([0-9.]*\) .*/\1/p' "$tmp/out")
if [ $rc -eq 0 ] && grep -qE '^ +2 +- .*static memory does not fit' "$tmp/out" && grep -qE '^ +4 +[0-9.]+ ' "$tmp/out" \
   && grep -qE '^ +8 +[0-9.]+ ' "$tmp/out" && grep -qE "^ +$k= +[0-9.]+ " "$tmp/out" && [ -n "$mk16" ] \
   && grep -q "^makespan $mk16 ms" "$tmp/out" && "$OP" sim "$tmp/ds.json" | grep -q "makespan *$mk16 ms" \
   && "$OP" plan --model gemma2-9b --devices 16 --microbatches 32 --quiet --out "$tmp/g3.json" | grep -q "^makespan $mk16 ms"; then ok
else bad "plan --device-sweep: rc=$rc $(cat "$tmp/out" | head -n 9) $(tail -n 2 "$tmp/err")"; fi
# on a mixed cluster: each kind of device alone, then all (the plan --out gets, as without it)
"$OP" plan --model llama2-7b --gpus h100-80gb:2,a100-80gb:2 --microbatches 8 --device-sweep --out "$tmp/dm.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
mk=$(sed -n 's/^all 4\* *\([0-9.]*\) .*/\1/p' "$tmp/out")
if [ $rc -eq 0 ] && grep -qE '^2 x h100-80gb +[0-9.]+ ' "$tmp/out" && grep -qE '^2 x a100-80gb +[0-9.]+ ' "$tmp/out" \
   && [ -n "$mk" ] && grep -q "^makespan $mk ms" "$tmp/out" \
   && "$OP" plan --model llama2-7b --gpus h100-80gb:2,a100-80gb:2 --microbatches 8 --quiet --out "$tmp/dm2.json" | grep -q "^makespan $mk ms"; then ok
else bad "--device-sweep on a mixed cluster: rc=$rc $(head -n 6 "$tmp/out") $(tail -n 2 "$tmp/err")"; fi
# P's own row under a limit its static memory exceeds says so, as the rows below it do (it said
# only "no plan fits")
"$OP" plan --model nemotron-h-8b --devices 4 --microbatches 8 --mem-limit 20 --device-sweep > "$tmp/out" 2> "$tmp/err"
grep -qE "^ +4\* .* static memory does not fit \(33.95 GiB on some device\)$" "$tmp/out" && ok \
  || bad "--device-sweep, P's static over the limit: $(cat "$tmp/out")"
expect_err "--mem-sweep and --device-sweep are separate runs" plan --model llama2-7b --devices 4 --microbatches 8 --device-sweep --mem-sweep
# a measured 4-device cluster file: fewer devices are its first ones, their corner of the links
python3 - "$tmp/c4.json" <<'PY'
import json, sys
n = 4
lat = [[0 if a == b else 0.01 for b in range(n)] for a in range(n)]
bw = [[1 if a == b else (360 if a // 2 == b // 2 else 40) for b in range(n)] for a in range(n)]
json.dump({"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 360,
           "inter_lat_ms": 0.025, "inter_bw_GBps": 40, "gpus": "h100-80gb:4",
           "pair_lat_ms": lat, "pair_bw_GBps": bw}, open(sys.argv[1], "w"))
PY
if "$OP" plan --model llama2-7b --cluster "$tmp/c4.json" --microbatches 8 --device-sweep > "$tmp/out" 2> "$tmp/err" \
   && grep -qE '^ +2 +[0-9.]+ .* keep$' "$tmp/out" && grep -qE '^ +4\* +[0-9.]+ ' "$tmp/out"; then ok
else bad "--device-sweep on a cluster file: $(cat "$tmp/out" "$tmp/err")"; fi
# where the work over all devices sets the bound, no such line
if "$OP" plan --model llama2-7b --devices 8 --microbatches 16 --quiet --out "$tmp/l.json" > "$tmp/out" 2> "$tmp/err" \
   && grep -q "^lower bound" "$tmp/out" && ! grep -q "^fewer devices" "$tmp/out"; then ok
else bad "llama2-7b P=8: $(grep -A2 '^fewer' "$tmp/out") $(tail -n 2 "$tmp/err")"; fi

echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
