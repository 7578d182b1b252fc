"""Benchmark (not a test): what each mode costs against `eval`, and the models each mode cannot run.

The models x the three default configs (baseline and the two built-in flags), swept once per mode at one worker with
the checks on ([accuracy] defaults), each mode its own run in one store, in one process (so a shared machine's load
drifts into every mode alike: the load is printed beside each mode's wall). Prints per mode: items, the wall, its
ratio to eval's, the models it could not run (skipped: the lock's modes record says so; create_error: it failed in
eager in the mode, with the reason) and the correctness effects it found. `--chunk N` sweeps N models at a time
through every mode and prints each chunk's table as it ends (a run cut short keeps whole rows).

    nice .venv/bin/python bench/modes_cost.py --models GPT2Model,BertModel
    nice .venv/bin/python bench/modes_cost.py --models public --chunk 4   # the public corpus comparison's 20
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep_common import machine  # noqa: E402
from harness.core.effects import effects_for  # noqa: E402
from harness.core.modes import BUILTIN, resolve  # noqa: E402
from harness.core.options import Accuracy, SweepOptions  # noqa: E402
from harness.engine.configs import BUILTIN as CONFIGS  # noqa: E402
from harness.engine.engine import SweepRequest, sweep  # noqa: E402
from state import db, runs  # noqa: E402


# The 20 models of the public corpus comparison (issue 46's benchmark), cheapest first as this machine builds them.
PUBLIC = ("BertModel,GPT2Model,DistilBertModel,RobertaModel,OPTModel,GPTNeoXModel,ViTModel,LlamaForCausalLM,"
          "MistralModel,Qwen2Model,T5Model,BartModel,FlaubertModel,LongformerModel,ReformerModel,CLIPModel,"
          "WhisperModel,MimiModel,Qwen2VLForConditionalGeneration,Glm4vForConditionalGeneration")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="GPT2Model,BertModel", help="names, or `public`: the comparison's 20")
    parser.add_argument("--modes", default="eval,train,bf16,dynamic-true,sdpa")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=0, help="models a table (0: all in one)")
    args = parser.parse_args()
    models = [m.strip() for m in (PUBLIC if args.models == "public" else args.models).split(",")]
    modes = resolve([m.strip() for m in args.modes.split(",")], BUILTIN)
    conn = db.connect(Path(tempfile.mkdtemp(prefix="modes-bench-")) / "state.sqlite")
    options = SweepOptions(workers=args.workers, accuracy=Accuracy())
    size = args.chunk or len(models)
    for at in range(0, len(models), size):
        table(conn, models[at:at + size], modes, options)
    return 0


def table(conn: object, models: list[str], modes: list, options: SweepOptions) -> None:
    """Sweep `models` once per mode and print the table."""
    print(f"models: {', '.join(models)}; {machine('before')}", flush=True)
    rows = []
    for mode in modes:
        start = time.perf_counter()
        swept = sweep(conn, SweepRequest(models=models, configs=dict(CONFIGS), progress=False,
                                         options=dataclasses.replace(options, mode=mode)))
        wall = time.perf_counter() - start
        outcomes = runs.outcomes(conn, swept.run.id)
        cannot = sorted({f"{o.model} ({o.status}): {o.error_message}" for o in outcomes
                         if o.status in ("create_error", "skipped")})
        found = Counter(e.correctness for e in effects_for(outcomes) if e.correctness)
        rows.append((mode.name, len(outcomes), wall, cannot, dict(found), machine("")))
        print(f"  {mode.name}: {wall:.1f} s ({machine('')})", flush=True)
    base = next((wall for name, _, wall, *_ in rows if name == "eval"), rows[0][2])
    print(f"{'mode':<16} {'items':>5} {'wall s':>8} {'x eval':>7}  correctness effects; load")
    for name, items, wall, cannot, found, load in rows:
        print(f"{name:<16} {items:>5} {wall:>8.1f} {wall / base:>7.2f}  {found}; {load}")
        for line in cannot:
            print(f"    cannot run: {line[:200]}")
    print(machine("after"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
