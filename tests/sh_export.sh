#!/usr/bin/env bash
# sh_export.sh: `octopipe export` from the command line: flag errors (one line, exit 2), every
# output from real plans (made by `octopipe compare --plans-dir`), refusals that leave no file
# behind, and the written CSV re-checked with --check-csv.
set -u
cd "$(dirname "$0")/.."
OCTOPIPE=${OCTOPIPE:-build/octopipe}
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
finish() { echo "sh_export: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
if [ ! -x "$OCTOPIPE" ]; then echo "skip: $OCTOPIPE not built"; finish; fi
tmp=$(mktemp -d /tmp/octopipe-export-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# expect RC WHAT CMD...: exit status RC and, for errors, exactly one line on stderr
expect() {
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$what: exit $rc, want $want: $(head -c 300 "$tmp/err")"; return 1; fi
  if [ "$want" -ne 0 ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    bad "$what: want one error line, got: $(cat "$tmp/err")"; return 1; fi
  ok; return 0
}
has() { if grep -q -- "$2" "$1"; then ok; else bad "$3: '$2' not in $(head -c 300 "$1")"; fi; }
absent() { if [ ! -e "$1" ]; then ok; else bad "$2: $1 was written"; fi; }

# --- flags -----------------------------------------------------------------------------
expect 0 "help" "$OCTOPIPE" export --help && has "$tmp/out" "--torch-csv FILE" "help"
has "$tmp/out" "examples:" "help"
expect 2 "no plan" "$OCTOPIPE" export --svg "$tmp/x.svg"
has "$tmp/err" "missing PLAN" "no plan"
expect 2 "unknown flag" "$OCTOPIPE" export p.json --svgg x
has "$tmp/err" "unknown flag '--svgg'" "unknown flag"
expect 2 "nothing to export" "$OCTOPIPE" export p.json
expect 2 "missing value" "$OCTOPIPE" export p.json --svg
expect 2 "two outputs one file" "$OCTOPIPE" export p.json --svg "$tmp/a" --chrome-trace "$tmp/a"
# '-' and another name of stdout: one output to stdout all the same (both were written there)
expect 2 "stdout twice" "$OCTOPIPE" export p.json --svg - --chrome-trace /dev/stdout
has "$tmp/err" "only one output can go to stdout" "stdout twice"
expect 2 "stdout twice, layout" "$OCTOPIPE" export p.json --torch-csv /dev/stdout --megatron-layout
expect 2 "missing plan file" "$OCTOPIPE" export "$tmp/nope.json" --svg "$tmp/x.svg"
absent "$tmp/x.svg" "missing plan file"
echo '{"format": "octopipe.plan/1", "devices": ' >"$tmp/broken.json"
expect 2 "broken plan" "$OCTOPIPE" export "$tmp/broken.json" --svg "$tmp/x.svg"
absent "$tmp/x.svg" "broken plan"

# a plan whose every op takes 0 ms (all layer times 0): refused on reading, exit 2, as the
# planner refuses such a model; it was read, and the exports said "simulate it first"
sed -e 's/"F": 1, "I": 1, "W": 1/"F": 0, "I": 0, "W": 0/' -e 's/, "start": [0-9.e+-]*, "end": [0-9.e+-]*//' \
    -e '/"predicted"/,$d' tests/data/plans/1f1b-p4-m8.json | sed '$s/,$//' >"$tmp/zero.json"
echo '}' >>"$tmp/zero.json"
expect 2 "zero-time plan" "$OCTOPIPE" export "$tmp/zero.json" --svg "$tmp/x.svg"
has "$tmp/err" "zero.json: layers: every op takes 0 ms" "zero-time plan"
absent "$tmp/x.svg" "zero-time plan"

# --- real plans --------------------------------------------------------------------------
mkplans() { # model dir
  "$OCTOPIPE" compare --model "$1" --devices 4 --microbatches 8 --seq 1024 --plans-dir "$2" \
    >/dev/null 2>"$tmp/compare.err"
}
mkdir -p "$tmp/tf" "$tmp/hy"
if ! mkplans llama2-7b "$tmp/tf" || [ ! -s "$tmp/tf/1f1b.json" ]; then
  echo "skip: cannot make plans with octopipe compare: $(head -c 200 "$tmp/compare.err")"
  finish
fi

d=$tmp/o
mkdir -p "$d"
expect 0 "1f1b all outputs" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --torch-csv "$d/1f1b.csv" \
  --torch-fqns "$d/fqns.json" --megatron-layout "$d/meg.txt" --chrome-trace "$d/t.json" --svg "$d/t.svg"
for f in 1f1b.csv fqns.json meg.txt t.json t.svg; do [ -s "$d/$f" ] && ok || bad "1f1b: $f missing"; done
[ "$(wc -l <"$d/1f1b.csv")" -eq 4 ] && ok || bad "1f1b CSV: want 4 rows"
has "$d/1f1b.csv" "^0F0," "1f1b CSV first cell"
has "$d/meg.txt" "^--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'E" "layout"
has "$d/t.svg" "</svg>" "svg closed"
has "$d/fqns.json" "tok_embeddings" "fqns"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); ev=t["traceEvents"]; assert any(e["ph"]=="C" for e in ev); assert sum(e["ph"]=="X" for e in ev) > 0' "$d/t.json" \
    && ok || bad "chrome trace is not valid JSON with X and C events"
  python3 -c 'import json,sys; l=json.load(open(sys.argv[1])); assert len(l)==4' "$d/fqns.json" && ok || bad "fqns JSON"
  python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$d/t.svg" && ok || bad "svg is not well-formed XML"
fi
# the written CSV passes the checker again; a damaged one does not
expect 0 "check-csv" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --check-csv "$d/1f1b.csv"
has "$tmp/out" "passes torch's checks" "check-csv"
sed '1s/^0F0,//' "$d/1f1b.csv" >"$d/bad.csv"
expect 1 "check-csv damaged" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --check-csv "$d/bad.csv"
has "$tmp/err" "stage 0, microbatch 0 without first running forward" "check-csv damaged"
# a --check-csv file that cannot be read is a bad input (exit 2), one that fails the checks a refusal (1)
expect 2 "check-csv missing" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --check-csv "$d/nope.csv"
has "$tmp/err" "nope.csv" "check-csv missing"
expect 2 "check-csv directory" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --check-csv "$d"
# layout to stdout
expect 0 "layout stdout" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --megatron-layout
has "$tmp/out" "pipeline-model-parallel-layout" "layout stdout"
# --megatron-layout FILE before PLAN: FILE was read as the plan; the line says how to write it
expect 2 "layout file before plan" "$OCTOPIPE" export --megatron-layout "$d/first.txt" "$tmp/tf/1f1b.json"
has "$tmp/err" "put PLAN first (export $tmp/tf/1f1b.json --megatron-layout $d/first.txt)" "layout file before plan"
absent "$d/first.txt" "layout file before plan"

# one output that cannot be written (a full device) leaves none of the others behind: the
# files before it in the write order were kept
if [ -w /dev/full ]; then
  expect 1 "full device" "$OCTOPIPE" export "$tmp/tf/1f1b.json" --torch-csv "$d/full.csv" \
    --svg "$d/full.svg" --chrome-trace "$d/full.json" --torch-stage-map /dev/full
  has "$tmp/err" "/dev/full: write failed" "full device"
  for f in full.csv full.svg full.json; do absent "$d/$f" "full device"; done
  [ -z "$(ls "$d" | grep '\.tmp\.')" ] && ok || bad "full device: temporary files stayed: $(ls "$d")"
fi

# a model file whose name is cut mid-character (64 bytes for the model name) or is not UTF-8:
# the plan file written stays UTF-8 (it held half a character, and no reader took it) and the
# name reaches the trace and the SVG whole
long=$(printf 'a%.0s' $(seq 61))
mkdir -p "$tmp/utf8"
cp data/hf-configs/llama2-7b.json "$tmp/utf8/${long}模型.json"
cp data/hf-configs/llama2-7b.json "$tmp/utf8/lat$(printf '\351')in.json"
for m in "$tmp/utf8/${long}模型.json" "$tmp/utf8/lat$(printf '\351')in.json"; do
  rm -rf "$tmp/utf8/p"
  if "$OCTOPIPE" compare --model "$m" --devices 4 --microbatches 8 --no-tune --plans-dir "$tmp/utf8/p" \
       >/dev/null 2>"$tmp/err"; then ok; else bad "utf8 name compare: $(head -c 300 "$tmp/err")"; fi
  expect 0 "utf8 name export" "$OCTOPIPE" export "$tmp/utf8/p/1f1b.json" --svg "$d/u.svg" --chrome-trace "$d/u.json"
  if command -v python3 >/dev/null; then
    python3 -c 'import json, sys, xml.dom.minidom as m; json.loads(open(sys.argv[1], "rb").read().decode("utf-8")); m.parse(sys.argv[2])' \
      "$d/u.json" "$d/u.svg" && ok || bad "utf8 name: trace or SVG is not valid UTF-8 JSON / XML"
  fi
done

# U+FFFE in a plan's name: valid in its JSON, no XML character: left out of the SVG (it did not parse)
sed 's/"name": "1f1b"/"name": "x\\ufffey"/' "$tmp/tf/1f1b.json" >"$tmp/fffe.json"
expect 0 "U+FFFE name" "$OCTOPIPE" export "$tmp/fffe.json" --svg "$d/fffe.svg"
if command -v python3 >/dev/null; then
  python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$d/fffe.svg" && ok || bad "U+FFFE name: SVG does not parse"
fi

# a GPU type name the SVG's margin cuts (14 bytes) inside a character: cut before it (half of
# it is no UTF-8 and the SVG did not parse)
if "$OCTOPIPE" compare --model llama2-7b --gpus h100-80gb:2,a100-80gb:2 --microbatches 4 --no-tune \
     --plans-dir "$tmp/mx" >/dev/null 2>"$tmp/err"; then
  sed 's/"name": "a100-80gb"/"name": "abcdefghijklm\\u00e9"/' "$tmp/mx/1f1b.json" >"$tmp/cut.json"
  expect 0 "type name cut" "$OCTOPIPE" export "$tmp/cut.json" --svg "$d/cut.svg"
  has "$d/cut.svg" ">abcdefghijklm</tspan>" "type name cut"
  if command -v python3 >/dev/null; then
    python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$d/cut.svg" && ok || bad "type name cut: SVG does not parse"
  fi
else
  bad "compare --gpus: $(head -c 300 "$tmp/err")"
fi

# interleaved (loop, 2 stages per device): layout with VPP 2 and a loop CSV
if [ -s "$tmp/tf/i1f1b.json" ]; then
  expect 0 "i1f1b" "$OCTOPIPE" export "$tmp/tf/i1f1b.json" --torch-csv "$d/i.csv" --megatron-layout "$d/i.txt"
  has "$d/i.txt" "pipeline-model-parallel-layout 'E" "i1f1b layout"
  [ "$(wc -l <"$d/i.csv")" -eq 4 ] && ok || bad "i1f1b CSV: want 4 rows"
fi
# V placement: Megatron refuses and nothing at all is written (even the SVG that could be made)
for v in zbv dualpipev; do
  [ -s "$tmp/tf/$v.json" ] || continue
  expect 1 "$v megatron" "$OCTOPIPE" export "$tmp/tf/$v.json" --svg "$d/$v.svg" --megatron-layout "$d/$v.txt"
  has "$tmp/err" "V placement" "$v megatron"
  absent "$d/$v.svg" "$v refused"
  absent "$d/$v.txt" "$v refused"
  expect 0 "$v torch csv" "$OCTOPIPE" export "$tmp/tf/$v.json" --torch-csv "$d/$v.csv"
done

# the tuned plan (any placement, unequal stages per device allowed): the CSV, torch's lowering
# of it and the stage map all export, no force flag
if [ -s "$tmp/tf/octopipe.json" ]; then
  expect 0 "tuned torch" "$OCTOPIPE" export "$tmp/tf/octopipe.json" --torch-csv "$d/t.csv" \
    --torch-comms-csv "$d/tc.csv" --torch-stage-map "$d/tm.json"
  has "$d/tc.csv" "SEND_F" "tuned comms csv"
  has "$d/tc.csv" "REDUCE_GRAD" "tuned comms csv"
  has "$d/tm.json" '"stage_to_rank": \[' "tuned stage map"
  [ "$(wc -l <"$d/tc.csv")" -eq 4 ] && ok || bad "tuned comms CSV: want 4 rows"
  expect 2 "no force flag" "$OCTOPIPE" export "$tmp/tf/octopipe.json" --torch-csv "$d/f.csv" --force
fi

# one microbatch: the tuned plan keeps the layers on fewer devices; torch needs a stage on
# every rank, so the refusal names the idle devices and the device count to plan for
if "$OCTOPIPE" plan --model tests/data/hf/llama.json --devices 4 --microbatches 1 \
     --out "$tmp/idle.json" >/dev/null 2>"$tmp/idle.err"; then
  ok
  expect 1 "idle devices csv" "$OCTOPIPE" export "$tmp/idle.json" --torch-csv "$d/idle.csv"
  has "$tmp/err" "hold.* no stage" "idle devices csv"
  has "$tmp/err" "(--devices [0-9]" "idle devices csv"
  absent "$d/idle.csv" "idle devices csv"
  expect 1 "idle devices comms" "$OCTOPIPE" export "$tmp/idle.json" --torch-comms-csv "$d/idle.csv"
  expect 0 "idle devices svg" "$OCTOPIPE" export "$tmp/idle.json" --svg "$d/idle.svg"
else
  bad "plan with one microbatch: $(head -c 300 "$tmp/idle.err")"
fi

# hybrid model: --hybrid-layer-pattern with | and no E/L symbols for embedding/head
if mkplans nemotron-h-8b "$tmp/hy" && [ -s "$tmp/hy/1f1b.json" ]; then
  expect 0 "hybrid layout" "$OCTOPIPE" export "$tmp/hy/1f1b.json" --megatron-layout "$d/h.txt"
  has "$d/h.txt" "--hybrid-layer-pattern 'M" "hybrid pattern"
  [ "$(tr -cd '|' <"$d/h.txt" | wc -c)" -eq 3 ] && ok || bad "hybrid: want 3 '|' in $(cat "$d/h.txt")"
  expect 1 "hybrid fqns" "$OCTOPIPE" export "$tmp/hy/1f1b.json" --torch-fqns "$d/h.json"
  absent "$d/h.json" "hybrid fqns refused"
fi

# --- the help's examples run as written, in order (the plans they export made by the lines
# before them; backslash lines joined), so each one works for a user who copies it
"$OCTOPIPE" export --help >"$tmp/help.txt" 2>&1
ex=$(mktemp -d "$tmp/examples-XXXXXX")
sed -n '/^examples:/,$p' "$tmp/help.txt" | sed -e :a -e '/\\$/N; s/\\\n *//; ta' |
  sed -n 's/^  octopipe //p' >"$tmp/examples.txt"
[ "$(wc -l <"$tmp/examples.txt")" -ge 4 ] && ok || bad "help examples: $(cat "$tmp/examples.txt")"
bin=$(cd "$(dirname "$OCTOPIPE")" && pwd)/$(basename "$OCTOPIPE")
while read -r line; do
  # shellcheck disable=SC2086
  set -- $line
  if [ "$1" = plan ]; then set -- "$@" --quiet; fi
  if (cd "$ex" && "$bin" "$@" >/dev/null 2>"$tmp/ex.err"); then ok
  else bad "help example 'octopipe $line': $(head -c 300 "$tmp/ex.err")"; fi
done <"$tmp/examples.txt"

# a plan from a profile whose every layer is measured records no batch (the profile holds for
# the batch it was measured at and does not say which): the Megatron export says how to set it
"$OCTOPIPE" plan --model tests/data/profiles/tiny.json --devices 2 --microbatches 4 --placement loop \
  --quiet --out "$tmp/prof.json" >/dev/null 2>&1
if ! grep -q '"batch"' "$tmp/prof.json" &&
   "$OCTOPIPE" export "$tmp/prof.json" --megatron-layout - 2>"$tmp/prof.err" | grep -q "^--pipeline-model-parallel-size 2 --hybrid-layer-pattern '[^']*'$" &&
   grep -q "^note: the plan file does not record its sequence length and micro-batch size .*--global-batch-size = 4 x --micro-batch-size" "$tmp/prof.err"; then ok
else bad "profile plan's batch: $(grep -c batch "$tmp/prof.json") $(cat "$tmp/prof.err")"; fi
# ... and one that says its batch ("seq", "mbs") is planned and exported at it; another --seq
# on the command line is refused in one line (its times hold for the profile's batch only)
jq '. + {seq: 2048, mbs: 2}' tests/data/profiles/tiny.json > "$tmp/profb.json"
"$OCTOPIPE" plan --model "$tmp/profb.json" --devices 2 --microbatches 4 --placement loop \
  --quiet --out "$tmp/profb.plan" >/dev/null 2>&1
if grep -q '"batch": {"seq": 2048, "mbs": 2}' "$tmp/profb.plan" &&
   "$OCTOPIPE" export "$tmp/profb.plan" --megatron-layout - 2>/dev/null | grep -q " --seq-length 2048 --micro-batch-size 2 --global-batch-size 8$"; then ok
else bad "profile with a batch: $(grep batch "$tmp/profb.plan")"; fi
"$OCTOPIPE" plan --model "$tmp/profb.json" --devices 2 --microbatches 4 --seq 4096 --quiet \
  --out "$tmp/profc.plan" >/dev/null 2>"$tmp/profc.err"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$tmp/profc.plan" ] && [ "$(wc -l <"$tmp/profc.err")" -eq 1 ] &&
  grep -q "profb.json was measured at seq 2048, mbs 2 (its \"seq\" and \"mbs\"); --seq 4096 --mbs 1 would need" "$tmp/profc.err" \
  && ok || bad "--seq against a profile's batch: rc=$rc $(cat "$tmp/profc.err")"

finish
