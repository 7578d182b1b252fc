"""From a nightly range to the commit: the commit range, its suspects ranked, and a bisection on a Python overlay.

The rule (syzbot's and ClusterFuzz's lessons, issue 37):
- The commits between the good and the bad build come from the `commits` step (a local checkout, or GitHub's
  compare); none, or more than `[culprit] max_commits`, is one line and no search.
- Every commit is ranked against the crash (harness.core.suspects); the ranking is kept whatever follows.
- Only the leading stretch of commits an overlay can carry is bisected (harness.core.commits.python_stretch);
  a commit it cannot carry cuts the search, and the stored reason says between which commits and why.
- Each probe runs the reproducer `[culprit] runs` times on the good build with commit k's Python laid over it
  (bot.ranges.overlay); it counts as old (passes) or new (fails with the signature) only when `confidence` of
  its runs agree, otherwise the reproducer is flaky and there is no culprit. A consistent other failure is
  stepped around like an uninstallable nightly.
- The last commit is tested before the search (it must fail; the good end passes by the nightly range), and the
  culprit and its parent are tested again after it: kept only when k fails with the same signature and its
  parent passes (the good build itself, when k is the first commit).
- The search is the one binary search (bot.ranges.bisect.search); it stops at `[culprit] max_minutes`.
The reproducer runs through the `run` step handed in from above (this package starts no process).
"""
from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bot.ranges import overlay
from bot.ranges.bisect import BisectError, OutOfInstalls, Probe, search
from bot.settings import CulpritSettings
from harness.core.commits import Commit, Stretch, changed_paths, python_stretch
from harness.core.suspects import Crash, rank
from harness.engine.progress import Progress
from state import culprits as store
from state.culprits import Bisection, CommitRange, ProbeRow, SuspectRow

log = logging.getLogger(__name__)
KEPT_SUSPECTS = 20               # ranked suspects stored per range (the issue shows at most three)


class CommitsStep(Protocol):
    """The main-branch commits after `good` up to `bad`, oldest first (a checkout's git log, or GitHub's compare)."""

    def __call__(self, good: str, bad: str) -> list[Commit]: ...


class FileAtStep(Protocol):
    """A file's bytes at a commit, None where the commit has none (the checkout)."""

    def __call__(self, sha: str, path: str) -> bytes | None: ...


class RunStep(Protocol):
    """One fresh run of the reproducer with `root` first on sys.path: "ok", else its signature (or status)."""

    def __call__(self, root: Path) -> str: ...


@dataclass(frozen=True)
class CulpritSteps:
    """The culprit search's calls into other areas; no defaults (the real ones live above: bot.pipeline, the CLI).
    file_at and run are None where only suspects can be ranked (no checkout)."""

    commits: CommitsStep
    file_at: FileAtStep | None = None
    run: RunStep | None = None


class CulpritError(ValueError):
    """The commit range cannot be had (no commits, too many, a checkout that lacks one); one line."""


class Flaky(Exception):
    """A probe's runs disagree: the reproducer does not fail reliably, so no culprit is named."""


class OutOfTime(OutOfInstalls):
    """`[culprit] max_minutes` spent: the search stops where it is (a bounded bisection)."""


@dataclass
class Overlaid:
    """Probes of one bisection: the overlay, its paths, the budget, every probe made."""

    steps: CulpritSteps
    root: Path
    paths: list[str]
    signature: str
    settings: CulpritSettings
    deadline: float
    bar: Progress
    rows: list[ProbeRow] = field(default_factory=list)
    runs: int = 0

    def verdict(self, answers: list[str]) -> str:
        """old | new | other, by the share of runs that agree; Flaky when too few do."""
        need = self.settings.confidence * len(answers)
        if answers.count(self.signature) >= need:
            return "new"
        if answers.count("ok") >= need:
            return "old"
        if "ok" not in answers and self.signature not in answers and len(set(answers)) == 1:
            return "other"
        return "flaky"

    def probe(self, sha: str, phase: str = "search") -> Probe:
        """The reproducer run `runs` times on the overlay at `sha`, judged."""
        if time.monotonic() > self.deadline:
            raise OutOfTime(sha)
        overlay.lay(self.root, {p: self.steps.file_at(sha, p) for p in self.paths})
        answers = [self.steps.run(self.root) for _ in range(self.settings.runs)]
        self.runs += len(answers)
        verdict = self.verdict(answers)
        self.rows.append(ProbeRow(sha, answers, verdict, phase))
        self.bar.advance(crashed=verdict == "new")
        if verdict == "flaky":
            raise Flaky(f"the reproducer is flaky at {sha[:12]}: {answers.count(self.signature)} of {len(answers)} "
                        f"runs failed with the signature, {answers.count('ok')} passed; no culprit is named")
        return Probe(date=sha, version=None, git=sha, key=None if verdict == "other" else verdict)


def commit_range(steps: CulpritSteps, good: str, bad: str, settings: CulpritSettings) -> list[Commit]:
    """The commits after `good` up to `bad`; CulpritError for none or more than `max_commits`."""
    found = steps.commits(good, bad)
    if not found:
        raise CulpritError(f"no commits between {good[:12]} and {bad[:12]}: nothing to search")
    if len(found) > settings.max_commits:
        raise CulpritError(f"{len(found)} commits between {good[:12]} and {bad[:12]}: more than "
                           f"[culprit] max_commits = {settings.max_commits}, not searched")
    return found


def find(steps: CulpritSteps, *, signature: str, good: str, bad: str, crash: Crash, settings: CulpritSettings,
         torch_dir: Path | None = None, work: Path | None = None, progress: bool = False) -> CommitRange:
    """The commit range of (good, bad) for `signature`: suspects ranked, and bisected where an overlay can be."""
    out = CommitRange(signature=signature, good_git=good, bad_git=bad, status="failed")
    try:
        commits = commit_range(steps, good, bad, settings)
    except (CulpritError, RuntimeError) as exc:    # the checkout's and GitHub's errors are one line too
        out.reason = str(exc)
        return out
    out.commits = commits
    out.suspects = [SuspectRow(s.commit.sha, s.score, list(s.why)) for s in rank(commits, crash)[:KEPT_SUSPECTS]]
    out.status = "suspects"
    if steps.file_at is None or steps.run is None or torch_dir is None or work is None:
        out.reason = "no [culprit] checkout: suspects ranked, no bisection"
        return out
    stretch = python_stretch(commits)
    if not stretch.commits:
        out.status, out.reason = "cut", stretch.sentence
        return out
    try:
        return _bisect(steps, out, stretch, good, torch_dir, work, settings, progress)
    except Exception as exc:      # an overlay, a checkout or a probe that breaks ends this range only, in one line
        log.exception("culprit: the search of %s failed", signature[:80])
        out.status, out.reason = "failed", one_line(exc)
        return out


def one_line(exc: BaseException) -> str:
    """An error as the one line a failed range stores."""
    text = str(exc).strip().splitlines()
    return f"the search failed: {type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _bisect(steps: CulpritSteps, out: CommitRange, stretch: Stretch, good: str, torch_dir: Path, work: Path,
            settings: CulpritSettings, progress: bool) -> CommitRange:
    """Ends, search, re-test: the overlay bisection of the stretch, stored on `out`."""
    started = time.monotonic()
    shas = [c.sha for c in stretch.commits]
    bar = Progress(3 + max(len(shas) - 1, 1).bit_length(), enabled=progress, label="culprit")
    with overlay.held(torch_dir, work) as root:
        o = Overlaid(steps, root, changed_paths(list(stretch.commits)), out.signature, settings,
                     started + settings.max_minutes * 60, bar)
        try:
            out.status, culprit, parent, out.reason = _search(o, good, shas, stretch)
        except Flaky as exc:
            out.status, culprit, parent, out.reason = "flaky", None, None, str(exc)
        except OutOfTime:
            out.status, culprit, parent = "bounded", None, None
            out.reason = f"stopped at [culprit] max_minutes = {settings.max_minutes:g} before a culprit was confirmed"
        finally:
            bar.close()
    out.bisection = Bisection(culprit=culprit, parent=parent, probes=o.rows, seconds=round(time.monotonic() - started, 1),
                              runs=o.runs)
    return out


def _search(o: Overlaid, good: str, shas: list[str], stretch: Stretch) -> tuple[str, str | None, str | None, str | None]:
    """(status, culprit, parent, reason) of one bisection.

    The good end is the good build, known to pass from the nightly range (not probed: the re-test of the
    culprit's parent probes it whenever the culprit is the first commit); the stretch's last commit is probed first.
    """
    high = o.probe(shas[-1], "ends")
    if high.key != "new":
        if stretch.cut is not None:
            return "cut", None, None, (f"{stretch.sentence}; the Python commits before it do not reproduce, so the "
                                       f"change lies from {stretch.cut.short} on (the bad build's wheel can test the "
                                       f"Python-only stretch after it)")
        if _no_result(o.rows[-1].runs):
            return "not_reproduced", None, None, (f"the reproducer never ran to a result at the last commit "
                                                  f"({shas[-1][:12]}): {', '.join(dict.fromkeys(o.rows[-1].runs))} in "
                                                  f"every run; no culprit can be judged")
        return "not_reproduced", None, None, f"the overlay at the last commit ({shas[-1][:12]}) does not fail: no culprit"
    low = Probe(date=good, version=None, git=good, key="old")
    try:
        found = search(shas[:-1], o.probe, good=low, bad=high)
    except BisectError as exc:
        return "failed", None, None, str(exc)
    if found.status == "bounded":
        raise OutOfTime(found.bad.git or "")
    culprit, parent = found.bad.git or "", found.good.git or ""
    if o.probe(culprit, "retest").key != "new" or o.probe(parent, "retest").key != "old":
        return "not_reproduced", None, None, (f"the re-test did not confirm {culprit[:12]} against its parent "
                                              f"{parent[:12]}: no culprit")
    reason = stretch.sentence and f"{stretch.sentence} (the culprit lies before it)"
    return "found", culprit, parent, reason

# How a run ends without a result line (harness.engine.script_runner): nothing about the crash was learnt.
NO_RESULT = ("timeout", "killed", "not_started", "bad_output")


def _no_result(answers: list[str]) -> bool:
    return bool(answers) and all(a in NO_RESULT for a in answers)


# A stored range is answered from the store; one stopped by the budget or a failure is searched again.
SEARCH_AGAIN = ("bounded", "failed")


def cached(conn: sqlite3.Connection, steps: CulpritSteps, *, signature: str, good: str, bad: str, crash: Crash,
           settings: CulpritSettings, torch_dir: Path | None = None, work: Path | None = None,
           progress: bool = False, key: tuple[str, str] | None = None, config: str = "") -> tuple[CommitRange, bool]:
    """(the commit range of (config, signature, good, bad), whether it came from the store): searched once, stored.

    key: the two builds' own commits the range is stored under (a nightly's torch_git), default (good, bad)."""
    good_key, bad_key = key or (good, bad)
    hit = store.get(conn, signature, good_key, bad_key, config)
    if hit is not None and hit.status not in SEARCH_AGAIN:
        return hit, True
    found = find(steps, signature=signature, good=good, bad=bad, crash=crash, settings=settings,
                 torch_dir=torch_dir, work=work, progress=progress)
    found.good_git, found.bad_git, found.config = good_key, bad_key, config
    store.record(conn, found)
    return found, False
