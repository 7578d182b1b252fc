"""Component isolation: does a confirmed crash live in Dynamo tracing, AOTAutograd or Inductor?

PyTorch's troubleshooting guide: re-run the failure under `eager` (Dynamo
only), `aot_eager` (Dynamo, then AOTAutograd) and `inductor` (all three). Each
stage includes the previous one, so the first stage that fails with the same
signature names the component. A stage is one run of the verified reproducer in
a fresh interpreter of the run's torch, through the runner `verify_all` uses
(rendered from stored build data: hand `isolate` a shrunk build and it isolates
that). Stages stop at the run's own backend: a crash seen under `aot_eager` is
never run under `inductor`.

No runs are spent when the answer is known by construction: under the counting
backend (nothing is compiled after Dynamo) and under `eager`, a crash is
Dynamo's. Runs are spent once per (config, signature): the result is kept in
the signature's cached verdict (bot/verify/reproducers.py) and carried to later
verdicts of the same signature, so a new torch build re-verifies but does not
re-isolate, and a quiet nightly runs nothing. Stdlib only: torch is never
imported here.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from bot.verify import reproducers, shrink
from bot.verify.reproducers import Runner
from harness.core.outcome import Effect, Outcome

STAGES = ("eager", "aot_eager", "inductor")
COMPONENT_OF = {"eager": "dynamo", "aot_eager": "aot_autograd", "inductor": "inductor"}
BY_CONSTRUCTION = ("count", "eager")     # backends under which a crash can only be Dynamo's


def stages_for(backend: str) -> tuple[str, ...]:
    """The backends to run for a crash seen under `backend`: each stage up to and including it."""
    return STAGES[:STAGES.index(backend) + 1] if backend in STAGES else ()


def by_construction(backend: str) -> dict[str, Any]:
    """The component of any crash under `backend` when it is known without a run (count, eager)."""
    return {"component": "dynamo", "backend": backend, "by_construction": True, "stages": []}


def stage_result(result: dict[str, Any], signature: str) -> str:
    """One stage's run: "fails" (same signature), "passes", "other" (another failure) or "no_result"."""
    status = result.get("status")
    if status is None:
        return "no_result"
    if status == "ok":
        return "passes"
    return "fails" if reproducers.verdict(result, signature)[0] == "confirmed" else "other"


def isolate(built: dict[str, Any] | None, settings: dict[str, Any], signature: str, *, backend: str,
            device: str, python: str, timeout: float, runner: Runner | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Where a crash with `signature` lives, for a reproducer of `built` under `settings` seen under `backend`.

    Runs `eager`, `aot_eager`, `inductor` in order (up to `backend`) and stops at
    the first stage that fails with the same signature (its component) or that
    ends otherwise (another signature, a hang, no result: "undetermined"). Passing
    every stage is "none": it fails only under the run's own backend and settings.
    """
    if backend in BY_CONSTRUCTION:
        return by_construction(backend)
    if backend not in STAGES:
        raise ValueError(f"no isolation stages for backend {backend!r}")
    runner = runner or reproducers.render_and_run
    record: dict[str, Any] = {"component": "none", "backend": backend, "by_construction": False, "stages": []}
    for stage in stages_for(backend):
        if progress:
            progress(f"isolating under {stage}")
        start = time.monotonic()
        _, result = runner(built, settings, stage, device, python, timeout)
        outcome = stage_result(result, signature)
        record["stages"].append({"backend": stage, "result": outcome, "seconds": round(time.monotonic() - start, 1),
                                 "signature": result.get("signature") or result.get("status"),
                                 "error": result.get("error")})
        record.update(reproducers.verified_on(result))
        if outcome == "fails":
            record["component"] = COMPONENT_OF[stage]
            break
        if outcome != "passes":
            record["component"] = "undetermined"
            break
    return record


def _build_for(verdict: dict[str, Any], builds: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """What to isolate: the shrunk build when the verdict carries one, else the model's stored build."""
    small = shrink.from_entry(verdict)
    return small.build if small else builds.get(verdict["model"])


def _isolated(cache: reproducers.Cache) -> dict[tuple[str, str], dict[str, Any]]:
    """Components already isolated, by (config, signature), from every cached verdict (any torch build)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in cache.data.values():
        comp = entry.get("component")
        if isinstance(comp, dict) and comp.get("config") and comp.get("signature"):
            found.setdefault((comp["config"], comp["signature"]), comp)
    return found


def isolate_all(groups: dict[str, tuple[str, str, list[Effect]]], verdicts: dict[str, dict[str, Any]],
                outcomes: list[Outcome], run: dict[str, Any], builds: dict[str, dict[str, Any]], *,
                cache_path: Path | None, python: str | None = None, timeout: float = 600.0,
                runner: Runner | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """{tracking key: component record} for each group: by construction, from the cache, or isolated now.

    Only confirmed verdicts are isolated (their model's stored build, the run's
    settings and device, its interpreter); the record is written into the
    verdict's cache entry. A group without a confirmed verdict has no record.
    """
    options = run.get("options") or {}
    backend = options.get("backend", "count")
    if backend in BY_CONSTRUCTION:
        return {key: by_construction(backend) for key in groups}
    python = python or reproducers.run_python(run)
    cache = reproducers.Cache(cache_path)
    known = _isolated(cache)
    by_item = {(o.model, o.config): o for o in outcomes}
    out: dict[str, dict[str, Any]] = {}
    for n, (key, (config, signature, _)) in enumerate(sorted(groups.items()), 1):
        verdict = verdicts.get(key) or {}
        if verdict.get("status") != "confirmed" or not python:
            continue
        record = verdict.get("component") or known.get((config, signature))
        if record is None:
            if progress:
                progress(f"component {n}/{len(groups)}: {verdict['model']} under {config}")
            try:
                record = isolate(_build_for(verdict, builds), reproducers.run_settings(run, config), signature,
                                 backend=backend, device=options.get("device", "cpu"), python=python,
                                 timeout=timeout, runner=runner, progress=progress)
            except Exception:  # nothing to render from: no component, and nothing cached
                continue
            record = {**record, "config": config, "signature": signature, "model": verdict["model"]}
            known[(config, signature)] = record
        out[key] = record
        if verdict.get("component") != record and not any(s["result"] == "no_result" for s in record["stages"]):
            cache.put(reproducers.verdict_key(run, config, signature, verdict["model"], by_item),
                      {**verdict, "component": record})
    return out
