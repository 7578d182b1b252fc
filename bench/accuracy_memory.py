"""Benchmark (not a test): where a model's peak memory goes with the checks on, step by step, in one process.

The steps a worker's group takes for the baseline, one model at a time, each in a fresh interpreter (a step's
memory cannot hide in another model's): the build and one eager forward (all a sweep with the checks off holds), eager's
references (harness.engine.scenarios.References: a deep copy, its outputs, the weight step), the compile and its
first call, the first call judged (the fp64 reference, where a difference needs it), then each later call. Prints the
resident set and the peak (VmHWM) after each step, the outputs' shapes, and the peak with the checks on over the
peak after the build and eager forward (a sweep with the checks off compiles too: bench/accuracy_cost.py measures
the ratio of the sweeps themselves, target at most 2x; this one shows where the peak with the checks on goes).

    nice .venv/bin/python bench/accuracy_memory.py          # MODELS: the issue's list
    nice .venv/bin/python bench/accuracy_memory.py FlaubertModel PaliGemmaForConditionalGeneration

Ends with a table of every model: the peak after the build and eager forward, the peak with the checks on, their
ratio (target at most 2x) and whether the peak with the checks on stays under LIMIT_MB.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The large-output models, then the 20 of the public corpus comparison (Flaubert and Longformer are in both).
MODELS = ("FlaubertModel", "PaliGemmaForConditionalGeneration", "LongformerModel", "BertModel", "GPT2Model",
          "LlamaForCausalLM", "MistralModel", "Qwen2Model", "T5Model", "BartModel", "ReformerModel", "MimiModel",
          "ViTModel", "CLIPModel", "WhisperModel", "DistilBertModel", "RobertaModel", "OPTModel", "GPTNeoXModel",
          "Qwen2VLForConditionalGeneration", "Glm4vForConditionalGeneration")
RATIO = 2.0       # the target: peak with the checks on at most twice the peak with them off
LIMIT_MB = 2048   # and no model over 2 GB with the checks on
PEAKS = "peaks:"  # the child's last line: its two peaks, for the table


def steps(model: str) -> None:
    """One model's steps, printed as they end (run in its own interpreter)."""
    import torch

    from harness.core.options import Accuracy
    from harness.engine import backend, measure, scenarios
    from harness.engine.accuracy import leaves
    from harness.zoo.build import build

    def say(step: str) -> float:
        peak = measure.status_mb("VmHWM:")
        print(f"  {step:40} rss {measure.rss_mb():8.0f} MB   peak {peak:8.0f} MB", flush=True)
        return peak

    built = build(model, "cpu")
    out = scenarios.run(built.module, built.inputs)
    shapes = [f"{leaf.path} {tuple(leaf.value.shape)}" for leaf in leaves(out) if isinstance(leaf.value, torch.Tensor)]
    print(f"{model}: outputs {', '.join(shapes[:4])}{' ...' if len(shapes) > 4 else ''}")
    del out
    off = on = say("built, one eager forward (checks off)")
    refs = scenarios.References(model, built, "cpu", Accuracy())
    say("eager's references")
    done = backend.compile_and_run(built.module, scenarios.clone(built.inputs), settings={}, backend="count")
    say("compiled, first call")
    recorder = scenarios.Recorder()
    first = scenarios.first_call(done.output, done.stats.graphs, refs, recorder)
    done.output = None
    say(f"first call judged: {first.accuracy}")
    with done.again():
        for step in refs.steps:
            call = scenarios.later_call(step, done.compiled, lambda: done.stats.graphs, built.module, refs, recorder,
                                        measure.error_fields)
            on = say(f"{step.scenario}: {call.accuracy}")
    print(f"  peak with the checks on / after the build and eager forward: {on / off:.2f}; fp64 runs: {refs.fp64_runs}")
    print(PEAKS, off, on, flush=True)


def one(model: str) -> tuple[float, float] | None:
    """A model's (peak off, peak on) measured in its own interpreter, its steps printed; None when it broke."""
    done = subprocess.run([sys.executable, __file__, "--one", model], check=False, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    lines = done.stdout.splitlines()
    print("\n".join(line for line in lines if not line.startswith(PEAKS)), flush=True)
    last = next((line.split()[1:] for line in reversed(lines) if line.startswith(PEAKS)), None)
    return (float(last[0]), float(last[1])) if last else None


def table(peaks: dict[str, tuple[float, float] | None]) -> str:
    """Every model's peaks, ratio and verdicts, and how many missed the targets."""
    rows = [f"{'model':40} {'off MB':>8} {'on MB':>8} {'on/off':>7}  <={RATIO:g}x  <{LIMIT_MB} MB"]
    misses = 0
    for model, p in peaks.items():
        if p is None:
            rows.append(f"{model:40} {'broke':>8}")
            misses += 1
            continue
        ratio = p[1] / p[0]
        ok_ratio, ok_mb = ratio <= RATIO, p[1] < LIMIT_MB
        misses += not (ok_ratio and ok_mb)
        rows.append(f"{model:40} {p[0]:8.0f} {p[1]:8.0f} {ratio:7.2f}  {'yes' if ok_ratio else 'NO':>5}  "
                    f"{'yes' if ok_mb else 'NO':>5}")
    rows.append(f"{len(peaks) - misses} of {len(peaks)} models within both targets")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)   # the child: one model, this process
    args = ap.parse_args()
    if args.one:
        steps(args.models[0])
        return 0
    from bench.sweep_common import machine

    print(machine("at the start"))
    peaks = {model: one(model) for model in args.models}
    print(machine())
    print(table(peaks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
