"""Is a device there? Asked in the interpreter under test, so the bot process never imports torch."""
from __future__ import annotations

import subprocess
import sys

from harness.engine.pool import worker_env

# Prints nothing when the device is usable, else one line saying why not.
_PROBE = """
import sys
import torch
dev = torch.device(sys.argv[1])
if dev.type == "cuda":
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n == 0:
        print(f"no CUDA device in this torch {torch.__version__} (CUDA build: {torch.version.cuda})")
    elif dev.index is not None and dev.index >= n:
        print(f"there are only {n} CUDA device(s) (cuda:0 to cuda:{n - 1})")
elif dev.type != "cpu" and not getattr(torch, dev.type).is_available():
    print(f"no {dev.type} device in this torch {torch.__version__}")
"""


def unavailable(device: str, python: str | None = None, timeout: float = 300.0) -> str | None:
    """Why `device` cannot be used by `python` (None when it can); cpu is always there and costs nothing."""
    if device == "cpu":
        return None
    proc = subprocess.run([python or sys.executable, "-c", _PROBE, device], capture_output=True, text=True,
                          env=worker_env(), timeout=timeout)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return f"cannot check it: {lines[-1] if lines else f'exit code {proc.returncode}'}"
    return proc.stdout.strip() or None
