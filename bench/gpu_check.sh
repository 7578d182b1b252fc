#!/usr/bin/env bash
# The device check, one command (not a test; bench/gpu_check.py holds the parts and prints the one table).
#
#   [PYTHON=python3.X] bench/gpu_check.sh prepare DIR   (X: the GPU machine's Python: the wheels are per version)
#                                         on a machine with the package registry: the wheels the check needs
#                                         (transformers at the lock's version and its dependencies, tqdm) into DIR
#   bench/gpu_check.sh [--torch PYTHON] [--wheels DIR] [gpu_check.py options]
#                                         on the GPU machine (no network): a venv over PYTHON's site-packages
#                                         (its preinstalled CUDA torch), the wheels installed from DIR offline,
#                                         then the check; default --device cuda. --device cpu runs the same path
#                                         on a CPU (tests/test_gpu_check.py, on 1- and 2-model samples).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lock=$(ls "$root"/harness/zoo/lock/transformers-*.json | sed 's/.*transformers-\(.*\)\.json/\1/' | sort -V | tail -1)

if [ "${1:-}" = prepare ]; then
    dir=${2:?usage: bench/gpu_check.sh prepare DIR}
    mkdir -p "$dir"
    # torch is the machine's own; only what the check imports beside it travels.
    "${PYTHON:-python3}" -m pip download --quiet --dest "$dir" --only-binary=:all: \
        -c "$root/constraints.txt" "transformers==$lock" tqdm
    du -sh "$dir"
    exit 0
fi

python=python3
wheels=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --torch) python=$2; shift 2 ;;
        --wheels) wheels=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ -n "$wheels" ]; then
    venv=$(mktemp -d)/venv
    "$python" -m venv --system-site-packages "$venv"
    "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" "transformers==$lock" tqdm
    python=$venv/bin/python
fi
"$python" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__)" >&2
cd "$root"
exec "$python" bench/gpu_check.py "${args[@]}"
