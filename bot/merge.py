"""Join the shard runs of one nightly (a CI matrix) into one run, so it is diffed and published once."""
from __future__ import annotations

import sqlite3

from state import history
from state import runs as runs_mod
from state.db import transaction


class MergeError(ValueError):
    """The runs cannot be merged; the message says why."""


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
        if (env_a.get("torch_version"), env_a.get("torch_git")) != (env_b.get("torch_version"), env_b.get("torch_git")):
            raise MergeError(f"run {r.id} used torch {env_a.get('torch_version')}, run {first.id} "
                             f"{env_b.get('torch_version')}")
    labels = [r.shard for r in shards]
    if len(set(labels)) != len(labels):
        raise MergeError(f"the same shard appears twice: {sorted(labels)}")
    total = {lbl.split("/")[1] for lbl in labels}
    if len(total) != 1:
        raise MergeError(f"shards of different splits: {sorted(labels)}")


def merge(conn: sqlite3.Connection, run_ids: list[int]) -> int:
    """A new finished, finalized nightly run holding every shard's outcomes; the shards are marked `merged`.

    Marking them keeps run history from comparing the merged night with its own shards.
    """
    shards = []
    for rid in run_ids:
        run = runs_mod.get_run(conn, rid)
        if run is None:
            raise MergeError(f"no run {rid}")
        shards.append(run)
    check(shards)
    first = shards[0]
    n = int(first.shard.split("/")[1])
    missing = sorted(set(range(1, n + 1)) - {int(r.shard.split("/")[0]) for r in shards})
    models = sorted({m for r in shards for m in r.models})
    with transaction(conn):
        options = dict(first.options)
        options["merged_from"] = [r.id for r in shards]
        if missing:
            options["missing_shards"] = missing
        new_id = runs_mod.create_run(conn, environment=first.environment, models=models, configs=first.configs,
                                     base_settings=first.base_settings, options=options, kind="nightly",
                                     nightly=first.nightly, shard=None)
        for r in shards:
            for outcome in runs_mod.outcomes(conn, r.id):
                runs_mod.record_outcome(conn, new_id, outcome)
            runs_mod.mark_merged(conn, r.id, new_id)
        runs_mod.finish_run(conn, new_id)
        history.finalize_run(conn, new_id)      # merge ends the merged run, so merge finalizes it
    return new_id
