"""The environment gate: is tonight's run the environment's fault? The one place that decides it.

Before anything is filed for a night the run must pass three checks:
- the environment: an interpreter, torch and transformers answered (the run's stored environment), CUDA when the
  run was on a CUDA device, a C++ compiler on PATH when the backend is `inductor`;
- the canaries (`[nightly] canaries`): each must build, run eager and compile at baseline (status `ok`);
- the error rate: the share of models failing at baseline (create/input/eager errors, crashes) may rise by at most
  `[nightly] max_error_jump` over the previous comparable night.
A run failing one is `environment_suspect` (state.gates): stored and reported, nothing filed or closed.
"""
from __future__ import annotations

import shutil
import sqlite3

from bot.settings import Settings
from state import gates, history
from state.gates import EnvironmentVerdict
from state.runs import Run
from harness.core.outcome import Outcome
from harness.core.options import SweepOptions
from harness.core.run_environment import RunEnvironment

COMPILERS = ("c++", "g++", "clang++")     # what inductor's C++ build looks for on PATH
FAILED_AT_BASELINE = ("create_error", "input_error", "eager_error", "error", "timeout", "killed", "out_of_memory")


def check(conn: sqlite3.Connection, run: Run, prev: Run | None, settings: Settings) -> EnvironmentVerdict:
    """Judge the run (its shard group) against the previous comparable run and store the verdict; returns it."""
    baseline = {o.model: o for o in history.group_outcomes(conn, run.id) if o.config == "baseline"}
    reasons = environment_reasons(run.environment, run.options.sweep)
    reasons += canary_reasons(baseline, settings.nightly.canaries)
    if prev is not None:
        before = {o.model: o for o in history.group_outcomes(conn, prev.id) if o.config == "baseline"}
        reasons += jump_reasons(before, baseline, settings.nightly.max_error_jump)
    verdict = gates.SUSPECT if reasons else gates.OK
    return gates.record(conn, EnvironmentVerdict(run_id=run.id, verdict=verdict, reasons=reasons))


def environment_reasons(env: RunEnvironment, options: SweepOptions) -> list[dict]:
    """What the environment lacks: interpreter, torch, transformers, CUDA on a CUDA run, a compiler for inductor."""
    wanted = [(env.python_version, "a Python interpreter"), (env.torch_version, "torch"),
              (env.transformers_version, "transformers")]
    if options.on_cuda:
        wanted.append((env.cuda_version, "CUDA"))
    reasons = [{"kind": "check", "missing": what} for value, what in wanted if not value]
    if options.backend == "inductor" and not any(shutil.which(c) for c in COMPILERS):
        reasons.append({"kind": "check", "missing": "a C++ compiler (inductor)"})
    return reasons


def canary_reasons(baseline: dict[str, Outcome], canaries: list[str]) -> list[dict]:
    """Each canary that did not build, run eager and compile at baseline (or was not swept at all)."""
    reasons = []
    for model in canaries:
        out = baseline.get(model)
        if out is None or out.status != "ok":
            reasons.append({"kind": "canary", "model": model, "status": out.status if out else "not swept",
                            "error": (out.error_type or "") if out else ""})
    return reasons


def error_share(baseline: dict[str, Outcome]) -> float:
    """The share of models that failed at baseline."""
    if not baseline:
        return 0.0
    return sum(1 for o in baseline.values() if o.status in FAILED_AT_BASELINE) / len(baseline)


def jump_reasons(before: dict[str, Outcome], now: dict[str, Outcome], limit: float) -> list[dict]:
    """A rise of the baseline failure share past `limit` between two nights (on the models both swept)."""
    common = set(before) & set(now)
    was = error_share({m: before[m] for m in common})
    is_ = error_share({m: now[m] for m in common})
    if is_ - was <= limit:
        return []
    return [{"kind": "jump", "before": round(was, 3), "now": round(is_, 3), "limit": limit, "models": len(common)}]
