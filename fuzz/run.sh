#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan with float-cast-overflow, the library
# instrumented for coverage) and runs each for $1 seconds (default 30), seeded from the test
# inputs in this repository (the checkpoint target writes its own seed); FUZZ_TARGETS="profile
# plan" picks targets.  Prints each target's executions and the total.  A crash leaves its
# input in build-fuzz/crash-* and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
# Sources a target links besides the library: the flags target parses flags as the commands do
# (cli_common.c) and that parser uses the commands' shared output helpers (cli_out.c).
extra_src() { if [ "$1" = flags ]; then echo "src/cli/cli_common.c src/cli/cli_out.c"; fi; }
# `fuzz/run.sh --sources TARGET` prints them (tests/sh_fuzz.sh links every target with them)
if [ "${1:-}" = --sources ]; then extra_src "${2:-}"; exit 0; fi
SECS=${1:-30}
CLANG=$(command -v clang || command -v clang-14 || true)
[ -n "$CLANG" ] || { echo "fuzz: clang not found (scripts/setup.sh --dev installs it)"; exit 1; }
B=build-fuzz
mkdir -p "$B/obj"
FLAGS="-g -O1 -std=c17 -D_GNU_SOURCE -Iinclude -Isrc $(pkg-config --cflags jansson openblas) $(mpicc --showme:compile)"
SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow"
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
total=0
for t in ${FUZZ_TARGETS:-hf_config profile plan torch_csv cluster ckpt flags}; do
  extra=() quiet=()
  for f in $(extra_src "$t"); do
    o="$B/obj/$(echo "$f" | tr / _).o"
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
      $CLANG $FLAGS $SAN -fsanitize=fuzzer-no-link -c "$f" -o "$o"
    fi
    extra+=("$o")
  done
  # the flags target prints one line per rejected flag, as the CLI does: close its stdout/stderr
  [ "$t" = flags ] && quiet=(-close_fd_mask=3)
  $CLANG $FLAGS -Ifuzz $SAN -fsanitize=fuzzer "fuzz/fuzz_$t.c" "${objs[@]}" "${extra[@]}" $LIBS -o "$B/fuzz_$t"
  corpus="$B/corpus-$t"; mkdir -p "$corpus"
  case $t in
    hf_config) cp -n tests/data/hf/*.json data/hf-configs/*.json "$corpus"/ 2>/dev/null || true ;;
    profile) cp -n tests/data/profiles/*.json "$corpus"/ 2>/dev/null || true ;;
    plan) cp -n tests/data/plans/*.json "$corpus"/ 2>/dev/null || true ;;
    cluster) printf '{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 360,\n "inter_lat_ms": 0.025, "inter_bw_GBps": 40, "source": "seed"}\n' > "$corpus/seed.json"
             # mixed clusters (docs/cluster.md): devices by type and memory, per-pair links, both
             cat > "$corpus/mixed-devices-pairs.json" <<'EOF'
{"format": "octopipe.cluster/1", "nodes_of": 2,
 "intra_lat_ms": 0.01, "intra_bw_GBps": 360, "inter_lat_ms": 0.025, "inter_bw_GBps": 40,
 "devices": [{"gpu": "h100-80gb"}, {"gpu": "h100-80gb"}, {"gpu": "a100-80gb"}, {"gpu": "a100", "mem_GiB": 40}],
 "pair_lat_ms":  [[0, 0.01, 0.025, 0.025], [0.01, 0, 0.025, 0.025], [0.025, 0.025, 0, 0.01], [0.025, 0.025, 0.01, 0]],
 "pair_bw_GBps": [[0, 360, 40, 40], [360, 0, 40, 40], [40, 40, 0, 300], [40, 40, 300, 0]],
 "source": "2 H100 + 2 A100 in two nodes, measured per pair"}
EOF
             cat > "$corpus/mixed-gpus.json" <<'EOF'
{"format": "octopipe.cluster/1", "nodes_of": 4, "intra_lat_ms": 0.01, "intra_bw_GBps": 360,
 "inter_lat_ms": 0.025, "inter_bw_GBps": 40, "gpus": "h100-80gb:4,a100-80gb:2,h200:2"}
EOF
             cat > "$corpus/pairs-only.json" <<'EOF'
{"format": "octopipe.cluster/1", "nodes_of": 0, "intra_lat_ms": 0.0261, "intra_bw_GBps": 5.559,
 "inter_lat_ms": 0.0261, "inter_bw_GBps": 5.559, "source": "profile comm --ranks 3",
 "pair_lat_ms": [[0, 0.025, 0.0255], [0.025, 0, 0.0256], [0.0255, 0.0256, 0]],
 "pair_bw_GBps": [[0, 5.989, 2.685], [5.989, 0, 4.49], [2.685, 4.49, 0]]}
EOF
             cat > "$corpus/mixed-mem.json" <<'EOF'
{"format": "octopipe.cluster/1", "nodes_of": 8, "intra_lat_ms": 0.01, "intra_bw_GBps": 360,
 "inter_lat_ms": 0.025, "inter_bw_GBps": 40,
 "devices": [{"gpu": "h200"}, {"gpu": "h100", "mem_GiB": 40}, {"gpu": "h100", "mem_GiB": 40},
             {"gpu": "a100", "mem_GiB": 12}, {"gpu": "a100", "mem_GiB": 12}]}
EOF
             ;;
    # the target writes a valid checkpoint of its own model (so the seed follows the format);
    # then cut and garbled copies (the target repairs their checksum: each reaches its check)
    ckpt) v="$corpus/valid.ckpt"
          FUZZ_CKPT_SEED="$v" "$B/fuzz_ckpt"
          n=$(stat -c %s "$v")
          head -c $((n / 2)) "$v" > "$corpus/cut-half.ckpt"
          head -c $((n - 8)) "$v" > "$corpus/no-checksum.ckpt"
          # offsets in that file: version 8, pattern "EM*-#L" 16, cfg 22, step 98, params 114
          garble() { cp "$v" "$corpus/$1"; printf "$3" | dd of="$corpus/$1" bs=1 seek="$2" conv=notrunc status=none; }
          garble version.ckpt 8 '\x02'
          garble dims.ckpt 26 '\x03'
          garble step.ckpt 105 '\x80'
          garble nan-param.ckpt 114 '\x00\x00\xc0\x7f' ;;
    flags) printf -- '--model\nnemotron-h-8b\n--devices\n4\n--microbatches\n8\n--tp\n2\n--mem-limit\n40\n' > "$corpus/seed1"
           printf -- '--model\nmixtral-8x7b\n--devices\n8\n--microbatches\n16\n--seq\n8192\n--nodes-of\n4\n--op-overhead\n0.1\n' > "$corpus/seed2"
           printf -- 'x.json\n--emulate\n--time-scale\n0.5\n--bytes-scale\n2\n--dispatch-ms\n0.01\n--recv-window\n4\n' > "$corpus/seed3" ;;
    torch_csv) printf '\x010F0,0F1,2F0,2F1,2I0,2W0,2I1,2W1,0I0,0I1,0W0,0W1\n1F0,1F1,3F0,3F1,3I0,3W0,3I1,3W1,1I0,1I1,1W0,1W1\n' > "$corpus/seed.csv" ;;
  esac
  echo "fuzz: $t for ${SECS}s"
  if ! (cd "$B" && ASAN_OPTIONS=detect_leaks=1 ./fuzz_$t "${quiet[@]}" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 \
        -print_final_stats=1 "corpus-$t" > "fuzz_$t.log" 2>&1); then
    echo "fuzz: $t FAILED (see $B/fuzz_$t.log)"; tail -n 30 "$B/fuzz_$t.log"; fail=1
  else
    grep -E "cov:" "$B/fuzz_$t.log" | tail -n 1 || true
  fi
  n=$(awk '/stat::number_of_executed_units/ {print $2}' "$B/fuzz_$t.log" | tail -n 1 || true)
  echo "fuzz: $t: ${n:-0} executions"
  total=$((total + ${n:-0}))
done
echo "fuzz: total ${total} executions"
exit $fail
