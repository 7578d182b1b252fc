"""Suspects: the commits of a range ranked by what each touched against the crash, and who a culprit's cc names.

Stdlib only, pure. ClusterFuzz's rule, in words a reader can check: a commit that changed a file of the crash's
torch frames ranks first, the innermost frame highest; then one that changed the module defining the flag or a
module reading it; then one that changed the component the isolation found. Every point a commit scores comes
with the sentence that earned it. The cc rule (ClusterFuzz's and syzbot's): one suspect, its author; two or three,
each of theirs; more than three, nobody (a guess spread that wide is noise); a person who unsubscribed or was
removed from the issue is never added again. "Theirs" is bounded, as a message may list any number of
`Co-authored-by:` lines: a commit adds its author and its first MAX_COAUTHORS co-authors GitHub vouches for (a
login), at most 3 x (1 + MAX_COAUTHORS) people in all; anyone else it names is shown without a mention.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.core.commits import Commit

_FRAME = re.compile(r'File "([^"]+)", line \d+,? in (\S+)')
# The component the isolation names -> the torch folders it lives in.
COMPONENT_PATHS = {"dynamo": ("torch/_dynamo/", "torch/csrc/dynamo/"), "aot_autograd": ("torch/_functorch/", "torch/_subclasses/"),
                   "inductor": ("torch/_inductor/",)}
FRAME_POINTS, FRAME_STEP = 100, 10      # the innermost frame's file; each frame further out, 10 fewer (to 10)
FLAG_MODULE_POINTS, READER_POINTS, COMPONENT_POINTS = 40, 30, 10
MAX_CC = 3                              # more suspects than this: nobody is cc'd
MAX_COAUTHORS = 2                       # co-authors one commit may add to a cc (beside its author)


@dataclass(frozen=True)
class Crash:
    """What a crash says about where it lives: its torch frames' files, the flag's keys, the component."""

    frames: tuple[str, ...] = ()        # torch/... files of the traceback's torch frames, innermost first
    flag_modules: tuple[str, ...] = ()  # torch/_dynamo/config.py for torch._dynamo.config.x
    readers: tuple[str, ...] = ()       # modules that read the flag
    component: str | None = None        # dynamo | aot_autograd | inductor


@dataclass(frozen=True)
class Suspect:
    """One ranked commit, with its score and why."""

    commit: Commit
    score: int
    why: tuple[str, ...] = field(default_factory=tuple)


def frame_files(traceback_text: str | None) -> tuple[str, ...]:
    """The torch files of a traceback's frames, innermost first, without repeats (the root cause's block first)."""
    found: list[str] = []
    for block in re.split(r"Traceback \(most recent call last\):", traceback_text or ""):
        paths = [p.replace("\\", "/") for p, _ in _FRAME.findall(block)]
        for path in reversed(paths):
            idx = path.rfind("/torch/")
            rel = path[idx + 1:] if idx >= 0 else (path if path.startswith("torch/") else None)
            if rel:
                found.append(rel)
    return tuple(dict.fromkeys(found))


def flag_modules(keys: list[str]) -> tuple[str, ...]:
    """The modules defining config keys: torch._dynamo.config.x -> torch/_dynamo/config.py."""
    mods = [".".join(k.split(".")[:-1]) for k in keys if k.count(".") >= 2]
    return tuple(dict.fromkeys(m.replace(".", "/") + ".py" for m in mods))


def score(c: Commit, crash: Crash) -> Suspect:
    """One commit scored against the crash, each point with its reason."""
    points, why = 0, []
    paths = {f.path for f in c.files}
    for depth, path in enumerate(crash.frames):
        if path in paths:
            pts = max(FRAME_POINTS - FRAME_STEP * depth, FRAME_STEP)
            points += pts
            where = "the innermost torch frame" if depth == 0 else f"torch frame {depth + 1} from the innermost"
            why.append(f"changes {path}, {where} of the crash")
    for path in crash.flag_modules:
        if path in paths:
            points += FLAG_MODULE_POINTS
            why.append(f"changes {path}, which defines the flag")
    readers = sorted(paths & set(crash.readers) - set(crash.flag_modules))
    if readers:
        points += READER_POINTS
        why.append(f"changes {', '.join(readers)}, which read{'s' if len(readers) == 1 else ''} the flag")
    prefixes = COMPONENT_PATHS.get(crash.component or "", ())
    touched = [pre for pre in prefixes if any(p.startswith(pre) for p in paths)]
    if touched:
        points += COMPONENT_POINTS
        why.append(f"changes {touched[0]}, the component the isolation found ({crash.component})")
    return Suspect(c, points, tuple(why))


def rank(commits: list[Commit], crash: Crash) -> list[Suspect]:
    """The commits that touched anything of the crash, highest score first (ties: the newer commit first)."""
    scored = [(score(c, crash), i) for i, c in enumerate(commits)]
    return [s for s, _ in sorted(((s, i) for s, i in scored if s.score > 0), key=lambda t: (-t[0].score, -t[1]))]


def cc_for(suspects: list[Commit], removed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Who the suspects' cc names: 1 suspect its people (people_of); 2-3 all theirs; more than 3 nobody.

    `removed`: logins that unsubscribed or were removed from the issue (compared case-insensitively): never added.
    """
    if not suspects or len(suspects) > MAX_CC:
        return []
    gone = {r.lower().lstrip("@") for r in removed}
    people = [p for c in suspects for p in people_of(c)]
    return [p for p in dict.fromkeys(people) if p.lower() not in gone]


def people_of(c: Commit) -> tuple[str, ...]:
    """The logins one commit may add to a cc: its author's and its first MAX_COAUTHORS co-authors' with a login."""
    coauthors = [p.login for p in c.coauthors if p.login][:MAX_COAUTHORS]
    return tuple(dict.fromkeys(p for p in (c.author, *coauthors) if p))
