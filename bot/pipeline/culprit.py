"""The nightly's culprit step: each new crash's regression range taken from the two nightlies to their commits.

For each regression range of the run (a new crash, found or bounded, both ends' commits known): each end's
`torch_git` (a commit of the `nightly` branch) is read for the main commit its message names; the commits
between come from the `[culprit] checkout` (git) or else GitHub's compare; the suspects are ranked against the
crash (its stored traceback's torch frames, the flag's module, the component the verify step isolated); and,
with a checkout and a verified reproducer, the range is bisected on overlays of the good build (the range step's
nightly) and the bad one (the torch under test) (bot.ranges.culprit, cached per (config, signature, range)). The
steps of a search are made by one `prepare`, which `flagsweep culprit` calls too. The night's bisections share
`[culprit] max_minutes`.
A range that cannot be had (a nightly commit that names no main commit, a checkout behind, too many commits)
is stored as `failed` with its one line, and the night goes on with the next.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bot.builds import checkout as git
from bot.builds.checkout import CheckoutError
from bot.ranges import culprit as search
from bot.ranges.culprit import CulpritSteps, RunStep
from bot.settings import Settings
from bot.verify import overlay_run
from harness.core.commits import Commit, CommitError, nightly_main_sha
from harness.core.suspects import Crash, flag_modules, frame_files
from harness.engine import interpreter
from state import culprits as store
from state import ranges as ranges_mod
from state import runs as runs_mod
from state import verdicts as verdicts_mod
from state.culprits import CommitRange
from state.ranges import Range

if TYPE_CHECKING:      # PyGithub is loaded only where GitHub is used (a dry run loads none of it)
    from bot.github.client import GitHubPublisher

log = logging.getLogger(__name__)


class GoodBuildStep(Protocol):
    """The interpreter of the range's good build (the pipeline's provider installs the nightly of its date)."""

    def __call__(self, settings: Settings, r: Range) -> str: ...


class Source(Protocol):
    """Where commits and messages come from: the checkout, or GitHub."""

    def message(self, sha: str) -> str: ...

    def commits(self, good: str, bad: str) -> list[Commit]: ...


@dataclass(frozen=True)
class Checkout:
    """A local git checkout of pytorch as the commits' source (and the overlay's files); `github`, when the bot has
    credentials, names the authors git cannot (a commit's address is rarely GitHub's noreply one)."""

    path: Path
    github: "GitHubSource | None" = None

    def login(self, sha: str) -> str | None:
        """The GitHub login of a commit's author (None: no GitHub to ask, or GitHub knows none)."""
        return self.github.author(sha) if self.github is not None else None

    def message(self, sha: str) -> str:
        """A commit's message."""
        return git.message(self.path, sha)

    def commits(self, good: str, bad: str) -> list[Commit]:
        """The first-parent commits after good up to bad."""
        return git.commits(self.path, good, bad)

    def file_at(self, sha: str, path: str) -> bytes | None:
        """A file's bytes at a commit."""
        return git.file_at(self.path, sha, path)

    def readers(self, sha: str, keys: list[str]) -> tuple[str, ...]:
        """The torch modules at `sha` that mention a flag's name (torch._dynamo.config.x: `x`)."""
        found = [path for key in keys for path in git.readers(self.path, sha, key.rsplit(".", 1)[-1])]
        return tuple(dict.fromkeys(found))


def overlay_dir(settings: Settings, torch: Path, role: str = "good") -> Path:
    """Where the overlay of a build's torch lives between nights: beside the store, one per build's package folder
    and role (made once, then only the files a bisection laid are put back: a night does not copy the package again;
    a build serving as both ends has two, each held on its own)."""
    key = hashlib.sha256(f"{torch}\0{role}".encode()).hexdigest()[:16] if role != "good" else \
        hashlib.sha256(str(torch).encode()).hexdigest()[:16]
    return Path(settings.state_path).parent / "overlays" / key


def prepare(source: Source, settings: Settings, script: str | None, good_python: str | None,
            bad_python: str | None, signature: str = "") -> CulpritSteps:
    """The steps of one culprit search (the nightly's and `flagsweep culprit`'s): commits from the source, and with
    a checkout, a reproducer and the good build's interpreter, the builds its probes run on."""
    if not isinstance(source, Checkout) or not script or not good_python:
        return CulpritSteps(commits=source.commits)
    timeout = settings.verify.timeout
    good_torch = torch_dir(good_python)
    good = search.Build(good_torch, overlay_dir(settings, good_torch),
                        run_step(script, good_python, timeout, signature))
    bad = None
    if bad_python:
        bad_torch = torch_dir(bad_python)
        bad = search.Build(bad_torch, overlay_dir(settings, bad_torch, "bad"), run_step(script, bad_python, timeout,
                                                                                         signature))
    return CulpritSteps(commits=source.commits, file_at=source.file_at, good=good, bad=bad)


def torch_dir(python: str) -> Path:
    """The `torch` package folder of an interpreter (asked there, without importing torch)."""
    return Path(interpreter.call("bot.verify.overlay_run:torch_package", python=python, timeout=120))


def bad_interpreter(settings: Settings, run: runs_mod.Run, r: Range, install: GoodBuildStep) -> str:
    """The bad build's interpreter: the torch under test when it is the range's bad build, else the nightly of the
    bad end installed as the good one is (a range found by bisecting older nightlies ends before tonight's)."""
    if run.environment.torch_git == r.bad.git:
        return run.options.sweep.python or sys.executable
    return install(settings, dataclasses.replace(r, good=r.bad))


def run_step(script: str, python: str, timeout: float, signature: str = "") -> RunStep:
    """One run of the reproducer on an overlay under `python` (bot.verify.overlay_run), as the search reads it."""
    once = overlay_run.runner(script, python, timeout, signature)
    return lambda root: search.Ran(*once(root))


def main_commit(source: Source, torch_git: str) -> str:
    """The main commit a build's git commit stands for: the one its nightly commit's message names."""
    try:
        return nightly_main_sha(source.message(torch_git))
    except CommitError as exc:
        raise CommitError(f"torch_git {torch_git[:12]} names no nightly commit ({exc})") from None


def main_or_self(source: Checkout, sha: str) -> str:
    """A build named by a person: a nightly commit's main commit, else the (main) commit itself, in full."""
    try:
        return nightly_main_sha(source.message(sha))
    except CommitError:
        return git.resolve(source.path, sha)


@dataclass(frozen=True)
class GitHubSource:
    """GitHub's compare and commits as the source (no overlay: suspects only), through the publisher's client."""

    client: "GitHubPublisher"
    repo: str
    most: int

    def message(self, sha: str) -> str:
        """A commit's message."""
        return self.client.commit_message(self.repo, sha)

    def commits(self, good: str, bad: str) -> list[Commit]:
        """The commits after good up to bad (refused past `most`)."""
        return self.client.commit_range(self.repo, good, bad, self.most)

    def author(self, sha: str) -> str | None:
        """A commit's author's login."""
        return self.client.commit_author(self.repo, sha)


def crash_of(conn: sqlite3.Connection, run: runs_mod.Run, r: Range, readers: tuple[str, ...] = ()) -> Crash:
    """What the run stored about the crash: its traceback's torch frames, the flag's modules, the component
    (`readers`: the modules that read the flag, where the caller could look)."""
    outcomes = [o for o in runs_mod.outcomes(conn, r.run_id) if o.config == r.config and o.signature == r.signature]
    tb = next((o.traceback for o in outcomes if o.traceback), None)
    verdict = verdicts_mod.for_run(conn, run.id).get((r.config, r.signature))
    component = verdict.component.component if verdict and verdict.component else None
    return Crash(frames=frame_files(tb), flag_modules=flag_modules(list(run.configs.get(r.config, {}))),
                 readers=readers, component=component)


def reproducer(conn: sqlite3.Connection, run_id: int, r: Range) -> str | None:
    """The verified reproducer's script of the range's tracking group, when the verify step confirmed one (a fix's
    range: the newest run of its mode that verified one, the crash being gone in its own run): the script runs the
    model in that mode, so the bisection does."""
    rids = [run_id]
    if r.kind != "new_crash":
        mode = _mode_key(conn, run_id)
        rids += [rid for rid in ranges_mod.runs_with(conn, r.config, r.signature) if _mode_key(conn, rid) == mode]
    for rid in rids:
        verdict = verdicts_mod.for_run(conn, rid).get((r.config, r.signature))
        found = verdict.verdict if verdict else None
        if found is not None and found.status == "confirmed" and found.script:
            return found.script
    return None


def _mode_key(conn: sqlite3.Connection, run_id: int) -> str:
    run = runs_mod.get_run(conn, run_id)
    return run.options.sweep.mode.key if run is not None else ""


def search_night(conn: sqlite3.Connection, run_id: int, settings: Settings, *, source: Source | None,
                 good_build: GoodBuildStep | None, progress: bool = False) -> list[CommitRange]:
    """The commit ranges of the run's new crashes' regression ranges and its fixes' ranges (the first commit where the
    signature is gone); stored; one failing range never stops the rest."""
    knobs = settings.culprit
    if not knobs.enabled or source is None:
        return []
    run = runs_mod.get_run(conn, run_id)
    deadline = time.monotonic() + knobs.max_minutes * 60          # the night's bisections share it
    out = []
    for r in ranges_mod.for_run(conn, [run_id]):
        if r.status not in ("found", "bounded") or not (r.good.git and r.bad.git):
            continue
        try:
            out.append(for_range(conn, run, r, settings, source, good_build, progress, deadline))
        except Exception as exc:     # a range that breaks (its build, its overlay) is stored failed; the night goes on
            log.exception("culprit: %s", r.signature[:80])
            out.append(_failed(conn, r, search.one_line(exc), run.options.sweep.mode.key))
    return out


def _failed(conn: sqlite3.Connection, r: Range, reason: str, mode: str) -> CommitRange:
    """The range stored as `failed` with its one line (mode: the run's Mode.key)."""
    failed = CommitRange(signature=r.signature, good_git=r.good.git or "", bad_git=r.bad.git or "", status="failed",
                         reason=reason, config=r.config, mode=mode)
    store.record(conn, failed)
    return failed


def for_range(conn: sqlite3.Connection, run: runs_mod.Run, r: Range, settings: Settings, source: Source,
              good_build: GoodBuildStep | None, progress: bool = False, deadline: float | None = None) -> CommitRange:
    """One regression (or fix) range's commit range: from the store when searched before (read once), else searched,
    its people named, and stored (written once)."""
    mode = run.options.sweep.mode.key          # a range bisected with another mode's reproducer is not this one's
    hit = store.get(conn, r.signature, r.good.git or "", r.bad.git or "", r.config, mode)
    if hit is not None and hit.status not in search.SEARCH_AGAIN:
        return hit              # searched on an earlier night (or publish): nothing installed, nothing run
    try:
        good, bad = main_commit(source, r.good.git or ""), main_commit(source, r.bad.git or "")
    except (CommitError, CheckoutError, RuntimeError) as exc:
        log.warning("culprit: %s: %s", r.signature, exc)
        return _failed(conn, r, str(exc), mode)
    script = reproducer(conn, run.id, r)
    good_python = bad_python = None
    if isinstance(source, Checkout) and script and good_build:
        good_python = good_build(settings, r)
        bad_python = bad_interpreter(settings, run, r, good_build)
    steps = prepare(source, settings, script, good_python, bad_python, r.signature)
    readers = source.readers(bad, list(run.configs.get(r.config, {}))) if isinstance(source, Checkout) else ()
    job = search.Search(r.signature, good, bad, crash_of(conn, run, r, readers), fix=r.kind == "fixed",
                        config=r.config)
    found = search.find(steps, job, settings.culprit, progress, deadline)
    found.good_git, found.bad_git = r.good.git or "", r.bad.git or ""       # stored under the builds' own commits
    found.mode = mode
    if isinstance(source, Checkout):
        found = with_logins(found, source)
    store.record(conn, found)
    return found


def with_logins(found: CommitRange, source: Checkout) -> CommitRange:
    """The range with its culprit's and shown suspects' authors named by GitHub where git knew no login."""
    named = [found.bisection.culprit] if found.bisection and found.bisection.culprit else []
    named += [s.sha for s in found.suspects[:3]]
    asked = {}
    for c in found.commits:
        if c.sha in named and c.author is None:
            try:
                asked[c.sha] = source.login(c.sha)
            except RuntimeError as exc:       # GitHub down or refusing: the range stays as git gave it
                log.warning("culprit: no login for %s: %s", c.short, exc)
    if not any(asked.values()):
        return found
    found.commits = [dataclasses.replace(c, author=asked.get(c.sha) or c.author) for c in found.commits]
    return found


def source_for(settings: Settings, client: "GitHubPublisher | None" = None) -> Source | None:
    """The commits' source: the `[culprit] checkout` when set (GitHub, with `client`, naming the authors), else GitHub
    through `client`, else none."""
    github = GitHubSource(client, settings.culprit.repo, settings.culprit.max_commits) if client is not None else None
    if settings.culprit.checkout:
        return Checkout(Path(settings.culprit.checkout), github)
    return github
