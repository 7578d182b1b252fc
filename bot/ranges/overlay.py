"""A Python overlay: a build's `torch` package with another commit's Python files laid over it.

The copy is cheap because only Python is copied: every other file (the compiled libraries under torch/lib,
`*.so`, headers, cached bytecode) is a symlink into the build. Writing a file of the copy first unlinks it, so
a write can never go through a link into the build itself (DESIGN.md's warning). Bytecode caches stay linked,
except a written file's own, which is removed (Python then writes a fresh one beside it). The reproducer runs with the overlay's root first on `sys.path`
(bot.verify.overlay_run).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import Iterator, Mapping


class OverlayError(RuntimeError):
    """The overlay cannot be made (no torch package there, a path outside it); one line."""


LAID = ".flagsweep-laid"     # beside torch/: every path a `lay` wrote, so a reused overlay is first made the build again


def make(torch_dir: Path, root: Path) -> Path:
    """A linked copy of the package `torch_dir` at `root`/torch (made once per build; made the build's again when it
    is reused: every file an earlier bisection laid is put back); returns `root`."""
    if not (torch_dir / "__init__.py").is_file():
        raise OverlayError(f"{torch_dir} is not a torch package")
    dest = root / "torch"
    if dest.exists():
        _restore(torch_dir, root)
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


@contextlib.contextmanager
def held(torch_dir: Path, root: Path) -> Iterator[Path]:
    """The overlay at `root` (made, or made the build's again), held by this process for one bisection: a second
    process asking for the same overlay (a person's `flagsweep culprit` during the nightly) waits for it."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield make(torch_dir, root)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _restore(torch_dir: Path, root: Path) -> None:
    """Every file an earlier `lay` wrote, as the build has it (a copy) or gone (the build has none)."""
    laid = root / LAID
    paths = laid.read_text().split("\n") if laid.exists() else []
    lay(root, {p: (torch_dir / p[len("torch/"):]).read_text() if (torch_dir / p[len("torch/"):]).is_file() else None
               for p in dict.fromkeys(paths) if p})
    laid.unlink(missing_ok=True)


def lay(root: Path, files: Mapping[str, str | None]) -> None:
    """Write each `torch/...` path's text over the overlay (None: remove it), unlinking before every write."""
    with (root / LAID).open("a") as manifest:
        manifest.write("".join(f"{p}\n" for p in files))
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
