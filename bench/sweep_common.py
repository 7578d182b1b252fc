"""Shared by the sweep benchmarks: the model set and one timed sweep (not a test; prints numbers)."""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.engine.configs import BUILTIN  # noqa: E402
from harness.engine.engine import SweepOptions, SweepRequest, sweep  # noqa: E402
from state import db, runs  # noqa: E402


def corpus_models(n: int, seed: int = 0) -> list[str]:
    """n models of the embedded corpus, stratified (the zoo's sampler)."""
    from harness import zoo
    from harness.zoo.corpus import DEFAULT_CORPUS

    return [c.model for c in zoo.sample(zoo.resolve(list(DEFAULT_CORPUS)), n, seed)]


def timed_sweep(models: list[str], workers: int, timeout: float = 600.0) -> dict:
    """One stored sweep of models x BUILTIN; wall time from pool start to the last stored item."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = db.connect(Path(tmp) / "bench.sqlite")
        start = time.perf_counter()
        run_id = sweep(conn, SweepRequest(models=models, configs=dict(BUILTIN),
                                          options=SweepOptions(workers=workers, timeout=timeout))).run.id
        wall = time.perf_counter() - start
        outs = runs.outcomes(conn, run_id)
    inside = sum((o.build_s or 0.0) + (o.compile_s or 0.0) for o in outs)
    return {"wall_s": wall, "inside_s": inside, "items": len(outs),
            "ok": sum(o.status == "ok" for o in outs), "outcomes": outs}


def machine(when: str = "at the end") -> str:
    """What the numbers were measured on (a shared machine skews them; say so)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores, load average {load:.2f} {when}"
