#!/usr/bin/env bash
# sh_fuzz.sh: the fuzz targets (fuzz/fuzz_*.c, `make fuzz`) still build against the sources.
# `make fuzz` needs clang and libFuzzer and takes minutes, so nothing else would notice a
# target that no longer links (the flags target's CLI parser came to call helpers of
# src/cli/cli_out.c, which fuzz/run.sh did not link, and `make fuzz` stopped at the link).
# Here each target is compiled with the suite's compiler and a small driver in place of
# libFuzzer's main, linked with the library and the sources `fuzz/run.sh --sources TARGET`
# names, and run on one seed input.  The checkpoint target writes its seed itself (a valid
# checkpoint of its model, FUZZ_CKPT_SEED) and aborts if that file is refused; it also runs on
# a cut copy.  The cluster seed is a mixed cluster (devices, per-pair links), which the CLI
# must accept too, so the target reaches the problem it builds from one.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CC=${CC:-cc}
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp=$(mktemp -d /tmp/octopipe-fuzz-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
XFLAGS=""
[ "${SAN:-}" = 1 ] && XFLAGS="-fsanitize=address,undefined"
[ "${SAN:-}" = thread ] && XFLAGS="-fsanitize=thread"
FLAGS="-std=c17 -D_GNU_SOURCE -Iinclude -Isrc -Ifuzz $(pkg-config --cflags jansson openblas) $(mpicc --showme:compile)"
LIBS="$(pkg-config --libs jansson openblas) $(mpicc --showme:link) -lpthread -lm"

# libFuzzer's run-one-input mode: LLVMFuzzerInitialize when the target has one, then each file
cat >"$tmp/driver.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);
int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) return 3;
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
EOF

printf -- '--model\nnemotron-h-8b\n--devices\n4\n--microbatches\n8\n--tp\n2\n' >"$tmp/flags.seed"
cat >"$tmp/cluster.seed" <<'EOF'
{"format": "octopipe.cluster/1", "nodes_of": 2, "intra_lat_ms": 0.01, "intra_bw_GBps": 360,
 "inter_lat_ms": 0.025, "inter_bw_GBps": 40,
 "devices": [{"gpu": "h100-80gb"}, {"gpu": "h100-80gb"}, {"gpu": "a100-80gb"}, {"gpu": "a100", "mem_GiB": 40}],
 "pair_lat_ms": [[0, 0.01, 0.025, 0.025], [0.01, 0, 0.025, 0.025], [0.025, 0.025, 0, 0.01], [0.025, 0.025, 0.01, 0]],
 "pair_bw_GBps": [[0, 360, 40, 40], [360, 0, 40, 40], [40, 40, 0, 300], [40, 40, 300, 0]]}
EOF
# a seed the reader refuses would check nothing past the refusal
if "$BUILD/octopipe" compare --model llama2-7b --cluster "$tmp/cluster.seed" --microbatches 4 \
     >/dev/null 2>"$tmp/cluster.cli"; then ok
else bad "the cluster seed is refused: $(head -n 2 "$tmp/cluster.cli")"; fi
printf '\x010F0,0F1,1F0,1F1,1B0,1B1,0B0,0B1\n' >"$tmp/torch_csv.seed"
seed_of() {
  case $1 in
    hf_config) echo "$PWD/data/hf-configs/llama2-7b.json" ;;
    profile) echo "$PWD/tests/data/profiles/tiny.json" ;;
    plan) echo "$PWD/tests/data/plans/1f1b-p4-m8.json" ;;
    *) echo "$tmp/$1.seed" ;;
  esac
}

n=0
for src in fuzz/fuzz_*.c; do
  t=$(basename "$src" .c); t=${t#fuzz_}
  n=$((n + 1))
  # shellcheck disable=SC2046
  if ! $CC $FLAGS $XFLAGS "$src" "$tmp/driver.c" $(fuzz/run.sh --sources "$t") "$BUILD/liboctopipe.a" \
       $LIBS -o "$tmp/fuzz_$t" 2>"$tmp/$t.cc"; then
    bad "fuzz target $t does not build: $(grep -m 3 -E 'error|undefined' "$tmp/$t.cc")"
    continue
  fi
  ok
  if [ "$t" = ckpt ]; then
    # its own checkpoint, saved and read back in the target (it aborts if that fails)
    if FUZZ_CKPT_SEED="$tmp/ckpt.seed" "$tmp/fuzz_ckpt" 2>"$tmp/ckpt.init" &&
       [ "$(head -c 8 "$tmp/ckpt.seed" 2>/dev/null)" = OPCKPT01 ]; then ok
    else bad "fuzz target ckpt wrote no checkpoint seed: $(head -n 3 "$tmp/ckpt.init")"; fi
    head -c 300 "$tmp/ckpt.seed" >"$tmp/ckpt.cut"
    if "$tmp/fuzz_ckpt" "$tmp/ckpt.cut" >/dev/null 2>"$tmp/ckpt.cutrun"; then ok
    else bad "fuzz target ckpt on a cut checkpoint: exit $?: $(head -n 3 "$tmp/ckpt.cutrun")"; fi
  fi
  # from fuzz/, as from build-fuzz/: the flags target reads ../tests/data
  seed=$(seed_of "$t")
  if (cd fuzz && "$tmp/fuzz_$t" "$seed" >/dev/null 2>"$tmp/$t.run"); then ok
  else bad "fuzz target $t on its seed: exit $?: $(head -n 3 "$tmp/$t.run")"; fi
done
[ "$n" -ge 7 ] && ok || bad "only $n fuzz targets found"
echo "sh_fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
