#!/usr/bin/env bash
# `octopipe train` end to end: real mpirun ranks give bitwise the weights of an in-process
# one-stage run (with offload on each rank's copy engine too), resume over mpirun is bitwise (and
# checked before any work under the user's own mpirun), outputs (SVG, trace, plan) are written, bad
# flags and corrupted checkpoints are refused with one clear line; an output on stdout comes alone.
set -u
. "$(dirname "$0")/lib.sh"
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="--model tiny --microbatches 4 --data copy --log-every 0 --repeats 1"

# reference: one stage, in-process
if "$OP" train $T --devices 1 --plan 1f1b --steps 4 --threads --checkpoint "$tmp/ref" > "$tmp/ref.out" 2>&1; then ok
else bad "reference run: $(tail -n 3 "$tmp/ref.out")"; fi

# real MPI ranks, V placement with I/W split: same weights bit for bit
if timeout -k 5 120 "$OP" train $T --devices 2 --plan zbv --steps 4 --checkpoint "$tmp/mpi" --timeout 100 > "$tmp/mpi.out" 2>&1 \
   && cmp -s "$tmp/ref/model.ckpt" "$tmp/mpi/model.ckpt"; then ok
else bad "mpirun zbv P=2 differs from one stage: $(tail -n 5 "$tmp/mpi.out")"; fi
grep -q "predicted" "$tmp/mpi.out" && ok || bad "no measured vs predicted line: $(tail -n 3 "$tmp/mpi.out")"

# real MPI ranks, every stage offloading on each rank's copy engine: still bit for bit
if timeout -k 5 120 "$OP" train $T --devices 2 --plan 1f1b --recompute offload --steps 4 --checkpoint "$tmp/off" \
     --timeout 100 > "$tmp/off.out" 2>&1 && cmp -s "$tmp/ref/model.ckpt" "$tmp/off/model.ckpt"; then ok
else bad "mpirun 1f1b P=2 with offload differs from one stage: $(tail -n 5 "$tmp/off.out")"; fi
# a cluster file's links leave the host link alone: offloading with --cluster was refused
# ('no host link (comm.host_bw_GBps = 0)'), and now trains bit for bit as without it
printf '{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 5,\n "inter_lat_ms": 0.01, "inter_bw_GBps": 5}\n' > "$tmp/links.json"
if timeout -k 5 120 "$OP" train $T --devices 2 --plan 1f1b --recompute offload --steps 4 --threads --cluster "$tmp/links.json" \
     --checkpoint "$tmp/offc" > "$tmp/offc.out" 2>&1 && cmp -s "$tmp/ref/model.ckpt" "$tmp/offc/model.ckpt"; then ok
else bad "train --recompute offload --cluster: $(tail -n 3 "$tmp/offc.out")"; fi

# --timeout given under the user's own mpirun: each rank keeps it (it was ignored: the job ran
# on); 10^6 steps stop after 2 s with one line per rank, exit 124 (mpirun's own limit, 60 s, and
# the test's outer timeout are far above)
RANK_ASAN="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
t0=$(date +%s)
timeout -k 5 90 env ASAN_OPTIONS="$RANK_ASAN" mpirun --oversubscribe --bind-to none --timeout 60 -np 2 \
  "$OP" train $T --devices 2 --plan 1f1b --steps 1000000 --timeout 2 > "$tmp/to.out" 2>&1; rc=$?
el=$(( $(date +%s) - t0 ))
if [ $rc -ne 0 ] && [ $el -lt 50 ] && grep -q "^octopipe train: rank [01]: ran past --timeout 2 s; stopping the job$" "$tmp/to.out"; then ok
else bad "--timeout under own mpirun: rc=$rc after $el s: $(tail -n 5 "$tmp/to.out")"; fi

# --resume under the user's own mpirun (no launcher checks the checkpoint there): one at
# --steps says "nothing to do" before the profile and exits 0 (it printed a summary of 0 steps,
# "error -100.0%"); a corrupt one: below
"$OP" train $T --devices 1 --plan 1f1b --steps 2 --threads --checkpoint "$tmp/own" > /dev/null 2>&1
timeout -k 5 90 env ASAN_OPTIONS="$RANK_ASAN" mpirun --oversubscribe --bind-to none --timeout 60 -np 2 \
  "$OP" train $T --devices 2 --plan 1f1b --steps 2 --checkpoint "$tmp/own" --resume > "$tmp/own.out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "^nothing to do: .*own/model.ckpt is at step 2 and --steps is 2" "$tmp/own.out" \
   && ! grep -q "trained\|^profile" "$tmp/own.out"; then ok
else bad "own mpirun, resume at --steps: rc=$rc: $(head -n 5 "$tmp/own.out")"; fi

# resume over mpirun: 2 steps, then on to 4 with another plan = the uninterrupted run
if timeout -k 5 120 "$OP" train $T --devices 2 --plan 1f1b --steps 2 --checkpoint "$tmp/res" --timeout 100 > "$tmp/r1.out" 2>&1 \
   && timeout -k 5 120 "$OP" train $T --devices 2 --plan zbv --steps 4 --checkpoint "$tmp/res" --resume --timeout 100 > "$tmp/r2.out" 2>&1 \
   && cmp -s "$tmp/ref/model.ckpt" "$tmp/res/model.ckpt"; then ok
else bad "mpirun resume differs: $(tail -n 3 "$tmp/r1.out" "$tmp/r2.out")"; fi

# outputs: SVG timeline, Chrome trace, the plan that ran
if "$OP" train $T --devices 2 --plan auto --steps 2 --threads --svg "$tmp/t.svg" --trace "$tmp/t.json" \
     --save-plan "$tmp/plan.json" > "$tmp/o.out" 2>&1 \
   && grep -q "<svg" "$tmp/t.svg" && grep -q "traceEvents" "$tmp/t.json" \
   && "$OP" train $T --devices 2 --plan "$tmp/plan.json" --steps 1 --threads > "$tmp/o2.out" 2>&1; then ok
else bad "outputs: $(tail -n 3 "$tmp/o.out" "$tmp/o2.out" 2>/dev/null)"; fi

# an artifact on stdout ('-') comes alone: profile, plan, step and summary lines go to stderr,
# under mpirun and with --threads
if timeout -k 5 120 "$OP" train --model tiny --devices 2 --microbatches 4 --steps 3 --plan zbv --repeats 1 \
     --trace - --timeout 100 2> "$tmp/tm.err" | jq -e '.traceEvents | length > 0' > /dev/null \
   && grep -q "^plan: " "$tmp/tm.err" && grep -q "^step " "$tmp/tm.err"; then ok
else bad "train --trace - under mpirun: stdout is not the trace alone: $(tail -n 3 "$tmp/tm.err")"; fi
if timeout -k 5 120 "$OP" train --model tiny --devices 2 --microbatches 4 --steps 3 --plan zbv --repeats 1 --threads \
     --svg - 2> "$tmp/ts.err" > "$tmp/ts.svg" && head -c 5 "$tmp/ts.svg" | grep -q "^<" && grep -q "</svg>" "$tmp/ts.svg" \
   && ! grep -qE "^(profile|plan|step|trained|wrote) " "$tmp/ts.svg" && grep -q "^trained 3 steps" "$tmp/ts.err"; then ok
else bad "train --svg - --threads: stdout is not the SVG alone: $(head -n 3 "$tmp/ts.svg")"; fi

# a corrupted checkpoint is refused
cp "$tmp/ref/model.ckpt" "$tmp/c.ckpt"; mkdir -p "$tmp/corrupt"
printf '\x55' | dd of="$tmp/c.ckpt" bs=1 seek=200 conv=notrunc status=none
cp "$tmp/c.ckpt" "$tmp/corrupt/model.ckpt"
"$OP" train $T --devices 2 --plan 1f1b --steps 6 --threads --checkpoint "$tmp/corrupt" --resume > "$tmp/c.out" 2> "$tmp/c.err"
[ $? -ne 0 ] && grep -qi "checksum" "$tmp/c.err" && ok || bad "corrupted checkpoint accepted: $(cat "$tmp/c.err")"
# a resume with another --lr goes on, saying first that it is no longer bitwise the
# uninterrupted run (the checkpoint records the settings); the same settings say nothing
cp -r "$tmp/ref" "$tmp/lr"
"$OP" train $T --devices 1 --plan 1f1b --steps 5 --threads --checkpoint "$tmp/lr" --resume --lr 0.001 > "$tmp/lr.out" 2> "$tmp/lr.err"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "note: resuming" "$tmp/lr.err")" -eq 1 ] \
  && grep -q "^octopipe train: note: resuming .*/lr/model.ckpt with --lr 0.001 (it had 0.003): training goes on, but not bitwise" "$tmp/lr.err" \
  && ok || bad "resume with another --lr: rc=$rc $(cat "$tmp/lr.err")"
"$OP" train $T --devices 1 --plan 1f1b --steps 6 --threads --checkpoint "$tmp/lr" --resume --lr 0.001 > "$tmp/lr.out" 2> "$tmp/lr.err"; rc=$?
[ $rc -eq 0 ] && ! grep -q "note: resuming" "$tmp/lr.err" && ok || bad "resume with the same settings: rc=$rc $(cat "$tmp/lr.err")"
# ... and under the user's own mpirun (no launcher check): rank 0 checks it before the profile
# and says why in one line, every rank exits 2 (rank 1's "rank 0 could not load PATH" once
# stopped the job before rank 0 said "checksum"; then each rank said it, with an MPI_ABORT)
timeout -k 5 90 env ASAN_OPTIONS="$RANK_ASAN" mpirun --oversubscribe --bind-to none --timeout 60 -np 2 \
  "$OP" train $T --devices 2 --plan 1f1b --steps 6 --checkpoint "$tmp/corrupt" --resume > "$tmp/cm.out" 2>&1; rc=$?
grep "^octopipe train: " "$tmp/cm.out" > "$tmp/cm.lines"
[ $rc -ne 0 ] && [ "$(wc -l < "$tmp/cm.lines")" -eq 1 ] && grep -q "corrupt/model.ckpt: checksum mismatch" "$tmp/cm.lines" \
  && ! grep -q "MPI_ABORT\|^profile" "$tmp/cm.out" && ok \
  || bad "corrupted checkpoint under own mpirun: rc=$rc $(cat "$tmp/cm.lines")"
# a FIFO as DIR/model.ckpt: resuming read it twice and blocked on the second open forever, and a
# run without --resume blocked at its final save; a checkpoint is a regular file, refused up front
mkdir -p "$tmp/fifo" && mkfifo "$tmp/fifo/model.ckpt"
for r in --resume ""; do
  timeout -k 5 60 "$OP" train $T --devices 2 --plan 1f1b --steps 2 --threads --checkpoint "$tmp/fifo" $r > "$tmp/f.out" 2> "$tmp/f.err"
  rc=$?; [ $rc -eq 2 ] && grep -q "fifo/model.ckpt: is not a regular file" "$tmp/f.err" && ok || bad "FIFO checkpoint $r: rc=$rc $(cat "$tmp/f.err")"
done

# --save-plan that cannot be written (a full disk): exit 1 and the one line; the plan was left
# unfreed on that path (a leak report under the sanitizer build)
"$OP" train $T --devices 2 --plan 1f1b --steps 1 --threads --save-plan /dev/full > "$tmp/sp.out" 2> "$tmp/sp.err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/sp.err")" -eq 1 ] && grep -q "/dev/full: write failed" "$tmp/sp.err" && ok \
  || bad "train --save-plan /dev/full: rc=$rc $(head -n 3 "$tmp/sp.err")"

# --calibrate: two plans take turns, the fitted times and the speed spread make the prediction
# (the spread needs undisturbed calibration steps, which a loaded machine may not give: not required)
"$OP" train --model tiny --devices 2 --microbatches 4 --threads --repeats 1 --steps 3 --calibrate 3 --data copy > "$tmp/cal.out" 2>&1
if grep -q "^calibration: 1f1b and zbv, 3 steps each in turns" "$tmp/cal.out" &&
   grep -qE "predicted [0-9.]+ ms per step" "$tmp/cal.out" &&
   grep -q "trained 3 steps" "$tmp/cal.out"; then ok; else bad "calibrated run: $(cat "$tmp/cal.out")"; fi
# step lines say done/total and the time left
grep -qE "^step +3/3  loss .* [0-9]+ s left$" "$tmp/cal.out" && ok || bad "step line without done/total and time left: $(grep '^step' "$tmp/cal.out")"

# bad input: one line on stderr, exit 2
expect_err() { # expected-substring args...
  local want=$1; shift
  "$OP" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok
  else bad "octopipe $* -> rc=$rc stderr: $(cat "$tmp/err")"; fi
}
expect_err "--devices needs an integer" train --model tiny --devices 0 --microbatches 4
expect_err "unknown or incomplete flag" train --model tiny --devices 2 --microbatches 4 --bogus
expect_err "--seed needs a non-negative integer" train --model tiny --devices 2 --microbatches 4 --seed 99999999999999999999999
expect_err "are required" train --devices 2 --microbatches 4
expect_err "--resume needs --checkpoint" train --model tiny --devices 2 --microbatches 4 --resume
# flags that would do nothing in the combination: refused, never silently dropped
expect_err "--checkpoint-every 2 needs --checkpoint DIR" train --model tiny --devices 2 --microbatches 4 --threads --checkpoint-every 2
expect_err "--timeout is the mpirun job's limit" train --model tiny --devices 2 --microbatches 4 --threads --timeout 5
expect_err "unknown layer symbol" train --model EMQL --devices 2 --microbatches 4 --threads
expect_err "/nonexistent/corpus.txt" train --model tiny --devices 2 --microbatches 4 --data /nonexistent/corpus.txt
expect_err "--calibrate needs an integer" train --model tiny --devices 2 --microbatches 4 --calibrate -1
expect_err "--calibrate needs an integer" train --model tiny --devices 2 --microbatches 4 --calibrate 9999
expect_err "no calibration plan fits" train --model tiny --devices 8 --microbatches 8 --threads --repeats 1 --calibrate 2
expect_err "nosuch" train --model tiny --devices 2 --microbatches 4 --plan nosuch --threads --repeats 1
# a misspelt schedule is refused before the profile and --calibrate's steps (seconds after them)
expect_err "--plan 'nosuch': not auto, a plan file or a schedule" train --model tiny --devices 2 --microbatches 4 --plan nosuch --threads --calibrate 2
[ -s "$tmp/out" ] && bad "train --plan nosuch profiled first: $(head -n 1 "$tmp/out")" || ok
# the range in the line: "needs a non-negative number (got '0')" and "(got '1e308')" said no range
expect_err "--lr needs a number in (0, 1e6\] (got '0')" train --model tiny --devices 2 --microbatches 4 --lr 0
expect_err "--overhead-ms needs a number in \[0, 1e6\] (got '1e308')" train --model tiny --devices 2 --microbatches 4 --overhead-ms 1e308
"$OP" train --help | grep -q "example" && ok || bad "train --help has no example"
# --repeats has profile's range: 1e8 repeats profiled silently for hours before the first line
expect_err "--repeats needs an integer in \[1, 1000\] (got '100000000')" train --model tiny --devices 2 --microbatches 2 --threads --repeats 100000000

# a diverging run (a valid --lr far too large): NaN activations went through the fast exp's
# float-to-int conversion (undefined; the sanitizer build of this suite stops there), and the
# summary printed "loss ... -> nan" without a word
"$OP" train --model tiny --devices 1 --microbatches 1 --steps 20 --threads --repeats 1 --lr 100 > "$tmp/nan.out" 2> "$tmp/nan.err"; rc=$?
if [ $rc -eq 0 ] && grep -q -- "-> nan" "$tmp/nan.out" && grep -q "the loss is not finite: training diverged (try a smaller --lr)" "$tmp/nan.err" \
   && ! grep -q "runtime error" "$tmp/nan.err"; then ok
else bad "train --lr 100: rc=$rc $(tail -n 3 "$tmp/nan.err")"; fi
# with --checkpoint, a diverged run's NaN weights replaced the last good checkpoint (and no
# resume accepts them): the save is refused, the file keeps the good one, exit 1
"$OP" train --model tiny --devices 1 --microbatches 1 --steps 2 --threads --repeats 1 --checkpoint "$tmp/ckd" > /dev/null 2>&1
cp "$tmp/ckd/model.ckpt" "$tmp/good.ckpt"
"$OP" train --model tiny --devices 1 --microbatches 1 --steps 20 --threads --repeats 1 --lr 100 --checkpoint "$tmp/ckd" > /dev/null 2> "$tmp/nan.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "model.ckpt: not written: parameter [0-9]* is nan (training diverged); the file keeps what it held" "$tmp/nan.err" \
   && cmp -s "$tmp/ckd/model.ckpt" "$tmp/good.ckpt"; then ok
else bad "a diverged run's checkpoint: rc=$rc $(tail -n 2 "$tmp/nan.err")"; fi

# --watchdog: the executor's (30 s by default, which many ranks on few cores could outwait)
expect_err "--watchdog needs a number in (0, 1e6]" train --model tiny --devices 2 --microbatches 2 --threads --watchdog 0
expect_err "--watchdog needs a number in (0, 1e6]" train --model tiny --devices 2 --microbatches 2 --threads --watchdog x
"$OP" train --model tiny --devices 2 --microbatches 2 --steps 1 --threads --repeats 1 --watchdog 120 > "$tmp/wd.out" 2>&1 \
  && grep -q "^trained 1 steps" "$tmp/wd.out" && ok || bad "train --watchdog 120: $(tail -n 2 "$tmp/wd.out")"
# an input without end: refused after 1 GiB (it grew memory until the machine ran out)
expect_err "/dev/zero: more than 1024 MiB from a pipe or device" train --model tiny --devices 1 --microbatches 1 --steps 1 --threads --repeats 1 --data /dev/zero
expect_err "/dev/zero: more than 1024 MiB from a pipe or device" train --model tiny --devices 1 --microbatches 1 --steps 1 --threads --repeats 1 --cluster /dev/zero

# a plan tuned for a slow-down names its types by speed once: "x2" (it was made the slowed plan
# a second time, which named the type "x2 x2")
"$OP" train --model tiny --devices 2 --microbatches 4 --plan auto --slowdown 1,2 --steps 1 --threads --repeats 1 \
  --log-every 0 --save-plan "$tmp/slow-auto.json" > "$tmp/slow-auto.out" 2>&1
if grep -q '"name": "x2"' "$tmp/slow-auto.json" && ! grep -q 'x2 x2' "$tmp/slow-auto.json"; then ok
else bad "--plan auto --slowdown 1,2: type names $(grep -o '"name": "[^"]*"' "$tmp/slow-auto.json" | tr '\n' ' ')"; fi

# a machine busy with other work: two ranks and a busy loop share one core, so each rank has
# its CPU for at most about half of its compute time; the summary says the measured time holds
# that wait (a first `make run` on a busy machine printed +318% and nothing else)
# (the small model, whose compute calls take milliseconds: the tiny model's take microseconds,
# which the scheduler seldom cuts, so the share inside them stayed near 100% on some runs;
# the loop is given 0.3 s to start spinning first)
taskset -c 0 sh -c 'while :; do :; done' & spin=$!
sleep 0.3
taskset -c 0 "$OP" train --model small --devices 2 --microbatches 2 --steps 3 --threads --repeats 1 --log-every 0 > "$tmp/busy.out" 2>&1
kill "$spin" 2>/dev/null; wait "$spin" 2>/dev/null
grep -q "^note: a rank had a CPU for only [0-9]*% of its compute time.*other work on this machine is in the measured time" "$tmp/busy.out" \
  && ok || bad "no busy-machine note beside a busy loop on the ranks' core: $(tail -n 4 "$tmp/busy.out")"

echo "sh_train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
