#!/bin/sh
# Creates .venv-torch/ in the repository root with torch (and numpy) from PyPI, for the PyTorch
# interop suite (`make test-torch`).  Only that suite uses it; `make test` never does.
# torch is pinned to the release the suite's lowering rules match (docs/torch.md).
# Idempotent: a venv whose python already imports that torch returns at once.
# Usage: scripts/setup_torch.sh   (or scripts/setup.sh --torch)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${OCTOPIPE_TORCH_VENV:-$ROOT/.venv-torch}
PY="$VENV/bin/python"
TORCH=2.15
if [ -x "$PY" ] && "$PY" -c "import numpy, torch; assert torch.__version__.startswith('$TORCH.')" 2>/dev/null; then
  exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "setup_torch: installing python3-venv" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
[ -x "$PY" ] || python3 -m venv "$VENV"
echo "setup_torch: installing torch $TORCH into $VENV (a few GB, once)" >&2
"$PY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
"$PY" -m pip install -q --disable-pip-version-check "torch==$TORCH.*" numpy
"$PY" -c 'import torch; print("setup_torch: torch", torch.__version__)' >&2
