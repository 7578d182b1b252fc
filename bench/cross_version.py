"""Cross-version check (not a test): the nightly pipeline under the bot's torch, then under a second real torch.

Installs the second torch into its own venv (default: torch==2.14.1 with the pinned
transformers, into /tmp/torch214; reused when it is already there), sweeps the
default corpus (or a stratified subset, --models N) with the nightly's configs plus
two configs that exist in only one of the two torches, under the bot's torch and
then under the second one, each as `flagsweep nightly --dry-run --torch <python>`
would (real engine, real store, dry-run publish with reproducers verified on the
run's own interpreter). Prints the transitions, the install and sweep times, how
the one-sided configs came out, and on which torch the reproducers were verified.

Run: .venv/bin/python bench/cross_version.py [--models N] [--second PYTHON] [--workers W]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.pipeline import nightly  # noqa: E402
from bot.settings import NightlySettings, Settings, SweepSettings  # noqa: E402
from state import db, runs  # noqa: E402

SECOND = "2.14.1"
# Each exists in only one of torch 2.13.0 and 2.14.1 (checked in both on 2026-11-23).
ONE_SIDED = {
    "partitioned_scatter_budget": {"torch._inductor.config.partitioned_scatter_memory_budget": 0.5},   # 2.13.0 only
    "canonical_node_order": {"torch._dynamo.config.canonicalize_output_graph_node_order": True},        # 2.14.1 only
}
CONFIG_FILE = """
[configs.partitioned_scatter_budget]
"torch._inductor.config.partitioned_scatter_memory_budget" = 0.5

[configs.canonical_node_order]
"torch._dynamo.config.canonicalize_output_graph_node_order" = true
"""


def install_second(venv: Path, version: str) -> tuple[str, float | None]:
    """(python, seconds spent installing; None when the venv was already there)."""
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import torch, transformers"]).returncode == 0:
        return str(python), None
    from importlib.metadata import version as installed

    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"torch=={version}",
                    f"transformers=={installed('transformers')}", f"numpy=={installed('numpy')}",
                    f"scipy=={installed('scipy')}", f"safetensors=={installed('safetensors')}"], check=True)
    return str(python), time.perf_counter() - start


def models(n: int | None) -> list[str]:
    """The default corpus, or n of it, stratified (the zoo's sampler)."""
    from harness import zoo
    from harness.zoo.corpus import DEFAULT_CORPUS

    cands = zoo.resolve(list(DEFAULT_CORPUS))
    return [c.model for c in (zoo.sample(cands, n, 0) if n else cands)]


def one_night(conn, settings: Settings, python: str, names: list[str], out: Path) -> tuple[nightly.NightlyResult, float]:
    start = time.perf_counter()
    result = nightly.run_nightly(conn, settings, torch=python, models=names, force=True, dry_run=True,
                                 out_dir=out, progress=True)
    return result, time.perf_counter() - start


def one_sided_report(conn, run_id: int) -> dict[str, dict]:
    """How each one-sided config came out in a run: statuses and error types, or unavailable."""
    run = runs.get_run(conn, run_id)
    out: dict[str, dict] = {}
    for name in ONE_SIDED:
        outs = [o for o in runs.outcomes(conn, run_id) if o.config == name]
        unavailable = run.unavailable if run else {}
        out[name] = {"swept": len(outs), "statuses": dict(Counter(o.status for o in outs)),
                     "errors": dict(Counter(o.error_type for o in outs if o.error_type)),
                     "unavailable": name in unavailable or name not in (run.configs if run else {})}
    return out


def planned(out: Path) -> dict:
    """Titles of the issues a dry run planned, and the torch their reproducers were verified on."""
    plan = json.loads((out / "plan.json").read_text())
    titles = [a["title"] for a in plan["actions"] if a["action"] == "create" and a.get("title")]
    verified = Counter()
    for a in plan["actions"]:
        if a.get("file"):
            for line in (out / a["file"]).read_text().splitlines():
                if line.startswith("Verified on torch"):
                    verified[line] += 1
    return {"issues": titles, "verified": dict(verified)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, help="a stratified subset of N models (default: the whole default corpus)")
    ap.add_argument("--second", default="/tmp/torch214", help="venv of the second torch (installed when missing)")
    ap.add_argument("--version", default=SECOND, help="the second torch's version, when it has to be installed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    python2, install_s = install_second(Path(args.second), args.version)
    names = models(args.models)
    with tempfile.TemporaryDirectory(prefix="flagsweep-cross-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "configs.toml").write_text(CONFIG_FILE)
        sweep = SweepSettings(config_file=str(tmp_path / "configs.toml"), workers=args.workers, timeout=args.timeout)
        nightly_settings = NightlySettings(configs=list(NightlySettings().configs) + list(ONE_SIDED))
        settings = Settings(state_path=tmp_path / "state.sqlite", sweep=sweep, nightly=nightly_settings)
        conn = db.connect(settings.state_path)
        first, first_s = one_night(conn, settings, sys.executable, names, tmp_path / "out-first")
        second, second_s = one_night(conn, settings, python2, names, tmp_path / "out-second")
        report = {
            "models": len(names), "subset": bool(args.models), "names": names,
            "configs": second.configs or first.configs,
            "first": {"torch": first.torch.get("version"), "git": first.torch.get("git"), "status": first.status,
                      "reason": first.reason, "nightly_s": round(first_s, 1),
                      "one_sided": one_sided_report(conn, first.run_id) if first.run_id else None},
            # nightly_s: the whole `nightly` (sweep, diff, flake confirmation, dry-run publish with
            # reproducers verified on the run's interpreter, report)
            "second": {"torch": second.torch.get("version"), "git": second.torch.get("git"), "status": second.status,
                       "reason": second.reason, "nightly_s": round(second_s, 1), "install_s": install_s and round(install_s, 1),
                       "one_sided": one_sided_report(conn, second.run_id) if second.run_id else None},
            "transitions": second.transitions, "previous_run": second.previous_run,
            "planned_first": planned(tmp_path / "out-first") if first.status != "failed" else None,
            "planned_second": planned(tmp_path / "out-second") if second.status != "failed" else None,
        }
        conn.close()
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
