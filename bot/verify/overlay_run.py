"""One run of a reproducer on a Python overlay (bot.ranges.overlay): the culprit search's `run` step.

Reproducers run isolated (`python -I`, harness.engine.script_runner), which ignores PYTHONPATH; so the
reproducer is written beside a small driver that puts the overlay's root first on `sys.path` and then runs it
as `__main__`: `import torch` inside it loads the overlay's package (tests/test_culprit_real.py checks
`torch.__file__`). The answer is what a probe compares: "ok", else the signature (else the status).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from harness.engine.script_runner import run_script

REPRO = "repro.py"
DRIVER = ("import runpy, sys\n"
          "sys.path.insert(0, {root!r})\n"
          "sys.argv = [{repro!r}, *sys.argv[1:]]\n"
          "runpy.run_path({repro!r}, run_name='__main__')\n")


def answer(script: str, root: Path, python: str, timeout: float, args: tuple[str, ...] = ()) -> str:
    """Run `script` once with the overlay at `root` first on sys.path: "ok", its signature, or how it ended."""
    result = run_script(DRIVER.format(root=str(root), repro=REPRO), python, timeout, args=args,
                        files={REPRO: script}, name="drive_overlay.py")
    if result.status == "ok":
        return "ok"
    return result.signature or result.error_type or result.status


def runner(script: str, python: str, timeout: float, args: tuple[str, ...] = ()) -> Callable[[Path], str]:
    """The culprit search's run step for one reproducer under one interpreter (the good build's)."""
    return lambda root: answer(script, root, python, timeout, args)


def torch_package() -> str:
    """The folder of the `torch` package this interpreter imports (asked in the good build's; torch not imported)."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("this interpreter has no torch package")
    return str(spec.submodule_search_locations[0])
