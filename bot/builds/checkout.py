"""A local git checkout of pytorch (`[culprit] checkout`), read through the `git` CLI: commits, files, messages.

The runner's workflow keeps the checkout up to date; this module only reads it (no fetch, no checkout of a
worktree): `git log` for a range's commits with their files, `git show <sha>:<path>` for a file at a commit.
What the messages say is harness.core.commits' business. Every failure is a `CheckoutError` in one line.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from harness.core.commits import CHANGES, Commit, CommitError, FileChange, commit

GIT_TIMEOUT = 120                 # seconds for one git command (a log of a few thousand commits takes a second)
_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed", "T": "modified", "C": "added"}
_RECORD, _UNIT = "\x1e", "\x1f"   # git log's record and field separators: no message contains them


class CheckoutError(RuntimeError):
    """The checkout cannot answer (not a repository, a commit it lacks, git missing); one line for the user."""


def _git(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckoutError(f"git {args[0]} in the checkout failed: {exc}") from None


def has_commit(checkout: Path, sha: str) -> bool:
    """True when the checkout holds the commit."""
    return _git(checkout, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


def resolve(checkout: Path, sha: str) -> str:
    """The full sha of a commit the checkout holds; CheckoutError naming it otherwise."""
    if not (checkout / ".git").exists() and _git(checkout, "rev-parse", "--git-dir").returncode != 0:
        raise CheckoutError(f"the [culprit] checkout is not a git repository")
    proc = _git(checkout, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
    if proc.returncode != 0:
        raise CheckoutError(f"the checkout lacks commit {sha[:12]} (fetch it, or the checkout is behind)")
    return proc.stdout.strip()


def message(checkout: Path, sha: str) -> str:
    """A commit's whole message."""
    proc = _git(checkout, "log", "-1", "--format=%B", resolve(checkout, sha))
    return proc.stdout


def count(checkout: Path, good: str, bad: str) -> int:
    """How many first-parent commits lie after `good` up to `bad`."""
    proc = _git(checkout, "rev-list", "--count", "--first-parent", f"{resolve(checkout, good)}..{resolve(checkout, bad)}")
    if proc.returncode != 0:
        raise CheckoutError(f"git rev-list {good[:12]}..{bad[:12]}: {proc.stderr.strip()[:200]}")
    return int(proc.stdout.strip())


def commits(checkout: Path, good: str, bad: str) -> list[Commit]:
    """The first-parent commits after `good` up to `bad`, oldest first, each with its files and what its message says."""
    fmt = f"{_RECORD}%H{_UNIT}%P{_UNIT}%ae{_UNIT}%B{_UNIT}"
    proc = _git(checkout, "log", "--reverse", "--first-parent", "-M", "--name-status", f"--format={fmt}",
                f"{resolve(checkout, good)}..{resolve(checkout, bad)}")
    if proc.returncode != 0:
        raise CheckoutError(f"git log {good[:12]}..{bad[:12]}: {proc.stderr.strip()[:200]}")
    try:
        return [_commit(record) for record in proc.stdout.split(_RECORD)[1:]]
    except CommitError as exc:
        raise CheckoutError(str(exc)) from None


def _commit(record: str) -> Commit:
    sha, parents, email, body, names = record.split(_UNIT)
    files = []
    for line in names.strip().splitlines():
        parts = line.split("\t")
        status = _STATUS.get(parts[0][:1])
        if status is None or status not in CHANGES:
            raise CommitError(f"commit {sha[:12]}: file status {parts[0]!r} not understood")
        files.append(FileChange(parts[-1], status, parts[1] if status == "renamed" else None))
    return commit(sha, body, _login(email), tuple(files), parent=(parents.split() or [None])[0])


def _login(email: str) -> str | None:
    """The author's GitHub login where the address is GitHub's noreply one (git itself knows no logins)."""
    local, _, domain = email.partition("@")
    return local.split("+")[-1] if domain == "users.noreply.github.com" else None


def file_at(checkout: Path, sha: str, path: str) -> bytes | None:
    """A file's bytes at a commit (never decoded: a latin-1 module is laid as it is); None when it has no such file."""
    try:
        proc = subprocess.run(["git", "-C", str(checkout), "cat-file", "blob", f"{sha}:{path}"], capture_output=True,
                              timeout=GIT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckoutError(f"git cat-file in the checkout failed: {exc}") from None
    return proc.stdout if proc.returncode == 0 else None


def readers(checkout: Path, sha: str, name: str) -> list[str]:
    """The Python files under torch/ at a commit that mention `name` (a flag's key: who reads it)."""
    proc = _git(checkout, "grep", "-l", "-w", "-F", name, sha, "--", "torch/*.py")
    prefix = f"{sha}:"
    return [line.removeprefix(prefix) for line in proc.stdout.splitlines() if line.strip()]
