"""The environment of a run, gathered inside the interpreter that runs the models.

gather() runs in a worker, or is called in the workers' interpreter through
harness.engine.interpreter, so the parent can ask an interpreter other than its own
(--python) without importing torch.
"""
from __future__ import annotations

import platform
import sys
from typing import Any


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # not installed as a distribution (a source checkout)
        return None


def gather(device: str = "cpu") -> dict[str, Any]:
    """torch, transformers, Python, device, CUDA and flagsweep versions, plus the recipe fingerprint."""
    import torch

    env: dict[str, Any] = {
        "torch_version": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "transformers_version": _version("transformers"),
        "python_version": platform.python_version(),
        "python": sys.executable,
        "platform": platform.platform(),
        "device": device,
        "device_name": platform.processor() or platform.machine(),
        "cuda_version": torch.version.cuda,
        "flagsweep_version": _version("flagsweep"),
        "recipe_fingerprint": None,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        # Only ever in a worker: the parent must not initialize CUDA.
        env.update(_gpu(torch.device(device)))
    env["recipe_fingerprint"] = _recipe_fingerprint()
    return env


def _gpu(device: Any) -> dict[str, Any]:
    """The GPU's name and compute capability, and the NVIDIA driver's version (None where unknown)."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return {"device_name": torch.cuda.get_device_name(device), "compute_capability": f"{major}.{minor}",
            "driver_version": _driver_version()}


def _driver_version() -> str | None:
    """The NVIDIA driver's version (torch knows only the CUDA runtime's): asked of nvidia-smi, None without it."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def _recipe_fingerprint() -> str:
    """The zoo's hash of its build code and recipes (the zoo owns it)."""
    from harness.zoo import zoo_code_version   # late: only the environment probe needs the zoo
    return zoo_code_version()

