"""Minimal reproducers: shrink a confirmed reproducer's build while the validity oracle still keeps it.

Given the stored build data of a reproducer that was seen to fail (config class,
config dict, input spec, seed), propose smaller builds - fewer layers, smaller
widths and heads, smaller vocab and counts, shorter inputs, a batch of one,
fewer images, dropped optional inputs, other config fields at their defaults -
and keep each only when the oracle that verified the reproducer keeps it
(bot/verify/oracle.py: its script runs in eager, compiles under the baseline and
fails under the flag with the same signature, on the run's own interpreter; a wrong result's, `judge_wrong`:
the baseline passes its assert_close, the flag fails it).
Greedy and delta-debugging style: every pass proposes one change per knob (the
smallest rung first), tries them all at once, and splits a rejected group in
halves down to single changes; a rejected change comes back one rung larger in
the next pass. It stops when nothing is left to try, or before a try would
overrun the time budget. Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from bot.verify import oracle
from bot.verify.proposals import Change, KeyPath, apply, input_shapes, is_int, label, propose
from bot.verify.steps import Runner
from harness.core.model_build import ModelBuild
from harness.engine.script_runner import ScriptResult


class Shrunk(NamedTuple):
    """The smallest verified build: (shrunk build, its script, stats of the shrink)."""

    build: ModelBuild
    script: str
    stats: dict[str, Any]


# ---- the search ----------------------------------------------------------------------------------------


@dataclass
class _Search:
    """The state of one shrink: the smallest verified build so far and what was spent."""

    build: ModelBuild
    script: str
    result: ScriptResult
    started: float
    tries: int = 0
    kept: int = 0
    last_wall: float = 0.0
    stopped: str = "done"       # done | budget | tries


Judge = Callable[[ModelBuild, float], oracle.Judged]   # (candidate build, timeout) -> the oracle's judgement


@dataclass(frozen=True)
class Limits:
    """What one shrink may spend: `budget` seconds in all, oracle runs included (a try that would overrun it, judged
    by the last try's duration, is not started), `timeout` seconds per try, at most `max_tries` tries (None: no cap),
    on `clock`."""

    budget: float
    timeout: float = 600.0
    max_tries: int | None = None
    clock: Callable[[], float] = time.monotonic


def crash_judge(crash: oracle.Crash, python: str, runner: Runner,
                clock: Callable[[], float] = time.monotonic) -> Judge:
    """A crash's oracle for each try (up to three `runner` calls: eager, baseline, flag), on `python`."""
    return lambda candidate, timeout: oracle.judge(candidate, crash, python, runner=runner, timeout=timeout,
                                                   clock=clock)


def minimise(built: ModelBuild, original: tuple[str, ScriptResult], judge: Judge, limits: Limits,
             progress: Callable[[str], None] | None = None, label: str | None = None) -> Shrunk:
    """Shrink a confirmed reproducer's build while `judge` keeps it, within `limits`.

    original: the flag run's (script, result) that confirmed it. Each try is one judgement: a crash's
    (`crash_judge`) or a wrong result's (oracle.judge_wrong), so every kept step still passes the baseline and
    fails under the flag. label: how progress lines name this shrink (default: the model).
    """
    budget, timeout, max_tries, clock = limits.budget, limits.timeout, limits.max_tries, limits.clock
    s = _Search(built, original[0], original[1], clock())
    s.last_wall = float(original[1].seconds or 0.0)   # the first try is judged by the run that confirmed it
    rejected: set[str] = set()

    def attempt(changes: list[Change]) -> bool | None:
        elapsed = clock() - s.started
        if max_tries is not None and s.tries >= max_tries:
            s.stopped = "tries"
            return None
        if elapsed + s.last_wall > budget or elapsed >= budget:
            s.stopped = "budget"
            return None
        candidate, t0 = apply(s.build, changes), clock()
        if progress:
            progress(f"shrinking {label or built.model}: try {s.tries + 1} ({s.kept} kept)")
        try:
            judged = judge(candidate, min(timeout, budget - elapsed))
        except Exception:             # a candidate the template cannot render is only a rejected one
            judged = None
        s.tries, s.last_wall = s.tries + 1, clock() - t0
        if judged is None or not judged.passed:
            return False
        s.build, s.script, s.result, s.kept = candidate, judged.script, judged.result, s.kept + 1
        return True

    while True:
        changes = propose(s.build, rejected)
        queue = [changes] if changes else []
        while queue:
            group = queue.pop(0)
            ok = attempt(group)
            if ok is None:
                return _finish(built, original, s, clock)
            if not ok and len(group) == 1:
                rejected.add(group[0].key)
            elif not ok:
                queue[:0] = [group[:len(group) // 2], group[len(group) // 2:]]
        if not changes:
            return _finish(built, original, s, clock)


# ---- what it shrank ------------------------------------------------------------------------------------


def _leaves(data: Any, path: KeyPath = ()) -> dict[KeyPath, Any]:
    """Flattened {path: value} of a build's config and spec (a list is one value)."""
    if isinstance(data, dict):
        out: dict[KeyPath, Any] = {}
        for key, value in data.items():
            out.update(_leaves(value, path + (key,)))
        return out
    return {path: data}


def _elements(build: ModelBuild) -> int:
    total = 0
    for _, shape in input_shapes(build):
        n = 1
        for d in shape:
            n *= d if is_int(d) else 1
        total += n
    return total


def measure(build: ModelBuild, script: str, result: ScriptResult) -> dict[str, Any]:
    """Size of one reproducer: parameters and run seconds (as its script reported), lines, input elements."""
    data = {"config": build.config or {}, "spec": build.spec or {}}
    return {"parameters": result.parameters, "seconds": result.seconds,
            "lines": len(script.splitlines()), "data_lines": len(json.dumps(data, indent=1).splitlines()),
            "input_elements": _elements(build)}


def changed_fields(before: ModelBuild, after: ModelBuild) -> dict[str, Any]:
    """What the shrink changed: [field, from, to] rows, config fields left at defaults, dropped inputs."""
    old = _leaves({"config": before.config or {}, "spec": before.spec or {}})
    new = _leaves({"config": after.config or {}, "spec": after.spec or {}})
    rows, defaulted, dropped = [], 0, set()
    for path, value in old.items():
        if path not in new:
            if path[0] == "spec":
                dropped.add(path[1])
            else:
                defaulted += 1
        elif new[path] != value:
            rows.append([label(path) if path[0] == "config" else f"{path[1]} {path[-1]}", value, new[path]])
    spec_after = after.spec or {}
    rows.sort(key=lambda row: (not row[0].startswith(tuple(before.spec or ())), 0 if "layer" in row[0] else 1))
    return {"rows": rows, "defaulted": defaulted, "dropped": sorted(n for n in dropped if n not in spec_after)}


def _finish(built: ModelBuild, original: tuple[str, ScriptResult], s: _Search,
            clock: Callable[[], float]) -> Shrunk:
    stats = {"tries": s.tries, "kept": s.kept, "seconds": round(clock() - s.started, 1), "stopped": s.stopped,
             "before": measure(built, *original), "after": measure(s.build, s.script, s.result),
             **changed_fields(built, s.build)}
    return Shrunk(s.build, s.script, stats)
