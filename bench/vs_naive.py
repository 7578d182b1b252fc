"""The engine against the naive way: a fresh `python` per item (import torch, build, eager check, compile).

Same models x 3 configs. The main ratio compares one process at a time on both
sides; the second is the engine as `flagsweep sweep` runs by default (one worker
per core) against the naive runner, which is sequential. Target: >= 3x.
Run: .venv/bin/python bench/vs_naive.py [N_MODELS]
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from sweep_common import BUILTIN, corpus_models, machine, timed_sweep

from harness.engine.pool import PROJECT_ROOT, worker_env

# What a per-item script does (as the PyTorch benchmark runner and public corpora do):
# start Python, import torch and transformers, build the model, run it eagerly, compile it.
NAIVE = """
import json, sys
import torch
from harness.zoo import build
from harness.engine.backend import compile_and_run, eager_run
model, settings = sys.argv[1], json.loads(sys.argv[2])
built = build(model, "cpu")
eager_run(built.module, built.inputs)
counts, error = compile_and_run(built.module, built.inputs, settings=settings)
print(json.dumps({"graphs": counts["graphs"], "error": type(error).__name__ if error else None}))
"""


def naive(models: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    graphs = {}
    for i, model in enumerate(models):
        for name, settings in BUILTIN.items():
            proc = subprocess.run([sys.executable, "-c", NAIVE, model, json.dumps(settings)], capture_output=True,
                                  text=True, env=worker_env(), cwd=str(PROJECT_ROOT), timeout=900)
            last = (proc.stdout.strip().splitlines() or ["{}"])[-1]
            graphs[model, name] = json.loads(last).get("graphs") if last.startswith("{") else None
        print(f"naive: {i + 1}/{len(models)} models, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return time.perf_counter() - start, graphs


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    models = corpus_models(n)
    import os

    ours = timed_sweep(models, workers=1)
    cores = os.cpu_count() or 1
    ours_default = timed_sweep(models, workers=cores)
    naive_s, naive_graphs = naive(models)
    same = sum(1 for o in ours["outcomes"] if naive_graphs.get((o.model, o.config)) == o.graphs)
    print(f"vs naive: {len(models)} models x 3 configs = {ours['items']} items, one process at a time")
    print(f"  engine {ours['wall_s']:.1f} s, fresh python per item {naive_s:.1f} s; same graph counts on {same}/{ours['items']}")
    print(f"  speedup at equal parallelism = {naive_s / ours['wall_s']:.2f}x (target >= 3)")
    print(f"  engine with its default {cores} workers {ours_default['wall_s']:.1f} s: "
          f"speedup = {naive_s / ours_default['wall_s']:.2f}x [{machine()}]")
    print(f"  (in-worker build+compile alone, 1 worker: {ours['inside_s']:.1f} s: the floor any runner pays)")


if __name__ == "__main__":
    main()
