"""Verified reproducers: a tracking issue embeds a script only if it was run and seen to fail the same way.

For each tracking issue the smallest affected model (fewest ops, then fewest
baseline graphs, then name) gets a standalone script from the zoo's generator,
run in a fresh interpreter. That is slow (a new Python, a compile), so verdicts
are cached per (config, signature, model, fingerprint) in a small versioned
JSON file beside the store.
"""
from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable

from harness.outcome import Effect, Outcome

log = logging.getLogger(__name__)
CACHE_VERSION = 1
Runner = Callable[[str, dict[str, Any], dict[str, Any], str, str, str, float], tuple[str, dict[str, Any]]]


def _harness_runner(model: str, config_settings: dict[str, Any], base_settings: dict[str, Any], backend: str,
                    device: str, python: str, timeout: float) -> tuple[str, dict[str, Any]]:
    """Adapter over the zoo area's generator and runner (kept in one place on purpose)."""
    from harness import repro

    script = repro.render_script(model, config_settings, base_settings, backend, device)
    return script, repro.run_script(script, python, timeout)


def pick_model(effects: list[Effect], outcomes: dict[tuple[str, str], Outcome]) -> Effect:
    """The smallest affected model: fewest ops, then fewest baseline graphs, then name."""
    def size(e: Effect) -> tuple:
        base = outcomes.get((e.model, "baseline"))
        ops = base.ops if base and base.ops is not None else float("inf")
        return (ops, e.baseline_graphs if e.baseline_graphs is not None else float("inf"), e.model)
    return min(effects, key=size)


def verdict(result: dict[str, Any], signature: str) -> tuple[str, str]:
    """(status, reason) for one script result: confirmed only when it failed with the same signature."""
    status = result.get("status")
    seen = result.get("signature") or status
    if status not in (None, "ok") and seen == signature:
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
    def key(config: str, signature: str, model: str, fingerprint: str | None) -> str:
        return hashlib.sha256(json.dumps([config, signature, model, fingerprint]).encode()).hexdigest()[:24]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": self.data}, sort_keys=True))
            tmp.replace(self.path)


def verify_all(groups: dict[str, tuple[str, str, list[Effect]]], outcomes: list[Outcome], run: dict[str, Any], *,
               cache_path: Path | None, python: str | None = None, timeout: float = 600.0,
               runner: Runner | None = None, progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """{tracking key: verdict} for each (config, signature) group; verdicts are cached."""
    runner = runner or _harness_runner
    python = python or sys.executable
    cache = Cache(cache_path)
    by_item = {(o.model, o.config): o for o in outcomes}
    options = run.get("options") or {}
    out: dict[str, dict[str, Any]] = {}
    for n, (key, (config, signature, effects)) in enumerate(sorted(groups.items()), 1):
        chosen = pick_model(effects, by_item)
        fingerprint = getattr(by_item.get((chosen.model, config)), "fingerprint", None)
        ckey = Cache.key(config, signature, chosen.model, fingerprint)
        cached = cache.get(ckey)
        if cached is not None:
            out[key] = cached
            continue
        if progress:
            progress(f"reproducer {n}/{len(groups)}: {chosen.model} under {config}")
        try:
            script, result = runner(chosen.model, (run.get("configs") or {}).get(config, {}), run.get("base_settings") or {},
                                    options.get("backend", "count"), options.get("device", "cpu"), python, timeout)
        except Exception as exc:  # the generator is another area's code: a failure there is "not confirmed"
            out[key] = {"status": "unconfirmed", "model": chosen.model, "script": "",
                        "reason": f"could not be generated ({type(exc).__name__}: {exc})"}
            continue                  # not cached: it may work once the generator is fixed
        status, reason = verdict(result, signature)
        out[key] = {"status": status, "model": chosen.model, "reason": reason,
                    "script": script if status == "confirmed" else ""}
        cache.put(ckey, out[key])
    return out
