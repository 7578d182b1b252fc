"""From a nightly range to the commit: the commit range, its suspects ranked, and a bisection on Python overlays.

The rule (syzbot's, ClusterFuzz's and `git bisect`'s lessons, issues 37 and 43):
- The commits between the good and the bad build come from the `commits` step (a local checkout, or GitHub's
  compare); none, or more than `[culprit] max_commits`, is one line and no search.
- Every commit is ranked against the crash (harness.core.suspects); the ranking is kept whatever follows.
- Both builds serve: commit k's Python laid over the good build is faithful when no commit in (good, k] changed
  anything but Python (harness.core.commits.overlay_blocker); over the bad build when none in (k, bad] did. A
  probe runs on the build faithful for it (the good one when both are); where neither is, on both, and it counts
  only when the two agree. A disagreement, an import failure or another error is a skip, stepped around as
  `git bisect skip` does (bot.ranges.bisect.search).
- Each probe on a build runs the reproducer `[culprit] runs` times; it counts as old or new only when
  `confidence` of its runs agree; a faithful build whose runs disagree means a flaky reproducer: no culprit.
- The bad end (the last commit, on the bad build) is probed first and must be new; the good end is the good
  build, old by the nightly range. The culprit is kept only when it fails and its parent passes again, each
  `runs` times, on the same build(s). A commit that is not Python is never named: when the search ends at one,
  the change is outside Python, said in one sentence, the range's non-Python commits ranked as suspects. When
  skips leave several commits, all are named "one of", each with why. A culprit that changes no file the
  reproducer imported is kept but said to be most likely wrong (nobody is cc'd for it).
- A regression's old is "passes" and new "fails with the signature"; a fix (the close rule's search) swaps them.
- The search stops at `[culprit] max_minutes` (a bounded bisection). Any error inside one search stores the range
  as `failed` with one line (the night goes on). The reproducer runs through the `run` step handed in from above.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from bot.ranges import overlay
from bot.ranges.bisect import BisectError, OutOfInstalls, Probe, search
from bot.settings import CulpritSettings
from harness.core.commits import Commit, changed_paths, overlay_blocker
from harness.core.suspects import Crash, frame_files, rank
from harness.engine.progress import Progress
from state.culprits import Bisection, Candidate, CommitRange, ProbeRow, SuspectRow

log = logging.getLogger(__name__)
KEPT_SUSPECTS = 20               # ranked suspects stored per range (the issue shows at most three)
GOOD, BAD = "good", "bad"
# How a run ends without a result line (harness.engine.script_runner): nothing about the crash was learnt.
NO_RESULT = ("timeout", "killed", "not_started", "bad_output")
NO_BUILD = "not testable: a non-Python commit lies before it and no bad build was given to lay it over"


class CommitsStep(Protocol):
    """The main-branch commits after `good` up to `bad`, oldest first (a checkout's git log, or GitHub's compare)."""

    def __call__(self, good: str, bad: str) -> list[Commit]: ...


class FileAtStep(Protocol):
    """A file's bytes at a commit, None where the commit has none (the checkout)."""

    def __call__(self, sha: str, path: str) -> bytes | None: ...


@dataclass(frozen=True)
class Ran:
    """One run of the reproducer on an overlay: "ok", else its signature (or how it ended); the torch/... files it
    imported; the end of its stderr (its traceback)."""

    answer: str
    modules: tuple[str, ...] = ()
    stderr: str = ""


class RunStep(Protocol):
    """One fresh run of the reproducer with `root` first on sys.path."""

    def __call__(self, root: Path) -> Ran: ...


@dataclass(frozen=True)
class Build:
    """A build commits are laid over: its torch package, where its overlay lives, the reproducer run under it."""

    torch_dir: Path
    work: Path
    run: RunStep


@dataclass(frozen=True)
class CulpritSteps:
    """The culprit search's calls into other areas; no defaults (the real ones live above: bot.pipeline, the CLI).
    file_at and good are None where only suspects can be ranked (no checkout, no reproducer); bad is None where
    only the good build can be run."""

    commits: CommitsStep
    file_at: FileAtStep | None = None
    good: Build | None = None
    bad: Build | None = None


@dataclass(frozen=True)
class Search:
    """One culprit search: the signature between two main commits, the crash it ranks against, and which way
    (`fix`: the first commit where the signature is gone, between the last failing and the first passing build)."""

    signature: str
    good: str
    bad: str
    crash: Crash = field(default_factory=Crash)
    fix: bool = False
    config: str = ""


class CulpritError(ValueError):
    """The commit range cannot be had (no commits, too many, a checkout that lacks one); one line."""


class Flaky(Exception):
    """A probe's runs disagree on a faithful build: the reproducer does not fail reliably, so no culprit is named."""


class OutOfTime(OutOfInstalls):
    """`[culprit] max_minutes` spent: the search stops where it is (a bounded bisection)."""


@dataclass(frozen=True)
class Ended:
    """How one bisection ended (stored on the range)."""

    status: str
    reason: str | None = None
    culprit: str | None = None
    parent: str | None = None
    candidates: tuple[Candidate, ...] = ()


@dataclass
class Overlaid:
    """Probes of one bisection: the commits, the overlays held, the budget, every probe made."""

    steps: CulpritSteps
    job: Search
    commits: list[Commit]
    roots: dict[str, Path]
    settings: CulpritSettings
    deadline: float
    bar: Progress
    rows: list[ProbeRow] = field(default_factory=list)
    runs: int = 0
    why: dict[str, str] = field(default_factory=dict)          # a skipped commit: why it was stepped around
    stderr: str = ""                                           # a run failing with the signature: its traceback
    loaded: dict[str, set[str]] = field(default_factory=dict)  # a commit: the torch files its runs imported
    apart: set[str] = field(default_factory=set)               # commits that pass on the good build, fail on the bad

    def __post_init__(self) -> None:
        self.paths = changed_paths(self.commits)
        self.native = [overlay_blocker(c) is not None for c in self.commits]
        self.index = {c.sha: i for i, c in enumerate(self.commits)} | {self.job.good: -1}

    def builds(self, sha: str) -> tuple[str, ...]:
        """The build(s) a commit's Python is probed on: the faithful one (good first), else both; none where only
        the good build can run and it is not faithful."""
        i = self.index[sha]
        good_ok = not any(self.native[:i + 1])
        bad_ok = not any(self.native[i + 1:])
        if good_ok:
            return (GOOD,)
        if BAD not in self.roots:
            return ()
        return (BAD,) if bad_ok else (GOOD, BAD)

    def verdict(self, answers: list[str]) -> str:
        """old | new | other, by the share of runs that agree; flaky when too few do."""
        need = self.settings.confidence * len(answers)
        new, old = ("ok", self.job.signature) if self.job.fix else (self.job.signature, "ok")
        if answers.count(new) >= need:
            return "new"
        if answers.count(old) >= need:
            return "old"
        if "ok" not in answers and self.job.signature not in answers and len(set(answers)) == 1:
            return "other"
        return "flaky"

    def _on(self, build: str, sha: str, phase: str) -> list[str]:
        """`runs` runs of the reproducer on `build` with `sha`'s Python laid over it; each run's answer."""
        if time.monotonic() > self.deadline:
            raise OutOfTime(sha)
        assert self.steps.file_at is not None
        run = (self.steps.good if build == GOOD else self.steps.bad).run      # type: ignore[union-attr]
        overlay.lay(self.roots[build], {p: self.steps.file_at(sha, p) for p in self.paths})
        ran = [run(self.roots[build]) for _ in range(self.settings.runs)]
        answers = [r.answer for r in ran]
        self.loaded.setdefault(sha, set()).update(m for r in ran for m in r.modules)
        self.stderr = next((r.stderr for r in ran if r.answer == self.job.signature and r.stderr), self.stderr)
        self.runs += len(answers)
        self.rows.append(ProbeRow(sha, answers, self.verdict(answers), phase, build))
        return answers

    def probe(self, sha: str, phase: str = "search", on: tuple[str, ...] | None = None) -> Probe:
        """The reproducer at `sha` on its build(s) (or those `on`), judged; key None (a skip) where it cannot be
        counted."""
        builds = on or self.builds(sha)
        if not builds:
            self.why[sha] = NO_BUILD
            return Probe(date=sha, version=None, git=sha, key=None)
        verdicts = [self._verdict_on(b, sha, phase, len(builds)) for b in builds]
        self.bar.advance(crashed=verdicts[-1] == "new")
        agreed = verdicts[0] if len(set(verdicts)) == 1 and verdicts[0] in ("old", "new") else None
        if agreed is None:
            self.why[sha] = self._skip_why(builds, verdicts)
            if builds == (GOOD, BAD) and [self._said(v) if v in ("old", "new") else v for v in verdicts] == [
                    "passes", "fails with the signature"]:
                self.apart.add(sha)
        return Probe(date=sha, version=None, git=sha, key=agreed)

    def _verdict_on(self, build: str, sha: str, phase: str, of: int) -> str:
        answers = self._on(build, sha, phase)
        verdict = self.rows[-1].verdict
        if verdict == "flaky" and of == 1:
            raise Flaky(f"the reproducer is flaky at {sha[:12]} on the {build} build: "
                        f"{answers.count(self.job.signature)} of {len(answers)} runs failed with the signature, "
                        f"{answers.count('ok')} passed; no culprit is named")
        return verdict

    def _skip_why(self, builds: tuple[str, ...], verdicts: list[str]) -> str:
        said = {"old": self._said("old"), "new": self._said("new"), "flaky": "is flaky", "other": "fails otherwise"}
        if len(builds) == 1:
            answer = self.rows[-1].runs[0]
            return f"not testable: on the {builds[0]} build it {said[verdicts[0]]} ({answer[:120]})"
        return ("not testable: the builds disagree (the good build " + said[verdicts[0]] + ", the bad build "
                + said[verdicts[1]] + ")")

    def _said(self, verdict: str) -> str:
        passes = (verdict == "old") != self.job.fix
        return "passes" if passes else "fails with the signature"


def commit_range(steps: CulpritSteps, good: str, bad: str, settings: CulpritSettings) -> list[Commit]:
    """The commits after `good` up to `bad`; CulpritError for none or more than `max_commits`."""
    found = steps.commits(good, bad)
    if not found:
        raise CulpritError(f"no commits between {good[:12]} and {bad[:12]}: nothing to search")
    if len(found) > settings.max_commits:
        raise CulpritError(f"{len(found)} commits between {good[:12]} and {bad[:12]}: more than "
                           f"[culprit] max_commits = {settings.max_commits}, not searched")
    return found


def find(steps: CulpritSteps, job: Search, settings: CulpritSettings, progress: bool = False,
         deadline: float | None = None) -> CommitRange:
    """The commit range of the search: suspects ranked, and bisected on overlays where a checkout and a build are,
    until `deadline` (time.monotonic(); default `max_minutes` from now: a night's searches share one)."""
    out = CommitRange(signature=job.signature, good_git=job.good, bad_git=job.bad, status="failed",
                      config=job.config)
    try:
        commits = commit_range(steps, job.good, job.bad, settings)
    except (CulpritError, RuntimeError) as exc:    # the checkout's and GitHub's errors are one line too
        out.reason = str(exc)
        return out
    out.commits = commits
    out.suspects = _ranked(commits, job.crash)
    out.status = "suspects"
    if steps.file_at is None or steps.good is None:
        out.reason = "no [culprit] checkout: suspects ranked, no bisection"
        return out
    try:
        return _bisect(steps, out, job, settings, progress,
                       deadline if deadline is not None else time.monotonic() + settings.max_minutes * 60)
    except Exception as exc:      # an overlay, a checkout or a probe that breaks ends this range only, in one line
        log.exception("culprit: the search of %s failed", job.signature[:80])
        out.status, out.reason = "failed", one_line(exc)
        return out


def _ranked(commits: list[Commit], crash: Crash) -> list[SuspectRow]:
    return [SuspectRow(s.commit.sha, s.score, list(s.why)) for s in rank(commits, crash)[:KEPT_SUSPECTS]]


def one_line(exc: BaseException) -> str:
    """An error as the one line a failed range stores."""
    text = str(exc).strip().splitlines()
    return f"the search failed: {type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _bisect(steps: CulpritSteps, out: CommitRange, job: Search, settings: CulpritSettings,
            progress: bool, deadline: float) -> CommitRange:
    """Ends, search, re-test: the overlay bisection of the range, stored on `out`."""
    started = time.monotonic()
    bar = Progress(3 + max(len(out.commits) - 1, 1).bit_length(), enabled=progress, label="culprit")
    with overlay.held(steps.good.torch_dir, steps.good.work) as good_root:          # type: ignore[union-attr]
        roots = {GOOD: good_root}
        native = any(overlay_blocker(c) for c in out.commits)      # the bad build serves only past a native commit
        bad = steps.bad if native else None                           # None: only the good build can run
        with overlay.held(bad.torch_dir, bad.work) if bad is not None else contextlib.nullcontext() as bad_root:
            if bad_root is not None:
                roots[BAD] = bad_root
            o = Overlaid(steps, job, out.commits, roots, settings, deadline, bar)
            try:
                ended = _search(o)
            except Flaky as exc:
                ended = Ended("flaky", str(exc))
            except OutOfTime:
                ended = Ended("bounded", f"stopped at the night's [culprit] max_minutes = {settings.max_minutes:g} "
                                         "before a culprit was confirmed")
            finally:
                bar.close()
    out.status, out.reason = ended.status, ended.reason
    if not job.crash.frames and frame_files(o.stderr):       # a reproducer by hand: its own traceback ranks them
        crash = replace(job.crash, frames=frame_files(o.stderr))
        out.suspects = _ranked(out.commits, crash)
        job = replace(job, crash=crash)
    culprit = next((c for c in out.commits if c.sha == ended.culprit), None)
    untouched = culprit is not None and not ({f.path for f in culprit.files} | {f.previous for f in culprit.files}) \
        & o.loaded.get(culprit.sha, set())
    out.bisection = Bisection(culprit=ended.culprit, parent=ended.parent, probes=o.rows,
                              seconds=round(time.monotonic() - started, 1), runs=o.runs,
                              candidates=list(ended.candidates), likely_wrong=bool(untouched), fix=job.fix)
    if ended.status == "outside":
        native = [c for c in out.commits if c.sha in {x.sha for x in ended.candidates} and overlay_blocker(c)]
        out.suspects = _ranked(native, job.crash) or [SuspectRow(c.sha, 0, [overlay_blocker(c) or ""]) for c in native]
    return out


def _search(o: Overlaid) -> Ended:
    """One bisection: the bad end probed, the binary search, then the culprit confirmed or the candidates named."""
    shas = [c.sha for c in o.commits]
    high = o.probe(shas[-1], "ends")
    if o.why.get(shas[-1]) == NO_BUILD:
        return Ended("cut", f"a non-Python commit lies before the last commit ({shas[-1][:12]}) and no bad build was "
                            "given: the good build cannot stand in for it")
    if high.key != "new":
        if _no_result(o.rows[-1].runs):
            return Ended("not_reproduced", f"the reproducer never ran to a result at the last commit "
                                           f"({shas[-1][:12]}): {', '.join(dict.fromkeys(o.rows[-1].runs))} in "
                                           "every run; no culprit can be judged")
        return Ended("not_reproduced", f"the overlay at the last commit ({shas[-1][:12]}) "
                                       f"{'still fails' if o.job.fix else 'does not fail'}: no "
                                       f"{'fix' if o.job.fix else 'culprit'}")
    low = Probe(date=o.job.good, version=None, git=o.job.good, key="old")
    try:
        found = search(shas[:-1], o.probe, good=low, bad=high)
    except BisectError as exc:
        return Ended("failed", str(exc))
    if found.status == "bounded":
        raise OutOfTime(found.bad.git or "")
    lo, hi = o.index[found.good.git or ""], o.index[found.bad.git or ""]
    between = o.commits[lo + 1:hi + 1]
    if len(between) == 1 and not o.native[hi]:
        return _confirm(o, between[0].sha, o.commits[lo].sha if lo >= 0 else o.job.good)
    return _unresolved(o, between)


def _confirm(o: Overlaid, culprit: str, parent: str) -> Ended:
    """The culprit kept only when it is new and its parent old again, on the same build(s)."""
    on = o.builds(culprit)
    if o.probe(culprit, "retest", on).key != "new" or o.probe(parent, "retest", on).key != "old":
        return Ended("not_reproduced", f"the re-test did not confirm {culprit[:12]} against its parent {parent[:12]}: "
                                       f"no {'fix' if o.job.fix else 'culprit'}")
    return Ended("found", None, culprit, parent)


def _unresolved(o: Overlaid, between: list[Commit]) -> Ended:
    """Where the search ends at a non-Python commit, or skips leave several: never one forced name."""
    native = [c for c in between if overlay_blocker(c)]
    if native and all(c.sha in o.apart for c in between if not overlay_blocker(c)):
        said = ", ".join(c.short for c in native)
        return Ended("outside", (f"every Python state between passes on the good build and fails on the bad one: the "
                                 f"change is outside Python, in {'one of ' if len(native) > 1 else ''}{said}"),
                     candidates=tuple(Candidate(c.sha, overlay_blocker(c) or "") for c in native))
    candidates = tuple(Candidate(c.sha, o.why.get(c.sha) or overlay_blocker(c) or "the first that fails")
                       for c in between)
    return Ended("one_of", (f"the skipped commits leave {len(between)} candidates: the change is one of "
                            f"{', '.join(c.short for c in between)}"), candidates=candidates)


def _no_result(answers: list[str]) -> bool:
    return bool(answers) and all(a in NO_RESULT for a in answers)


# A stored range is answered from the store; one stopped by the budget or a failure is searched again.
SEARCH_AGAIN = ("bounded", "failed")
