"""A Python overlay: a build's `torch` package with another commit's Python files laid over it.

The copy is cheap because only Python is copied: every other file (the compiled libraries under torch/lib,
`*.so`, headers, cached bytecode) is a symlink into the build. Writing a file of the copy first unlinks it, so
a write can never go through a link into the build itself (DESIGN.md's warning). Bytecode caches stay linked,
except a written file's own, which is removed (Python then writes a fresh one beside it). The reproducer runs with the overlay's root first on `sys.path`
(bot.verify.overlay_run).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping


class OverlayError(RuntimeError):
    """The overlay cannot be made (no torch package there, a path outside it); one line."""


def make(torch_dir: Path, root: Path) -> Path:
    """A linked copy of the package `torch_dir` at `root`/torch (made once per build); returns `root`."""
    if not (torch_dir / "__init__.py").is_file():
        raise OverlayError(f"{torch_dir} is not a torch package")
    dest = root / "torch"
    if dest.exists():
        return root
    for folder, dirs, files in os.walk(torch_dir):
        rel = Path(folder).relative_to(torch_dir)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            src, out = Path(folder) / name, dest / rel / name
            if name.endswith(".py"):
                shutil.copy2(src, out)           # mtime kept: the build's bytecode still matches
            else:
                out.symlink_to(src)
    return root


def lay(root: Path, files: Mapping[str, str | None]) -> None:
    """Write each `torch/...` path's text over the overlay (None: remove it), unlinking before every write."""
    for path, text in files.items():
        target = root / path
        if not path.startswith("torch/") or ".." in Path(path).parts:
            raise OverlayError(f"{path!r} is not a file of the torch package")
        if target.is_symlink() or target.exists():
            target.unlink()
        if text is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        for cached in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
            cached.unlink()   # a rewrite within the same second and size would pass the mtime check
