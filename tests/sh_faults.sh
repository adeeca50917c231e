#!/usr/bin/env bash
# sh_faults.sh: bad inputs and faults from the command line.  Every bad input is one line on
# stderr and exit 2 (profiles with NaN / Infinity / 1e308 / all-zero times or 1e19 bytes, --tp
# not dividing the heads, more devices than layers, a wrong or missing --cluster file); a
# stopped launcher (TERM or Ctrl-C to `run` and `train`, or SIGKILL to `train`) leaves no process
# of its job behind;
# errors from ranks come without mpirun's banners; stale mpirun logs are removed; a corrupt
# checkpoint gets the same line and exit 2 under mpirun and --threads; resuming at --steps says
# there is nothing to do; a train that cannot fit in memory is refused before it starts; out of
# threads, run and train say so in one line and exit 1.
set -u
OP=${OCTOPIPE:-build/octopipe}
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d /tmp/octopipe-sh-faults-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# refused NAME TEXT -- command...: exit 2, exactly one line on stderr, containing TEXT
refused() {
  local name=$1 want=$2; shift 3
  timeout -k 5 60 "$@" >"$T/out" 2>"$T/err"; local rc=$?
  local n; n=$(wc -l < "$T/err")
  if [ "$rc" -eq 2 ] && [ "$n" -eq 1 ] && grep -qF -- "$want" "$T/err"; then ok
  else bad "$name: exit $rc (want 2), $n stderr lines (want 1), want '$want':"; sed 's/^/    /' "$T/err" | head -n 8; fi
}

# profiles: one replaceable forward time of M and act_bytes of M
profile() { # profile FILE FWD_M ACT_M [ALL_ZERO]
  local e=0.5 l=3 d=0.75 b=2
  [ "${4:-}" = zero ] && e=0 l=0 d=0 b=0
  cat > "$1" <<EOF
{"pattern": "M-M-",
 "forward_ms": {"E": $e, "M": $2, "-": $d, "L": $l},
 "backward_ms": {"E": 0, "M": $b, "-": $d, "L": $l},
 "act_bytes": {"M": $3}}
EOF
}
C="--devices 2 --microbatches 4"
profile "$T/ok.json" 1.0 1024
timeout -k 5 60 "$OP" compare --model "$T/ok.json" $C --no-tune >/dev/null 2>&1 && ok || bad "a good profile is refused"
profile "$T/nan.json" NaN 1024
refused nan "nan.json:2:32: NaN is not allowed here" -- "$OP" compare --model "$T/nan.json" $C
profile "$T/inf.json" Infinity 1024
refused inf "inf.json:2:32: Infinity is not allowed here" -- "$OP" plan --model "$T/inf.json" $C --out "$T/p.json"
profile "$T/big.json" 1e308 1024
refused 1e308-compare "forward_ms['M']: 1e+308 is beyond any device" -- "$OP" compare --model "$T/big.json" $C
refused 1e308-plan "forward_ms['M']: 1e+308 is beyond any device" -- "$OP" plan --model "$T/big.json" $C --out "$T/p.json"
profile "$T/act.json" 1.0 1e19
refused act-1e19 "act_bytes['M']: 1e+19 is beyond any device" -- "$OP" compare --model "$T/act.json" $C
profile "$T/zero.json" 0 0 zero
refused zero-compare "nothing to schedule" -- "$OP" compare --model "$T/zero.json" $C
refused zero-plan "nothing to schedule" -- "$OP" plan --model "$T/zero.json" $C --out "$T/p.json"
# a denormal per-op overhead on it printed 0.00 ms makespans at 800 M tokens/s
refused zero-overhead "per-op overhead 1e-300 ms is neither 0 nor at least 1e-06 ms" -- "$OP" compare --model "$T/zero.json" $C --op-overhead 1e-300
# an escape sequence in a plan's device type name reached the terminal from sim's table
"$OP" plan --model llama2-7b --gpus h100-80gb:2,a100-80gb:2 --microbatches 8 --quiet --out "$T/mx.json" > /dev/null 2>&1
sed 's/"h100-80gb"/"h1\\u001b[2J00"/' "$T/mx.json" > "$T/esc.json"
"$OP" sim "$T/esc.json" > "$T/esc.out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q 'h1?\[2J00' "$T/esc.out" && ! grep -q "$(printf '\033')" "$T/esc.out" && ok \
  || bad "control characters of a plan's type name: rc=$rc $(head -c 300 "$T/esc.out" | od -c | head -n 3)"
[ -e "$T/p.json" ] && bad "a refused plan left $T/p.json" || ok

# devices x microbatches beyond what a plan may hold: refused before the schedulers fill GBs
cat > "$T/deep.json" <<EOF
{"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
 "num_hidden_layers": 2000, "vocab_size": 32000}
EOF
refused plan-ops-compare "2000 devices x 65536 microbatches is more ops than a plan may hold" -- \
  "$OP" compare --model "$T/deep.json" --devices 2000 --microbatches 65536 --no-tune
refused plan-ops-plan "1025 devices x 65536 microbatches is more ops than a plan may hold" -- \
  "$OP" plan --model "$T/deep.json" --devices 1025 --microbatches 65536 --out "$T/p.json"

refused tp3 "--tp 3 does not divide its 32 attention heads" -- "$OP" compare --model llama2-7b --devices 4 --microbatches 8 --tp 3
refused tp1024 "--tp 1024 does not divide" -- "$OP" plan --model llama2-7b --devices 4 --microbatches 8 --tp 1024 --out "$T/p.json"
# one rule for every command: compare refuses what plan refuses
refused devices-compare "54 layers cannot fill 100 devices" -- "$OP" compare --model nemotron-h-8b --devices 100 --microbatches 8
refused devices-plan "54 layers cannot fill 100 devices" -- "$OP" plan --model nemotron-h-8b --devices 100 --microbatches 8 --out "$T/p.json"

refused cluster-missing "nope.json: cannot open: No such file or directory" -- \
  "$OP" compare --model llama2-7b --devices 4 --microbatches 8 --cluster "$T/nope.json"
refused cluster-profile "missing field \"format\": not an octopipe.cluster/1 file" -- \
  "$OP" compare --model llama2-7b --devices 4 --microbatches 8 --cluster "$T/ok.json"
printf '{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 0, "inter_lat_ms": 0.02, "inter_bw_GBps": 10}\n' > "$T/bw0.json"
refused cluster-bw0 "intra_bw_GBps: 0 must be a bandwidth of at least 1e-06 GB/s" -- \
  "$OP" compare --model llama2-7b --devices 4 --microbatches 8 --cluster "$T/bw0.json"
printf '{"format": "octopipe.cluster/1", "nodes_of": 4, "intra_lat_ms": 0.01, "intra_bw_GBps": 300, "inter_lat_ms": 0.02, "inter_bw_GBps": 25}\n' > "$T/n4.json"
# the file's node size wins; a different --nodes-of beside it was silently ignored
refused cluster-nodes-of "--nodes-of 8 disagrees with $T/n4.json, whose nodes_of is 4" -- \
  "$OP" compare --model llama2-7b --devices 8 --microbatches 16 --no-tune --cluster "$T/n4.json" --nodes-of 8
if "$OP" compare --model llama2-7b --devices 8 --microbatches 16 --no-tune --cluster "$T/n4.json" --nodes-of 4 \
     --quiet > "$T/out" 2>&1 && grep -q "nodes of 4" "$T/out"; then ok; else bad "cluster-nodes-of same: $(head -3 "$T/out")"; fi

# ---- stopping the launcher stops the job
"$OP" compare --model llama2-7b --devices 2 --microbatches 4 --no-tune --plans-dir "$T/plans" >/dev/null 2>&1
# no_orphans NAME SIG MARK -- command...: starts it, waits until its ranks run, signals the
# launcher, then no process whose command line holds MARK may remain
no_orphans() {
  local name=$1 sig=$2 mark=$3; shift 4
  env --default-signal=INT "$@" >"$T/$name.out" 2>&1 &
  local pid=$! n=0 i
  for i in $(seq 1 150); do # ranks up: the launcher, mpirun and P ranks carry MARK
    n=$(pgrep -f -- "$mark" | wc -l)
    [ "$n" -ge 4 ] && break
    sleep 0.1
  done
  sleep 0.5
  kill -s "$sig" "$pid"
  local t0; t0=$(date +%s)
  wait "$pid"; local rc=$?
  sleep 0.3
  local left; left=$(pgrep -f -- "$mark" | wc -l)
  if [ "$n" -ge 4 ] && [ "$left" -eq 0 ] && [ "$rc" -eq $((128 + $(kill -l "$sig"))) ] && [ $(( $(date +%s) - t0 )) -lt 10 ]; then ok
  else bad "$name: $n processes before, $left after $sig, exit $rc: $(pgrep -af -- "$mark" | head -n 3)"
    pkill -KILL -f -- "$mark"; fi
}
cp "$T/plans/1f1b.json" "$T/stop-run.json"
no_orphans run-term TERM "$T/stop-run.json" -- "$OP" run "$T/stop-run.json" --emulate --time-scale 50
no_orphans run-int INT "$T/stop-run.json" -- "$OP" run "$T/stop-run.json" --emulate --time-scale 50
no_orphans train-term TERM "$T/stop-train" -- "$OP" train --model tiny --devices 2 --microbatches 4 --data copy \
  --repeats 1 --steps 100000 --log-every 0 --checkpoint "$T/stop-train"
# a launcher killed outright (SIGKILL: nothing to forward) takes its job with it: mpirun gets
# SIGTERM from the kernel; the ranks ran on, writing the checkpoint a resumed run writes too
"$OP" train --model tiny --devices 2 --microbatches 4 --data copy --repeats 1 --steps 100000 --log-every 0 \
  --checkpoint "$T/kill-train" >"$T/kill-train.out" 2>&1 &
kpid=$! n=0
for i in $(seq 1 150); do n=$(pgrep -f -- "$T/kill-train" | wc -l); [ "$n" -ge 4 ] && break; sleep 0.1; done
sleep 0.5
kill -KILL "$kpid"; wait "$kpid" 2>/dev/null
for i in $(seq 1 100); do left=$(pgrep -f -- "$T/kill-train" | wc -l); [ "$left" -eq 0 ] && break; sleep 0.1; done
if [ "$n" -ge 4 ] && [ "$left" -eq 0 ]; then ok
else bad "train-kill: $n processes before, $left 10 s after SIGKILL: $(pgrep -af -- "$T/kill-train" | head -n 3)"
  pkill -KILL -f -- "$T/kill-train"; fi

# ---- a failing rank: the launcher's line, no mpirun banner
"$OP" run "$T/plans/1f1b.json" --emulate --time-scale 0.05 --inject-crash 1:2 >"$T/out" 2>"$T/err"; rc=$?
if [ "$rc" -eq 1 ] && grep -q "rank 1 killed by signal 9" "$T/err" && ! grep -q -- "-----" "$T/err" &&
   ! grep -q "Primary job" "$T/err"; then ok; else bad "crash report: exit $rc: $(cat "$T/err")"; fi

# a rank's own error is the one line (not followed by "mpirun exited with status 1")
"$OP" run "$T/plans/1f1b.json" --emulate --time-scale 0.01 --trace "$T/missing/t.json" >"$T/out" 2>"$T/err"; rc=$?
if [ "$rc" -ne 0 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "missing/t.json: cannot write" "$T/err"; then ok
else bad "rank error: exit $rc: $(cat "$T/err")"; fi

# ---- stale logs of launchers that are gone are removed; a live one's is kept
sh -c 'exit 0' & dead=$!; wait $dead
touch "/tmp/octopipe-mpirun-$dead-stale1"; touch "/tmp/octopipe-mpirun-$$-alive1"
"$OP" run "$T/plans/1f1b.json" --emulate --time-scale 0.01 >/dev/null 2>&1
[ -e "/tmp/octopipe-mpirun-$dead-stale1" ] && bad "stale mpirun log kept" || ok
[ -e "/tmp/octopipe-mpirun-$$-alive1" ] && ok || bad "a live launcher's log was removed"
rm -f "/tmp/octopipe-mpirun-$dead-stale1" "/tmp/octopipe-mpirun-$$-alive1"
ls /tmp/octopipe-mpirun-$$-* >/dev/null 2>&1 && bad "this run left its log" || ok

# ---- checkpoints: every corruption refused with the same line and exit 2, mpirun or threads
TR="--model tiny --devices 2 --microbatches 4 --data copy --repeats 1 --log-every 0 --plan 1f1b"
"$OP" train $TR --steps 2 --threads --checkpoint "$T/ck" >/dev/null 2>&1 || bad "checkpoint run failed"
size=$(stat -c %s "$T/ck/model.ckpt")
corrupt() { # corrupt KIND FILE
  cp "$T/ck/model.ckpt" "$2"
  case $1 in
    flip-*) printf '\x55' | dd of="$2" bs=1 seek="${1#flip-}" conv=notrunc status=none ;;
    truncate) truncate -s $((size / 2)) "$2" ;;
    append) printf 'extra' >> "$2" ;;
    empty) : > "$2" ;;
  esac
}
for kind in flip-0 flip-9 flip-13 flip-40 flip-200 flip-$((size / 2)) flip-$((size - 1)) truncate append empty; do
  mkdir -p "$T/bad-$kind"; corrupt "$kind" "$T/bad-$kind/model.ckpt"
  timeout -k 5 120 "$OP" train $TR --steps 4 --checkpoint "$T/bad-$kind" --resume >/dev/null 2>"$T/mpi.err"; a=$?
  timeout -k 5 120 "$OP" train $TR --steps 4 --threads --checkpoint "$T/bad-$kind" --resume >/dev/null 2>"$T/thr.err"; b=$?
  if [ "$a" -eq 2 ] && [ "$b" -eq 2 ] && [ "$(wc -l < "$T/mpi.err")" -eq 1 ] && cmp -s "$T/mpi.err" "$T/thr.err"; then ok
  else bad "corrupt checkpoint $kind: mpirun exit $a, threads exit $b: $(head -n 3 "$T/mpi.err") | $(head -n 3 "$T/thr.err")"; fi
done
# resuming at or past --steps: nothing to do, said so
for s in 2 1; do
  timeout -k 5 60 "$OP" train $TR --steps $s --checkpoint "$T/ck" --resume >"$T/out" 2>"$T/err"; rc=$?
  if [ "$rc" -eq 0 ] && grep -q "nothing to do: .*model.ckpt is at step 2 and --steps is $s" "$T/out" &&
     ! grep -q "trained" "$T/out"; then ok; else bad "resume at step 2 with --steps $s: exit $rc: $(cat "$T/out" "$T/err")"; fi
done

# ---- a run that cannot fit this machine's memory is refused up front, with the figures
need_kb=$((120 * 1024 * 1024))
avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if [ "${avail_kb:-0}" -lt "$need_kb" ]; then
  refused train-memory "GiB available: use fewer ranks or microbatches" -- \
    "$OP" train --model small --devices 2 --microbatches 4096 --plan gpipe --threads --steps 1 --repeats 1 --data copy --log-every 0
  grep -q "activations of 4096 microbatches" "$T/err" && ok || bad "memory refusal without its figures"
else
  echo "sh_faults: SKIPPED the memory refusal: this machine has more than 120 GiB available"
fi

# ---- plans with many idle devices: every device is a rank (a thread of run --threads)
idle_plan() { # idle_plan FILE P: one stage on device 0, devices 1..P-1 idle
  { printf '{"format": "octopipe.plan/1", "devices": %d, "microbatches": 1, ' "$2"
    printf '"layers": [{"kind": "T", "F": 1, "I": 1, "W": 0, "out_bytes": 8, "act_bytes": 8}], '
    printf '"stages": [[0, 1]], "placement": [[0]'; for ((d = 1; d < $2; d++)); do printf ', []'; done
    printf '], "schedule": [[{"op": "F", "stage": 0, "mb": 0}, {"op": "B", "stage": 0, "mb": 0}]'
    for ((d = 1; d < $2; d++)); do printf ', []'; done; printf ']}\n'; } > "$1"
}
idle_plan "$T/idle65536.json" 65536
refused idle-65536 "plan has 65536 devices; the executor runs at most 4096 ranks" -- \
  "$OP" run "$T/idle65536.json" --emulate --threads
# out of threads: one line and exit 1 (it was an assertion); address space is what ASan and
# TSan cannot run without, so only the plain build
if [ -z "${SAN:-}" ]; then
  idle_plan "$T/idle1024.json" 1024
  (ulimit -s 8192 -v 1500000; timeout -k 5 60 "$OP" run "$T/idle1024.json" --emulate --threads --time-scale 0.001) >"$T/out" 2>"$T/err"; rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "cannot start rank [0-9]* of 1024 as a thread" "$T/err"; then ok
  else bad "run --threads out of threads: exit $rc: $(cat "$T/err")"; fi
  # train's profiler threads the same (they were an assertion too): a default thread stack
  # (RLIMIT_STACK) beyond the address space fails every pthread_create, as root too, where
  # RLIMIT_NPROC binds nothing; no checkpoint and no plan file are written
  (ulimit -s 8000000 -v 4000000; timeout -k 5 60 "$OP" train $TR --steps 2 --threads \
     --checkpoint "$T/ck-nothreads" --save-plan "$T/nothreads.json") >"$T/out" 2>"$T/err"; rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] &&
     grep -q "^octopipe train: profile: cannot start profiler 1 of 2 as a thread" "$T/err" &&
     [ ! -e "$T/ck-nothreads/model.ckpt" ] && [ ! -e "$T/nothreads.json" ]; then ok
  else bad "train --threads out of threads: exit $rc: $(cat "$T/err")"; fi
else
  echo "skip: out of threads (a small address space): the plain build only, not SAN=$SAN"
fi

echo "sh_faults: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
