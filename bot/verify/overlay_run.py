"""One run of a reproducer on a Python overlay (bot.ranges.overlay): the culprit search's `run` step.

Reproducers run isolated (`python -I`, harness.engine.script_runner), which ignores PYTHONPATH; so the
reproducer is written beside a small driver that puts the overlay's root first on `sys.path` and then runs it
as `__main__`: `import torch` inside it loads the overlay's package (tests/test_culprit_real.py checks
`torch.__file__`). The answer is what a probe compares: "ok", else the signature (else the status); beside it,
the torch files the run imported (written by the driver at exit), so that a culprit no run imported is said to be
most likely wrong.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Callable

from bot.text.render import render
from bot.verify.script import HARNESS, module_source
from bot.verify.wrong_script import MISMATCH
from harness.core.correctness import is_wrong_signature
from harness.engine.script_runner import run_script

REPRO = "repro.py"
WRONG_DRIVER = "drive.py"        # the verify step's driver of a wrong result's reproducer (it runs repro.py)
# The driver keeps its stderr's last 64 KiB by whole writes (no 64 KiB copy per write, as script_runner's reader).
DRIVER = ("import atexit, collections, json, os, runpy, sys\n"
          "sys.path.insert(0, {root!r})\n"
          "class _Tail:\n"
          "    def __init__(self, inner):\n"
          "        self.inner, self.parts, self.size = inner, collections.deque(), 0\n"
          "    def write(self, text):\n"
          "        self.parts.append(text)\n"
          "        self.size += len(text)\n"
          "        while len(self.parts) > 1 and self.size - len(self.parts[0]) >= 65536:\n"
          "            self.size -= len(self.parts.popleft())\n"
          "        return self.inner.write(text)\n"
          "    @property\n"
          "    def tail(self):\n"
          "        return ''.join(self.parts)[-65536:]\n"
          "    def __getattr__(self, name):\n"
          "        return getattr(self.inner, name)\n"
          "sys.stderr = _Tail(sys.stderr)\n"
          "def _loaded():\n"
          "    pkg = os.path.join({root!r}, 'torch') + os.sep\n"
          "    files = (getattr(m, '__file__', None) for m in list(sys.modules.values()))\n"
          "    with open({loaded!r}, 'w') as out:\n"
          "        json.dump({{'modules': sorted({{os.path.relpath(f, {root!r}) for f in files if f and "
          "f.startswith(pkg)}}), 'stderr': sys.stderr.tail}}, out)\n"
          "atexit.register(_loaded)\n"
          "sys.argv = [{repro!r}, *sys.argv[1:]]\n"
          "runpy.run_path({repro!r}, run_name='__main__')\n")


def answer(script: str, root: Path, python: str, timeout: float, args: tuple[str, ...] = (),
           wrong: str | None = None) -> tuple[str, tuple[str, ...], str]:
    """Run `script` once with the overlay at `root` first on sys.path: ("ok", its signature, or how it ended; the
    torch/... files it imported; the end of what it wrote to stderr, its traceback), the last two empty where it
    never reached its end.

    wrong: a wrong result's signature; the script is then its accuracy reproducer, run compiled under the verify
    step's driver, and a failed comparison (its assert_close) answers that signature."""
    said, seen = _run(script, root, python, timeout, args, wrong)
    return said, tuple(seen.get("modules", ())), str(seen.get("stderr", ""))


def _run(script: str, root: Path, python: str, timeout: float, args: tuple[str, ...],
         wrong: str | None) -> tuple[str, dict]:
    """One run: its answer, and what the driver wrote at exit (the modules, the stderr's tail; {} when nothing)."""
    entry, files = REPRO, {REPRO: script}
    if wrong is not None:
        entry, args = WRONG_DRIVER, ("compiled",)
        files[WRONG_DRIVER] = render("wrong_driver.py.j2", mismatch=MISMATCH,
                                     signature_source=module_source(HARNESS / "core" / "signature.py"))
    with tempfile.TemporaryDirectory(prefix="flagsweep-loaded-") as tmp:
        loaded = Path(tmp) / "loaded.json"
        result = run_script(DRIVER.format(root=str(root), repro=entry, loaded=str(loaded)), python, timeout,
                            args=args, files=files, name="drive_overlay.py")
        try:
            seen = json.loads(loaded.read_text()) if loaded.is_file() else {}
        except ValueError:            # killed while writing it: nothing known of what it imported
            seen = {}
    if result.status == "ok":
        return "ok", seen
    if wrong is not None and result.exception == MISMATCH:
        return wrong, seen
    return result.signature or result.error_type or result.status, seen


def runner(script: str, python: str, timeout: float,
           signature: str | None = None) -> Callable[[Path], tuple[str, tuple[str, ...], str]]:
    """The culprit search's run step for one reproducer under one build's interpreter (`signature`: the group's; a
    wrong result's runs its accuracy reproducer)."""
    wrong = signature if signature is not None and is_wrong_signature(signature) else None
    return lambda root: answer(script, root, python, timeout, wrong=wrong)


def torch_package() -> str:
    """The folder of the `torch` package this interpreter imports (asked in the good build's; torch not imported)."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("this interpreter has no torch package")
    return str(spec.submodule_search_locations[0])
