#!/usr/bin/env bash
# sh_svg_render.sh: the SVG timelines render in a real browser.  Renders two SVGs test_export
# builds (P=2 V with I/W, P=16 x M=64 1F1B) and, when `octopipe compare` can make plans, one
# exported through the CLI (ZB-V on nemotron-h-8b), in headless Chromium, and checks each
# screenshot is a 1600x900 PNG with real content (a blank page compresses to ~6 kB).  Skips, saying so, when
# Chromium is absent.  KEEP=DIR keeps the SVGs and PNGs there to look at.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OCTOPIPE=${OCTOPIPE:-$BUILD/octopipe}
pass=0; fail=0
finish() { echo "sh_svg_render: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$CHROME" ]; then echo "skip: no chromium on this machine"; finish; fi
if [ ! -x "$BUILD/tests/test_export" ]; then echo "skip: $BUILD/tests/test_export not built"; finish; fi
tmp=$(mktemp -d /tmp/octopipe-svg-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=${KEEP:-$tmp}
mkdir -p "$out"

OCTOPIPE_EXPORT_DUMP=$out "$BUILD/tests/test_export" svg >"$tmp/t.log" 2>&1 \
  || { echo "FAIL: test_export svg: $(tail -n 3 "$tmp/t.log")"; fail=$((fail + 1)); }
mkdir -p "$tmp/plans"
if [ -x "$OCTOPIPE" ] && "$OCTOPIPE" compare --model nemotron-h-8b --devices 8 --microbatches 32 \
     --seq 1024 --plans-dir "$tmp/plans" >/dev/null 2>&1 && [ -s "$tmp/plans/zbv.json" ]; then
  "$OCTOPIPE" export "$tmp/plans/zbv.json" --svg "$out/cli_zbv.svg" >/dev/null 2>&1 \
    || { echo "FAIL: octopipe export --svg"; fail=$((fail + 1)); }
else
  echo "note: no CLI-made plan (octopipe compare unavailable); rendering test_export's SVGs only"
fi

# three renders cover the cases (small V with tints and labels, P=16 x M=64, a real model via
# the CLI); each Chromium start costs seconds on a shared machine
for svg in "$out"/v_p2_m2.svg "$out"/1f1b_p16_m64.svg "$out"/cli_zbv.svg; do
  [ -e "$svg" ] || continue
  png=${svg%.svg}.png
  prof=$(mktemp -d "$tmp/chrome-XXXXXX")
  timeout -k 5 90 "$CHROME" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$prof" --screenshot="$png" --window-size=1600,900 "file://$(realpath "$svg")" \
    >"$tmp/chrome.log" 2>&1
  rm -rf "$prof"
  size=$(stat -c %s "$png" 2>/dev/null || echo 0)
  # PNG signature and IHDR width/height (big-endian at bytes 16..23)
  dims=$(od -A n -t u1 -j 16 -N 8 "$png" 2>/dev/null | awk '{print $3*256+$4 "x" $7*256+$8}')
  if [ "$size" -gt 15000 ] && [ "$dims" = "1600x900" ]; then
    pass=$((pass + 1)); echo "ok: $(basename "$svg") -> $size bytes, $dims"
  else
    fail=$((fail + 1)); echo "FAIL: $(basename "$svg"): png $size bytes, $dims; $(tail -n 2 "$tmp/chrome.log")"
  fi
done
[ $((pass + fail)) -gt 0 ] || { echo "FAIL: no SVG to render"; fail=1; }
finish
