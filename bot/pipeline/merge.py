"""Join the shard runs of one nightly (a CI matrix) into one run per mode, so each mode is diffed and published once.

Shards may run on separate hosts with separate stores: each exports each mode's run as
one file (`export_run`: the run with its environment, outcomes and the build data
its reproducers need, under a format version; `export_path` names another mode's file), and the publishing host
imports the files into its own store (`import_file`) before merging them. A night of several modes is a shard set
per mode (`merge_modes`): every shard of the set swept the same modes, or the set is refused in one line.

A file is foreign input, read as strictly as a webhook's payload (`read_export`): an unknown key anywhere (the top
level, `run`, `run.options`, the accuracy options), a value out of its range or outside its closed set, an outcome
without its calls, a run that does not name the torch it ran: each is one line naming the file and the field, and
every file is read before any is imported, so nothing of a refused file reaches the store.

A shard never chooses code for the merging host: the flake confirmation's workers import a run's
`extra_modules` on this host (the one holding the GitHub token), so a run merged here imports none but those
this host's own settings name (`modules`; none today: only `flagsweep sweep --import` names any, never a nightly).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from harness.core.files import write_atomic
from harness.core.model_build import ModelBuild
from harness.core.modes import Mode
from harness.core.outcome import Outcome
from harness.core.record import RecordError
from harness.core.run_environment import RunEnvironment
from harness.engine.configs import ConfigError, check_syntax
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

_TOP = ("format", "version", "run", "outcomes", "builds")
# Every field an export writes; those the stored form leaves out when unset (Outcome.UNSET_LEFT_OUT) are optional.
_OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(Outcome) if f.name not in Outcome.UNSET_LEFT_OUT)


class MergeError(ValueError):
    """The runs cannot be merged; the message says why."""


@dataclass(frozen=True)
class Shard:
    """An export file, read and checked (`read_export`); nothing of it is stored yet."""

    path: Path
    run: runs_mod.ExportedRun
    outcomes: list[Outcome]
    builds: list[ModelBuild]
    origin: str                 # a hash of the document: importing the same file twice keeps one run


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
    unknown = sorted(set(doc) - set(_TOP))
    if unknown:
        raise MergeError(f"{path}: unknown key {unknown[0]!r} at the top level")
    run = doc.get("run")
    _typed(f"{path}: run", run, (dict,))
    unknown = sorted(set(run) - set(_RUN_TYPES))
    if unknown:
        raise MergeError(f"{path}: run.{unknown[0]}: unknown field")
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
    _torch_named(run["environment"], path)
    _typed(f"{path}: outcomes", doc.get("outcomes"), (list,))
    if not all(isinstance(o, dict) for o in doc["outcomes"]):
        raise MergeError(f"{path}: outcomes: expected a list of objects")
    _typed(f"{path}: builds", doc.get("builds"), (dict,))
    if not all(isinstance(b, dict) for b in doc["builds"].values()):
        raise MergeError(f"{path}: builds: expected an object of objects")


def _torch_named(environment: dict, path: Path) -> None:
    """A shard names the torch it ran (the merge compares shards by it): said apart from a mismatch."""
    if "torch_version" not in environment or environment["torch_version"] is None:
        raise MergeError(f"{path}: run.environment.torch_version is missing: a shard names the torch it ran")
    version = environment["torch_version"]
    if not isinstance(version, str) or not version.strip():
        raise MergeError(f"{path}: run.environment.torch_version {version!r} is not a torch version string")


def _run(data: dict, path: Path, modules: Sequence[str]) -> runs_mod.ExportedRun:
    """The run record, its configs and options read strictly (closed sets, ranges, no unknown key)."""
    try:
        run = runs_mod.ExportedRun.from_dict(data)
    except RecordError as exc:
        raise MergeError(f"{path}: {exc}") from None
    refused = modules_refusal(run, modules)
    if refused:
        raise MergeError(f"{path}: {refused}")
    for name in ("started_at", "finished_at"):
        stamp = getattr(run, name)
        if stamp is not None and not _iso_time(stamp):
            raise MergeError(f"{path}: run.{name} {stamp!r} is not an ISO 8601 time")
    try:
        check_syntax(run.base_settings, "run.base_settings")
        for name, settings in run.configs.items():
            check_syntax(settings, f"run.configs.{name}")
    except ConfigError as exc:
        raise MergeError(f"{path}: {exc}") from None
    return run


def modules_refusal(run: runs_mod.ExportedRun | runs_mod.Run, modules: Sequence[str]) -> str | None:
    """Why a shard may not be merged here for the modules its workers imported (None: only those in `modules`,
    this host's own settings, which the merged run's confirmation workers import)."""
    foreign = [m for m in run.options.sweep.extra_modules if m not in modules]
    if not foreign:
        return None
    return (f"run.options.extra_modules names {foreign[0]!r}, a module this host's settings do not import: "
            f"a shard never chooses code for the merging host")


def _iso_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _outcomes(items: list[dict], run: runs_mod.ExportedRun, path: Path) -> list[Outcome]:
    """Every outcome whole (each field written, its calls included), read strictly, of the run's models and configs."""
    found = []
    for n, item in enumerate(items, 1):
        missing = [f for f in _OUTCOME_FIELDS if f not in item]
        where = f"{path}: outcome {n}"
        if missing:
            raise MergeError(f"{where}: missing field {missing[0]!r} (an export writes every field)")
        try:
            outcome = Outcome.from_dict(item)
        except (TypeError, ValueError) as exc:
            raise MergeError(f"{where}: an outcome does not read ({exc})") from None
        if outcome.model not in run.models or outcome.config not in run.configs:
            raise MergeError(f"{where}: {outcome.model} under {outcome.config} is not an item of the run")
        found.append(outcome)
    return found


def _builds(builds: dict[str, dict], path: Path) -> list[ModelBuild]:
    try:
        found = {model: ModelBuild.from_dict(b) for model, b in builds.items()}
    except (TypeError, ValueError) as exc:
        raise MergeError(f"{path}: a build does not read ({exc})") from None
    for model, build in found.items():
        if build.model != model:
            raise MergeError(f"{path}: builds.{model} is the build of {build.model!r}")
    return list(found.values())


def check(shards: list[runs_mod.Run]) -> None:
    """Raise MergeError unless the runs are finished shards of one nightly with one config set, one torch, one mode."""
    check_night(shards)
    modes = {r.options.sweep.mode for r in shards}
    if len(modes) > 1:
        raise MergeError(f"runs of modes {', '.join(sorted(m.name for m in modes))}: one merge joins one mode's shards "
                         "(merge_modes joins each mode's)")
    labels = [r.shard for r in shards]
    if len(set(labels)) != len(labels):
        raise MergeError(f"the same shard appears twice: {sorted(labels)}")


def check_night(shards: list[runs_mod.Run]) -> None:
    """Raise MergeError unless the runs are finished shards of one nightly, one config set, one torch, one split."""
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
        if not env_a.torch_version:
            raise MergeError(f"run {r.id} does not name the torch it ran (its environment has no torch_version)")
        if (env_a.torch_version, env_a.torch_git) != (env_b.torch_version, env_b.torch_git):
            raise MergeError(f"run {r.id} used torch {env_a.torch_version}, run {first.id} {env_b.torch_version}")
    total = {shard_of(r.shard)[1] for r in shards}
    if len(total) != 1:
        raise MergeError(f"shards of different splits: {sorted(r.shard for r in shards)}")


def mode_sets(shards: list[runs_mod.Run]) -> list[list[runs_mod.Run]]:
    """The shards grouped by mode (the default mode first, then by name), each a shard set `check` accepts; MergeError
    when the shards disagree about the night's modes: a shard without a run of a mode another shard swept."""
    check_night(shards)
    sets: dict[Mode, list[runs_mod.Run]] = {}
    for r in shards:
        sets.setdefault(r.options.sweep.mode, []).append(r)
    by_label: dict[str, set[Mode]] = {}
    for r in shards:
        by_label.setdefault(r.shard, set()).add(r.options.sweep.mode)
    for label, modes in sorted(by_label.items()):
        lacking = sorted(m.name for m in sets if m not in modes)
        if lacking:
            raise MergeError(f"shard {label} has no run in mode {', '.join(lacking)}, which other shards swept: "
                             "a shard set holds every mode's run of each shard")
    ordered = sorted(sets, key=lambda m: (not m.is_default, m.name))
    for mode in ordered:
        check(sets[mode])
    return [sets[m] for m in ordered]


def missing_shards(labels: list[str]) -> list[str]:
    """The shard labels of the split that `labels` (checked, of one split) do not cover, in order."""
    n = shard_of(labels[0])[1]
    have = {shard_of(lbl)[0] for lbl in labels}
    return [f"{i}/{n}" for i in range(1, n + 1) if i not in have]


def merge(conn: sqlite3.Connection, run_ids: list[int], *, python: str | None = None,
          modules: Sequence[str] = ()) -> int:
    """A new finished, finalized nightly run holding every shard's outcomes; the shards are marked `merged`.

    Marking them keeps run history from comparing the merged night with its own shards.
    python: this host's interpreter of the shards' torch (checked by the caller), recorded
    as the merged run's interpreter so its reproducers are verified here. modules: the worker modules this host's
    settings import; a shard naming another is refused (`modules_refusal`).
    """
    shards = _stored(conn, run_ids, modules)
    check(shards)
    return _joined(conn, shards, python)


def merge_modes(conn: sqlite3.Connection, run_ids: list[int], *, python: str | None = None,
                modules: Sequence[str] = ()) -> list[int]:
    """`merge` for each mode's shard set (`mode_sets`: the default mode first), all or none: the merged runs' ids."""
    sets = mode_sets(_stored(conn, run_ids, modules))
    with transaction(conn):
        return [_joined(conn, shards, python) for shards in sets]


def _stored(conn: sqlite3.Connection, run_ids: list[int], modules: Sequence[str]) -> list[runs_mod.Run]:
    """The stored runs of `run_ids`; MergeError for one that is not there or names a module this host does not import."""
    shards = []
    for rid in run_ids:
        run = runs_mod.get_run(conn, rid)
        if run is None:
            raise MergeError(f"no run {rid}")
        refused = modules_refusal(run, modules)
        if refused:
            raise MergeError(f"run {rid}: {refused}")
        shards.append(run)
    return shards


def _joined(conn: sqlite3.Connection, shards: list[runs_mod.Run], python: str | None) -> int:
    """The merged run of one checked shard set."""
    first = shards[0]
    missing = missing_shards([r.shard for r in shards])
    models = sorted({m for r in shards for m in r.models})
    with transaction(conn):
        options = dataclasses.replace(first.options, merged_from=[r.id for r in shards], missing_shards=missing or None)
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
            "run": {**{k: getattr(run, k) for k in _RUN_FIELDS}, "options": run.options.to_dict(),
                    "environment": run.environment.to_dict()},
            "outcomes": [o.to_dict() for o in runs_mod.outcomes(conn, run_id)],
            "builds": {model: b.to_dict() for model, b in runs_mod.model_data(conn, run_id).items()}}


def export_path(target: str | Path, mode: Mode) -> Path:
    """Where `nightly --export target` writes the run of `mode`: `target` for the default mode; another mode's name
    goes before the name's suffixes (shard-1.flagsweep.json: shard-1.train-bf16.flagsweep.json), so one glob finds
    every mode's file."""
    target = Path(target)
    if mode.is_default:
        return target
    head, dot, rest = target.name.partition(".")
    return target.with_name(f"{head}.{mode.name}{dot}{rest}")


def write_export(conn: sqlite3.Connection, run_id: int, path: str | Path) -> Path:
    """Write `export_run` to `path` (atomically: a half-written file is never left under that name)."""
    return write_atomic(path, json.dumps(export_run(conn, run_id), sort_keys=True) + "\n")


def export_night(conn: sqlite3.Connection, run_ids: list[int], target: str | Path) -> list[Path]:
    """Write each of a night's runs (one per mode) to its `export_path`; the files written, in order."""
    written = []
    for run_id in run_ids:
        run = runs_mod.get_run(conn, run_id)
        if run is None:
            raise MergeError(f"no run {run_id}")
        written.append(write_export(conn, run_id, export_path(target, run.options.sweep.mode)))
    return written


def read_export(path: str | Path, modules: Sequence[str] = ()) -> Shard:
    """A run document from a file, read and checked whole; MergeError names the file and what is wrong with it
    (`modules`: the worker modules this host's settings import, the only ones a shard's run may name)."""
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
    run = _run(doc["run"], path, modules)
    origin = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]
    return Shard(path, run, _outcomes(doc["outcomes"], run, path), _builds(doc["builds"], path), origin)


def import_file(conn: sqlite3.Connection, path: str | Path, modules: Sequence[str] = ()) -> int:
    """Import one exported run into this store; its id here (the same id when imported before)."""
    return import_shard(conn, read_export(path, modules))


def import_shard(conn: sqlite3.Connection, shard: Shard) -> int:
    """Store a file already read; its run's id here."""
    return runs_mod.import_run(conn, shard.run, shard.outcomes, shard.builds, shard.origin)


def read_files(refs: list[str], modules: Sequence[str] = ()) -> dict[str, Shard]:
    """Every `merge` argument that names a file, read and checked before anything is imported."""
    return {ref: read_export(ref, modules) for ref in refs if not ref.isdigit()}


def resolve_runs(conn: sqlite3.Connection, refs: list[str], shards: dict[str, Shard] | None = None) -> list[int]:
    """Run ids for `merge` arguments: a number is a run in this store, anything else an exported file (all read
    first, then imported together: a refused file leaves nothing of the others either)."""
    shards = read_files(refs) if shards is None else shards
    with transaction(conn):
        return [int(ref) if ref.isdigit() else import_shard(conn, shards[ref]) for ref in refs]


def environment_of(conn: sqlite3.Connection, ref: str, shards: dict[str, Shard]) -> RunEnvironment:
    """The environment of a `merge` argument: a stored run's, or its file's."""
    if not ref.isdigit():
        return shards[ref].run.environment
    run = runs_mod.get_run(conn, int(ref))
    if run is None:
        raise MergeError(f"no run {ref}")
    return run.environment
