"""The sweep engine: plan items, run them in warm workers, store each outcome as it finishes.

The parent never imports torch (workers do; see harness/engine/pool.py). The store's
connection is used only here, in the main process, so every finished item is
committed at once and an interrupted sweep resumes where it stopped.
"""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from harness.engine.configs import Checked, ConfigError, check_all_syntax
from harness.engine.configs import check as config_check
from harness.core.effects import BASELINE
from harness.engine.options import SweepOptions
from harness.core.outcome import Outcome
from harness.core.run_environment import BuildOrigin, RunEnvironment
from harness.engine.interpreter import CallFailed, call
from harness.engine.pool import Group, Pool, PoolError
from harness.engine.progress import Progress
from harness.core.scrub import scrub
from harness.engine.flags.pruning import Pruning, audit, eligible
from state import flags as stored_flags, history, leases, runs

log = logging.getLogger(__name__)

_PATH_FIELDS = ("error_message", "traceback", "torch_frame")  # outcome text that may carry machine paths

# Fields of the environment that make two runs incomparable if they differ.


class ResumeError(ValueError):
    """The run to resume does not exist, is finished, or ran in another environment."""


class ConfigUnavailable(ConfigError):
    """run_items was asked for a config whose key the torch under test lacks."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: workers stopped, finished items kept, run marked interrupted."""

    def __init__(self, run_id: int):
        super().__init__(run_id)
        self.run_id = run_id


def _pool(options: SweepOptions, base_settings: dict, n_groups: int, fresh: bool = False) -> Pool:
    return Pool(options, workers=options.worker_count(n_groups), base_settings=base_settings, fresh_workers=fresh)


def plan_groups(models: list[str], configs: dict[str, dict], done: set[tuple[str, str]] = frozenset(),
                prune: frozenset[str] = frozenset(), pool: bool = False) -> list[Group]:
    """One group per model: baseline first, then its configs, skipping items already done; `prune`: the configs
    the worker may report without compiling when the baseline never read their keys (and, with `pool`, may
    compile together first when it did)."""
    names = [BASELINE] + [c for c in configs if c != BASELINE]
    groups, index = [], 0
    for model in models:
        items = []
        for name in names:
            if (model, name) not in done:
                items.append((index, name, configs.get(name, {})))
            index += 1
        if items:
            groups.append(Group(model, items, prune=prune, pool=pool))
    return groups


def _stratum_lookup() -> Callable[[str], str | None]:
    """Strata for models that never built (their outcome has none); asks the zoo once, lazily."""
    cache: dict[str, str | None] = {}

    def lookup(model: str) -> str | None:
        if model not in cache:
            from harness import zoo   # late: scanning transformers is slow, and most outcomes carry their stratum

            try:
                cache.update({c.model: c.stratum for c in zoo.resolve([model])})
            except ValueError:  # zoo.UnknownModel, or a name that is no model glob: the stratum stays empty
                pass
            cache.setdefault(model, None)
        return cache[model]

    return lookup


def _outcome(data: dict[str, Any], stratum_of: Callable[[str], str | None]) -> Outcome:
    # Stored without machine paths (the signature, made from the raw text, keeps only file names).
    data = {**data, **{k: scrub(data.get(k)) for k in _PATH_FIELDS if data.get(k)}}
    outcome = Outcome.from_dict(data)
    if outcome.stratum is None:
        outcome.stratum = stratum_of(outcome.model)
    return outcome


def sweep(conn: Any, *, models: list[str], configs: dict[str, dict], base_settings: dict,
          options: SweepOptions, run_id: int | None = None, resume: bool = False, kind: str = "sweep",
          nightly: str | None = None, shard: str | None = None, progress: bool = True,
          extra_environment: BuildOrigin | None = None,
          prior: list[Outcome] | None = None, population: dict[str, Any] | None = None,
          pruning: Pruning | None = None) -> int:
    """Run models x (baseline + configs), storing each outcome as it finishes; returns the run id.

    extra_environment: what the caller knows of the build beyond what the workers see
    (the index and channel it came from), stored with the environment.
    `prior`: outcomes already had on this torch (a baseline pass), stored into a new run instead of run again;
    `population`: how the models were chosen, kept with the run's options for the issues' method table.

    `pruning`: the configs that may be pruned (read-set pruning) and the audit's sample; None: trace everything.

    A run that finishes is finalized here (effects, signature history): the engine ends it, so the engine
    finalizes it, once. An interrupted or failed run is not finalized.
    """
    configs = {BASELINE: configs.get(BASELINE, {}), **{k: v for k, v in configs.items() if k != BASELINE}}
    prior = [o for o in prior or [] if o.model in set(models) and o.config in configs] if not resume else []
    done: set[tuple[str, str]] = {(o.model, o.config) for o in prior}
    stored, unavailable = None, {}
    lease = None
    if not resume:
        check_all_syntax(configs, base_settings)   # malformed keys stop us before a worker starts
    if resume:
        if run_id is None:
            raise ResumeError("--resume needs a run id")
        stored = runs.get_run(conn, run_id)
        if stored is None:
            raise ResumeError(f"run {run_id} does not exist")
        if stored.status == "finished":
            raise ResumeError(f"run {run_id} is already finished")
        models, configs, base_settings = stored.models, stored.configs, stored.base_settings
        try:
            lease = leases.acquire(conn, run_id)   # before any worker starts: a live holder is refused at once
        except leases.LeaseHeld as exc:
            raise ResumeError(str(exc)) from None
        lease.keep_alive()
        done = runs.finished_items(conn, run_id)
    prune = eligible(pruning, configs, stored_flags.disabled_keys(conn))
    pooled = bool(pruning and pruning.pool)
    groups = plan_groups(models, configs, done, prune, pooled)
    pool = _pool(options, base_settings, len(groups))
    bar = None
    try:
        try:
            pool.start()  # the workers import torch while we set up the run and check the configs
        except OSError as exc:   # no such interpreter: a bad --python, said in one line
            raise ConfigError(f"{options.python or sys.executable}: cannot start the workers ({exc.strerror})") from None
        if not resume:
            # In the interpreter under test, before any model runs: ConfigError on a wrong type,
            # a config whose key that torch lacks set aside.
            checked = check_configs(configs, base_settings, options.python)
            configs, unavailable = checked.configs, checked.unavailable
            groups = plan_groups(models, configs, done, prune, pooled)
        total = len(models) * len(configs)
        bar = Progress(total=total, done=len(done), enabled=progress, label=f"sweep {len(models)} models")
        # "python": the interpreter the workers were started with, what a reproducer is verified under.
        env = RunEnvironment.from_dict({**pool.environment(), "python": options.python or sys.executable})
        env = env.with_build(extra_environment) if extra_environment else env
        if stored is not None:
            _check_same_environment(stored.environment, env, run_id)
        else:
            run_options = {**options.to_dict(), **({"population": population} if population else {})}
            lease = leases.create_held(conn, lambda: runs.create_run(
                conn, environment=env, models=models, configs=configs, base_settings=base_settings,
                options=run_options, kind=kind, nightly=nightly, shard=shard, unavailable=unavailable))
            run_id = lease.run_id
            lease.keep_alive()
            for outcome in prior:
                runs.record_outcome(conn, run_id, outcome)
        if pool.config_space:
            stored_flags.record_space(conn, env, pool.config_space["modules"], pool.config_space["entries"])
        stratum_of = _stratum_lookup()
        for _, data in pool.run(groups):
            outcome = _outcome(data, stratum_of)
            if data.get("config_reads") is not None:
                stored_flags.record_reads(conn, run_id, outcome.model, data["config_reads"])
            built = pool.model_data.pop(outcome.model, None)
            if built is not None:   # once per model: what its reproducer is rendered from
                runs.record_model(conn, run_id, built)
            runs.record_outcome(conn, run_id, outcome)
            bar.advance(crashed=outcome.crashed)
        bar.close()
        pool.close()
        if prune:
            audit(conn, run_id, configs=configs, pruning=pruning, trace=lambda items: run_items(
                items, configs=configs, base_settings=base_settings, options=options, progress=progress))
        runs.finish_run(conn, run_id, "finished")
    except KeyboardInterrupt:
        pool.close(kill=True)
        if bar is not None:
            bar.close()
        if run_id is None:
            raise
        runs.finish_run(conn, run_id, "interrupted", reason="interrupted (Ctrl-C or SIGTERM)")
        raise SweepInterrupted(run_id) from None
    except BaseException as exc:
        pool.close(kill=True)
        if bar is not None:
            bar.close()
        if run_id is not None and isinstance(exc, PoolError):
            # The interpreter, not the run, is broken: keep the run resumable with a working --python.
            runs.finish_run(conn, run_id, "interrupted", reason=str(exc).splitlines()[0][:500])
        elif run_id is not None and not isinstance(exc, ResumeError):
            runs.finish_run(conn, run_id, "failed", reason=f"{type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        if lease is not None:
            lease.release(conn)
    history.finalize_run(conn, run_id)
    return run_id


def check_configs(configs: dict[str, dict], base_settings: dict, python: str | None) -> Checked:
    """The configs checked in `python`'s torch (a subprocess): runnable ones and unavailable ones."""
    checked = config_check(configs, base_settings, python)
    for line in checked.describe():
        log.warning("%s", line)
    return checked


def _check_same_environment(old: RunEnvironment, new: RunEnvironment, run_id: int) -> None:
    diffs = old.differences(new)
    if diffs:
        raise ResumeError(f"run {run_id} ran in another environment ({'; '.join(diffs)}); start a new sweep instead")


def run_items(items: list[tuple[str, str]], *, configs: dict[str, dict], base_settings: dict,
              options: SweepOptions, fresh_workers: bool = False, progress: bool = False) -> list[Outcome]:
    """Run (model, config) items without storing them; outcomes in the order of `items`.

    Every config named must be in `configs` (baseline, when absent, is no settings).
    fresh_workers: every item in a new worker (flake confirmation).
    """
    checked = check_configs({name: configs.get(name, {}) for _, name in items}, base_settings, options.python)
    if checked.unavailable:
        raise ConfigUnavailable(checked.describe()[0])
    settings_of = {}
    for _, name in items:
        if name not in configs and name != BASELINE:
            raise KeyError(f"config {name!r} is not in the configs given")
        settings_of[name] = configs.get(name, {})
    if fresh_workers:
        groups = [Group(model, [(i, name, settings_of[name])]) for i, (model, name) in enumerate(items)]
    else:
        by_model: dict[str, list] = {}
        for i, (model, name) in enumerate(items):
            by_model.setdefault(model, []).append((i, name, settings_of[name]))
        groups = [Group(model, its) for model, its in by_model.items()]
    pool = _pool(options, base_settings, len(groups), fresh=fresh_workers)
    return _outcomes(pool, groups, items, progress, f"compile {len(items)} items")


# The label an eager check's outcomes carry where a sweep's name their config: no config ran.
EAGER = "eager"


def eager_check(models: list[str], *, options: SweepOptions, progress: bool = False) -> list[Outcome]:
    """Build each model and run one eager forward, in workers (`zoo check`); outcomes in the order of `models`."""
    groups = [Group(model, [(i, EAGER, {})], "eager") for i, model in enumerate(models)]
    pool = _pool(options, {}, len(groups))
    return _outcomes(pool, groups, [(m, EAGER) for m in models], progress, f"eager {len(models)} models")


def describe(models: list[str], *, options: SweepOptions) -> dict[str, dict]:
    """{model: its build as plain data} (what a reproducer embeds), from workers; nothing is stored.

    Models that do not build, or have no transformers config to embed, are left out.
    """
    groups = [Group(model, [(i, EAGER, {})], "eager") for i, model in enumerate(models)]
    pool = _pool(options, {}, len(groups))
    _outcomes(pool, groups, [(m, EAGER) for m in models], False, "")
    return dict(pool.model_data)


@contextmanager
def _running(pool: Pool, bar: Progress) -> Iterator[None]:
    """While the pool runs groups: on the way out the bar is closed and so is the pool (its workers killed
    when anything went wrong, a caller that stopped listening included)."""
    try:
        yield
    except BaseException:
        pool.close(kill=True)
        raise
    finally:
        bar.close()
    pool.close()


def _outcomes(pool: Pool, groups: list[Group], items: list[tuple[str, str]], progress: bool,
              label: str) -> list[Outcome]:
    """Run the groups on the pool and close it; one outcome per (model, label) item, in order."""
    results: list[Outcome | None] = [None] * len(items)
    stratum_of = _stratum_lookup()
    bar = Progress(total=len(items), enabled=progress, label=label)
    with _running(pool, bar):
        for index, data in pool.run(groups):
            results[index] = _outcome(data, stratum_of)
            bar.advance(crashed=results[index].crashed)
    return [r if r is not None else Outcome(model=m, config=c, status="killed", error_type="killed",
                                            error_message="no result", signature="killed")
            for r, (m, c) in zip(results, items)]


@dataclass
class JobResult:
    """What a job answered for one model (status ok), or how it ended without an answer."""

    model: str
    status: str                  # ok | error (the job raised) | timeout | killed (the worker died or went over memory)
    data: Any = None             # the job's answer (JSON data) when ok
    error: str | None = None     # why there is no answer, in one line


def run_job(job: str, models: list[str], *, options: SweepOptions, progress: bool = False) -> Iterator[JobResult]:
    """Call the caller's job on each model in workers; results in the order they finish.

    job: "module:function", imported by the worker; function(model, device) returns JSON data.
    The engine knows nothing of what it does (`zoo lock` passes discovery's).
    """
    groups = [Group(model, [(i, job, {})], "job", job) for i, model in enumerate(models)]
    pool = _pool(options, {}, len(groups))
    bar = Progress(total=len(models), enabled=progress, label=f"{job.rpartition(':')[2]} {len(models)} models")
    with _running(pool, bar):
        for _, data in pool.run(groups):
            lines = (data.get("error_message") or "").strip().splitlines()
            result = JobResult(data["model"], data["status"], data.get("data"), lines[0] if lines else None)
            bar.advance(crashed=result.status != "ok")
            yield result


def collect_environment(python: str | None = None, device: str = "cpu") -> dict:
    """The run environment as seen by the interpreter that runs the workers (no torch import here)."""
    try:
        return call("harness.engine.environment:gather", device, python=python, timeout=600)
    except CallFailed as exc:
        raise RuntimeError(f"{exc.python}: cannot gather the environment: {exc.tail}") from None
