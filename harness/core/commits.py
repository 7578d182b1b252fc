"""PyTorch's commits as plain data: what the merge bot and the nightly job write in a message, and which file changes
an overlay of Python can stand in for.

Stdlib only, pure. The merge bot ends each commit of main with `<title> (#N)` on the first line and
`Pull Request resolved: <url>`, `Approved by: <url>, <url>` and `Co-authored-by: Name <email>` lines; those are
a more reliable source of the PR and the people than GitHub's commit-to-PR lookup (a ghstack PR reads "closed",
not "merged"). A nightly wheel's `torch.version.git_version` names a commit of the `nightly` branch whose message
is `YYYY-MM-DD nightly release (<main sha>)`.

An **overlay** (PyTorch CI's own shortcut) is an older build with a newer commit's Python copied in: it stands
for that commit only while every commit between them changes Python files under `torch/` outside `torch/csrc`
and deletes none (a deleted module would still be importable from the build; a C++ change is not in the wheel).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from harness.core.record import check_closed

_NIGHTLY = re.compile(r"^(\d{4}-\d{2}-\d{2}) nightly release \(([0-9a-f]{7,40})\)\s*$")
_TITLE_PR = re.compile(r"\(#(\d+)\)\s*$")
_RESOLVED = re.compile(r"^Pull Request resolved:\s*https?://github\.com/[\w.-]+/[\w.-]+/pull/(\d+)\s*$", re.M)
_APPROVED = re.compile(r"^Approved by:\s*(.+)$", re.M)
_COAUTHOR = "Co-authored-by:"    # read line by line: a backtracking pattern over a hostile line takes minutes
_PERSON_URL = re.compile(r"https?://github\.com/([A-Za-z0-9-]+)\b")
_NOREPLY = re.compile(r"^(?:\d+\+)?([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))@users\.noreply\.github\.com$", re.I)
_SHA = re.compile(r"^[0-9a-f]{7,40}$")

CHANGES = ("added", "modified", "removed", "renamed")   # GitHub's file statuses; git's A/M/D/R are mapped to them
MAX_MESSAGE = 65536     # characters of a message read (the merge bot writes a few hundred; the rest is not parsed)
UNREADABLE = "\ufffd"    # what stands for a file name's bytes that are not UTF-8
MAX_TITLE = 500         # characters of a title kept (its PR is read from the whole first line)


class CommitError(ValueError):
    """A commit or a message is not what the search needs; the message says which and why, in one line."""


@dataclass(frozen=True)
class FileChange:
    """One file a commit changed: its path (the new one for a rename), how, and the old path of a rename."""

    path: str
    status: str                       # one of CHANGES
    previous: str | None = None       # a rename's old path

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"status": CHANGES}

    def __post_init__(self) -> None:
        check_closed(self, "file change")


@dataclass(frozen=True)
class Person:
    """Someone a commit names: `login` only where GitHub vouches for it (its noreply address, or GitHub's own answer
    for the commit), else None; `name` as written. Only a login is ever mentioned or cc'd; a name is shown as code."""

    name: str
    login: str | None = None


@dataclass(frozen=True)
class Commit:
    """One commit of main with what its message says: the PR, the author, co-authors and approvers."""

    sha: str
    title: str
    author: str | None                # GitHub login, when known (the API's author; a noreply address)
    files: tuple[FileChange, ...] = ()
    pr: int | None = None
    coauthors: tuple[Person, ...] = ()
    approvers: tuple[str, ...] = ()   # as written (the merge bot's URLs name logins): shown as code, never mentioned
    parent: str | None = None

    @property
    def short(self) -> str:
        """The first 12 characters of the sha, as people quote it."""
        return self.sha[:12]


@dataclass(frozen=True)
class Message:
    """What a merge-bot message says."""

    title: str
    pr: int | None = None
    approvers: tuple[str, ...] = ()
    coauthors: tuple[Person, ...] = ()


def nightly_main_sha(message: str) -> str:
    """The main-branch sha a nightly commit's message names; CommitError when it is not a nightly release's."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    m = _NIGHTLY.match(first)
    if not m:
        raise CommitError(f"not a nightly release commit: its message reads {first[:80]!r}")
    return m.group(2)


def parse_message(message: str) -> Message:
    """The PR, approvers and co-authors the merge bot wrote into a commit's message (its first MAX_MESSAGE
    characters: the rest of a longer one is not read)."""
    message = message[:MAX_MESSAGE]
    lines = message.strip().splitlines()
    first = lines[0].strip() if lines else ""
    resolved = _RESOLVED.search(message)
    in_title = _TITLE_PR.search(first)
    pr = int(resolved.group(1)) if resolved else int(in_title.group(1)) if in_title else None
    approvers: list[str] = []
    for m in _APPROVED.finditer(message):
        approvers += _PERSON_URL.findall(m.group(1)) or [a.strip().lstrip("@") for a in m.group(1).split(",")]
    coauthors = [p for p in map(_coauthor, message.splitlines()) if p is not None]
    return Message(title=first[:MAX_TITLE], pr=pr, approvers=tuple(dict.fromkeys(a for a in approvers if a)),
                   coauthors=tuple(dict.fromkeys(coauthors)))


def commit(sha: str, message: str, author: str | None, files: tuple[FileChange, ...],
           parent: str | None = None) -> Commit:
    """A commit from its sha, message, author's login and files; CommitError for a sha that is not one."""
    if not _SHA.match(sha):
        raise CommitError(f"{sha[:60]!r} is not a commit sha")
    said = parse_message(message)
    return Commit(sha=sha, title=said.title, author=author, files=files, pr=said.pr, coauthors=said.coauthors,
                  approvers=said.approvers, parent=parent)


def _coauthor(line: str) -> Person | None:
    """A `Co-authored-by: Name <address>` line's co-author as written, with a login only when the address is GitHub's
    noreply one; None for any other line."""
    if not line.startswith(_COAUTHOR):
        return None
    name, _, email = line[len(_COAUTHOR):].strip().removesuffix(">").rpartition("<")
    if not name.strip() or not line.rstrip().endswith(">"):
        return None
    return Person(name=name.strip(), login=noreply_login(email))


def noreply_login(email: str) -> str | None:
    """The login in a GitHub noreply address (`[id+]login@users.noreply.github.com`); None for any other address
    (a name or another address says nothing about who holds a GitHub account)."""
    m = _NOREPLY.match(email.strip())
    return m.group(1) if m else None


def python_only(change: FileChange) -> bool:
    """True when an overlay can carry this change: a Python file under torch/ outside torch/csrc, added, changed,
    renamed or deleted (the overlay removes a deleted or renamed-away file)."""
    paths = [change.path] + ([change.previous] if change.previous else [])
    return all(p.startswith("torch/") and not p.startswith("torch/csrc/") and p.endswith(".py") and not _unreadable(p)
               for p in paths)


def _unreadable(path: str) -> bool:
    """A name that was not UTF-8 in git (read with U+FFFD for its bad bytes): no file of that name can be laid."""
    return UNREADABLE in path


def overlay_blocker(c: Commit) -> str | None:
    """Why an overlay cannot stand in for this commit (its first such file), or None when it can.

    Files no build carries (tests, docs, CI configuration) do not count; anything else outside torch/ does
    (aten/, c10/, torchgen/ and setup files change what is compiled)."""
    for change in c.files:
        if python_only(change) or (not change.path.startswith("torch/") and _not_built(change.path)):
            continue
        if any(_unreadable(p) for p in (change.path, change.previous) if p):
            return f"its file name {change.path} is not UTF-8, so no overlay can write it"
        if change.status == "removed":
            return f"it deletes {change.path}, which is not Python in the torch package"
        if change.status == "renamed":
            return f"it renames {change.previous} to {change.path}, which is not Python in the torch package"
        return f"it changes {change.path}, which is not Python in the torch package"
    return None


def _not_built(path: str) -> bool:
    """Files outside torch/ that no build carries (tests, docs, CI configuration, Markdown)."""
    return path.startswith(("test/", "docs/", ".github/", ".ci/", "benchmarks/")) or path.endswith((".md", ".rst"))


def changed_paths(commits: list[Commit]) -> list[str]:
    """Every torch/ Python path the commits change (a rename's old path too), in first-change order: what an overlay
    at any of them must write (a path the commit lacks is removed)."""
    return list(dict.fromkeys(p for c in commits for f in c.files if python_only(f)
                              for p in (f.previous, f.path) if p))
