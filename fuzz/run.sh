#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, the library instrumented for coverage) and
# runs each for $1 seconds (default 30), seeded from the test inputs.  A crash leaves its input
# in build-fuzz/crash-* and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-30}
CLANG=$(command -v clang || command -v clang-14 || true)
[ -n "$CLANG" ] || { echo "fuzz: clang not found (scripts/setup.sh --dev installs it)"; exit 1; }
B=build-fuzz
mkdir -p "$B/obj"
FLAGS="-g -O1 -std=c17 -D_GNU_SOURCE -Iinclude -Isrc $(pkg-config --cflags jansson openblas) $(mpicc --showme:compile)"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
objs=()
# an object is rebuilt when its source or any header is newer (struct layouts change with headers)
newest_h=$(ls -t include/octopipe/*.h src/*/*.h | awk 'NR == 1')
for f in $(ls src/*/*.c | grep -v '^src/cli/'); do
  o="$B/obj/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
    $CLANG $FLAGS $SAN -fsanitize=fuzzer-no-link -c "$f" -o "$o"
  fi
  objs+=("$o")
done
LIBS="$(pkg-config --libs jansson openblas) $(mpicc --showme:link) -lpthread -lm"
fail=0
for t in hf_config profile plan torch_csv; do
  $CLANG $FLAGS -Ifuzz $SAN -fsanitize=fuzzer "fuzz/fuzz_$t.c" "${objs[@]}" $LIBS -o "$B/fuzz_$t"
  corpus="$B/corpus-$t"; mkdir -p "$corpus"
  case $t in
    hf_config) cp -n tests/data/hf/*.json data/hf-configs/*.json "$corpus"/ 2>/dev/null || true ;;
    profile) cp -n tests/data/profiles/*.json "$corpus"/ 2>/dev/null || true ;;
    plan) cp -n tests/data/plans/*.json "$corpus"/ 2>/dev/null || true ;;
    torch_csv) printf '\x010F0,0F1,2F0,2F1,2I0,2W0,2I1,2W1,0I0,0I1,0W0,0W1\n1F0,1F1,3F0,3F1,3I0,3W0,3I1,3W1,1I0,1I1,1W0,1W1\n' > "$corpus/seed.csv" ;;
  esac
  echo "fuzz: $t for ${SECS}s"
  if ! (cd "$B" && ASAN_OPTIONS=detect_leaks=1 ./fuzz_$t -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 \
        -print_final_stats=1 "corpus-$t" > "fuzz_$t.log" 2>&1); then
    echo "fuzz: $t FAILED (see $B/fuzz_$t.log)"; tail -n 30 "$B/fuzz_$t.log"; fail=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$B/fuzz_$t.log" | tail -n 2
  fi
done
exit $fail
