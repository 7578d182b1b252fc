#!/usr/bin/env bash
# Create or refresh .venv with pinned dependencies. Idempotent: a stamp file
# records what was installed, so a second call costs nothing.
#   TORCH_VERSION  torch version to install (default 2.13.0, the CPU wheel)
#   PYTHON         interpreter to build the venv from (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PYTHON="${PYTHON:-python3}"
VENV=.venv
stamp_want="$(cat constraints.txt pyproject.toml | sha256sum | cut -c1-16)-torch-${TORCH_VERSION}"
if [ -f "$VENV/.flagsweep-stamp" ] && [ "$(cat "$VENV/.flagsweep-stamp")" = "$stamp_want" ]; then
  exit 0
fi
echo "bootstrap: creating $VENV (torch==$TORCH_VERSION)" >&2
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
log="$VENV/bootstrap.log"
pip_install() {
  if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" >>"$log" 2>&1; then
    echo "bootstrap: pip install $* failed; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}
: >"$log"
# torch first, pinned, so that nothing below can pull a CUDA build.
pip_install "torch==${TORCH_VERSION}"
pip_install -c constraints.txt -e ".[test]"
echo "$stamp_want" > "$VENV/.flagsweep-stamp"
echo "bootstrap: ready" >&2
