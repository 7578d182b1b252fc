"""Where one model's Inductor compile on CPU spends its time, and which part each cache saves (not a test).

One process, one model, the baseline's settings (a flag that changes nothing compiles the same graphs), compiled:
  first      nothing cached, the first compile of the process (a worker's first item)
  cold       nothing cached, the process warm (a fresh cache folder, the in-memory caches cleared)
  kernels    the same folder again, FX graph + AOTAutograd caches off: Inductor's C++ kernels found by their source
             (what a flag that changes nothing costs a worker without the shared cache)
  fx hit     FX graph + AOTAutograd caches on, after one compile that stored the entry (what it costs with it)
The differences split the cost: first - cold is the process's one-time part (the vector ISA checks compile C++,
imports, the compile workers' start), cold - kernels the C++ compile of the kernels, kernels - fx hit AOTAutograd and
Inductor's lowering and codegen, fx hit Dynamo's trace (and loading the cached module). Torch's own phase timers
(torch._dynamo.utils.compilation_time_metrics) are printed for each compile.

Run: .venv/bin/python bench/inductor_phases.py [MODEL] [THREADS]
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweep_common import machine  # noqa: E402

# Torch's phase timers worth reading, outermost first.
PHASES = ("_compile.compile_inner", "bytecode_tracing", "create_aot_dispatcher_function", "compile_fx_inner",
          "GraphLowering.run", "GraphLowering.codegen", "async_compile.wait", "PyCodeCache.load_by_key_path")


@contextlib.contextmanager
def caches(on: bool) -> Iterator[None]:
    """FX graph + AOTAutograd caches on or off for the block."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=on), functorch_config.patch(enable_autograd_cache=on):
        yield


def compile_once(built: Any, label: str) -> tuple[str, float, str]:
    """One compile of the model under the baseline: (label, seconds, torch's phases and the cache's counts)."""
    from torch._dynamo.utils import compilation_time_metrics, counters

    from harness.engine.backend import compile_and_run
    from harness.engine.scenarios import clone

    compilation_time_metrics.clear()
    counts, error = compile_and_run(built.module, clone(built.inputs), settings={}, backend="inductor")
    if error is not None:
        raise SystemExit(f"{label}: the compile failed: {type(error).__name__}: {str(error)[:300]}")
    phases = ", ".join(f"{name} {sum(compilation_time_metrics[name]):.1f}" for name in PHASES
                       if name in compilation_time_metrics)
    hits = (f"FX {counters['inductor']['fxgraph_cache_hit']}/{counters['inductor']['fxgraph_cache_miss']}, "
            f"AOT {counters['aot_autograd']['autograd_cache_hit']}/{counters['aot_autograd']['autograd_cache_miss']}")
    return label, counts["compile_s"], f"{counts['graphs']} graphs; hit/miss {hits}; {phases}"


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else "AlbertModel"
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    import torch
    import transformers
    from torch._inductor.utils import fresh_cache

    from harness import zoo

    torch.set_num_threads(threads)   # as a pool's worker on this machine (os.cpu_count() // workers)
    transformers.logging.set_verbosity_error()
    load = os.getloadavg()[0]
    built = zoo.build(model, "cpu")
    rows = []
    start = time.perf_counter()
    with caches(False), fresh_cache():
        rows.append(compile_once(built, "first"))
    with fresh_cache():
        with caches(False):
            rows.append(compile_once(built, "cold"))
            rows.append(compile_once(built, "kernels"))
        with caches(True):
            compile_once(built, "fx store")
            rows.append(compile_once(built, "fx hit"))
    seconds = {label: s for label, s, _ in rows}
    for label, s, detail in rows:
        print(f"{label:8s} {s:6.1f} s  {detail}")
    print(f"process one-time (first - cold)      {seconds['first'] - seconds['cold']:6.1f} s")
    print(f"C++ kernels (cold - kernels)         {seconds['cold'] - seconds['kernels']:6.1f} s")
    print(f"AOT + lowering (kernels - fx hit)    {seconds['kernels'] - seconds['fx hit']:6.1f} s")
    print(f"Dynamo trace + load (fx hit)         {seconds['fx hit']:6.1f} s")
    print(f"{model}, {threads} threads; {time.perf_counter() - start:.0f} s; load {load:.2f} at the start, "
          f"[{machine()}]")


if __name__ == "__main__":
    main()
