"""A planted commit series over a slice of the installed torch's own Python files, in a real git repository.

The slice is the two files the series edits (`torch/_dynamo/config.py`, `torch/_dynamo/variables/builtin.py`),
committed as they are installed: the good build's commit. Then, as the merge bot writes them (title `(#N)`,
`Pull Request resolved:`, `Approved by:`, `Co-authored-by:`), harmless edits, one planted change that makes
Dynamo raise while tracing `abs(x)` (what a regression looks like), and one commit that touches a C++ file.
A `nightly` branch holds the nightly job's commit, `YYYY-MM-DD nightly release (<main sha>)`, for the good build.
The reproducer is the cheapest real one: a tiny function compiled with `fullgraph=True`.
"""
from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

TORCH_DIR = Path(importlib.util.find_spec("torch").submodule_search_locations[0])
SLICE = ("torch/_dynamo/config.py", "torch/_dynamo/variables/builtin.py")
BUILTIN = "torch/_dynamo/variables/builtin.py"
ANCHOR = "        key: tuple[object, ...]\n        if kwargs:"
PLANT = "        if self.fn is abs:\n            raise NotImplementedError(\"abs() of a traced value\")\n" + ANCHOR
SIGNATURE = "NotImplementedError: abs() of a traced value"

# The reproducer names its error the way every flagsweep reproducer does: harness/core/signature.py inlined.
_SIGNATURE_SOURCE = (Path(__file__).parent.parent / "harness/core/signature.py").read_text().replace(
    "from __future__ import annotations\n", "")
REPRO = "from __future__ import annotations\n" + _SIGNATURE_SOURCE + '''
import json
import torch

def f(x):
    return abs(x) + 1

try:
    torch.compile(f, backend="eager", fullgraph=True)(torch.ones(2))
    line = {"v": 1, "status": "ok"}
except Exception as e:
    line = {"v": 1, "status": "error", "signature": signature(type(e).__name__, str(e)),
            "error_type": type(e).__name__}
print("FLAGSWEEP_RESULT " + json.dumps(line))
'''


def message(title: str, pr: int, approvers: tuple[str, ...], coauthor: str | None = None) -> str:
    """A commit message as PyTorch's merge bot writes it."""
    lines = [f"{title} (#{pr})", "", "Some words about the change.", "",
             f"Pull Request resolved: https://github.com/pytorch/pytorch/pull/{pr}",
             "Approved by: " + ", ".join(f"https://github.com/{a}" for a in approvers)]
    if coauthor:
        lines.append(f"Co-authored-by: {coauthor.title()} <12345+{coauthor}@users.noreply.github.com>")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Step:
    """One commit of the series: what it writes, who wrote it, what its message says."""

    name: str                      # harmless1 | planted | harmless2 | cpp | cpp2 | needs | fix | wrong
    author: str
    pr: int
    approvers: tuple[str, ...]
    coauthor: str | None = None


STEPS = {
    "harmless1": Step("harmless1", "alice", 1001, ("reviewer1",)),
    "planted": Step("planted", "bob", 1002, ("reviewer2", "reviewer3"), coauthor="carol"),
    "harmless2": Step("harmless2", "dave", 1003, ("reviewer1",)),
    "cpp": Step("cpp", "erin", 1004, ("reviewer2",)),
    "cpp2": Step("cpp2", "gina", 1006, ("reviewer1",)),
    "needs": Step("needs", "hank", 1007, ("reviewer2",)),
    "fix": Step("fix", "ivan", 1008, ("reviewer3",)),
    "wrong": Step("wrong", "judy", 1009, ("reviewer1",)),
}
NEEDS = "# FLAGSWEEP_NEEDS_NATIVE: this code imports a name only a newer build's compiled part has\n"


def _git(repo: Path, *args: str, author: str = "base", env_date: str = "2026-11-27T00:00:00") -> str:
    env = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": f"9+{author}@users.noreply.github.com",
           "GIT_COMMITTER_NAME": "pytorchmergebot", "GIT_COMMITTER_EMAIL": "bot@example.com",
           "GIT_AUTHOR_DATE": env_date, "GIT_COMMITTER_DATE": env_date, "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _write(repo: Path, step: str) -> None:
    """The change one step makes in the work tree."""
    if step == "cpp":
        path = repo / "torch/csrc/dynamo/eval_frame.cpp"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// a C++ change no overlay can carry\n")
        return
    if step == "cpp2":
        path = repo / "aten/src/ATen/native/Abs.cpp"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// a kernel change\n")
        return
    if step == "planted":
        path = repo / BUILTIN
        path.write_text(path.read_text().replace(ANCHOR, PLANT, 1))
        return
    if step == "fix":
        path = repo / BUILTIN
        path.write_text(path.read_text().replace(PLANT, ANCHOR, 1))
        return
    if step == "wrong":
        path = repo / "torch/_dynamo/config.py"
        path.write_text(path.read_text() + "\nflagsweep_scale = 2.0  # planted: an output scaled under the flag\n")
        return
    if step == "needs":
        path = repo / BUILTIN
        path.write_text(NEEDS + path.read_text())
        return
    path = repo / ("torch/_dynamo/config.py" if step != "harmless2" else BUILTIN)
    path.write_text(path.read_text() + f"\n# {step}: a comment, nothing else\n")


@dataclass(frozen=True)
class Series:
    """The repository and its commits' shas: `good` (the slice as installed), then one per step in order."""

    repo: Path
    good: str
    shas: dict[str, str]
    nightly: str                   # the nightly branch's commit for the good build


def build(repo: Path, order: list[str]) -> Series:
    """A repository at `repo` holding the slice, then the steps in `order`."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for rel in SLICE:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text((TORCH_DIR / rel[len("torch/"):]).read_text())
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "The good build's commit")
    good = _git(repo, "rev-parse", "HEAD")
    shas = {}
    for i, name in enumerate(order):
        step = STEPS[name]
        _write(repo, name)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message(f"[dynamo] {name}", step.pr, step.approvers, step.coauthor),
             author=step.author, env_date=f"2026-11-27T0{i + 1}:00:00")
        shas[name] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "nightly", good)
    _git(repo, "commit", "-q", "--allow-empty", "-m", f"2026-11-27 nightly release ({good})")
    nightly = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    return Series(repo, good, shas, nightly)


def nightly_of(s: Series, main: str, day: str) -> str:
    """A commit on the nightly branch for a nightly cut from `main` on `day` (what its wheel's git_version names)."""
    _git(s.repo, "checkout", "-q", "nightly")
    _git(s.repo, "commit", "-q", "--allow-empty", "-m", f"{day} nightly release ({main})")
    sha = _git(s.repo, "rev-parse", "HEAD")
    _git(s.repo, "checkout", "-q", "main")
    return sha
