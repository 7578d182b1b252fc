"""Benchmark (not a test): where the later calls' wall goes, phase by phase, in one process.

Runs the worker's own group loop (harness.engine.worker.run_group) in this process on a few corpus models x the three
default configs, checks off then on, with timers around each phase (exclusive: a phase's time excludes the phases it
calls): build, eager (the worker's first eager forward), deepcopy, eager reference runs (first, the run twice, each
step's), fp64 references, the compiled calls (first compile+call, each later call with its recompile), judging,
Dynamo reset, event encoding. A first pass, untimed, imports what the models need. Prints seconds per phase, summed
over the models, each way (--repeat: off and on interleaved that many times), and the split of what the checks add:
the second-size call (Dynamo's recompile at another size, inherent to what is measured) and the rest.

    nice .venv/bin/python bench/accuracy_phases.py --models GPT2Model,BertModel,T5Model --repeat 2
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import sys
import time
import types
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import transformers  # noqa: E402

from bench.sweep_common import machine  # noqa: E402
from harness.engine import backend, events, scenarios, worker  # noqa: E402
from harness.engine.configs import BUILTIN  # noqa: E402
from harness.engine.events import RunRequest  # noqa: E402
from harness.core.options import Accuracy  # noqa: E402


class Phases:
    """Exclusive seconds per phase name (a nested phase's time is taken out of its caller's)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)
        self.stack: list[list[float]] = []
        self.patched: list[tuple[Any, str, Any]] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.stack.append([time.perf_counter(), 0.0])
        try:
            yield
        finally:
            start, inner = self.stack.pop()
            spent = time.perf_counter() - start
            self.seconds[name] += spent - inner
            self.count[name] += 1
            if self.stack:
                self.stack[-1][1] += spent

    def wrap(self, owner: Any, attr: str, name: str | Callable[..., str]) -> None:
        real = getattr(owner, attr)
        self.patched.append((owner, attr, real))

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name(*args, **kwargs) if callable(name) else name):
                return real(*args, **kwargs)
        setattr(owner, attr, timed)

    def restore(self) -> None:
        for owner, attr, real in reversed(self.patched):
            setattr(owner, attr, real)
        self.patched = []


_group: dict[str, Any] = {}   # the References of the group being run (its first inputs tell the calls apart)


def _run_name(module: Any, inputs: Any) -> str:
    if isinstance(module, torch._dynamo.eval_frame.OptimizedModule):
        if inputs is not _group["refs"].inputs:
            return "compiled call: second_size"
        hooked = any(sub._forward_hooks for sub in module._orig_mod.modules())
        return f"compiled call: {'hook_added' if hooked else 'weights_updated'}"
    if any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in _tensors(inputs)) or \
            any(p.dtype == torch.float64 for p in module.parameters()):
        return "fp64 reference run"
    return "eager reference run"


def _kept(make: Callable) -> Callable:
    def references(*args: Any, **kwargs: Any) -> Any:
        _group["refs"] = make(*args, **kwargs)
        return _group["refs"]
    return references


def _tensors(value: Any) -> list:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return [value]


def instrument(phases: Phases) -> None:
    """Timers around every phase of the worker's group loop (patched in this process only)."""
    phases.wrap(worker, "_build", "build")
    phases.wrap(backend, "eager_run", "eager (worker's first forward)")
    phases.wrap(backend, "reset_dynamo", "dynamo reset")
    phases.wrap(backend, "compile_and_run", "first compile + call")
    phases.wrap(scenarios, "run", _run_name)
    phases.wrap(scenarios, "compare", "judging (compare)")
    phases.wrap(scenarios.References, "fp64", "fp64 reference (deepcopy, casts)")
    phases.wrap(scenarios.Recorder, "take", "recompile metrics")
    phases.wrap(scenarios, "later_call", "later calls (changes, records)")
    # The group's references through the worker's maker: the class itself stays a class (isinstance asks it).
    phases.wrap(worker, "_references", "references (the rest)")
    worker._references = _kept(worker._references)
    scenarios.copy = types.SimpleNamespace(deepcopy=copy.deepcopy)   # copy's own recursion stays untimed
    phases.wrap(scenarios.copy, "deepcopy", "deepcopy")
    phases.wrap(events, "encode", "event encoding")


class Sink:
    """A channel that keeps the events (what a worker would write to the pipe)."""

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, event: Any) -> None:
        events.encode(event)
        self.sent.append(event)


def group(model: str, accuracy: Accuracy) -> list:
    items = [(i, name, dict(settings)) for i, (name, settings) in enumerate(BUILTIN.items())]
    req = RunRequest(model=model, items=items, mode="compile", job=None, prune=[], pool=False, base_settings={},
                     backend="count", device="cpu", accuracy=accuracy)
    sink = Sink()
    worker.run_group(sink, req)
    return [e for e in sink.sent if isinstance(e, events.Result)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="GPT2Model,BertModel,T5Model,LlamaForCausalLM")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="off/on passes, interleaved (a shared machine is noisy)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch._dynamo.config.verbose = True
    transformers.logging.set_verbosity_error()
    models = args.models.split(",")
    print(f"{len(models)} models x {len(BUILTIN)} configs, {args.threads} thread(s); {machine()}")
    for m in models:   # warm: the first build imports the model's module
        group(m, Accuracy(enabled=False))
    results = {label: (0.0, Phases(), []) for label in ("off", "on")}
    for _ in range(args.repeat):
        for label, accuracy in (("off", Accuracy(enabled=False)), ("on", Accuracy())):
            wall, phases, verdicts = results[label]
            instrument(phases)
            start = time.perf_counter()
            for m in models:
                for res in group(m, accuracy):
                    verdicts += [(m, res.outcome.config, c.scenario, c.accuracy) for c in res.outcome.calls]
            results[label] = (wall + time.perf_counter() - start, phases, verdicts)
            phases.restore()
            scenarios.copy = copy
    results = {k: (wall, dict(p.seconds), v, dict(p.count)) for k, (wall, p, v) in results.items()}
    names = sorted(set(results["off"][1]) | set(results["on"][1]), key=lambda n: -results["on"][1].get(n, 0.0))
    print(f"{'phase':42} {'off s':>8} {'on s':>8} {'on n':>6}")
    for name in names:
        print(f"{name:42} {results['off'][1].get(name, 0.0):8.2f} {results['on'][1].get(name, 0.0):8.2f} "
              f"{results['on'][3].get(name, 0):6}")
    off, on = results["off"][0], results["on"][0]
    timed_on = sum(results["on"][1].values())
    print(f"{'(untimed rest)':42} {off - sum(results['off'][1].values()):8.2f} {on - timed_on:8.2f}")
    print(f"{'wall':42} {off:8.2f} {on:8.2f}   on/off {on / off:.2f}")
    second = results["on"][1].get("compiled call: second_size", 0.0)
    # the rest: the phases only the checks run (the shared ones, first compile included, differ by the load alone)
    rest = sum(t for n, t in results["on"][1].items() if n not in results["off"][1]) - second
    print(f"added by the checks: {on - off:.2f}s = {(on - off) / off:.0%} of the off wall; the second-size call "
          f"(its recompile) {second:.2f}s = {second / off:.0%}, the other phases only the checks run {rest:.2f}s = "
          f"{rest / off:.0%}")
    print("verdicts (scenario, accuracy) with the checks on:", dict(Counter(v[2:] for v in results["on"][2])))
    print(f"after: {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
