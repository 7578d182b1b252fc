"""Run a standalone reproducer in a fresh, isolated interpreter and read its result line.

Scripts are rendered elsewhere (bot/verify/script.py, from what a run stored);
this module only runs one, under whichever interpreter it is given (the run's
own, so a crash that exists only in a nightly is checked on that nightly).
Stdlib only: it never imports torch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

RESULT_PREFIX = "FLAGSWEEP_RESULT "


def run_script(text: str, python: str = sys.executable, timeout: float = 300, args: Sequence[str] = (),
               files: Mapping[str, str] | None = None, name: str = "repro.py") -> dict:
    """Run a reproducer's source (with command-line `args`) in a fresh isolated interpreter in an empty dir.

    files: other files written beside it first, {file name: text}; name: the script's own file name (a driver,
    drive.py, runs the maintainer's repro.py written beside it).
    Its parsed result is the script's (last) FLAGSWEEP_RESULT object plus `returncode`, and "modes": {mode:
    its result} when it reported several; a script
    that hangs is status `timeout`, one that dies without a result `killed`, and an
    interpreter that cannot start has status None and an `error`.
    """
    with tempfile.TemporaryDirectory(prefix="flagsweep-repro-") as tmp:
        for other, content in (files or {}).items():
            (Path(tmp) / Path(other).name).write_text(content)
        path = Path(tmp) / Path(name).name
        path.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["HF_HUB_OFFLINE"] = "1"
        try:
            proc = subprocess.run([python, "-I", str(path), *args], cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired as exc:   # what it reported before it hung is kept (its modes)
            said = _results(exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or "")
            timeout_result = {"status": "timeout", "graphs": None, "signature": None, "error_type": None,
                              "returncode": None}
            return {**timeout_result, "modes": {one.get("mode"): one for one in said}} if said else timeout_result
        except OSError as exc:
            return {"status": None, "error": f"cannot run {Path(python).name}: {exc.strerror or exc}",
                    "returncode": None}
    lines = _results(proc.stdout)
    if lines:
        result = {**lines[-1], "returncode": proc.returncode}
        if len(lines) > 1:      # a script that ran several modes (its `checks`): each one's result too
            result["modes"] = {one.get("mode"): one for one in lines}
        return result
    return {"status": "killed", "graphs": None, "signature": None, "error_type": None,
            "returncode": proc.returncode, "stderr_tail": proc.stderr[-2000:]}


def _results(stdout: str) -> list[dict]:
    """The FLAGSWEEP_RESULT objects a script printed, in order."""
    return [json.loads(line[len(RESULT_PREFIX):]) for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
