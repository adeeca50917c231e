#!/usr/bin/env bash
# Outputs never destroy anything (octopipe/out.h): FIFOs get the bytes, symlinks stay links and
# their targets get the content, device nodes stay devices, '-' is stdout, regular files are
# replaced whole with no temporary file left, and every output path is checked before the work
# starts (one line, exit 2).  Everything happens in a temporary directory; /dev is never touched
# (device nodes are made here with mknod).
set -u
. "$(dirname "$0")/lib.sh"
skipped=()
M=(--model tests/data/profiles/tiny.json --devices 2 --microbatches 4 --quiet)

# the reference bytes: a plan written to stdout ('-'), summary on stderr
"$OP" plan "${M[@]}" --out - > "$tmp/ref.json" 2> "$tmp/ref.err"; rc=$?
if [ $rc -eq 0 ] && jq -e '.format == "octopipe.plan/1"' "$tmp/ref.json" > /dev/null && grep -q "to stdout" "$tmp/ref.err" \
   && [ ! -e ./- ] && [ ! -e "$tmp/-" ]; then ok; else bad "plan --out - (rc=$rc): $(head -c 200 "$tmp/ref.json")"; fi

"$OP" plan "${M[@]}" --placement loop --out "$tmp/loop.json" > /dev/null 2>&1 || bad "loop plan"

# a regular file: replaced atomically (new inode), mode kept, no temporary file left
echo old > "$tmp/p.json"; chmod 600 "$tmp/p.json"; ino=$(stat -c %i "$tmp/p.json")
"$OP" plan "${M[@]}" --out "$tmp/p.json" > /dev/null 2>&1
if cmp -s "$tmp/p.json" "$tmp/ref.json" && [ "$(stat -c %a "$tmp/p.json")" = 600 ] && [ "$(stat -c %i "$tmp/p.json")" != "$ino" ]; then ok
else bad "regular file not replaced whole (mode $(stat -c %a "$tmp/p.json"))"; fi
left=$(find "$tmp" -name '*.tmp.*' -o -name '*.probe.*' | head -n 3)
[ -z "$left" ] && ok || bad "temporary files left: $left"

# a FIFO gets the bytes and stays a FIFO
mkfifo "$tmp/fifo"
cat "$tmp/fifo" > "$tmp/fifo.out" & reader=$!
timeout -k 5 60 "$OP" plan "${M[@]}" --out "$tmp/fifo" > /dev/null 2>&1; rc=$?
wait $reader
if [ $rc -eq 0 ] && [ -p "$tmp/fifo" ] && cmp -s "$tmp/fifo.out" "$tmp/ref.json"; then ok; else bad "FIFO: rc=$rc, $(wc -c < "$tmp/fifo.out") bytes"; fi
# export into a FIFO too (SVG)
cat "$tmp/fifo" > "$tmp/fifo.svg" & reader=$!
timeout -k 5 60 "$OP" export "$tmp/ref.json" --svg "$tmp/fifo" > /dev/null 2>&1; rc=$?
wait $reader
if [ $rc -eq 0 ] && [ -p "$tmp/fifo" ] && grep -q "<svg" "$tmp/fifo.svg"; then ok; else bad "export --svg FIFO: rc=$rc"; fi

# a symlink stays a symlink; its target (relative, in another directory) gets the content
mkdir "$tmp/real"; echo old > "$tmp/real/t.json"
ln -s real/t.json "$tmp/link.json"
"$OP" plan "${M[@]}" --out "$tmp/link.json" > /dev/null 2>&1; rc=$?
if [ $rc -eq 0 ] && [ -L "$tmp/link.json" ] && [ "$(readlink "$tmp/link.json")" = real/t.json ] \
   && cmp -s "$tmp/real/t.json" "$tmp/ref.json"; then ok; else bad "symlink replaced or target not written (rc=$rc)"; fi
# a dangling symlink: its target is created, the link stays
ln -s real/new.csv "$tmp/dangling.csv"
"$OP" export "$tmp/loop.json" --megatron-layout "$tmp/dangling.csv" > /dev/null 2>&1; rc=$?
if [ $rc -eq 0 ] && [ -L "$tmp/dangling.csv" ] && grep -q -- "--pipeline-model-parallel-size" "$tmp/real/new.csv"; then ok
else bad "dangling symlink (rc=$rc)"; fi
# export through a symlink to a symlink, as /dev/stdout is on Linux
ln -s link.json "$tmp/link2.json"
"$OP" export "$tmp/ref.json" --chrome-trace "$tmp/link2.json" > /dev/null 2>&1
if [ -L "$tmp/link2.json" ] && [ -L "$tmp/link.json" ] && jq -e '.traceEvents | length > 0' "$tmp/real/t.json" > /dev/null; then ok
else bad "chain of symlinks"; fi

# a link to an open descriptor (what /dev/stdout is: a link to /proc/self/fd/1) means that
# descriptor: into a pipe and into a redirected file, nothing printed before or after is lost
ln -s /proc/self/fd/1 "$tmp/my-stdout"; ln -s /proc/self/fd/3 "$tmp/my-fd3"
"$OP" plan "${M[@]}" --out "$tmp/my-stdout" 2> "$tmp/err" | cat > "$tmp/o"; rc=${PIPESTATUS[0]}
if [ $rc -eq 0 ] && cmp -s "$tmp/o" "$tmp/ref.json" && [ -L "$tmp/my-stdout" ] && grep -q "to stdout" "$tmp/err"; then ok
else bad "--out link to stdout, a pipe: rc=$rc $(head -n 2 "$tmp/err")"; fi
echo "kept line" > "$tmp/o"
"$OP" plan "${M[@]}" --out "$tmp/my-stdout" >> "$tmp/o" 2> /dev/null; rc=$?
if [ $rc -eq 0 ] && [ "$(head -n 1 "$tmp/o")" = "kept line" ] && tail -n +2 "$tmp/o" | cmp -s - "$tmp/ref.json"; then ok
else bad "--out link to stdout, a file opened for append: rc=$rc"; fi
"$OP" export "$tmp/ref.json" --svg "$tmp/my-fd3" 3> "$tmp/fd3.svg" > /dev/null 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "<svg" "$tmp/fd3.svg" && [ -L "$tmp/my-fd3" ] && ok || bad "--svg link to fd 3: rc=$rc"

# device nodes (made here, not in /dev): written in place, never replaced by a file
if mknod "$tmp/null" c 1 3 2> /dev/null && mknod "$tmp/full" c 1 7 2> /dev/null; then
  "$OP" plan "${M[@]}" --out "$tmp/null" > /dev/null 2>&1; rc=$?
  [ $rc -eq 0 ] && [ -c "$tmp/null" ] && ok || bad "--out null device: rc=$rc, $(stat -c %F "$tmp/null")"
  "$OP" plan "${M[@]}" --out "$tmp/full" > /dev/null 2> "$tmp/err"; rc=$?
  if [ $rc -eq 1 ] && [ -c "$tmp/full" ] && grep -q "No space left" "$tmp/err" && [ "$(wc -l < "$tmp/err")" -eq 1 ]; then ok
  else bad "--out full device: rc=$rc, $(stat -c %F "$tmp/full"), $(cat "$tmp/err")"; fi
else
  skipped+=("device nodes (mknod not permitted here)")
fi

# '-' is stdout for every output flag
"$OP" export "$tmp/loop.json" --megatron-layout - > "$tmp/o" 2> /dev/null
grep -q -- "--pipeline-model-parallel-size 2" "$tmp/o" && ok || bad "export --megatron-layout -"
"$OP" export "$tmp/loop.json" --torch-csv - > "$tmp/o" 2> /dev/null
[ "$(wc -l < "$tmp/o")" -eq 2 ] && ok || bad "export --torch-csv -: $(wc -l < "$tmp/o") lines"
"$OP" run "$tmp/ref.json" --emulate --threads --time-scale 0.01 --bytes-scale 0.001 --trace - > "$tmp/o" 2> "$tmp/e"; rc=$?
if [ $rc -eq 0 ] && jq -e '.traceEvents | length > 0' "$tmp/o" > /dev/null && grep -q "measured" "$tmp/e"; then ok
else bad "run --trace -: rc=$rc $(tail -n 2 "$tmp/e")"; fi
"$OP" profile --model tiny --repeats 1 --out - > "$tmp/o" 2> "$tmp/e"; rc=$?
if [ $rc -eq 0 ] && jq -e '.pattern' "$tmp/o" > /dev/null; then ok; else bad "profile --out -: rc=$rc"; fi
"$OP" train --model tiny --devices 2 --microbatches 2 --steps 1 --threads --plan 1f1b --repeats 1 \
      --save-plan - > "$tmp/o" 2> "$tmp/e"; rc=$?
if [ $rc -eq 0 ] && grep -q '"octopipe.plan/1"' "$tmp/o"; then ok; else bad "train --save-plan -: rc=$rc $(tail -n 2 "$tmp/e")"; fi
[ ! -e ./- ] && [ ! -e "$tmp/-" ] && ok || bad "a file named '-' was created"

# every output checked before the work: one line naming the file, exit 2, nothing written
expect_early() { # what args...
  local what=$1; shift
  local t0; t0=$(date +%s.%N)
  "$OP" "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "cannot write" "$tmp/err" && grep -q "$what" "$tmp/err" \
     && [ ! -s "$tmp/out" ]; then ok
  else bad "octopipe $* -> rc=$rc stdout $(wc -c < "$tmp/out") B, stderr: $(head -n 3 "$tmp/err")"; fi
}
touch "$tmp/afile"
expect_early "$tmp/missing/p.json" plan "${M[@]}" --out "$tmp/missing/p.json"
expect_early "afile" plan "${M[@]}" --out "$tmp/afile/p.json"
expect_early "is a directory" plan "${M[@]}" --out "$tmp/real"
expect_early "$tmp/missing/r.json" run "$tmp/ref.json" --emulate --trace "$tmp/missing/r.json"
expect_early "$tmp/missing/r.json" run "$tmp/ref.json" --emulate --threads --trace "$tmp/missing/r.json"
expect_early "$tmp/missing/e.svg" export "$tmp/ref.json" --svg "$tmp/missing/e.svg"
expect_early "$tmp/missing/x.json" profile --model tiny --out "$tmp/missing/x.json"
expect_early "$tmp/missing/c.json" profile comm --out "$tmp/missing/c.json"
T=(train --model tiny --devices 2 --microbatches 2 --steps 1)
expect_early "$tmp/missing/t.svg" "${T[@]}" --svg "$tmp/missing/t.svg"
expect_early "$tmp/missing/t.json" "${T[@]}" --trace "$tmp/missing/t.json"
expect_early "$tmp/missing/t.json" "${T[@]}" --threads --save-plan "$tmp/missing/t.json"
expect_early "$tmp/missing/ck" "${T[@]}" --checkpoint "$tmp/missing/ck"
expect_early "afile" "${T[@]}" --checkpoint "$tmp/afile/ck"
[ ! -e "$tmp/missing" ] && ok || bad "a refused output created something"

# an unwritable directory (root ignores permission bits, so: a read-only bind mount in a private
# mount namespace, else an immutable directory): one line for compare --plans-dir, not one per plan
mkdir -p "$tmp/ro"
ro_run() { # args...: runs octopipe with $tmp/ro read-only
  if unshare -m --propagation private true 2> /dev/null; then
    unshare -m --propagation private bash -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' \
      _ "$tmp/ro" "$OP" "$@"
  elif chattr +i "$tmp/ro" 2> /dev/null; then
    "$OP" "$@"; local rc=$?; chattr -i "$tmp/ro"; return $rc
  else
    return 99
  fi
}
ro_run compare --model llama2-7b --devices 4 --microbatches 8 --no-tune --plans-dir "$tmp/ro" > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc -eq 99 ]; then skipped+=("read-only directory (neither a private mount namespace nor chattr here)")
elif [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "$tmp/ro: cannot write" "$tmp/err" && [ ! -s "$tmp/out" ]; then ok
else bad "compare --plans-dir read-only: rc=$rc, $(wc -l < "$tmp/err") lines: $(head -n 2 "$tmp/err")"; fi
ro_run plan "${M[@]}" --out "$tmp/ro/p.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
if [ $rc -eq 99 ]; then :
elif [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "Read-only\|Operation not permitted" "$tmp/err"; then ok
else bad "plan --out read-only dir: rc=$rc $(cat "$tmp/err")"; fi
[ -z "$(ls -A "$tmp/ro")" ] && ok || bad "read-only dir got files"

# a failed run leaves an old file as it was (plan that fits nowhere)
echo keep > "$tmp/keep.json"
"$OP" plan --model jamba-v0.1 --devices 4 --microbatches 8 --quiet --out "$tmp/keep.json" > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && [ "$(cat "$tmp/keep.json")" = keep ] && ok || bad "failed plan touched the old file (rc=$rc)"
# an output never replaces an input of the same command, under any name (out.h)
mkdir "$tmp/in"; cp "$tmp/ref.json" "$tmp/in/p.json"; ln -s p.json "$tmp/in/l.json"
cp tests/data/profiles/tiny.json "$tmp/in/m.json"
# the other inputs: a CSV that export --check-csv reads, a cluster file that run --cluster reads
"$OP" export "$tmp/ref.json" --torch-csv "$tmp/in/c.csv" > /dev/null 2>&1 && cp "$tmp/in/c.csv" "$tmp/c.ref"
printf '{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 10, "inter_lat_ms": 0.02, "inter_bw_GBps": 10}\n' \
  > "$tmp/in/cl.json"; cp "$tmp/in/cl.json" "$tmp/cl.ref"
for c in "export $tmp/in/p.json --svg $tmp/in/p.json" "export $tmp/in/p.json --chrome-trace $tmp/in/./p.json" \
         "export $tmp/in/p.json --svg $tmp/in/l.json" "run $tmp/in/l.json --emulate --threads --time-scale 0.01 --trace $tmp/in/p.json" \
         "plan --model $tmp/in/m.json --devices 2 --microbatches 4 --quiet --out $tmp/in/m.json" \
         "train --model tiny --devices 2 --microbatches 4 --plan 1f1b --threads --steps 1 --data $tmp/in/m.json --trace $tmp/in/m.json" \
         "train --model tiny --devices 2 --microbatches 4 --plan $tmp/in/p.json --threads --steps 1 --svg $tmp/in/l.json" \
         "export $tmp/in/p.json --check-csv $tmp/in/c.csv --svg $tmp/in/./c.csv" \
         "run $tmp/in/p.json --emulate --threads --time-scale 0.01 --cluster $tmp/in/cl.json --trace $tmp/in/cl.json"; do
  $OP $c > /dev/null 2> "$tmp/err"; rc=$?
  if [ $rc -eq 2 ] && grep -q "it is the input" "$tmp/err" && [ "$(wc -l < "$tmp/err")" -eq 1 ] \
     && cmp -s "$tmp/in/p.json" "$tmp/ref.json" && cmp -s "$tmp/in/m.json" tests/data/profiles/tiny.json \
     && cmp -s "$tmp/in/c.csv" "$tmp/c.ref" && cmp -s "$tmp/in/cl.json" "$tmp/cl.ref" \
     && [ -L "$tmp/in/l.json" ]; then ok; else bad "input as output ($c): rc=$rc $(cat "$tmp/err")"; fi
done
# compare --plans-dir: each plan file is checked before the work too, not only the directory:
# a directory where a plan goes, or an input with a plan's name, is refused at the start (such a
# run once printed its table, wrote the plans before that one and failed there)
mkdir -p "$tmp/pd/zbv.json"
expect_early "$tmp/pd/zbv.json: cannot write: is a directory" compare "${M[@]}" --no-tune --plans-dir "$tmp/pd"
[ "$(ls -A "$tmp/pd")" = zbv.json ] && ok || bad "compare --plans-dir with a directory zbv.json wrote: $(ls -A "$tmp/pd")"
mkdir "$tmp/pd2"; cp tests/data/profiles/tiny.json "$tmp/pd2/octopipe.json"; cp "$tmp/cl.ref" "$tmp/pd2/zbv.json"
for c in "compare --model $tmp/pd2/octopipe.json --devices 2 --microbatches 4 --quiet --plans-dir $tmp/pd2" \
         "compare ${M[*]} --no-tune --cluster $tmp/pd2/zbv.json --plans-dir $tmp/pd2"; do
  $OP $c > "$tmp/out" 2> "$tmp/err"; rc=$?
  if [ $rc -eq 2 ] && grep -q "it is the input" "$tmp/err" && [ "$(wc -l < "$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ] \
     && [ "$(ls "$tmp/pd2" | tr '\n' ' ')" = "octopipe.json zbv.json " ] \
     && cmp -s "$tmp/pd2/octopipe.json" tests/data/profiles/tiny.json && cmp -s "$tmp/pd2/zbv.json" "$tmp/cl.ref"; then ok
  else bad "input as a plan of --plans-dir ($c): rc=$rc, wrote $(ls "$tmp/pd2" | wc -l) files, $(head -n 2 "$tmp/err")"; fi
done
# two output flags naming one file by different spellings: refused before anything is written
"$OP" export "$tmp/ref.json" --svg "$tmp/in/a.svg" --chrome-trace "$tmp/in/./a.svg" > /dev/null 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "the same file" "$tmp/err" && [ ! -e "$tmp/in/a.svg" ] && ok || bad "two spellings of one output: rc=$rc $(cat "$tmp/err")"

left=$(find "$tmp" -name '*.tmp.*' -o -name '*.probe.*' | head -n 3)
[ -z "$left" ] && ok || bad "temporary files left at the end: $left"

for s in "${skipped[@]}"; do echo "SKIPPED (not counted): $s"; done
echo "out: $pass passed, $fail failed"
[ $fail -eq 0 ]
