#!/bin/sh
# Installs the Debian packages OctoPipe needs, only those that are missing.
# Idempotent: a machine that already has everything returns at once.
# Usage: scripts/setup.sh [--test] [--dev]
#   (none)  what building and `make run` need
#   --test  also what the tests use (make test): chromium renders the SVG timelines,
#           python3 re-reads the exported JSON/XML
#   --dev   also clang + libFuzzer runtime (make fuzz), and what --test adds
#   --torch the PyTorch interop venv (.venv-torch/, torch from PyPI): scripts/setup_torch.sh
set -eu
# --torch: the PyTorch interop venv (.venv-torch/), made by its own script
if [ "${1:-}" = "--torch" ]; then exec "$(dirname "$0")/setup_torch.sh"; fi
PKGS="build-essential pkg-config openmpi-bin libopenmpi-dev libopenblas-dev libjansson-dev iproute2 util-linux jargon-text jq"
TEST_PKGS="chromium python3"
for a in "$@"; do
  case "$a" in
    --test) PKGS="$PKGS $TEST_PKGS" ;;
    --dev) PKGS="$PKGS $TEST_PKGS clang libclang-rt-dev" ;;
    *) echo "setup.sh: unknown option '$a' (use --test or --dev)" >&2; exit 2 ;;
  esac
done
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "setup: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
