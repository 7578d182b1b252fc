"""`zoo check`: build + eager forward of candidates in the engine's workers, cached, summarized.

The summary is pure (plain dicts in, the --json document out); the cache is a
JSON file keyed by model and fingerprint (its lock entry plus the code that
builds from it), so a result is reused only for the same build; a timeout is
reused only when the new limit is no larger than the one it ran under.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from harness.core.outcome import STRATA

CACHE_VERSION = 1
CACHE_NAME = "zoo-check.json"


def result_of(outcome: Any, fingerprint: str | None) -> dict:
    """One model's check result from its eager-mode Outcome."""
    cause = None
    if outcome.status != "ok":
        cause = short_cause(outcome.error_type, outcome.error_message)
    return {"model": outcome.model, "stratum": outcome.stratum, "status": outcome.status, "cause": cause,
            "text_only": bool(outcome.text_only), "fingerprint": fingerprint or outcome.fingerprint,
            "seconds": round((outcome.build_s or 0) + (outcome.compile_s or 0), 3)}


def result_of_entry(entry: dict) -> dict:
    """One model's check result as its lock entry records it (the coverage of the lock itself)."""
    return {"model": entry["model"], "stratum": entry.get("stratum"), "status": entry["status"],
            "cause": entry.get("cause"), "text_only": bool(entry.get("text_only")), "fingerprint": entry.get("hash"),
            "seconds": 0.0}


def reusable(hit: dict | None, fingerprint: str | None, timeout: float) -> bool:
    """Whether a cached result answers for this build now: same fingerprint, and a timeout only under no larger limit."""
    if not hit or not fingerprint or hit.get("fingerprint") != fingerprint:
        return False
    return hit.get("status") != "timeout" or timeout <= float(hit.get("timeout_s") or 0)


def short_cause(error_type: str | None, message: str | None) -> str:
    """A one-line cause: error type and the first line of the message, clipped."""
    lines = [ln.strip() for ln in (message or "").strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.endswith(":") and len(lines) > 1:  # "validation error for ...:" says what only on the next line
        first = f"{first} {lines[1]}"
    etype = (error_type or "").rsplit(".", 1)[-1]
    text = first if first.startswith(etype) or etype in ("create_error", "input_error") else f"{etype}: {first}"
    return text[:200]


def summarize(results: Iterable[dict]) -> dict:
    """The --json document: counts overall and per stratum, text-only fallbacks, failures."""
    results = sorted(results, key=lambda r: r["model"])
    by: dict[str, dict[str, int]] = {s: {"candidates": 0, "ok": 0} for s in STRATA}
    for r in results:
        entry = by.setdefault(r["stratum"] or "unknown", {"candidates": 0, "ok": 0})
        entry["candidates"] += 1
        entry["ok"] += r["status"] == "ok"
    return {
        "candidates": len(results),
        "ok": sum(r["status"] == "ok" for r in results),
        "by_stratum": by,
        "text_only": [r["model"] for r in results if r["text_only"]],
        "failures": [{"model": r["model"], "stratum": r["stratum"], "status": r["status"], "cause": r["cause"]}
                     for r in results if r["status"] != "ok"],
    }


def group_failures(failures: list[dict]) -> list[tuple[str, list[str]]]:
    """Failures grouped by (status, cause), biggest group first."""
    groups: dict[str, list[str]] = defaultdict(list)
    for f in failures:
        groups[f"{f['status']}: {f['cause']}"].append(f["model"])
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def load_cache(cache_dir: Path) -> dict[str, dict]:
    """Cached results by model; an unreadable or old-version cache is empty."""
    path = Path(cache_dir) / CACHE_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    return data.get("results", {})


def save_cache(cache_dir: Path, results: dict[str, dict]) -> None:
    """Write the cache atomically (a crash never leaves half a file)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".zoo-check.")
    with os.fdopen(fd, "w") as f:
        json.dump({"version": CACHE_VERSION, "results": results}, f, indent=1, sort_keys=True)
    os.replace(tmp, cache_dir / CACHE_NAME)


def run_eager(models: list[str], *, workers: int, timeout: float, python: str | None = None,
              progress: bool = True, extra_modules: list[str] | None = None) -> list[Any]:
    """Eager-mode outcomes from the engine (adapter: the one call into harness.engine.engine)."""
    from harness.engine.engine import SweepOptions, run_items

    options = SweepOptions(workers=workers, timeout=timeout, python=python, max_items_per_worker=25,
                           extra_modules=list(extra_modules or []))
    return run_items([(m, "-") for m in models], configs={"-": {}}, base_settings={}, options=options,
                     mode="eager", progress=progress)


def check(models: list[str], fingerprints: dict[str, str], *, cache_dir: Path | None, workers: int,
          timeout: float, use_cache: bool = True, progress: bool = True,
          extra_modules: list[str] | None = None) -> list[dict]:
    """Results for models: cached ones reused when their fingerprint matches, the rest run now."""
    cache = load_cache(cache_dir) if (cache_dir and use_cache) else {}
    results, todo = {}, []
    for m in models:
        hit = cache.get(m)
        if reusable(hit, fingerprints.get(m), timeout):
            results[m] = hit
        else:
            todo.append(m)
    if todo:
        for outcome in run_eager(todo, workers=workers, timeout=timeout, progress=progress, extra_modules=extra_modules):
            results[outcome.model] = {**result_of(outcome, fingerprints.get(outcome.model)), "timeout_s": timeout}
        if cache_dir:
            fresh = load_cache(cache_dir)
            fresh.update({m: r for m, r in results.items() if fingerprints.get(m)})
            save_cache(cache_dir, fresh)
    return [results[m] for m in models]
