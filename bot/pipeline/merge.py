"""Join the shard runs of one nightly (a CI matrix) into one run, so it is diffed and published once.

Shards may run on separate hosts with separate stores: each exports its run as
one file (`export_run`: the run with its environment, outcomes and the build data
its reproducers need, under a format version), and the publishing host imports
the files into its own store (`import_file`) before merging them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.core.files import write_atomic
from harness.core.model_build import ModelBuild
from harness.core.outcome import Outcome
from harness.core.record import RecordError
from state import history
from state import runs as runs_mod
from state.db import transaction

FORMAT = "flagsweep-run"
FORMAT_VERSION = 1
_RUN_FIELDS = ("kind", "status", "started_at", "finished_at", "reason", "nightly", "shard", "models", "configs",
               "base_settings", "options", "environment")


# the run document's schema: field -> the JSON types it may hold
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,), "status": (str,), "started_at": (str,), "finished_at": (str, type(None)),
    "reason": (str, type(None)), "nightly": (str, type(None)), "shard": (str, type(None)), "models": (list,),
    "configs": (dict,), "base_settings": (dict,), "options": (dict,), "environment": (dict,),
}


class MergeError(ValueError):
    """The runs cannot be merged; the message says why."""


def shard_of(label: str) -> tuple[int, int]:
    """(i, N) of a shard label "i/N" with 1 <= i <= N; MergeError naming the label otherwise."""
    i, slash, n = label.partition("/")
    if not (slash and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise MergeError(f"shard {label!r} is not i/N with 1 <= i <= N")
    return int(i), int(n)


def _typed(where: str, value: Any, types: tuple[type, ...]) -> None:
    if not isinstance(value, types):
        raise MergeError(f"{where}: expected {' or '.join('null' if t is type(None) else t.__name__ for t in types)}, "
                         f"got {type(value).__name__}")


def validate(doc: dict, path: Path) -> None:
    """Check a run document against its schema before anything of it is imported; MergeError names file and field."""
    run = doc.get("run")
    _typed(f"{path}: run", run, (dict,))
    for name, types in _RUN_TYPES.items():
        if name not in run:
            raise MergeError(f"{path}: run.{name} is missing")
        _typed(f"{path}: run.{name}", run[name], types)
    if not all(isinstance(m, str) and m for m in run["models"]):
        raise MergeError(f"{path}: run.models: expected a list of model names")
    if run["shard"] is not None:
        try:
            shard_of(run["shard"])
        except MergeError as exc:
            raise MergeError(f"{path}: run.{exc}") from None
    _typed(f"{path}: outcomes", doc.get("outcomes"), (list,))
    if not all(isinstance(o, dict) for o in doc["outcomes"]):
        raise MergeError(f"{path}: outcomes: expected a list of objects")
    _typed(f"{path}: builds", doc.get("builds"), (dict,))
    if not all(isinstance(b, dict) for b in doc["builds"].values()):
        raise MergeError(f"{path}: builds: expected an object of objects")


def check(shards: list[runs_mod.Run]) -> None:
    """Raise MergeError unless the runs are finished shards of one nightly with one config set and one torch."""
    if not shards:
        raise MergeError("no runs to merge")
    first = shards[0]
    for r in shards:
        if r.kind != "nightly" or not r.shard:
            raise MergeError(f"run {r.id} is not a shard of a nightly (kind={r.kind}, shard={r.shard})")
        if r.status != "finished":
            raise MergeError(f"run {r.id} is {r.status}, not finished")
        if r.nightly != first.nightly:
            raise MergeError(f"run {r.id} is nightly {r.nightly}, run {first.id} is {first.nightly}")
        if r.configs != first.configs or r.base_settings != first.base_settings:
            raise MergeError(f"run {r.id} swept other configs than run {first.id}")
        env_a, env_b = r.environment, first.environment
        if (env_a.torch_version, env_a.torch_git) != (env_b.torch_version, env_b.torch_git):
            raise MergeError(f"run {r.id} used torch {env_a.torch_version}, run {first.id} {env_b.torch_version}")
    labels = [r.shard for r in shards]
    if len(set(labels)) != len(labels):
        raise MergeError(f"the same shard appears twice: {sorted(labels)}")
    total = {shard_of(lbl)[1] for lbl in labels}
    if len(total) != 1:
        raise MergeError(f"shards of different splits: {sorted(labels)}")


def missing_shards(labels: list[str]) -> list[str]:
    """The shard labels of the split that `labels` (checked, of one split) do not cover, in order."""
    n = shard_of(labels[0])[1]
    have = {shard_of(lbl)[0] for lbl in labels}
    return [f"{i}/{n}" for i in range(1, n + 1) if i not in have]


def merge(conn: sqlite3.Connection, run_ids: list[int], *, python: str | None = None) -> int:
    """A new finished, finalized nightly run holding every shard's outcomes; the shards are marked `merged`.

    Marking them keeps run history from comparing the merged night with its own shards.
    python: this host's interpreter of the shards' torch (checked by the caller), recorded
    as the merged run's interpreter so its reproducers are verified here.
    """
    shards = []
    for rid in run_ids:
        run = runs_mod.get_run(conn, rid)
        if run is None:
            raise MergeError(f"no run {rid}")
        shards.append(run)
    check(shards)
    first = shards[0]
    missing = missing_shards([r.shard for r in shards])
    models = sorted({m for r in shards for m in r.models})
    with transaction(conn):
        options = dict(first.options)
        options["merged_from"] = [r.id for r in shards]
        if missing:
            options["missing_shards"] = missing
        environment = dataclasses.replace(first.environment, python=python) if python else first.environment
        new_id = runs_mod.create_run(conn, environment=environment, models=models, configs=first.configs,
                                     base_settings=first.base_settings, options=options, kind="nightly",
                                     nightly=first.nightly, shard=None)
        for r in shards:
            for outcome in runs_mod.outcomes(conn, r.id):
                runs_mod.record_outcome(conn, new_id, outcome)
            for build in runs_mod.model_data(conn, r.id).values():
                runs_mod.record_model(conn, new_id, build)
            runs_mod.mark_merged(conn, r.id, new_id)
        runs_mod.finish_run(conn, new_id)
        history.finalize_run(conn, new_id)      # merge ends the merged run, so merge finalizes it
    return new_id


def export_run(conn: sqlite3.Connection, run_id: int) -> dict[str, Any]:
    """One run as a self-contained document: the run, its environment, outcomes and stored builds."""
    run = runs_mod.get_run(conn, run_id)
    if run is None:
        raise MergeError(f"no run {run_id}")
    return {"format": FORMAT, "version": FORMAT_VERSION,
            "run": {**{k: getattr(run, k) for k in _RUN_FIELDS}, "environment": run.environment.to_dict()},
            "outcomes": [o.to_dict() for o in runs_mod.outcomes(conn, run_id)],
            "builds": {model: b.to_dict() for model, b in runs_mod.model_data(conn, run_id).items()}}


def write_export(conn: sqlite3.Connection, run_id: int, path: str | Path) -> Path:
    """Write `export_run` to `path` (atomically: a half-written file is never left under that name)."""
    return write_atomic(path, json.dumps(export_run(conn, run_id), sort_keys=True) + "\n")


def read_export(path: str | Path) -> dict[str, Any]:
    """A run document from a file; MergeError names the file and what is wrong with it."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise MergeError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise MergeError(f"{path}: not a flagsweep run export ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise MergeError(f"{path}: not a flagsweep run export")
    if doc.get("version") != FORMAT_VERSION:
        raise MergeError(f"{path}: export format version {doc.get('version')!r}; this flagsweep reads {FORMAT_VERSION}")
    validate(doc, path)
    return doc


def import_file(conn: sqlite3.Connection, path: str | Path) -> int:
    """Import one exported run into this store; its id here (the same id when imported before)."""
    doc = read_export(path)
    origin = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]
    try:
        outcomes = [Outcome.from_dict(o) for o in doc["outcomes"]]
    except (TypeError, ValueError, KeyError) as exc:
        raise MergeError(f"{path}: an outcome does not read ({exc})") from None
    try:
        builds = [ModelBuild.from_dict(b) for b in doc["builds"].values()]
    except RecordError as exc:
        raise MergeError(f"{path}: a build does not read ({exc})") from None
    return runs_mod.import_run(conn, doc["run"], outcomes, builds, origin)


def resolve_runs(conn: sqlite3.Connection, refs: list[str]) -> list[int]:
    """Run ids for `merge` arguments: a number is a run in this store, anything else an exported file."""
    return [int(ref) if ref.isdigit() else import_file(conn, ref) for ref in refs]
