"""A Python overlay: a build's `torch` package with another commit's Python files laid over it.

The copy is cheap because only Python is copied: every other file (the compiled libraries under torch/lib,
`*.so`, headers, cached bytecode) is a symlink into the build. Writing a file of the copy first unlinks it, so
a write can never go through a link into the build itself (DESIGN.md's warning). Files are read and laid as
bytes: a module is whatever bytes its commit holds (a PEP 263 latin-1 one too), never decoded here.

Why linked bytecode is safe: a `__pycache__/*.pyc` is checked by Python against its source's mtime and size,
which its header records. A copied `.py` keeps the build's mtime (copy2), so the linked pyc is the one that
source compiles to. A laid file gets a fresh mtime and its own pyc link is removed, so Python compiles the laid
source; it writes the new pyc to a temporary name and renames it over (importlib's atomic write), which
replaces the overlay's entry, never the build's file behind a link. `_restore` copies the build's file back
with its mtime and links its pyc again, so a reused overlay is exactly the one `make` made.

`make` builds into `torch.partial` and renames it to `torch` only when whole: an interrupted copy is never
taken for the overlay. `lay` checks every path before it records or writes any; a restore that fails (a
manifest no `lay` could have written, a file gone) makes the overlay again from the build.
The reproducer runs with the overlay's root first on `sys.path` (bot.verify.overlay_run).
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
PARTIAL = "torch.partial"    # beside torch/: the copy being made (renamed to torch/ when whole)


def make(torch_dir: Path, root: Path) -> Path:
    """A linked copy of the package `torch_dir` at `root`/torch (made once per build; made the build's again when it
    is reused: every file an earlier bisection laid is put back, or the whole copy made again when that fails);
    returns `root`."""
    if not (torch_dir / "__init__.py").is_file():
        raise OverlayError(f"{torch_dir} is not a torch package")
    dest = root / "torch"
    if dest.exists():
        try:
            _restore(torch_dir, root)
            return root
        except (OSError, OverlayError, ValueError):
            shutil.rmtree(dest)               # links are removed, never followed
            (root / LAID).unlink(missing_ok=True)
    partial = root / PARTIAL
    if partial.exists():
        shutil.rmtree(partial)                # an earlier copy that was interrupted
    _copy(torch_dir, partial)
    partial.rename(dest)
    return root


def _copy(torch_dir: Path, dest: Path) -> None:
    """Python copied (mtime kept: the build's bytecode still matches), every other file linked."""
    for folder, _, files in os.walk(torch_dir):
        rel = Path(folder).relative_to(torch_dir)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            src, out = Path(folder) / name, dest / rel / name
            if name.endswith(".py"):
                shutil.copy2(src, out)
            else:
                out.symlink_to(src)


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
    """Every file an earlier `lay` wrote, as the build has it (copied with its mtime, its pyc linked) or gone."""
    laid = root / LAID
    paths = [p for p in dict.fromkeys(laid.read_text().split("\n")) if p] if laid.exists() else []
    for path in paths:
        _check(path)
    for path in paths:
        target, src = root / path, torch_dir / path[len("torch/"):]
        _remove(target)
        if src.is_file():
            shutil.copy2(src, target)
            for cached in (src.parent / "__pycache__").glob(f"{src.stem}.*.pyc"):
                (target.parent / "__pycache__").mkdir(exist_ok=True)
                (target.parent / "__pycache__" / cached.name).symlink_to(cached)
    laid.unlink(missing_ok=True)


def _check(path: str) -> None:
    if not path.startswith("torch/") or ".." in Path(path).parts or "\n" in path:
        raise OverlayError(f"{path!r} is not a file of the torch package")


def _remove(target: Path) -> None:
    """The overlay's file and its cached bytecode gone (a rewrite within the same second and size would pass the
    mtime check)."""
    if target.is_symlink() or target.exists():
        target.unlink()
    for cached in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        cached.unlink()


def lay(root: Path, files: Mapping[str, bytes | None]) -> None:
    """Write each `torch/...` path's bytes over the overlay (None: remove it), unlinking before every write.
    Every path is checked before any is recorded or written (OverlayError names the first refused)."""
    for path in files:
        _check(path)
    with (root / LAID).open("a") as manifest:
        manifest.write("".join(f"{p}\n" for p in files))
    for path, data in files.items():
        target = root / path
        _remove(target)
        if data is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
