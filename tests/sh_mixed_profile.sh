#!/usr/bin/env bash
# CLI tests of profiles with measured times per GPU type (by_gpu): types the profile measured
# are not scaled and no note says they are; types it did not measure are named in the note;
# bad by_gpu entries are one line naming the file and the field, exit 2.
set -u
. "$(dirname "$0")/lib.sh"

P=tests/data/profiles
note() { # want-note(yes/no) type-in-note model gpus
  timeout -k 5 120 "$OP" compare --model "$3" --gpus "$4" --microbatches 8 --no-tune > "$tmp/out" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { bad "compare --model $3 --gpus $4: rc=$rc: $(tail -n 2 "$tmp/out")"; return; }
  if [ "$1" = yes ]; then
    grep -q "note: the profile's times are taken as measured on h100-80gb (--gpu); it has none of its own (by_gpu) for $2:" "$tmp/out" \
      && ok || bad "$3 on $4: no note naming $2: $(grep note "$tmp/out")"
  else
    grep -q "note: the profile" "$tmp/out" && bad "$3 on $4: a note though every type is measured: $(grep note "$tmp/out")" || ok
  fi
}
note no  ""        $P/by_gpu.json h100:2,a100:2
note yes h200      $P/by_gpu.json h100:2,h200:2
note yes a100-80gb $P/tiny.json   h100:2,a100:2
# the measured A100 times reach the plan: its A100 rows are the profile's (M: F 2.5, I 5, W 1)
timeout -k 5 120 "$OP" plan --model $P/by_gpu.json --gpus h100:2,a100:2 --microbatches 8 --quiet --out "$tmp/p.json" > /dev/null 2>&1 \
  || bad "plan with by_gpu failed"
jq -e '.device_types[1].name == "a100-80gb" and (.device_types[1].layers[1] | .F == 2.5 and .I == 5 and .W == 1)' "$tmp/p.json" > /dev/null \
  && ok || bad "plan file's A100 row is not the measured one: $(jq -c '.device_types[1].layers[1]' "$tmp/p.json" 2>&1)"

expect_err() { # expected-substring file
  timeout -k 5 60 "$OP" compare --model "$2" --gpus h100:2,a100:2 --microbatches 8 --no-tune > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -qF -- "$1" "$tmp/err"; then ok
  else bad "$2 -> rc=$rc (want 2) stderr: $(cat "$tmp/err")"; fi
}
jq '.by_gpu = {"v100": .by_gpu["a100-80gb"]}' $P/by_gpu.json > "$tmp/unknown.json"
expect_err "unknown.json: by_gpu: unknown device 'v100' (known: a100-40gb, a100-80gb" "$tmp/unknown.json"
jq '.by_gpu["a100-80gb"].backward_ms.M = -1' $P/by_gpu.json > "$tmp/neg.json"
expect_err "neg.json: by_gpu.a100-80gb.backward_ms['M']: expected a number >= 0" "$tmp/neg.json"
jq 'del(.by_gpu["a100-80gb"].forward_ms)' $P/by_gpu.json > "$tmp/nofwd.json"
expect_err "nofwd.json: by_gpu.a100-80gb.forward_ms: missing" "$tmp/nofwd.json"
jq 'del(.by_gpu["a100-80gb"].forward_ms["*"])' $P/by_gpu.json > "$tmp/nosym.json"
expect_err "nosym.json: by_gpu.a100-80gb.forward_ms has no time for symbol '*'" "$tmp/nosym.json"
# a type whose times are all 0 was a lower bound of 0 ms and gaps of 0% (compare), and a
# refusal naming no type (plan); either type, it is refused up front naming the type
jq '.by_gpu["a100-80gb"] |= map_values(map_values(0))' $P/by_gpu.json > "$tmp/zero_a100.json"
expect_err "on device type 1 (a100-80gb): every layer's forward, backward and weight time is 0" "$tmp/zero_a100.json"
jq '.forward_ms |= map_values(0) | .backward_ms |= map_values(0) | .weight_ms |= map_values(0) | del(.recompute_ms)' \
  $P/by_gpu.json > "$tmp/zero_h100.json"
expect_err "on device type 0 (h100-80gb): every layer's forward, backward and weight time is 0" "$tmp/zero_h100.json"

echo "sh_mixed_profile: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
