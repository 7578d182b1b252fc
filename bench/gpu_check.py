"""The device check (not a test; bench/gpu_check.sh runs it): one table of what a GPU runner changes.

Parts, each timed and bounded by --budget (a part that would start past it is listed as not run):
  effects   the corpus sample under the counting backend on --device and on the CPU: agreement, each difference
  scaling   items per minute with each worker count of --scaling (GPU workers per GPU on CUDA, CPU workers else)
  inductor  the --inductor models under --backend inductor, without and with the shared compile cache
  memory    peak memory per item on the device (a worker's peak is its items' largest; its cap is 1/gpu_workers)
  modes     the --modes-sample models under --backend inductor with the checks on, once per mode of --modes (what
            the GPU nightly sweeps: eval, train-bf16, dynamic-true): wall against eval's, how the items ended, the
            wrong results found

Run: python bench/gpu_check.py --device cuda [--sample 0] [--scaling 1,4,8] [--inductor 10] [--modes-sample 4]
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.effects import BASELINE, effects_for  # noqa: E402
from harness.core.outcome import Outcome  # noqa: E402
from harness.engine.configs import BUILTIN  # noqa: E402
from harness.engine.engine import CacheTally, SweepOptions, plan_groups  # noqa: E402
from harness.engine.events import CacheCounts, Result  # noqa: E402
from harness.engine.pool import Pool  # noqa: E402
from harness.engine.progress import Progress  # noqa: E402


def corpus(n: int, seed: int = 0) -> list[str]:
    """n models of the embedded corpus, stratified (0: all of it)."""
    from harness import zoo
    from harness.zoo.corpus import DEFAULT_CORPUS

    found = zoo.resolve(list(DEFAULT_CORPUS))
    return [c.model for c in (zoo.sample(found, n, seed) if n else found)]


def sample_or_names(arg: str) -> list[str]:
    """A number of corpus models (0: all of it), or model names, comma-separated (test models among them)."""
    return corpus(int(arg)) if arg.isdigit() else arg.split(",")


def run(models: list[str], options: SweepOptions, label: str) -> tuple[list[Outcome], dict[str, CacheTally], float]:
    """models x (baseline + the built-in flags) on a pool: outcomes, cache counts per config ("pooled": a pooled
    compile's), wall seconds."""
    configs = {BASELINE: {}, **BUILTIN}
    groups = plan_groups(models, configs)
    names = {index: config for group in groups for index, config, _ in group.items}
    outs, tallies = [], collections.defaultdict(CacheTally)
    bar = Progress(total=len(models) * len(configs), label=label)
    start = time.perf_counter()
    with Pool(options, items=len(groups)) as pool:
        for event in pool.run(groups):
            if isinstance(event, CacheCounts):
                tallies[names.get(event.index, "pooled")].add(event)
            elif isinstance(event, Result):
                outs.append(event.outcome)
                bar.advance(crashed=event.outcome.crashed)
    bar.close()
    return outs, dict(tallies), time.perf_counter() - start


def effects_rows(models: list[str], base: SweepOptions, device: str, workers: int) -> list[tuple[str, str, str]]:
    """The corpus sample's effects on `device` against the CPU's: agreement, then each difference."""
    there, _, t_dev = run(models, _on(base, device, workers), f"effects on {device}")
    here, _, t_cpu = run(models, _on(base, "cpu", workers), "effects on cpu")
    dev = {(e.model, e.config): e.effect for e in effects_for(there)}
    cpu = {(e.model, e.config): e.effect for e in effects_for(here)}
    same = sum(dev.get(k) == v for k, v in cpu.items())
    rows = [("effects", f"{device} vs cpu agree", f"{same}/{len(cpu)} ({len(models)} models; "
                                                  f"{t_dev:.0f} s vs {t_cpu:.0f} s)")]
    rows += [("effects", f"differs: {m} [{c}]", f"cpu {v} -> {device} {dev.get((m, c))}")
             for (m, c), v in sorted(cpu.items()) if dev.get((m, c)) != v]
    peaks = [o.peak_mem_mb for o in there if o.peak_mem_mb]
    if peaks:
        rows.append(("memory", f"peak per item on {device} (MiB)",
                     f"max {max(peaks):.0f}, median {statistics.median(peaks):.0f}, over {len(peaks)} items"))
    return rows


def scaling_rows(models: list[str], base: SweepOptions, counts: list[int]) -> list[tuple[str, str, str]]:
    """Items per minute at each worker count."""
    rows = []
    for n in counts:
        outs, _, wall = run(models, _on(base, base.device, n), f"scaling {n} workers")
        rows.append(("scaling", f"{n} {'GPU ' if base.on_cuda else ''}workers",
                     f"{len(outs) / wall * 60:.1f} items/min ({len(outs)} items, {wall:.0f} s)"))
        peaks = [o.peak_mem_mb for o in outs if o.peak_mem_mb]
        if peaks and base.on_cuda:
            rows.append(("memory", f"peak per worker, {n} per GPU (MiB)",
                         f"{max(peaks):.0f} (cap: 1/{n} of the GPU)"))
    return rows


def inductor_rows(models: list[str], base: SweepOptions, workers: int,
                  warm: bool = False) -> list[tuple[str, str, str]]:
    """The models under inductor without, then with, the shared cache (a fresh one; with `warm`, then the same one
    again: the next night of the same build): wall times, hits per config, compile seconds per config, and whether
    each cached run's results are the uncached run's."""
    ind = dataclasses.replace(base, backend="inductor")
    sides, loads = {}, {}
    with tempfile.TemporaryDirectory(prefix="flagsweep-cache-") as root:
        for name, cache in [("no cache", None), ("fresh", root)] + ([("warm", root)] if warm else []):
            with _load_sampled() as loads[name]:
                sides[name] = run(models, _on(ind, ind.device, workers, cache=cache), f"inductor, {name}")
    plain, _, t_off = sides["no cache"]
    total = _total(list(sides["fresh"][1].values()))
    rows = [("inductor", f"{len(models)} models x {len({BASELINE, *BUILTIN})} configs, no cache", f"{t_off:.0f} s"),
            ("inductor", "with the shared cache", _less(sides["fresh"][2], t_off))]
    if warm:
        rows.append(("inductor", "with the warm shared cache (next night, same build)", _less(sides["warm"][2], t_off)))
    rows.append(("inductor", f"mean load average: {' / '.join(loads)}", " / ".join(map(_load, loads.values()))))
    rows.append(("inductor", "cache hits (FX graph / AOTAutograd)", _hits(total)))
    rows += [("inductor", f"{config}: compile s, FX hits, AOT hits",
              "; ".join(_per_config(name, side, config) for name, side in sides.items()))
             for config in [BASELINE, *(c for c in BUILTIN if c != BASELINE)]]
    rows.append(("inductor", "same results with and without", f"{_agree(plain, sides['fresh'][0])}/{len(plain)} items"))
    if warm:
        rows.append(("inductor", "same results, warm cache", f"{_agree(plain, sides['warm'][0])}/{len(plain)} items"))
    return rows


def modes_rows(models: list[str], base: SweepOptions, workers: int, modes: list[str]) -> list[tuple[str, str, str]]:
    """The models under inductor in each mode, the checks on: wall (and its ratio to eval's), statuses, wrong
    results."""
    from harness.core.modes import BUILTIN as MODES, resolve
    from harness.core.options import Accuracy

    rows, walls = [], {}
    for mode in resolve(modes, MODES):
        options = dataclasses.replace(_on(base, base.device, workers), backend="inductor", mode=mode,
                                      accuracy=Accuracy())
        with _load_sampled() as load:
            outs, _, walls[mode.name] = run(models, options, f"mode {mode.name}")
        ratio = f", {walls[mode.name] / walls['eval']:.2f}x eval" if "eval" in walls else ""
        ended = collections.Counter(o.status for o in outs)
        wrong = sum(e.correctness == "wrong_result" for e in effects_for(outs))
        rows.append(("modes", f"{mode.name}: {len(models)} models x {len({BASELINE, *BUILTIN})} configs, inductor",
                     f"{walls[mode.name]:.0f} s{ratio} (load {_load(load)}); "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(ended.items()))}; wrong results {wrong}"))
    return rows


@contextlib.contextmanager
def _load_sampled(every: float = 10.0) -> Iterator[list[float]]:
    """The 1-minute load average every `every` seconds while the block runs (a shared machine's other work skews a
    side's wall time: each side says what it ran under)."""
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every) and hasattr(os, "getloadavg"):
            samples.append(os.getloadavg()[0])
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


def _load(samples: list[float]) -> str:
    return f"{statistics.mean(samples):.1f}" if samples else "n/a"


def _less(t_on: float, t_off: float) -> str:
    return f"{t_on:.0f} s ({(1 - t_on / t_off) * 100:.0f}% less)"


def _total(tallies: Iterable[CacheTally]) -> CacheTally:
    return CacheTally(*(sum(getattr(t, f.name) for t in tallies) for f in dataclasses.fields(CacheTally)))


def _hits(t: CacheTally) -> str:
    return (f"{t.fxgraph_hit}/{t.fxgraph_hit + t.fxgraph_miss} / "
            f"{t.autograd_hit}/{t.autograd_hit + t.autograd_miss}")


def _per_config(name: str, side: tuple[list[Outcome], dict[str, CacheTally], float], config: str) -> str:
    """One config's compile seconds (summed over the models) and its hits/lookups, in one run."""
    outs, tallies, _ = side
    seconds = sum(o.compile_s or 0.0 for o in outs if o.config == config)
    return f"{name} {seconds:.0f} s, {_hits(tallies.get(config, CacheTally())).replace(' / ', ', ')}"


def _agree(plain: list[Outcome], cached: list[Outcome]) -> int:
    return sum(_same(a, b) for a, b in zip(sorted(plain, key=_key), sorted(cached, key=_key)))


def _key(o: Outcome) -> tuple[str, str]:
    return o.model, o.config


def _same(a: Outcome, b: Outcome) -> bool:
    return _result(a) == _result(b)


def _result(o: Outcome) -> tuple:
    """What a compile cache must not change."""
    return o.model, o.config, o.status, o.graphs, o.ops_per_graph, o.graph_breaks, o.recompiles


def _on(base: SweepOptions, device: str, workers: int, cache: str | None = None) -> SweepOptions:
    """The options on `device` with `workers` (per GPU on CUDA)."""
    return dataclasses.replace(base, device=device, workers=workers, gpu_workers=workers, compile_cache=cache)


def table(rows: list[tuple[str, str, str]]) -> str:
    """The one table, aligned."""
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    lines = [f"{'part':<{w0}}  {'measure':<{w1}}  value", f"{'-' * w0}  {'-' * w1}  -----"]
    return "\n".join(lines + [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows])


def main(argv: list[str] | None = None) -> int:
    """Run the parts within the budget and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--sample", default="0", help="a number of corpus models for the effects (0: the whole corpus), "
                                               "or model names (comma-separated)")
    p.add_argument("--workers", type=int, default=8, help="workers for the effects and inductor parts")
    p.add_argument("--scaling", default="1,4,8", help="worker counts, comma-separated")
    p.add_argument("--scaling-sample", default="8", help="a number of corpus models for the scaling part, or model "
                                                          "names (comma-separated)")
    p.add_argument("--inductor", default="10", help="a number of corpus models, or model names (comma-separated)")
    p.add_argument("--extra-module", action="append", default=[], help="imported by each worker (test models)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per item")
    p.add_argument("--modes", default="eval,train-bf16,dynamic-true", help="modes for the modes part (empty: none)")
    p.add_argument("--modes-sample", default="4", help="a number of corpus models for the modes part, or model names")
    p.add_argument("--budget", type=float, default=450.0, help="seconds; a part is not started past it")
    args = p.parse_args(argv)
    base = SweepOptions(device=args.device, timeout=args.timeout, extra_modules=list(args.extra_module))
    parts = [("effects", lambda: effects_rows(sample_or_names(args.sample), base, args.device, args.workers)),
             ("scaling", lambda: scaling_rows(sample_or_names(args.scaling_sample), base,
                                              [int(n) for n in args.scaling.split(",") if n])),
             ("inductor", lambda: inductor_rows(sample_or_names(args.inductor), base, args.workers))]
    modes = [m for m in args.modes.split(",") if m]
    if modes:
        parts.append(("modes", lambda: modes_rows(sample_or_names(args.modes_sample), base, args.workers, modes)))
    start, rows = time.perf_counter(), []
    for name, part in parts:
        if time.perf_counter() - start > args.budget:
            rows.append((name, "not run", f"past the budget of {args.budget:.0f} s"))
            continue
        rows += part()
    rows.append(("total", f"wall time on {args.device}", f"{time.perf_counter() - start:.0f} s"))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
