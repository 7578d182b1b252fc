"""A local git checkout of pytorch (`[culprit] checkout`), read through the `git` CLI: commits, files, messages.

The runner's workflow keeps the checkout up to date; this module only reads it (no fetch, no checkout of a
worktree): `rev-list`, `cat-file --batch` and `diff-tree -z` for a range's commits with their files, `git show
<sha>:<path>` for a file at a commit. The checkout is foreign input (its config may name programs, its messages
may hold any byte): see `_git` and `commits`. What the messages say is harness.core.commits' business. Every
failure is a `CheckoutError` in one line.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path
from typing import IO, NamedTuple

from harness.core.commits import CHANGES, MAX_MESSAGE, Commit, CommitError, FileChange, commit, noreply_login

# bytes of one commit object kept: its headers (a signature is a few KB) and MAX_MESSAGE characters of UTF-8
MAX_OBJECT = 4 * MAX_MESSAGE + 65536
GIT_TIMEOUT = 120                 # seconds for one git command (a log of a few thousand commits takes a second)
_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed", "T": "modified", "C": "added"}
# The checkout is foreign data: its .git/config, attributes and refs may name programs (a pager, an external diff, a
# textconv driver, an fsmonitor hook, hooks, a signature verifier) that git would run for us. Command-line config
# outranks every file, so these switch each of them off; the environment drops the user's and the system's config
# and anything inherited (GIT_DIR, GIT_EXTERNAL_DIFF, GIT_CONFIG_COUNT...); replace refs and grafts cannot swap a
# commit or its parents.
_SAFE_CONFIG = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "core.pager=cat", "pager.log=false",
                "pager.show=false", "pager.grep=false", "diff.external=", "log.showSignature=false",
                "gpg.program=false", "gpg.ssh.program=false", "gpg.x509.program=false", "core.attributesFile=/dev/null",
                "core.untrackedCache=false", "grep.fallbackToNoIndex=false", "color.ui=never")
# ... and their output stays plain (a `color.grep = always` would put escape codes into the file names read back).
_SAFE_FLAGS = {"log": ("--no-ext-diff", "--no-textconv", "--no-show-signature", "--no-color"),
               "show": ("--no-ext-diff", "--no-textconv", "--no-show-signature", "--no-color"),
               "diff-tree": ("--no-ext-diff", "--no-textconv", "--no-color"), "grep": ("--no-textconv", "--no-color")}
_SAFE_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_SYSTEM": os.devnull, "GIT_CONFIG_GLOBAL": os.devnull,
             "GIT_ATTR_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull,
             "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "LC_ALL": "C"}


class CheckoutError(RuntimeError):
    """The checkout cannot answer (not a repository, a commit it lacks, git missing); one line for the user."""


def _command(checkout: Path, args: tuple[str, ...]) -> list[str]:
    """The git command line that runs `args` in the checkout as on foreign data (no program it names runs)."""
    trusted = f"safe.directory={Path(checkout).resolve()}"   # named in the settings; owned by whoever runs the updates
    return ["git", "--no-pager", *(f for c in (*_SAFE_CONFIG, trusted) for f in ("-c", c)), "-C", str(checkout),
            args[0], *_SAFE_FLAGS.get(args[0], ()), *args[1:]]


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), **_SAFE_ENV}


def _git(checkout: Path, *args: str, text: bool = True, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """git run in the checkout as on foreign data (no program the repository names runs); stdout as text or bytes."""
    try:
        proc = subprocess.run(_command(checkout, args), capture_output=True, input=stdin, timeout=GIT_TIMEOUT,
                              env=_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckoutError(f"git {args[0]} in the checkout failed: {exc}") from None
    if not text:
        return proc
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def has_commit(checkout: Path, sha: str) -> bool:
    """True when the checkout holds the commit."""
    return _git(checkout, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


def resolve(checkout: Path, sha: str) -> str:
    """The full sha of a commit the checkout holds; CheckoutError naming it otherwise."""
    if sha.startswith("-"):          # a stored or typed name is never an option to git
        raise CheckoutError(f"{sha[:40]!r} does not name a commit")
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
    """The first-parent commits after `good` up to `bad`, oldest first, each with its files and what its message says.

    Nothing a message holds can pass for structure: the shas come from `rev-list` (hex only), each commit object
    from `cat-file --batch` (length-prefixed), its files from `diff-tree -z` against its first parent (NUL-ended
    names, never quoted), and the message is parsed alone."""
    span = f"{resolve(checkout, good)}..{resolve(checkout, bad)}"
    proc = _git(checkout, "rev-list", "--reverse", "--first-parent", span)
    if proc.returncode != 0:
        raise CheckoutError(f"git rev-list {good[:12]}..{bad[:12]}: {proc.stderr.strip()[:200]}")
    shas = proc.stdout.split()
    if not shas:
        return []
    objects = _objects(checkout, shas)
    try:
        heads = {sha: _head(sha, objects.get(sha)) for sha in shas}
        lines = "".join(f"{sha} {heads[sha].parent or ''}".rstrip() + "\n" for sha in shas)
        files = _changes(_read(checkout, ("diff-tree", "--stdin", "--root", "-z", "-r", "-M", "--name-status"), lines))
        return [_commit(sha, heads[sha], files.get(sha, [])) for sha in shas]
    except CommitError as exc:
        raise CheckoutError(str(exc)) from None


def _read(checkout: Path, args: tuple[str, ...], stdin: str) -> bytes:
    """A git command fed `stdin`, its raw output; CheckoutError naming it when it fails."""
    proc = _git(checkout, *args, text=False, stdin=stdin.encode())
    if proc.returncode != 0:
        raise CheckoutError(f"git {args[0]}: {proc.stderr.decode('utf-8', 'replace').strip()[:200]}")
    return proc.stdout


def _objects(checkout: Path, shas: list[str]) -> dict[str, bytes]:
    """{sha: its raw commit object, cut at MAX_OBJECT bytes} from one `cat-file --batch`, read as it streams: a
    header line, then exactly `size` bytes, of which only the first MAX_OBJECT are kept (a commit of a gigabyte of
    message costs a read, not a gigabyte of memory)."""
    try:
        proc = subprocess.Popen(_command(checkout, ("cat-file", "--batch")), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env())
    except OSError as exc:
        raise CheckoutError(f"git cat-file in the checkout failed: {exc}") from None
    timer = threading.Timer(GIT_TIMEOUT, proc.kill)
    feeder = threading.Thread(target=_feed, args=(proc, "".join(f"{sha}\n" for sha in shas).encode()), daemon=True)
    timer.start()
    feeder.start()
    try:
        return {sha: _object(proc.stdout, sha) for sha in shas}
    finally:
        timer.cancel()
        proc.kill()
        feeder.join()
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    """Write the shas from a thread: git answers as it reads, so one pipe must never wait on the other."""
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except OSError:          # git ended early; its output says why
        pass


def _object(out: IO[bytes], sha: str) -> bytes:
    """One commit object of `cat-file --batch` output: its first MAX_OBJECT bytes, the rest read and dropped."""
    header = out.readline()
    if not header.endswith(b"\n"):
        raise CheckoutError("git cat-file: its output ends inside a header (killed after "
                            f"{GIT_TIMEOUT} s, or it failed)")
    name, kind, size = (header.split() + [b"", b""])[:3]   # "<sha> missing" for one it lacks
    if kind != b"commit" or not size.isdigit() or name.decode("ascii", "replace") != sha:
        raise CheckoutError(f"git cat-file: {header[:80].decode('ascii', 'replace')!r} is not commit {sha[:12]}")
    size = int(size)
    kept = out.read(min(size, MAX_OBJECT))
    left = size - len(kept)
    while left > 0 and len(kept) == min(size, MAX_OBJECT):
        chunk = out.read(min(left, 1 << 20))
        if not chunk:
            break
        left -= len(chunk)
    if left or out.read(1) != b"\n":
        raise CheckoutError(f"git cat-file: commit {sha[:12]} ends early (killed after {GIT_TIMEOUT} s, or it failed)")
    return kept


_AUTHOR_EMAIL = re.compile(rb"<([^<>\n]*)>[^<>]*$")


class _Head(NamedTuple):
    """What a raw commit object says, before its message is read."""

    parent: str | None
    email: str
    message: str


def _commit(sha: str, head: _Head, files: list[FileChange]) -> Commit:
    """The commit, its author's login from a noreply address only (git itself knows no logins)."""
    return commit(sha, head.message, noreply_login(head.email), tuple(files), parent=head.parent)


def _head(sha: str, raw: bytes | None) -> _Head:
    """A raw commit's first parent, author's address and message (decoded as its `encoding` header says)."""
    if raw is None:
        raise CommitError(f"commit {sha[:12]}: git cat-file did not return it")
    head, _, body = raw.partition(b"\n\n")
    parent, email, encoding = None, "", "utf-8"
    for line in head.split(b"\n"):          # a header's continuation lines (a signature) start with a space
        key, _, value = line.partition(b" ")
        if key == b"parent" and parent is None:
            parent = value.decode("ascii", "replace").strip()
        elif key == b"author":
            found = _AUTHOR_EMAIL.search(value)
            email = found.group(1).decode("utf-8", "replace") if found else ""
        elif key == b"encoding":
            encoding = value.decode("ascii", "replace").strip()
    return _Head(parent, email, _decode(body, encoding))


def _decode(body: bytes, encoding: str) -> str:
    try:
        return body.decode(encoding, "replace")
    except LookupError:          # an encoding Python lacks, or a codec that is no text encoding (rot13, zlib)
        return body.decode("utf-8", "replace")


def _changes(data: bytes) -> dict[str, list[FileChange]]:
    """{sha: its files} from `diff-tree --stdin -z --name-status`: a sha, then status and one path (two for a rename
    or a copy) per file, each ended by NUL; a status is never 40 hex digits, so a path cannot pass for a sha."""
    tokens, out, sha, i = data.split(b"\0"), {}, "", 0
    while i < len(tokens):
        token = tokens[i]
        if _SHA.fullmatch(token):
            sha, i = token.decode("ascii"), i + 1
            out[sha] = []
            continue
        if not token:
            i += 1
            continue
        status = _STATUS.get(token[:1].decode("ascii", "replace"))
        if status is None or status not in CHANGES:
            raise CommitError(f"commit {sha[:12]}: file status {token[:8].decode('ascii', 'replace')!r} not understood")
        n = 2 if token[:1] in (b"R", b"C") else 1
        paths = [_path(sha, p) for p in tokens[i + 1:i + 1 + n]]
        if len(paths) != n or not sha:
            raise CommitError(f"commit {sha[:12] or '?'}: git diff-tree's file list ends early")
        out[sha].append(FileChange(paths[-1], status, paths[0] if status == "renamed" else None))
        i += 1 + n
    return out


def _path(sha: str, raw: bytes) -> str:
    """A file name as text; one that is not UTF-8 keeps U+FFFD where its bad bytes were (its commit is a skip for the
    overlay, not the end of the range)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")        # an overlay cannot lay it: see harness.core.commits.python_only


_SHA = re.compile(rb"[0-9a-f]{40}")


def file_at(checkout: Path, sha: str, path: str) -> bytes | None:
    """A file's bytes at a commit (never decoded: a latin-1 module is laid as it is); None when it has no such file."""
    if sha.startswith("-"):          # a stored or typed name is never an option to git
        raise CheckoutError(f"{sha[:40]!r} does not name a commit")
    proc = _git(checkout, "cat-file", "blob", f"{sha}:{path}", text=False)
    return proc.stdout if proc.returncode == 0 else None


def readers(checkout: Path, sha: str, name: str) -> list[str]:
    """The Python files under torch/ at a commit that mention `name` (a flag's key: who reads it)."""
    proc = _git(checkout, "grep", "-z", "-l", "-w", "-F", "-e", name, sha, "--", "torch/*.py")
    prefix = f"{sha}:"
    return [found.removeprefix(prefix) for found in proc.stdout.split("\0") if found.strip()]
