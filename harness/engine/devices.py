"""Is a device there? Asked in the interpreter under test, so the bot process never imports torch."""
from __future__ import annotations

import subprocess

from harness.engine import interpreter


def why_not(device: str) -> str | None:
    """Run in the interpreter under test (through harness.engine.interpreter): why `device` is unusable, or None."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            return f"no CUDA device in this torch {torch.__version__} (CUDA build: {torch.version.cuda})"
        if dev.index is not None and dev.index >= n:
            return f"there are only {n} CUDA device(s) (cuda:0 to cuda:{n - 1})"
    elif dev.type != "cpu" and not getattr(torch, dev.type).is_available():
        return f"no {dev.type} device in this torch {torch.__version__}"
    return None


def unavailable(device: str, python: str | None = None, timeout: float = 300.0) -> str | None:
    """Why `device` cannot be used by `python` (None when it can); cpu is always there and costs nothing."""
    if device == "cpu":
        return None
    try:
        return interpreter.call("harness.engine.devices:why_not", device, python=python, timeout=timeout)
    except interpreter.CallFailed as exc:
        return f"cannot check it: {exc.why}"


def gpu_indices(device: str) -> list[str]:
    """The GPUs a pool on `device` spreads its workers over, asked of nvidia-smi (never of torch: this runs in the
    parent, which must hold no CUDA context): every GPU for "cuda"; none for "cuda:N" (that one, as the worker's
    device says) or a CPU, or where nvidia-smi does not answer (the workers then see what the parent sees)."""
    if device != "cuda":
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
