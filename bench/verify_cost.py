"""Verify-step cost (not a test): night 1 on the bot's torch with 1 and 2 workers, night 2 on torch 2.14.1.

Sweeps MODELS (default: the seed-named models, those of them in the corpus) under
capture_scalar_outputs and capture_dynamic_output_shape_ops in dry run. Night 1 runs
twice on fresh stores (1, then 2 workers: the verify step's wall time each); night 2
sweeps the same models on the second torch (/tmp/torch214, installed by
bench/cross_version.py when missing) into the 2-worker store, so its open signatures
carry their shrunk cases. Prints, as JSON: the step's seconds and scripts per night
(state.verdicts.StepCost), the 1→2 worker speed-up, night 2 as a fraction of night 1,
and the load (`uptime`). `--models A,B` for fewer.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bot.pipeline import nightly  # noqa: E402
from bot.settings import Settings, SweepSettings  # noqa: E402
from cross_version import install_second  # noqa: E402
from state import db, verdicts  # noqa: E402

SEEDS = ["Qwen2VLForConditionalGeneration", "MimiModel", "Qwen2_5_VLForConditionalGeneration", "GPT2Model",
         "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "PhiForCausalLM", "GemmaForCausalLM",
         "BertModel", "T5Model", "WhisperModel"]


def night(state: Path, python: str, names: list[str], workers: int, out: Path) -> dict:
    settings = Settings(state_path=state, sweep=SweepSettings(workers=workers))
    conn = db.connect(state)
    result = nightly.run_nightly(conn, settings, torch=python, models=names, force=True, dry_run=True, out_dir=out,
                                 progress=True)
    cost = verdicts.step_cost(conn, result.run_id) if result.run_id else None
    conn.close()
    return {"torch": result.torch.get("version"), "status": result.status, "transitions": result.transitions,
            "verify": asdict(cost) if cost else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated models (default: the seed-named ones)")
    ap.add_argument("--second", default="/tmp/torch214")
    args = ap.parse_args()
    names = args.models.split(",") if args.models else SEEDS
    python2, _ = install_second(Path(args.second), "2.14.1")
    with tempfile.TemporaryDirectory(prefix="flagsweep-verify-cost-") as tmp:
        t = Path(tmp)
        one = night(t / "w1.sqlite", sys.executable, names, 1, t / "o1")
        two = night(t / "w2.sqlite", sys.executable, names, 2, t / "o2")
        second = night(t / "w2.sqlite", python2, names, 2, t / "o3")
    s1, s2, n2 = (x["verify"]["seconds"] if x["verify"] else None for x in (one, two, second))
    report = {"models": names, "night1_workers1": one, "night1_workers2": two, "night2_workers2": second,
              "speedup_2_workers": round(s1 / s2, 2) if s1 and s2 else None,
              "night2_fraction_of_night1": round(n2 / s2, 3) if n2 is not None and s2 else None,
              "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
