"""`zoo check`: build + eager forward of candidates in the engine's workers, kept in the store, summarized.

The summary is pure (plain dicts in, the --json document out). Results are kept in
the store (state/zoo.py) by model with the fingerprint of the build they checked
(its lock entry plus the code that builds from it), so a result is reused only for
the same build; a timeout is reused only when the new limit is no larger than the
one it ran under.
"""
from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any, Iterable

from harness.core.outcome import STRATA
from state import zoo as kept


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


def reusable(hit: dict | None, fingerprint: str | None, timeout: float, where: dict | None = None) -> bool:
    """Whether a cached result answers for this build now: same fingerprint, checked where this check runs (the
    interpreter and device: `where`), and a timeout only under no larger limit."""
    if not hit or not fingerprint or hit.get("fingerprint") != fingerprint:
        return False
    if where is not None and hit.get("where") != where:
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


def where_checked(python: str | None, device: str) -> dict:
    """Where a check runs, kept with its result: the workers' interpreter (None: the bot's own) and device."""
    return {"python": python, "device": device}


def reused(conn: sqlite3.Connection | None, fingerprints: dict[str, str], timeout: float,
           where: dict | None = None) -> dict[str, dict]:
    """The kept results that answer for these builds now (checked `where` this check runs), by model (none
    without a store)."""
    results = kept.check_results(conn) if conn is not None else {}
    return {m: r for m, r in results.items() if reusable(r, fingerprints.get(m), timeout, where)}


def check(models: list[str], fingerprints: dict[str, str], *, conn: sqlite3.Connection | None, workers: int,
          timeout: float, use_kept: bool = True, progress: bool = True,
          extra_modules: list[str] | None = None, python: str | None = None, device: str = "cpu") -> list[dict]:
    """Results for models: kept ones reused when their fingerprint matches and they were checked under the same
    interpreter and device, the rest run now (in workers of `python`, on `device`) and kept.

    conn: the store (None: nothing reused or kept). use_kept=False reruns every model.
    """
    from harness.engine.engine import eager_check
    from harness.core.options import SweepOptions

    where = where_checked(python, device)
    results = reused(conn, fingerprints, timeout, where) if use_kept else {}
    results = {m: results[m] for m in models if m in results}
    todo = [m for m in models if m not in results]
    if todo:
        options = SweepOptions(workers=workers, timeout=timeout, max_items_per_worker=25, python=python,
                               device=device, extra_modules=list(extra_modules or []))
        for outcome in eager_check(todo, options=options, progress=progress):
            results[outcome.model] = {**result_of(outcome, fingerprints.get(outcome.model)), "timeout_s": timeout,
                                      "where": where}
        if conn is not None:
            kept.record_checks(conn, [results[m] for m in todo if fingerprints.get(m)])
    return [results[m] for m in models]
