"""`flagsweep zoo lock`: discovery for every candidate in the engine's isolated workers, merged into the lock.

The parent never imports torch: the scan runs in the workers' interpreter (the
engine calls harness.discovery.enumerate.scan_document there), and discovery runs in
engine workers as a job (harness.discovery.lockjob.lock_entry) whose answer is the
class's entry. Each finished entry is kept in the store until the lock file has it,
so an interrupted lock resumes where it stopped. Merging into the lock file is plain
JSON work, into the lock directory the caller names.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from harness.engine import engine
from harness.engine.interpreter import CallFailed, call
from harness.core.options import SweepOptions
from harness.zoo import lock, second
from harness.zoo.mode_record import FIELD as MODES
from state import zoo as kept

LOCK_JOB = "harness.discovery.lockjob:lock_entry"
REVERIFY_JOB = "harness.discovery.lockjob:reverify_entry"
MODES_JOB = "harness.discovery.lockjob:modes_entry"    # `--modes-probe`: the modes record alone probed again
SCAN = "harness.discovery.enumerate:scan_document"


class ScanFailed(RuntimeError):
    """The workers' interpreter could not list the installed transformers' classes; one line says why."""


@dataclass
class LockResult:
    """What one `zoo lock` did: classes locked now, reused from an interrupted lock, the lock file written, and
    the good entries this lock found failing (each says whether the good entry was kept)."""

    path: Path
    locked: list[str]
    resumed: list[str]
    entries: dict
    downgraded: list[dict]


def scan(python: str | None = None) -> dict:
    """The installed transformers' candidates and exclusions, scanned in the workers' interpreter."""
    try:
        return call(SCAN, python=python, timeout=1800)
    except CallFailed as exc:
        raise ScanFailed(f"cannot scan transformers in {exc.python}: {exc.why}") from None


def discover_entries(models: list[str], version: str, strata: dict[str, str], *, workers: int, timeout: float,
                     python: str | None, progress: bool, job: str = LOCK_JOB) -> Iterator[tuple[dict, bool]]:
    """(entry, answered) per model as its worker finishes the lock job, in finishing order.

    A class whose worker gave no entry (timeout, killed) gets one saying so (answered False), not dropped,
    for this transformers version and in the stratum the lock already knows for it (strata), if any.
    """
    options = SweepOptions(workers=workers, timeout=timeout, python=python, max_items_per_worker=20)
    for result in engine.run_job(job, models, options=options, progress=progress):
        hollow = not_an_entry(result, version) if result.status == "ok" else None
        if result.status == "ok" and hollow is None:
            yield result.data, True
        else:
            failed = engine.JobResult(result.model, "error", None, hollow) if hollow else result
            yield unanswered_entry(failed, version, strata.get(result.model)), False


def not_an_entry(result: engine.JobResult, version: str) -> str | None:
    """Why a worker's answer is not a lock entry (nothing staged, a hollow or broken entry), or None when it is one."""
    from harness.zoo.errors import CorruptEntry

    try:
        lock.check_entry(result.model, result.data, version)
    except CorruptEntry as exc:
        return f"the worker's answer is no lock entry: {exc}"
    return None


def unanswered_entry(result: engine.JobResult, version: str, stratum: str | None) -> dict:
    """The entry of a class whose worker gave no entry (timeout, killed, the job broke): its status and cause."""
    from harness.discovery.enumerate import kind_of, stratum_fallback

    status = result.status if result.status in lock.LOCK_STATUSES else "create_error"
    return lock.seal({"model": result.model, "config_class": "", "stratum": stratum or stratum_fallback(result.model),
                      "kind": kind_of(result.model), "status": status, "cause": (result.error or status)[:300],
                      "config": {}, "spec": {}, "text_only": False,
                      "applied": {"recipes": [], "fixups": [], "repairs": []}, "transformers": version})


def with_modeling(entries: dict[str, dict], doc: dict) -> dict[str, dict]:
    """The entries, each with the hash of its class's modeling source from the scan (doc), sealed again."""
    hashes = {c["model"]: c.get("modeling") for c in doc["candidates"]}
    return {m: lock.seal({**e, "modeling": hashes[m]}) if hashes.get(m) else e for m, e in entries.items()}


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

    from harness.zoo.errors import UnknownModel
    from harness.zoo.select import Candidate, sample

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


def _locked(path: Path) -> tuple[dict[str, dict], dict[str, str]]:
    """The entries of the lock file at path (none if there is none yet), and each one's stratum."""
    entries = lock.read(path)["entries"] if path.exists() else {}
    return entries, _strata(entries)


def _strata(entries: dict[str, dict]) -> dict[str, str]:
    """Each locked entry's stratum."""
    return {m: e.get("stratum") for m, e in entries.items() if isinstance(e, dict)}


def lock_corpus(conn: sqlite3.Connection, *, patterns: list[str], sample_n: int | None, seed: int, workers: int,
                timeout: float, python: str | None, lock_dir: Path, fresh: bool = False,
                progress: bool = True) -> LockResult:
    """Discover the selected classes (all by default) and merge their entries into the lock file in lock_dir."""
    doc = scan(python)
    version, kinds = doc["transformers"], {c["model"]: c["kind"] for c in doc["candidates"]}
    path = lock.lock_path(version, Path(lock_dir).resolve())
    old, strata = _locked(path)
    selected = select(sorted(kinds), patterns, sample_n, seed, strata)
    if fresh:
        kept.forget_lock_entries(conn, version, selected)
    done = kept.lock_entries(conn, version)
    resumed = [m for m in selected if m in done]
    todo = [m for m in selected if m not in done]
    unanswered = set()
    for entry, answered in discover_entries(todo, version, strata, workers=workers, timeout=timeout,
                                            python=python, progress=progress):
        if answered:   # kept until the lock file has it; a class whose worker died is tried again on resume
            kept.keep_lock_entry(conn, version, entry)
        else:
            unanswered.add(entry["model"])
        done[entry["model"]] = entry
    fresh_entries = with_modeling({m: done[m] for m in selected if m in done}, doc)
    downgraded = downgrades(old, fresh_entries, unanswered)
    for d in downgraded:
        if d["kept"]:
            fresh_entries[d["model"]] = old[d["model"]]
    full = not patterns and not sample_n
    entries = merge(path, version, fresh_entries, set(kinds) if full else None, doc["excluded"])
    kept.forget_lock_entries(conn, version, fresh_entries)
    return LockResult(path, todo, resumed, entries, downgraded)


def reverify_corpus(conn: sqlite3.Connection, *, patterns: list[str], sample_n: int | None, seed: int, workers: int,
                    timeout: float, python: str | None, progress: bool = True, lock_dir: Path = lock.LOCK_DIR,
                    job: str = REVERIFY_JOB) -> LockResult:
    """Verify the package lock's good entries again (the selected ones, all by default) as `zoo lock` verifies a new
    one, without discovery: after the verify rule changed (the second input spec it seals, say). An entry whose
    worker gave no answer keeps its locked self; an answered failure replaces it and is reported. The workers read
    the package's lock (what sweeps build from); `lock_dir` is where the result is written: the package's, or a
    copy of it. `job` MODES_JOB probes the modes record alone (harness.zoo.mode_record), changing nothing else.
    Each answered entry is kept in the store as it comes (state.zoo), so a run stopped halfway resumes with what is
    left; a kept entry is reused only while the lock holds the entry it began from."""
    path = lock.lock_path(lock.installed_transformers(), Path(lock_dir))
    doc = lock.read(path) if path.exists() else {"entries": {}}
    old, strata = doc["entries"], _strata(doc["entries"])
    if not old:
        raise lock.LockError(f"no lock for the installed transformers in {Path(lock_dir).name}: run `flagsweep zoo lock`")
    version = doc["transformers"]
    good = sorted(m for m, e in old.items() if isinstance(e, dict) and e.get("status") == "ok")
    selected = select(good, patterns, sample_n, seed, strata)
    resumed = {m: k.entry for m, k in kept.probe_entries(conn, job, version).items()
               if m in selected and k.source == old[m]["hash"]}
    todo = [m for m in selected if m not in resumed]
    fresh, unanswered = dict(resumed), set()
    for entry, answered in discover_entries(todo, version, strata, workers=workers, timeout=timeout,
                                            python=python, progress=progress, job=job):
        model = entry["model"]
        if answered:
            kept.keep_probe_entry(conn, job, version, kept.KeptProbe(old[model]["hash"], entry))
        else:
            unanswered.add(model)
        fresh[model] = entry if answered else old[model]
    downgraded = downgrades(old, fresh, set())
    entries = merge(path, version, fresh, None, doc["excluded"])
    kept.forget_probe_entries(conn, job, version, selected)
    return LockResult(path, todo, sorted(resumed), entries, downgraded + [{"model": m, "status": "unanswered", "cause":
                                                                           "the worker gave no answer", "kept": True}
                                                                          for m in sorted(unanswered)])


def downgrades(old: dict[str, dict], fresh: dict[str, dict], unanswered: set[str]) -> list[dict]:
    """Good (ok) locked entries this lock found failing: model, new status and cause, and whether the good entry is
    kept (it is when the worker gave no answer: a timeout or a killed worker says nothing about the class)."""
    out = []
    for m in sorted(fresh):
        before = old.get(m)
        if isinstance(before, dict) and before.get("status") == "ok" and fresh[m]["status"] != "ok":
            out.append({"model": m, "status": fresh[m]["status"], "cause": fresh[m]["cause"], "kept": m in unanswered})
    return out


def corrupt_entries(locked: dict[str, dict], version: str) -> list[dict]:
    """The locked entries that fail the checks a sweep applies (hand edits, hollow entries, a malformed second
    input spec): model, field and why."""
    return second.corrupt_entries(locked, version)


def staleness(locked: dict[str, dict], scanned: list[str], rediscovered: dict[str, dict],
              corrupt: list[dict] | None = None) -> dict:
    """What `zoo lock --check` reports: classes added/removed, corrupt entries, entries that no longer build or would differ."""
    broken, differ, corrupt = [], [], list(corrupt or [])
    for m, new in sorted(rediscovered.items()):
        old = locked.get(m)
        if old is None:
            continue
        if old.get("status") == "ok" and new.get("status") != "ok":
            broken.append({"model": m, "status": new.get("status"), "cause": new.get("cause")})
        elif old.get("hash") != new.get("hash"):
            # an entry locked before the modes record is not stale for lacking it (`--modes-probe` fills it)
            fields = sorted(k for k in set(old) | set(new) if k != "hash" and old.get(k) != new.get(k)
                            and not (k == MODES and k not in old))
            if fields:
                differ.append({"model": m, "fields": fields})
    added = sorted(set(scanned) - set(locked))
    removed = sorted(set(locked) - set(scanned))
    return {"added": added, "removed": removed, "corrupt": corrupt, "no_longer_build": broken, "would_differ": differ,
            "checked": len(rediscovered), "stale": bool(added or removed or corrupt or broken or differ)}


def check_lock(*, patterns: list[str], sample_n: int | None, seed: int, workers: int, timeout: float,
               python: str | None, lock_dir: Path, progress: bool = True) -> dict:
    """Rediscover the selected locked classes and compare with the lock file in lock_dir; nothing is written."""
    doc = scan(python)
    version, scanned = doc["transformers"], [c["model"] for c in doc["candidates"]]
    locked, strata = _locked(lock.lock_path(version, Path(lock_dir).resolve()))
    wanted = select(sorted(scanned), patterns, None, seed, strata)    # a class missing from the lock is stale, not unknown
    selected = select([m for m in wanted if m in locked], [], sample_n, seed, strata)
    fresh = {e["model"]: e for e, _ in discover_entries(selected, version, strata, workers=workers,
                                                        timeout=timeout, python=python, progress=progress)}
    report = staleness(locked, scanned, with_modeling(fresh, doc), corrupt_entries(locked, version))
    report["transformers"] = version
    return report
