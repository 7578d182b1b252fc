"""What the minimal-reproducer stage adds to a nightly with one new crash (not a test).

One real sweep of MimiModel under the baseline and capture_scalar_outputs (torch 2.13
crashes it with PendingUnbackedSymbolNotFound), stored in a real SQLite file, then
three dry runs of the pipeline's verify step and the publish after it (bot.pipeline.steps.verify,
bot.github.publish.publish_run), each on a copy of the swept store:
  1. reproducer verified, not shrunk ([issues] shrink_budget = 0), no stored verdict;
  2. verified and shrunk under the default budget, no stored verdict;
  3. the same again on the store of 2 (the quiet nightly): it must run nothing.
Prints the sweep time of the model, what the shrink did (tries, kept, seconds, the
ratios of parameters, lines, input elements and script run time) and the shrink's
cost as a ratio to that sweep time; writes the rendered tracking issue of publish 2.

Run: .venv/bin/python bench/stage_shrink.py [--budget SECONDS] [--issue-out FILE]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.github import publish  # noqa: E402
from bot.pipeline import steps  # noqa: E402
from bot.verify.steps import VerifySteps, render_and_run  # noqa: E402
from bot.settings import Settings, VerifySettings  # noqa: E402
from harness.engine import engine  # noqa: E402
from harness.engine.engine import SweepRequest  # noqa: E402
from state import db, history  # noqa: E402
from state.verdicts import Verdict  # noqa: E402

MODEL = "MimiModel"
CSO = {"torch._dynamo.config.capture_scalar_outputs": True}


def _publish(swept: Path, run_id: int, budget: float, store_dir: Path, out: Path) -> tuple[float, int, Verdict]:
    """(seconds, reproducer runs, the tracking verdict) of the verify step and a dry-run publish on store_dir's copy."""
    calls = []

    def counting(*args):
        calls.append(1)
        return render_and_run(*args)

    store = store_dir / "state.sqlite"
    if not store.exists():
        shutil.copyfile(swept, store)         # the swept run, no verdict stored yet
    settings = Settings(state_path=store, verify=VerifySettings(shrink_budget=budget))
    conn = db.connect(store)
    try:
        t0 = time.perf_counter()
        (found,) = steps.verify(conn, run_id, settings, seams=VerifySteps(run=counting)).values()
        publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                            publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
        seconds = time.perf_counter() - t0
    finally:
        conn.close()
    return seconds, len(calls), found.verdict


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a and b else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--issue-out", default="", help="write the shrunk tracking issue here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="stage-shrink-"))
    store = tmp / "state.sqlite"
    conn = db.connect(store)
    t0 = time.perf_counter()
    run_id = engine.sweep(conn, SweepRequest(models=[MODEL], configs={"capture_scalar_outputs": CSO}, base_settings={},
                          options=engine.SweepOptions(workers=1, timeout=600), progress=False)).run.id
    sweep_s = time.perf_counter() - t0
    history.finalize_run(conn, run_id)
    conn.close()                              # checkpoints the WAL: the file alone holds the run
    for name in ("verify", "shrink"):
        (tmp / name).mkdir()
    verify_s, verify_runs, plain = _publish(store, run_id, 0, tmp / "verify", tmp / "out-verify")
    total_s, total_runs, shrunk = _publish(store, run_id, args.budget, tmp / "shrink", tmp / "out-shrink")
    quiet_s, quiet_runs, again = _publish(store, run_id, args.budget, tmp / "shrink", tmp / "out-quiet")
    st = shrunk.shrink.stats if shrunk.shrink else {}
    before, after = st.get("before", {}), st.get("after", {})
    print(f"model {MODEL} under capture_scalar_outputs; verdict {plain.status}; shrink budget {args.budget:.0f} s")
    print(f"sweep of the model (baseline + flag)  {sweep_s:8.1f} s")
    print(f"publish, verify only                  {verify_s:8.1f} s  runs {verify_runs}")
    print(f"publish, verify + shrink              {total_s:8.1f} s  runs {total_runs}")
    print(f"publish again (quiet nightly, stored) {quiet_s:8.1f} s  runs {quiet_runs}  same verdict: {again == shrunk}")
    print(f"shrink: tries {st.get('tries')}, kept {st.get('kept')}, {st.get('seconds')} s, stopped: {st.get('stopped')}")
    for field, old, new in st.get("rows", []):
        print(f"  {field}: {old} -> {new}")
    print(f"  config fields left at defaults: {st.get('defaulted')}; inputs dropped: {st.get('dropped')}")
    for what in ("parameters", "seconds", "lines", "data_lines", "input_elements"):
        print(f"{what:>15}: {before.get(what)} -> {after.get(what)}  ratio {_ratio(after.get(what), before.get(what))}")
    shrink_cost = total_s - verify_s
    print(f"shrink adds {shrink_cost:.1f} s to the publish = {_ratio(shrink_cost, sweep_s)} x the model's sweep time "
          f"({total_runs - verify_runs} extra reproducer runs; quiet nightly: {quiet_runs} runs)")
    if args.issue_out:
        plan = json.loads((tmp / "out-shrink" / "plan.json").read_text())
        crash = [a for a in plan["actions"] if a["action"] == "create" and "crashes" in (a.get("title") or "")]
        Path(args.issue_out).write_text((tmp / "out-shrink" / crash[0]["file"]).read_text())
        print(f"tracking issue written to {args.issue_out}")


if __name__ == "__main__":
    main()
