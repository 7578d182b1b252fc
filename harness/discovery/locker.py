"""`flagsweep zoo lock`: discovery for every candidate in the engine's isolated workers, staged, merged into the lock.

The parent never imports torch: the scan runs in the workers' interpreter
(harness.discovery.enumerate.main), discovery runs in engine workers that
import harness.discovery.lockjob, and each finished class is staged as a file, so an
interrupted lock resumes where it stopped. Merging the stage into the lock file
is plain JSON work.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.zoo import lock
LOCKJOB = "harness.discovery.lockjob"
STAGE_ENV = "FLAGSWEEP_ZOO_STAGE"   # where lock workers stage entries (read by harness.discovery.lockjob)


@dataclass
class LockResult:
    """What one `zoo lock` did: classes locked now, reused from the stage, and the lock file written."""

    path: Path
    locked: list[str]
    resumed: list[str]
    entries: dict


def scan(python: str | None = None) -> dict:
    """The installed transformers' candidates and exclusions, scanned in the workers' interpreter."""
    from harness.engine.pool import worker_env

    proc = subprocess.run([python or sys.executable, "-c", "from harness.discovery.enumerate import main; main()"], capture_output=True,
                          text=True, env=worker_env(), timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"cannot scan transformers: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def staged(stage_dir: Path) -> dict[str, dict]:
    """Entries already staged (a resumed lock reuses them); unreadable files are ignored and redone."""
    out = {}
    for path in sorted(Path(stage_dir).glob("*.json")):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("model") == path.stem:
            out[path.stem] = entry
    return out


def run_discovery(models: list[str], stage_dir: Path, *, workers: int, timeout: float, python: str | None,
                  progress: bool) -> list[Any]:
    """Discovery for models in engine workers (adapter: the one call into harness.engine.engine); outcomes in order."""
    from harness.engine.engine import SweepOptions, run_items

    options = SweepOptions(workers=workers, timeout=timeout, python=python, max_items_per_worker=20,
                           extra_modules=[LOCKJOB])
    before = os.environ.get(STAGE_ENV)
    os.environ[STAGE_ENV] = str(stage_dir)  # inherited by the workers (harness.engine.pool.worker_env copies it)
    try:
        return run_items([(m, "-") for m in models], configs={"-": {}}, base_settings={}, options=options,
                         mode="eager", progress=progress)
    finally:
        if before is None:
            os.environ.pop(STAGE_ENV, None)
        else:
            os.environ[STAGE_ENV] = before


def unstaged_entry(outcome: Any, version: str, kind: str) -> dict:
    """The entry of a class whose worker staged nothing (timeout, killed): its status and cause, not dropped."""
    cause = (outcome.error_message or outcome.status or "").strip().splitlines()
    return lock.seal({"model": outcome.model, "config_class": "", "stratum": outcome.stratum or "decoder_llm",
                      "kind": kind, "status": outcome.status if outcome.status in lock.LOCK_STATUSES else "killed",
                      "cause": (cause[0] if cause else outcome.status)[:300], "config": {}, "spec": {},
                      "text_only": False, "applied": {"recipes": [], "fixups": [], "repairs": []},
                      "transformers": version})


def merge(path: Path, version: str, fresh: dict[str, dict], keep: set[str] | None, excluded: dict[str, str]) -> dict[str, dict]:
    """The lock's entries after this run: existing ones (only those in keep, if given) overlaid with fresh ones."""
    old = lock.read(path)["entries"] if path.exists() else {}
    entries = {m: e for m, e in old.items() if keep is None or m in keep}
    entries.update(fresh)
    lock.write(path, version, entries, excluded)
    return entries


def select(names: list[str], patterns: list[str], sample_n: int | None, seed: int, strata: dict[str, str]) -> list[str]:
    """Scanned class names matching patterns (all if none), optionally a stratified sample; UnknownModel if one matches nothing."""
    import fnmatch

    from harness.zoo.select import Candidate
    from harness.zoo.errors import UnknownModel
    from harness.zoo.select import sample

    chosen = names
    if patterns:
        chosen = []
        for pattern in patterns:
            hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
            if not hits:
                raise UnknownModel(f"{pattern!r} matches no model class of the installed transformers")
            chosen += [h for h in hits if h not in chosen]
    if sample_n:
        cands = [Candidate(n, strata.get(n, "unknown"), "") for n in chosen]
        chosen = [c.model for c in sample(cands, sample_n, seed)]
    return chosen


def _collect(selected: list[str], stage_dir: Path, outcomes: list[Any], version: str, kinds: dict) -> dict[str, dict]:
    st = staged(stage_dir)
    by_model = {o.model: o for o in outcomes}
    out = {}
    for m in selected:
        if m in st:
            out[m] = st[m]
        elif m in by_model:
            out[m] = unstaged_entry(by_model[m], version, kinds.get(m, ""))
    return out


def lock_corpus(*, patterns: list[str], sample_n: int | None, seed: int, workers: int, timeout: float,
                python: str | None, stage_root: Path, lock_dir: Path | None = None, fresh: bool = False,
                progress: bool = True) -> LockResult:
    """Discover the selected classes (all by default), stage them, merge them into the lock file of that transformers."""
    doc = scan(python)
    version, kinds = doc["transformers"], {c["model"]: c["kind"] for c in doc["candidates"]}
    path = lock.lock_path(version, lock_dir)
    old = lock.read(path)["entries"] if path.exists() else {}
    strata = {m: e.get("stratum") for m, e in old.items() if isinstance(e, dict)}
    selected = select(sorted(kinds), patterns, sample_n, seed, strata)
    stage_dir = Path(stage_root) / f"transformers-{version}"
    if fresh:
        for m in selected:
            (stage_dir / f"{m}.json").unlink(missing_ok=True)
    resumed = [m for m in selected if m in staged(stage_dir)]
    todo = [m for m in selected if m not in resumed]
    outcomes = run_discovery(todo, stage_dir, workers=workers, timeout=timeout, python=python,
                             progress=progress) if todo else []
    fresh_entries = _collect(selected, stage_dir, outcomes, version, kinds)
    full = not patterns and not sample_n
    entries = merge(path, version, fresh_entries, set(kinds) if full else None, doc["excluded"])
    for m in fresh_entries:
        (stage_dir / f"{m}.json").unlink(missing_ok=True)
    return LockResult(path, todo, resumed, entries)


def staleness(locked: dict[str, dict], scanned: list[str], rediscovered: dict[str, dict]) -> dict:
    """What `zoo lock --check` reports: classes added/removed, entries that no longer build, entries that would differ."""
    broken, differ = [], []
    for m, new in sorted(rediscovered.items()):
        old = locked.get(m)
        if old is None:
            continue
        if old.get("status") == "ok" and new.get("status") != "ok":
            broken.append({"model": m, "status": new.get("status"), "cause": new.get("cause")})
        elif old.get("hash") != new.get("hash"):
            fields = sorted(k for k in set(old) | set(new) if k != "hash" and old.get(k) != new.get(k))
            differ.append({"model": m, "fields": fields})
    added = sorted(set(scanned) - set(locked))
    removed = sorted(set(locked) - set(scanned))
    return {"added": added, "removed": removed, "no_longer_build": broken, "would_differ": differ,
            "checked": len(rediscovered), "stale": bool(added or removed or broken or differ)}


def check_lock(*, patterns: list[str], sample_n: int | None, seed: int, workers: int, timeout: float,
               python: str | None, stage_root: Path, lock_dir: Path | None = None, progress: bool = True) -> dict:
    """Rediscover the selected locked classes into a scratch stage and compare with the lock; nothing is written."""
    import shutil
    import tempfile

    doc = scan(python)
    version, scanned = doc["transformers"], [c["model"] for c in doc["candidates"]]
    path = lock.lock_path(version, lock_dir)
    locked = lock.read(path)["entries"] if path.exists() else {}
    strata = {m: e.get("stratum") for m, e in locked.items() if isinstance(e, dict)}
    selected = select(sorted(set(scanned) & set(locked)), patterns, sample_n, seed, strata)
    Path(stage_root).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="check-", dir=stage_root))
    try:
        outcomes = run_discovery(selected, scratch, workers=workers, timeout=timeout, python=python,
                                 progress=progress) if selected else []
        kinds = {m: e.get("kind", "") for m, e in locked.items() if isinstance(e, dict)}
        fresh = _collect(selected, scratch, outcomes, version, kinds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = staleness(locked, scanned, fresh)
    report["transformers"] = version
    return report
