"""Verified reproducers: a tracking issue embeds a script only if it was run and seen to fail the same way.

For each tracking issue the smallest affected model (fewest ops, then fewest
baseline graphs, then name) gets a standalone script rendered from what the run
stored (bot/verify/repro_script.py; no model is built here and torch is never imported),
run in a fresh subprocess of the interpreter the run used: a crash that exists
only in a nightly is checked on that nightly. That is slow (a new Python, a
compile), so verdicts are cached per (config, signature, model, fingerprint,
torch build) in a small versioned JSON file beside the store. A confirmed one is
then shrunk (bot/verify/shrink.py) under a time budget, and the verdict embeds the
smallest script that still fails the same way; the shrink is cached with it.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable

from bot.verify import shrink
from harness.core.outcome import Effect, Outcome

log = logging.getLogger(__name__)
CACHE_VERSION = 3   # 3: a confirmed verdict carries its shrink ("shrink": {"build", "stats"}) and component
Runner = shrink.Runner   # (stored build, settings, backend, device, python, timeout) -> (script, result)


def render_and_run(built: dict[str, Any] | None, settings: dict[str, Any], backend: str, device: str,
                   python: str, timeout: float) -> tuple[str, dict[str, Any]]:
    """Render the script from stored data, run it under `python`; (script, its result)."""
    from bot.verify.repro_script import render_script
    from harness.engine.script_runner import run_script

    script = render_script(built, settings, backend, device)
    return script, run_script(script, python, timeout)


def pick_model(effects: list[Effect], outcomes: dict[tuple[str, str], Outcome]) -> Effect:
    """The smallest affected model: fewest ops, then fewest baseline graphs, then name."""
    def size(e: Effect) -> tuple:
        base = outcomes.get((e.model, "baseline"))
        ops = base.ops if base and base.ops is not None else float("inf")
        return (ops, e.baseline_graphs if e.baseline_graphs is not None else float("inf"), e.model)
    return min(effects, key=size)


def run_python(run: dict[str, Any]) -> str | None:
    """The interpreter the run's workers used (its environment records it)."""
    return (run.get("environment") or {}).get("python")


def verified_on(result: dict[str, Any]) -> dict[str, Any]:
    """The torch a script actually ran on, as it reported it."""
    return {"torch_version": result.get("torch_version"), "torch_git": result.get("torch_git")}


def run_settings(run: dict[str, Any], config: str) -> dict[str, Any]:
    """The settings a run applied for `config`: its base settings, then the config's own."""
    return {**(run.get("base_settings") or {}), **(run.get("configs") or {}).get(config, {})}


def verdict_key(run: dict[str, Any], config: str, signature: str, model: str,
                by_item: dict[tuple[str, str], Outcome]) -> str:
    """The cache key of one verdict: (config, signature, model, its fingerprint, the run's torch build)."""
    env = run.get("environment") or {}
    fingerprint = getattr(by_item.get((model, config)), "fingerprint", None)
    return Cache.key(config, signature, model, fingerprint, [env.get("torch_version"), env.get("torch_git")])


def verdict(result: dict[str, Any], signature: str) -> tuple[str, str]:
    """(status, reason) for one script result: confirmed only when it failed with the same signature."""
    status = result.get("status")
    seen = result.get("signature") or status
    if shrink.reproduces(result, signature):
        return "confirmed", ""
    if status == "ok":
        return "unconfirmed", "ran without crashing in a fresh interpreter"
    if status is None:
        return "unconfirmed", f"did not report a result ({result.get('error') or 'no FLAGSWEEP_RESULT line'})"
    return "unconfirmed", f"ended with {status} and another signature: {seen}"


class Cache:
    """Verdicts by (config, signature, model, fingerprint), in one JSON file with a schema version."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        if path and path.exists():
            try:
                raw = json.loads(path.read_text())
                if raw.get("version") == CACHE_VERSION:
                    self.data = raw.get("entries", {})
            except (OSError, ValueError):
                log.warning("%s: unreadable reproducer cache, starting afresh", path)

    @staticmethod
    def key(config: str, signature: str, model: str, fingerprint: str | None, torch: list[Any]) -> str:
        return hashlib.sha256(json.dumps([config, signature, model, fingerprint, torch]).encode()).hexdigest()[:24]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": self.data}, sort_keys=True))
            tmp.replace(self.path)


def verify_all(groups: dict[str, tuple[str, str, list[Effect]]], outcomes: list[Outcome], run: dict[str, Any],
               builds: dict[str, dict[str, Any]], *, cache_path: Path | None, python: str | None = None,
               timeout: float = 600.0, runner: Runner | None = None, shrink_budget: float = 0.0,
               progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """{tracking key: verdict} for each (config, signature) group; verdicts (and their shrinks) are cached.

    builds: the run's stored build data per model. python: the interpreter to verify
    under (default: the one the run used, from its environment). shrink_budget: seconds
    per confirmed reproducer to shrink it in (0: embed it as built).
    """
    runner = runner or render_and_run
    python = python or run_python(run)
    cache = Cache(cache_path)
    by_item = {(o.model, o.config): o for o in outcomes}
    options = run.get("options") or {}
    how = (options.get("backend", "count"), options.get("device", "cpu"))
    out: dict[str, dict[str, Any]] = {}
    for n, (key, (config, signature, effects)) in enumerate(sorted(groups.items()), 1):
        chosen = pick_model(effects, by_item)
        ckey = verdict_key(run, config, signature, chosen.model, by_item)
        settings = run_settings(run, config)
        built = builds.get(chosen.model)
        cached = cache.get(ckey)
        if cached is not None and not _wants_shrink(cached, shrink_budget, python):
            out[key] = cached
            continue
        if progress:
            progress(f"reproducer {n}/{len(groups)}: {chosen.model} under {config}")
        if cached is not None:        # confirmed before the shrink was enabled: measure it again, then shrink
            out[key], ran = _remeasure(cached, built, settings, how, python or "", runner, timeout)
        else:
            out[key], ran = _verify(chosen.model, built, settings, how, python, signature, runner, timeout)
        if ran is None:               # nothing ran: not cached, a later run may store what is missing
            continue
        if out[key]["status"] == "confirmed" and shrink_budget > 0:
            out[key] = {**out[key], **_shrunk(built, settings, how, python or "", signature, ran,
                                              shrink_budget, runner, timeout, progress)}
        if ran[1].get("status") is not None:   # an interpreter that did not start says nothing to cache
            cache.put(ckey, out[key])
    return out


def _verify(model: str, built: dict[str, Any] | None, settings: dict[str, Any], how: tuple[str, str],
            python: str | None, signature: str, runner: Runner,
            timeout: float) -> tuple[dict[str, Any], tuple[str, dict[str, Any]] | None]:
    """(verdict, (script, result)) of one fresh run; None in place of the run when nothing could run."""
    if not python:
        return {"status": "unconfirmed", "model": model, "script": "",
                "reason": "could not be run: the run recorded no interpreter"}, None
    try:
        script, result = runner(built, settings, *how, python, timeout)
    except Exception as exc:  # nothing stored to render from, or a template error: "not confirmed"
        return {"status": "unconfirmed", "model": model, "script": "",
                "reason": f"could not be generated ({type(exc).__name__}: {exc})"}, None
    status, reason = verdict(result, signature)
    return {"status": status, "model": model, "reason": reason,
            "script": script if status == "confirmed" else "", **verified_on(result)}, (script, result)


def _remeasure(cached: dict[str, Any], built: dict[str, Any] | None, settings: dict[str, Any],
               how: tuple[str, str], python: str, runner: Runner,
               timeout: float) -> tuple[dict[str, Any], tuple[str, dict[str, Any]] | None]:
    """A cached confirmed verdict run again so it can be shrunk; None in place of the run when its build is gone."""
    try:
        return cached, runner(built, settings, *how, python, timeout)
    except Exception:
        return cached, None


def _shrunk(built: dict[str, Any] | None, settings: dict[str, Any], how: tuple[str, str], python: str,
            signature: str, original: tuple[str, dict[str, Any]], budget: float, runner: Runner, timeout: float,
            progress: Callable[[str], None] | None) -> dict[str, Any]:
    """The verdict fields a shrink sets: the smallest verified script, and the shrink (None: could not start)."""
    if not built or not shrink.reproduces(original[1], signature):
        return {"shrink": None}
    small = shrink.minimise(built, settings, *how, python, signature, original=original, budget=budget,
                            runner=runner, timeout=timeout, progress=progress)
    return {"script": small.script, "shrink": {"build": small.build, "stats": small.stats}}


def _wants_shrink(cached: dict[str, Any], budget: float, python: str | None) -> bool:
    """A cached confirmed verdict that was never shrunk, now that shrinking is on."""
    return bool(budget > 0 and python and cached.get("status") == "confirmed" and "shrink" not in cached)
