"""Call one function in another Python interpreter (the one the workers use) and read back its JSON answer.

`python -m harness.engine.interpreter module:function` reads the call's arguments as a
JSON list on stdin, calls the function and prints what it returns as one tagged JSON line
(`FLAGSWEEP_ANSWER {...}`, read by harness.engine.childline: whatever else the function prints is not the answer). The caller names the function by its module path, so the parent (which
never imports torch) can ask the torch under test, and the engine can run code of the
layers above it (discovery's scan of transformers) without importing them.
"""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

from harness.engine.childline import ChildLineError, last, line
from harness.engine.handle import worker_env

ANSWER_TAG = "FLAGSWEEP_ANSWER"


class CallFailed(RuntimeError):
    """The function could not be called there: the interpreter did not start, or the call failed in it."""

    def __init__(self, python: str, started: bool, why: str, tail: str = ""):
        super().__init__(f"{python}: {why}")
        self.python = python
        self.started = started    # False: the interpreter itself could not be run
        self.why = why            # one line: the OS error, or the last line the interpreter wrote
        self.tail = tail or why   # the end of what it wrote to stderr


def call(target: str, *args: Any, python: str | None = None, timeout: float = 600.0) -> Any:
    """target(*args) run in `python` (default: this interpreter) with the workers' environment; its JSON answer."""
    python = python or sys.executable
    try:
        proc = subprocess.run([python, "-m", "harness.engine.interpreter", target], input=json.dumps(list(args)),
                              capture_output=True, text=True, env=worker_env(), timeout=timeout)
    except OSError as exc:
        raise CallFailed(python, False, exc.strerror or str(exc)) from None
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip()
        lines = said.splitlines()
        raise CallFailed(python, True, lines[-1] if lines else f"exit code {proc.returncode}", said[-500:])
    return _answer(python, proc.stdout)


def _answer(python: str, stdout: str) -> Any:
    """The call's tagged JSON answer; CallFailed when there is none (not a Python interpreter?)."""
    try:
        return last(stdout, ANSWER_TAG)
    except ChildLineError as exc:
        lines = stdout.strip().splitlines()
        said = f"wrote {lines[-1][:80]!r}" if lines else "wrote nothing"
        raise CallFailed(python, True, f"gave no answer ({said}: {exc.why}); is it a Python interpreter with "
                                       "flagsweep's dependencies?") from None


def main(argv: list[str]) -> int:
    """Call argv[1] ("module:function") with the JSON list on stdin; print its answer as JSON."""
    module, _, name = argv[1].partition(":")
    function = getattr(importlib.import_module(module), name)
    answer = function(*json.loads(sys.stdin.read() or "[]"))
    sys.stdout.write("\n" + line(ANSWER_TAG, answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
