#!/usr/bin/env bash
# profile comm over several ranks: every pair of ranks is measured and written as the cluster
# file's pair_lat_ms / pair_bw_GBps (N x N, the same both ways), which plan and compare read
# back for N devices (the count --devices may leave out; another count refused); over 2 ranks only the fit, as before,
# unless --pairs.  Starts MPI ranks: OCTOPIPE_SAN_NO_LEAK_CHECK
set -u
. "$(dirname "$0")/lib.sh"

run() { # log args...
  local log=$1; shift
  timeout -k 5 150 "$OP" "$@" > "$log" 2>&1
}
# profile comm: the fit is of ping-pong times this machine measures; on a loaded machine a
# rank's wake-up can cost milliseconds, which may swamp the largest message and leave no
# bandwidth to fit.  The command refuses that noise ("fit no link ... no slower", exit 1,
# nothing written): measured again, up to 5 times; any other outcome counts at once
profile_comm() { # log args...
  local log=$1 i rc; shift
  for i in 1 2 3 4 5; do
    run "$log" profile comm "$@"; rc=$?
    [ $rc -eq 1 ] && grep -q "fit no link .*the larger messages were no slower" "$log" || return $rc
  done
  return $rc
}
profile_comm "$tmp/p3.log" --ranks 3 --max-bytes 16777216 --iters 12 --out "$tmp/c3.json" \
  || bad "profile comm --ranks 3: $(tail -n 5 "$tmp/p3.log")"
jq -e '(.pair_lat_ms | length) == 3 and (.pair_bw_GBps | length) == 3 and all(.pair_lat_ms[]; length == 3)
       and all(.pair_bw_GBps[]; length == 3)' "$tmp/c3.json" > /dev/null && ok || bad "c3.json: no 3 x 3 matrices"
# measured both ways once: symmetric; every link off the diagonal has a bandwidth > 0 and a latency >= 0
jq -e '[range(3) as $a | range(3) as $b | select($a != $b)
        | (.pair_lat_ms[$a][$b] == .pair_lat_ms[$b][$a]) and (.pair_bw_GBps[$a][$b] == .pair_bw_GBps[$b][$a])
          and .pair_bw_GBps[$a][$b] > 0 and .pair_lat_ms[$a][$b] >= 0] | all' "$tmp/c3.json" > /dev/null \
  && ok || bad "c3.json: matrices not symmetric or not positive: $(jq -c '.pair_bw_GBps' "$tmp/c3.json")"
grep -q "rank a rank b" "$tmp/p3.log" && grep -qE '^ +1 +2 ' "$tmp/p3.log" && ok || bad "no per-pair table: $(cat "$tmp/p3.log")"
# read back: 3 devices take the matrix (the plan file keeps it), 4 are refused
run "$tmp/plan.log" plan --model llama2-7b --cluster "$tmp/c3.json" --devices 3 --microbatches 6 --quiet --out "$tmp/p.json" \
  || bad "plan --cluster c3.json: $(tail -n 3 "$tmp/plan.log")"
want=$(jq '.pair_bw_GBps[1][2]' "$tmp/c3.json")
jq -e --argjson w "$want" '(.comm.pair_bw_GBps[1][2] - $w) | fabs < 1e-6 * $w' "$tmp/p.json" > /dev/null \
  && ok || bad "plan file's pair link 1 -> 2 is not the measured $want: $(jq -c '.comm.pair_bw_GBps' "$tmp/p.json")"
# without --devices the matrix says how many (it once asked for --devices)
timeout -k 5 60 "$OP" compare --model llama2-7b --cluster "$tmp/c3.json" --microbatches 6 --no-tune > "$tmp/out" 2> "$tmp/err" \
  && grep -q "^3 devices " "$tmp/out" && ok || bad "compare --cluster c3.json without --devices: $(cat "$tmp/err")"
timeout -k 5 60 "$OP" compare --model llama2-7b --cluster "$tmp/c3.json" --devices 4 --microbatches 6 --no-tune > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "c3.json: pair_lat_ms/pair_bw_GBps are 3 x 3 but there are 4 devices" "$tmp/err" \
  && ok || bad "4 devices on a 3 x 3 file: rc=$rc $(cat "$tmp/err")"
# 2 ranks: the fit only (the file fits any device count); --pairs adds the 2 x 2 matrix
profile_comm "$tmp/p2.log" --max-bytes 16777216 --iters 12 --out "$tmp/c2.json" || bad "profile comm: $(tail -n 3 "$tmp/p2.log")"
jq -e 'has("pair_lat_ms") | not' "$tmp/c2.json" > /dev/null && ok || bad "2 ranks wrote a matrix"
profile_comm "$tmp/p2p.log" --pairs --max-bytes 16777216 --iters 12 --out "$tmp/c2p.json" || bad "profile comm --pairs: $(tail -n 3 "$tmp/p2p.log")"
jq -e '(.pair_bw_GBps | length) == 2' "$tmp/c2p.json" > /dev/null && ok || bad "--pairs over 2 ranks wrote no 2 x 2 matrix"
timeout -k 5 10 "$OP" profile comm --ranks 1 > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q -- "--ranks needs an integer in \[2, 64\]" "$tmp/err" && ok || bad "--ranks 1 accepted: $(cat "$tmp/err")"
# the fit needs two message sizes (8 B, 32 B, ...): a smaller --max-bytes is refused before any
# rank starts; a fit that comes out NaN or without a bandwidth (larger messages no slower, as two
# tiny sizes may measure) is an error with nothing written, never an abort or a made-up link
timeout -k 5 10 "$OP" profile comm --iters 5 --max-bytes 31 --out "$tmp/m31.json" > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q -- "--max-bytes needs at least 32" "$tmp/err" && [ ! -e "$tmp/m31.json" ] \
  && ok || bad "--max-bytes 31: $(cat "$tmp/err")"
timeout -k 5 60 "$OP" profile comm --iters 5 --max-bytes 32 --out "$tmp/m32.json" > "$tmp/m32.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  jq -e '.intra_bw_GBps > 0 and .intra_bw_GBps < 1e6 and .intra_lat_ms >= 0' "$tmp/m32.json" > /dev/null \
    && ok || bad "--max-bytes 32 wrote an implausible fit: $(cat "$tmp/m32.json")"
else
  [ $rc -eq 1 ] && grep -q "fit no link" "$tmp/m32.log" && ! grep -q "internal error" "$tmp/m32.log" \
    && [ ! -e "$tmp/m32.json" ] && ok || bad "--max-bytes 32: rc=$rc $(tail -n 3 "$tmp/m32.log")"
fi
grep -qE "nan|1000000\.000 GB/s" "$tmp/m32.log" && bad "--max-bytes 32 printed a NaN or clamped fit: $(cat "$tmp/m32.log")" || ok

echo "sh_profile_comm: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
