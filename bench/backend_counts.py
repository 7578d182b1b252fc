"""Benchmark (not a test): the graph count of every quick-start model is the same under the four backends.

The quick start (`make run`, quickstart.toml) sweeps the embedded corpus and the canaries under the nightly's
configs: baseline, capture_scalar_outputs, capture_dynamic_output_shape_ops. Each of those, and
`assume_static_by_default = false` (where AOTAutograd restarts Dynamo's analysis: issue 45), is run under count,
eager, aot_eager and inductor (the first call only: the checks' later calls are off), and every (model, config)
whose graph count differs between backends is printed with its counts per backend (an item that crashed under a
backend is listed apart: it has no count there). Exits 1 when one differs.
Inductor on a CPU is slow: --backends and --models run a part; the time per backend and the load are printed.

    nice .venv/bin/python bench/backend_counts.py --workers 2
    nice .venv/bin/python bench/backend_counts.py --backends count,aot_eager --models GPT2Model,BertModel
    nice .venv/bin/python bench/backend_counts.py --backends count,aot_eager --configs dynamic_by_default
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep_common import machine  # noqa: E402
from harness.core.options import Accuracy  # noqa: E402
from harness.engine.configs import BUILTIN  # noqa: E402
from harness.engine.engine import SweepOptions, run_items  # noqa: E402

BACKENDS = ("count", "eager", "aot_eager", "inductor")
CONFIGS = {**{name: dict(BUILTIN.get(name, {})) for name in
              ("baseline", "capture_scalar_outputs", "capture_dynamic_output_shape_ops")},
           "dynamic_by_default": {"torch._dynamo.config.assume_static_by_default": False}}


def quickstart_models() -> list[str]:
    """The quick start's models: the embedded corpus, then the canaries it lacks (the nightly's defaults)."""
    from bot.settings import NightlySettings
    from harness.zoo.corpus import DEFAULT_CORPUS
    return list(DEFAULT_CORPUS) + [c for c in NightlySettings().canaries if c not in DEFAULT_CORPUS]


def counts(models: list[str], configs: list[str], backend: str, workers: int,
           timeout: float) -> dict[tuple[str, str], str]:
    """(model, config) -> its graph count under `backend` ("status" where it did not end ok)."""
    items = [(m, c) for m in models for c in configs]
    options = SweepOptions(workers=workers, timeout=timeout, backend=backend, accuracy=Accuracy(enabled=False))
    outs = run_items(items, configs=CONFIGS, base_settings={}, options=options, progress=True)
    return {(o.model, o.config): str(o.graphs) if o.status == "ok" else o.status for o in outs}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated (default: the quick start's)")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"some of {', '.join(CONFIGS)}")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900.0)
    args = p.parse_args()
    models = args.models.split(",") if args.models else quickstart_models()
    configs = args.configs.split(",")
    found: dict[str, dict[tuple[str, str], str]] = {}
    for backend in args.backends.split(","):
        start = time.perf_counter()
        found[backend] = counts(models, configs, backend, args.workers, args.timeout)
        print(f"{backend}: {len(found[backend])} items in {time.perf_counter() - start:.0f} s ({machine('now')})",
              flush=True)
    differ, crashed = [], []
    for key in found[next(iter(found))]:
        by = {b: found[b][key] for b in found}
        ran = [n for n in by.values() if n.isdigit()]     # an item that did not end ok has no count to compare
        (differ if len(set(ran)) > 1 else crashed if len(ran) < len(by) else []).append((key, by))
    for word, rows in (("DIFFERS", differ), ("NOT OK under a backend (its counts compared where it ran)", crashed)):
        for (model, config), by in rows:
            print(f"{word}: {model} under {config}: " + ", ".join(f"{b} {n}" for b, n in by.items()))
    total = len(models) * len(configs)
    print(f"{total - len(differ)}/{total} (model, config) items have one graph count under {', '.join(found)} "
          f"where they ran; {len(models)} models x {len(configs)} configs ({machine()})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
