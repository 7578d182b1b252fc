"""Benchmark (not a test): build time from the lock against today's build with discovery (shrink, fix-ups, probing).

For a stratified sample of locked ok entries, in one process: the time to build
module + inputs from the lock entry, and the time discovery takes before it
(plan + probe forwards), each model once per path. Prints median and p95 and
their ratio. Run it niced on a quiet machine:

    nice .venv/bin/python bench/zoo_build_time.py --sample 40 --seed 0
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import zoo  # noqa: E402
from harness.zoo import lock  # noqa: E402


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch

    from harness.zoo.build import materialize, quiet_transformers
    from harness.discovery.discover import discover, plan

    torch.set_num_threads(1)
    quiet_transformers()
    current = lock.current()
    ok = [c for c in zoo.candidates() if current.entries[c.model]["status"] == "ok"]
    models = [c.model for c in zoo.sample(ok, args.sample, args.seed)]
    from_lock, discovering = [], []
    for model in models:
        entry = current.entry(model)
        materialize(entry)  # warm the module import for both paths
        from_lock.append(timed(materialize, entry))
        plan.cache_clear()
        discovering.append(timed(discover, model) + from_lock[-1])
    for name, xs in (("from the lock", from_lock), ("with discovery", discovering)):
        print(f"{name:16s} median {statistics.median(xs):7.3f}s  p95 {pct(xs, 0.95):7.3f}s  (n={len(xs)})")
    print(f"ratio discovery/lock: median {statistics.median(discovering) / statistics.median(from_lock):.2f}x, "
          f"p95 {pct(discovering, 0.95) / pct(from_lock, 0.95):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
