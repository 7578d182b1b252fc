"""A run's interpreter for tests of accuracy reproducers: the test models of tests/accuracy_models.py exposed in
transformers' namespace (where a rendered script builds its model from), then the script run as `python` runs it.

Started by a wrapper (`interpreter` below) in place of the run's python: `wrapper -I script.py ARGS` becomes
`python -I tests/accuracy_python.py script.py ARGS`; a sweep's workers started through it run as usual.
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def interpreter(folder: Path) -> str:
    """A wrapper `python` in `folder` that runs scripts with the test models exposed; its path."""
    wrapper = folder / "python-with-test-models"
    # A script (`-I script ARGS`, as harness.engine.script_runner runs one) runs through this module; anything else
    # (a sweep's workers, an interpreter call) runs as the real python runs it.
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = "-I" ]; then\n  shift\n  exec "{sys.executable}" -I "{__file__}" "$@"\n'
                       f'fi\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from tests import accuracy_models

    accuracy_models.expose()
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
