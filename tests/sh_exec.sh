#!/usr/bin/env bash
# sh_exec.sh: the executor's CLI end to end: lower, run (mpirun and threads), refusal of a
# deadlocking plan, a killed rank and a stuck rank named, profile comm -> --cluster.
set -u
OCTOPIPE=${OCTOPIPE:-build/octopipe}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# MPI ranks cannot be leak-checked (Open MPI's own allocations look leaked); `octopipe run` sets
# this for its ranks itself, the direct mpirun below needs it by hand
RANK_ASAN="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
T=$(mktemp -d /tmp/octopipe-sh-exec-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# expect CODE NAME -- command...: runs it (stdout/stderr to $T/out, $T/err), checks the exit code
expect() {
  local want=$1 name=$2; shift 3
  timeout -k 5 60 "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$name: exit $rc, want $want"; sed 's/^/    /' "$T/err" | tail -n 15; fi
}
has() { # has FILE TEXT NAME
  if grep -qF -- "$2" "$1"; then ok; else bad "$3: '$2' not in $1"; sed 's/^/    /' "$1" | tail -n 15; fi
}

expect 0 compare -- "$OCTOPIPE" compare --model nemotron-h-8b --devices 4 --microbatches 8 --no-tune --plans-dir "$T"
[ -s "$T/1f1b.json" ] && ok || bad "compare wrote no plans"

# lower: human-readable lists; rank filter; bad flags
expect 0 lower -- "$OCTOPIPE" lower "$T/1f1b.json" --rank 1
has "$T/out" "rank 1: 16 compute ops" lower
has "$T/out" "WAIT b0" lower
has "$T/out" "COMP F(s1,mb0) in b0 out b1" lower
has "$T/out" "SEND b1 -> r2 tag 4" lower
if grep -q "rank 2:" "$T/out"; then bad "lower --rank 1 printed rank 2"; else ok; fi
expect 2 lower-badflag -- "$OCTOPIPE" lower "$T/1f1b.json" --frobnicate
has "$T/err" "unknown flag" lower-badflag
expect 2 lower-badrank -- "$OCTOPIPE" lower "$T/1f1b.json" --rank 9
expect 0 lower-help -- "$OCTOPIPE" lower --help
has "$T/out" "usage: octopipe lower" lower-help

# a deadlocking order (device 3 runs B(s3,mb0) before F(s3,mb0); recorded times dropped, as a
# hand-edited plan would have them) is refused before launch, its cycle named
f=$(grep -nF '{"op": "F", "stage": 3, "mb": 0,' "$T/1f1b.json" | cut -d: -f1)
b=$(grep -nF '{"op": "B", "stage": 3, "mb": 0,' "$T/1f1b.json" | cut -d: -f1)
awk -v f="$f" -v b="$b" 'NR==FNR { l[NR]=$0; next } FNR==f { print l[b]; next } FNR==b { print l[f]; next } { print }' \
  "$T/1f1b.json" "$T/1f1b.json" | sed -E 's/, "start": [^,]*, "end": [0-9.e+-]*//' > "$T/cyclic.json"
expect 2 cyclic-run -- "$OCTOPIPE" run "$T/cyclic.json" --emulate
has "$T/err" "deadlock" cyclic-run
has "$T/err" "B(s3,mb0)" cyclic-run
has "$T/err" "waits for F(s3,mb0)" cyclic-run
expect 2 cyclic-lower -- "$OCTOPIPE" lower "$T/cyclic.json"
has "$T/err" "deadlock" cyclic-lower

# run: flags checked
expect 2 run-noemulate -- "$OCTOPIPE" run "$T/zbv.json"
expect 2 run-badscale -- "$OCTOPIPE" run "$T/zbv.json" --emulate --time-scale -1
has "$T/err" "--time-scale" run-badscale
expect 0 run-help -- "$OCTOPIPE" run --help
has "$T/out" "mpirun" run-help

# profile comm -> cluster file -> run under mpirun with --json and --trace
# (the fit is of times this machine measures: on a loaded machine a rank's wake-up can cost
# milliseconds, which may swamp the largest message and leave no bandwidth to fit; the command
# refuses that noise, exit 1 "fit no link ... no slower", and measures again, up to 5 times)
for _ in 1 2 3 4 5; do
  timeout -k 5 60 "$OCTOPIPE" profile comm --max-bytes 16777216 --iters 20 --out "$T/cluster.json" >"$T/out" 2>"$T/err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "fit no link .*the larger messages were no slower" "$T/err" || break
done
if [ $rc -eq 0 ]; then ok; else bad "profile: exit $rc, want 0"; sed 's/^/    /' "$T/err" | tail -n 15; fi
has "$T/cluster.json" '"format": "octopipe.cluster/1"' profile
expect 0 run-mpi -- "$OCTOPIPE" run "$T/zbv.json" --emulate --time-scale 0.05 --bytes-scale 0.01 \
  --cluster "$T/cluster.json" --json --trace "$T/trace.json"
has "$T/out" '"makespan_error_pct"' run-mpi
has "$T/trace.json" '"name": "predicted"' run-mpi-trace
has "$T/trace.json" '"name": "measured"' run-mpi-trace
grep -q "note:" "$T/out" && bad "run-mpi: a note with --bytes-scale 0.01 --cluster" || ok
expect 0 run-threads -- "$OCTOPIPE" run "$T/dualpipev.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --threads
has "$T/out" "predicted makespan" run-threads
# the defaults (full-size messages copied by the CPUs, the plan's NVLink model): far above the
# prediction, and the report says which flags a run on one machine needs, under mpirun (the
# ranks are `exec` started by `run`) and as threads
expect 0 run-note-mpi -- "$OCTOPIPE" run "$T/zbv.json" --emulate --time-scale 0.05
has "$T/out" "above the prediction: on one machine every message is a memory copy" run-note-mpi
has "$T/out" "--bytes-scale 0.002 --cluster FILE (FILE from \`octopipe profile comm --out FILE\`)" run-note-mpi
expect 0 run-note-threads -- "$OCTOPIPE" run "$T/zbv.json" --emulate --time-scale 0.05 --threads --cluster "$T/cluster.json"
has "$T/out" "rerun with" run-note-threads
grep -q -- "--cluster FILE" "$T/out" && bad "run-note-threads: asks for --cluster, which it has" || ok
# a cluster file carries the links between devices, not the host link: with --cluster, a plan
# whose stages offload was refused ('no host link (comm.host_bw_GBps = 0)'); it keeps its own
jq -c '.activation = [.stages[] | "offload"] | del(.predicted) | .schedule |= map(map(del(.start, .end)))' \
  "$T/1f1b.json" > "$T/offload.json"
printf '{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 5,\n "inter_lat_ms": 0.01, "inter_bw_GBps": 5}\n' > "$T/links.json"
expect 0 run-offload-cluster -- "$OCTOPIPE" run "$T/offload.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --threads --cluster "$T/links.json"
has "$T/out" "predicted makespan" run-offload-cluster
# a cluster file's per-pair links are the plan's devices: another count is refused (it mixed
# measured and modelled links without a word), and the right count is used, not dropped
mat() { jq -nc --argjson n "$1" --argjson v "$2" '[range($n) as $a | [range($n) as $b | if $a == $b then 0 else $v end]]'; }
pairs() { jq -n --argjson lat "$(mat "$1" 0.01)" --argjson bw "$(mat "$1" "$2")" \
  '{format: "octopipe.cluster/1", nodes_of: 8, intra_lat_ms: 0.01, intra_bw_GBps: 360, inter_lat_ms: 0.01,
    inter_bw_GBps: 360, pair_lat_ms: $lat, pair_bw_GBps: $bw}'; }
pairs 2 360 > "$T/pairs2.json"; pairs 4 0.5 > "$T/pairs4slow.json"
jq 'del(.pair_lat_ms, .pair_bw_GBps)' "$T/pairs4slow.json" > "$T/fast4.json"
jq '. + {gpus: "h100-80gb:5"} | del(.pair_lat_ms, .pair_bw_GBps)' "$T/pairs4slow.json" > "$T/dev5.json"
expect 2 run-cluster-pairs-count -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --threads --cluster "$T/pairs2.json"
has "$T/err" "pair_lat_ms/pair_bw_GBps are 2 x 2 but $T/1f1b.json has 4 ranks" run-cluster-pairs-count
expect 2 run-cluster-devices-count -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --threads --cluster "$T/dev5.json"
has "$T/err" "lists 5 devices but $T/1f1b.json has 4 ranks" run-cluster-devices-count
pred() { sed -n 's/^ *predicted makespan *\([0-9.]*\) ms.*/\1/p' "$T/out"; }
expect 0 run-cluster-pairs-slow -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --threads --cluster "$T/pairs4slow.json"
slow=$(pred)
expect 0 run-cluster-pairs-fast -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --threads --cluster "$T/fast4.json"
fast=$(pred)
awk -v s="$slow" -v f="$fast" 'BEGIN { exit !(s + 0 > 2 * f && f + 0 > 0) }' && ok \
  || bad "run-cluster-pairs: predicted $slow ms with 0.5 GB/s pairs, $fast without: the pairs were not used"
# a file's GPU list is noted as unused once, by run, not again by rank 0 under its mpirun
jq '. + {gpus: "h100-80gb:4"}' "$T/fast4.json" > "$T/dev4.json"
expect 0 run-cluster-devices-note -- timeout -k 5 120 "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --cluster "$T/dev4.json"
n=$(grep -c "note: the GPU types" "$T/err")
[ "$n" -eq 1 ] && ok || bad "run-cluster-devices-note: the note $n times, want once"

# exec under the user's own mpirun with the wrong rank count
expect 2 exec-np -- env ASAN_OPTIONS="$RANK_ASAN" mpirun --oversubscribe --bind-to none --timeout 20 -np 3 "$OCTOPIPE" exec "$T/1f1b.json" --emulate
has "$T/err" "has 4 devices but mpirun started 3 ranks" exec-np
# a bad flag: every rank parses it, rank 0 alone says so (it was one line per rank)
expect 2 exec-flag -- env ASAN_OPTIONS="$RANK_ASAN" mpirun --oversubscribe --bind-to none --timeout 20 -np 4 "$OCTOPIPE" exec "$T/1f1b.json" --emulate --frobnicate
n=$(grep -c "unknown flag '--frobnicate'" "$T/err")
[ "$n" -eq 1 ] && ok || bad "exec-flag: the flag error $n times, want once"
# a switch given a value is refused before the command parses its flags: the same rule
expect 2 exec-switch-value -- env ASAN_OPTIONS="$RANK_ASAN" mpirun --oversubscribe --bind-to none --timeout 20 -np 4 "$OCTOPIPE" exec "$T/1f1b.json" --emulate=1
n=$(grep -c "takes no value" "$T/err")
[ "$n" -eq 1 ] && ok || bad "exec-switch-value: the error $n times, want once"
expect 0 exec-switch-value-rank1 -- env OMPI_COMM_WORLD_RANK=1 "$OCTOPIPE" exec "$T/1f1b.json" --emulate=1
[ -s "$T/err" ] && bad "exec-switch-value-rank1: rank 1 said $(cat "$T/err")" || ok

# a killed rank and a stuck rank end the job within seconds, named
s=$(date +%s)
expect 1 crash -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --inject-crash 2:3
has "$T/err" "rank 2 killed by signal 9" crash
expect 3 hang -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --inject-hang 1:2 --watchdog 1
has "$T/err" "rank 1: stuck in compute F(s1,mb2)" hang
has "$T/err" "rank 0: waiting" hang
has "$T/err" "rank 3: waiting" hang
has "$T/err" "watchdog stopped the job" hang
e=$(date +%s)
[ $((e - s)) -lt 20 ] && ok || bad "crash + hang took $((e - s)) s"
# a rank stuck where nobody waits on it (rank 0's last op): the ranks keep the time limit
# themselves and say what they were doing; mpirun's own limit (which named no rank) is the
# backstop 5 s later
expect 3 timeout-mpi -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --inject-hang 0:15 --timeout 3
has "$T/err" "time limit: rank 0: stuck in compute B(s0,mb7)" timeout-mpi
has "$T/err" "the job passed its --timeout and stopped" timeout-mpi

# --threads: a stuck thread is named by the watchdog as under mpirun; a crash needs MPI ranks,
# so it is refused up front (one thread's SIGKILL ended the whole process with no report)
expect 3 hang-threads -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --threads --inject-hang 1:2 --watchdog 1
has "$T/err" "rank 1: stuck in compute F(s1,mb2)" hang-threads
# the last line names the stuck rank, whichever waiting rank raised the watchdog (it named rank 0,
# which only waited for rank 1)
if grep -q "^octopipe run: watchdog (raised by rank [0-9]*): rank 1: stuck in compute F(s1,mb2)" "$T/err"; then ok
else bad "hang-threads: last line: $(tail -n 1 "$T/err")"; fi
expect 2 crash-threads -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --threads --inject-crash 1:2
has "$T/err" "--inject-crash needs MPI ranks" crash-threads
# rank 0's last op: no rank waits on it, so the watchdog never fires; --timeout stops the
# threads as mpirun's stops MPI ranks (this run waited forever before)
s=$(date +%s)
expect 3 timeout-threads -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --threads --inject-hang 0:15 --timeout 2
has "$T/err" "passed its --timeout of 2 s: rank 0: stuck in compute B(s0,mb7)" timeout-threads
e=$(date +%s)
[ $((e - s)) -lt 15 ] && ok || bad "timeout-threads took $((e - s)) s"
# mid-run, the watchdog longer than the limit: the limit stops it, naming the stuck rank
expect 3 timeout-threads-mid -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --time-scale 0.05 --bytes-scale 0.01 --threads --inject-hang 2:3 --watchdog 60 --timeout 2
has "$T/err" "passed its --timeout of 2 s: rank 2: stuck in compute" timeout-threads-mid
# a fault at a rank or op the plan lacks never fired, and the run passed: refused
expect 2 hang-badrank -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --threads --inject-hang 4:1
has "$T/err" "--inject-hang 4:1: $T/1f1b.json has ranks 0..3" hang-badrank
expect 2 crash-badop -- "$OCTOPIPE" run "$T/1f1b.json" --emulate --inject-crash 1:16
has "$T/err" "--inject-crash 1:16: rank 1 of $T/1f1b.json has compute ops 0..15" crash-badop
expect 0 run-help-threads -- "$OCTOPIPE" run --help
has "$T/out" "--inject-crash needs MPI" run-help-threads

# exec --help: its mpirun line starts as many ranks as the plan its example makes has devices
# (exec refuses any other count), so the example runs as written
expect 0 exec-help -- "$OCTOPIPE" exec --help
np=$(sed -n 's/^  mpirun .*-np \([0-9]*\).*/\1/p' "$T/out")
dev=$(sed -n 's/^  octopipe plan .*--devices \([0-9]*\).*/\1/p' "$T/out")
if [ -n "$np" ] && [ "$np" = "$dev" ]; then ok; else bad "exec-help: mpirun -np '$np' for a plan of '$dev' devices"; fi

echo "sh_exec: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
