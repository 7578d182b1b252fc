"""What the regression-range search adds to a nightly with one new crash (not a test; prints numbers from ONE run).

Ten nightlies of a fake torch wheel on a local PEP 503 index (installed for real
by the provider into cached venvs); the sweeps themselves run the real engine on
this machine's torch over a few tiny corpus models plus `BenchRegressingModel`,
which crashes under capture_scalar_outputs from the FLIP nightly on. Night 1 is the
first nightly, night 2 the last: the range step bisects the eight between.

    .venv/bin/python bench/stage_range.py [--models 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sweep_common import corpus_models, machine  # noqa: E402
from bot.pipeline import nightly, steps as steps_mod  # noqa: E402
from bot.settings import ConfirmSettings, NightlySettings, Settings, VerifySettings  # noqa: E402
from state import db, runs  # noqa: E402
from tests.fakeindex import FakeIndex  # noqa: E402

import bench.range_models  # noqa: E402,F401  (registers BenchRegressingModel in this process)

DATES = [(date(2026, 11, 1) + timedelta(days=i)).isoformat() for i in range(10)]
FLIP = DATES[5]
EXTRA = ["bench.range_models"]


class Clock:
    """Times and counts the steps the bench wraps."""

    def __init__(self) -> None:
        self.sweep_s: list[float] = []
        self.install_s: list[float] = []
        self.probe_s: list[float] = []
        self.range_s = 0.0
        self.range_dates: list[str] = []
        self.built = None


def _broken_on(day: str) -> None:
    os.environ["FLAGSWEEP_BENCH_BROKEN"] = "1" if day >= FLIP else "0"   # workers inherit it when spawned


def make_steps(clock: Clock, models: list[str]) -> steps_mod.Steps:
    from harness.engine import engine

    def provide(settings, torch, day, progress):
        t = time.perf_counter()
        built = steps_mod.provide(settings, torch, day, False)       # the real provider: pip into a cached venv
        clock.install_s.append(time.perf_counter() - t)
        clock.built = built
        _broken_on(built.date)
        return dataclasses.replace(built, python=sys.executable)     # the fake wheel has no compiler: run ours

    def sweep(conn, request):
        t = time.perf_counter()
        run = engine.sweep(conn, dataclasses.replace(
            request, options=dataclasses.replace(request.options, extra_modules=list(EXTRA)), progress=False)).run
        # the run is of the installed (fake) nightly, though our torch compiled it: store it as that torch's
        env = dataclasses.replace(run.environment, torch_version=clock.built.version, torch_git=clock.built.git)
        conn.execute("UPDATE runs SET environment_id = ? WHERE id = ?", (runs.environment_id(conn, env), run.id))
        run = runs.get_run(conn, run.id)
        clock.sweep_s.append(time.perf_counter() - t)
        return run

    def range_sweep(items, *, configs, base_settings, build, settings):
        t = time.perf_counter()
        _broken_on(build.date)
        clock.range_dates.append(build.date)
        out = engine.run_items(items, configs=configs, base_settings=base_settings,
                               options=settings.sweep_options(build.python, EXTRA))
        clock.probe_s.append(time.perf_counter() - t)
        return out

    def ranges(*a, **kw):
        t = time.perf_counter()
        found = steps_mod.ranges(*a, **kw)
        clock.range_s += time.perf_counter() - t
        return found

    return steps_mod.Steps(provide=provide, resolve_models=lambda pats: list(models), sweep=sweep,
                           range_sweep=range_sweep, ranges=ranges)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=3, help="tiny corpus models beside the regressing one")
    args = ap.parse_args()
    models = corpus_models(args.models) + ["BenchRegressingModel"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        idx = FakeIndex(tmp / "index")
        for d in DATES:
            idx.add(f"2.14.0.dev{d.replace('-', '')}+cpu", (d.replace("-", "") * 5)[:40])
        nightly_settings = NightlySettings(index_url=idx.url, channel="cpu", venv_dir=str(tmp / "venvs"),
                                           transformers_pin="", extra_index_url="", no_deps=True,
                                           pip_args=["--isolated"], configs=["capture_scalar_outputs"])
        settings = Settings(state_path=tmp / "state.sqlite", nightly=nightly_settings,
                            confirm=ConfirmSettings(runs=0), verify=VerifySettings(enabled=False))
        conn = db.connect(settings.state_path)
        clock = Clock()
        steps = make_steps(clock, models)
        nightly.run_nightly(conn, settings, date=DATES[0], out_dir=tmp / "o1", steps=steps, progress=False)
        t = time.perf_counter()
        second = nightly.run_nightly(conn, settings, date=DATES[-1], out_dir=tmp / "o2", steps=steps, progress=False)
        night_s = time.perf_counter() - t
        idx.close()
    sweep_s = clock.sweep_s[-1]
    print(f"nightly of {len(models)} models x 2 configs on {DATES[-1]} vs {DATES[0]}: "
          f"{second.transitions} ({machine()})")
    for r in second.ranges:
        print(f"  {r['kind']} {r['signature'][:60]}: {r['status']} {r['good']['date']} .. {r['bad']['date']}"
              f" ({r['installs']} installs){' ' + r['reason'] if r['reason'] else ''}")
    print(f"  nightly sweep:              {sweep_s:7.1f} s ({len(models) * 2} items)")
    print(f"  nightly total (diff..report): {night_s:5.1f} s")
    print(f"  range search:               {clock.range_s:7.1f} s = {clock.range_s / sweep_s:.2f} x the nightly sweep")
    print(f"    installs: {second.range_cost['installs']} (of {len(DATES) - 2} nightlies between;"
          f" {sum(clock.install_s[2:]):.1f} s, fake wheels: a real nightly wheel is ~200 MB and costs more)")
    print(f"    probe sweeps: {second.range_cost['sweeps']} ({second.range_cost['items_swept']} items;"
          f" {sum(clock.probe_s):.1f} s), builds probed: {', '.join(clock.range_dates)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
