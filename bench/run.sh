#!/usr/bin/env bash
# Runs benchmark groups and prints their tables.  Usage: bench/run.sh all|sim|baselines|plan|memory|mixed|exec|model
# Each group is bench/bench_<group>*.c (built as $BUILD/bench/...) and/or bench/<group>*.sh.
# Results are also written to $BUILD/bench-results/<name>.txt.  Machine facts go on top so
# the numbers can be compared with the machine they came from.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD OCTOPIPE=${OCTOPIPE:-$BUILD/octopipe}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
group=${1:-all}
out=$BUILD/bench-results; mkdir -p "$out"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git describe --always --dirty 2>/dev/null || echo "?")"
rc=0
groups=(sim baselines plan memory mixed exec model)
[ "$group" != all ] && groups=("$group")
for g in "${groups[@]}"; do
  for b in "$BUILD"/bench/bench_"$g"* bench/"$g"*.sh; do
    [ -e "$b" ] || continue
    case "$b" in *.o|*.d) continue;; esac
    name=$(basename "$b"); name=${name%.sh}
    echo; echo "== $name"
    if [[ "$b" == *.sh ]]; then timeout -k 10 3000 bash "$b" 2>&1 | tee "$out/$name.txt"
    else timeout -k 10 3000 "$b" 2>&1 | tee "$out/$name.txt"; fi
    [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
  done
done
exit $rc
