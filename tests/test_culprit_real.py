"""The overlay bisection for real: git over a slice of the installed torch, the reproducer run in fresh interpreters.

One module-scoped overlay of the installed torch (Python copied, the rest linked) serves every test; each
bisection lays its commit's files over it. The planted series is searched once (4 probes of 3 runs: the last commit,
one probe between, the culprit and its parent re-tested) and stored; the cache then answers a second ask.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.builds import checkout
from bot.ranges import culprit, overlay
from bot.settings import CulpritSettings
from bot.verify import overlay_run
from harness.core.commits import nightly_main_sha
from harness.core.suspects import Crash
from harness.engine.script_runner import run_script
from state import culprits as store
from state import db
from tests import culprit_series as series

PYTHON = str(Path(__import__("sys").executable))
SETTINGS = CulpritSettings(runs=3, max_minutes=10)


@pytest.fixture(scope="module")
def overlay_root(tmp_path_factory) -> Path:
    return overlay.make(series.TORCH_DIR, tmp_path_factory.mktemp("overlay"))


def steps_for(s: series.Series, script: str) -> culprit.CulpritSteps:
    return culprit.CulpritSteps(commits=lambda good, bad: checkout.commits(s.repo, good, bad),
                                file_at=lambda sha, path: checkout.file_at(s.repo, sha, path),
                                run=overlay_run.runner(script, PYTHON, timeout=120))


CRASH = Crash(frames=(series.BUILTIN, "torch/_dynamo/symbolic_convert.py"), flag_modules=("torch/_dynamo/config.py",),
              component="dynamo")


def test_import_torch_loads_the_overlay_and_writes_never_reach_the_build(overlay_root):
    probe = ('import json, torch\nprint("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", '
             '"signature": torch.__file__}))\n')
    assert overlay_run.answer(probe, overlay_root, PYTHON, 120) == str(overlay_root / "torch" / "__init__.py")
    assert (overlay_root / "torch/lib").is_dir() and any(p.is_symlink() for p in (overlay_root / "torch/lib").iterdir())
    overlay.lay(overlay_root, {series.BUILTIN: "# replaced\n"})
    assert "replaced" not in (series.TORCH_DIR / series.BUILTIN[len("torch/"):]).read_text()
    overlay.lay(overlay_root, {series.BUILTIN: (series.TORCH_DIR / series.BUILTIN[len("torch/"):]).read_text()})


def test_the_overlay_bisection_names_the_planted_commit(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["harmless1", "planted", "cpp", "harmless2"])
    good = nightly_main_sha(checkout.message(s.repo, s.nightly))       # the good build's torch_git -> main
    assert good == s.good
    conn = db.connect(tmp_path / "state.sqlite")
    steps = steps_for(s, series.REPRO)
    found, cached = culprit.cached(conn, steps, signature=series.SIGNATURE, good=good, bad=s.shas["harmless2"],
                                   crash=CRASH, settings=SETTINGS, torch_dir=series.TORCH_DIR, work=overlay_root)
    assert not cached and found.status == "found", found.reason
    assert found.bisection.culprit == s.shas["planted"] and found.bisection.parent == s.shas["harmless1"]
    named = found.culprit
    assert (named.pr, named.author, named.coauthors, named.approvers) == (1002, "bob", ("carol",),
                                                                           ("reviewer2", "reviewer3"))
    # the cut after the culprit is said, with why
    assert f"stops between {s.shas['planted'][:12]} and {s.shas['cpp'][:12]}" in found.reason
    assert "torch/csrc/dynamo/eval_frame.cpp" in found.reason
    # evidence: the culprit failed every re-test run with the signature, its parent passed every one
    retest = {p.sha: p for p in found.bisection.probes if p.phase == "retest"}
    assert retest[s.shas["planted"]].runs == [series.SIGNATURE] * 3 and retest[s.shas["harmless1"]].runs == ["ok"] * 3
    assert found.bisection.runs == 12 and len(found.bisection.probes) == 4
    # ranked suspects: the planted commit touches the innermost frame's file
    assert found.suspects[0].sha in (s.shas["planted"], s.shas["harmless2"])
    # cached per (signature, range): asked again, nothing runs
    again, cached = culprit.cached(conn, dataclasses.replace(steps, run=_never), signature=series.SIGNATURE,
                                   good=good, bad=s.shas["harmless2"], crash=CRASH, settings=SETTINGS,
                                   torch_dir=series.TORCH_DIR, work=overlay_root)
    assert cached and again.bisection.culprit == s.shas["planted"]


def _never(root: Path) -> str:
    raise AssertionError("a cached range ran a reproducer")


def test_a_cpp_commit_before_the_planted_one_stops_the_search_and_says_so(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["cpp", "harmless1", "planted"])
    found = culprit.find(dataclasses.replace(steps_for(s, series.REPRO), run=_never), signature=series.SIGNATURE,
                         good=s.good, bad=s.shas["planted"], crash=CRASH, settings=SETTINGS,
                         torch_dir=series.TORCH_DIR, work=overlay_root)
    assert found.status == "cut" and found.bisection is None
    assert found.reason == (f"the overlay search stops between the good build and {s.shas['cpp'][:12]}: it changes "
                            "torch/csrc/dynamo/eval_frame.cpp, which is not Python in the torch package")
    assert [c.sha for c in found.commits] == [s.shas[n] for n in ("cpp", "harmless1", "planted")]


FLAKY = '''import json, os
count = os.path.join({folder!r}, "count")
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
line = {{"v": 1, "status": "ok"}} if n % 2 else {{"v": 1, "status": "error", "signature": {sig!r}}}
print("FLAGSWEEP_RESULT " + json.dumps(line))
'''


def test_a_reproducer_failing_one_run_in_two_names_no_culprit(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["harmless1", "planted"])
    script = FLAKY.format(folder=str(tmp_path), sig=series.SIGNATURE)
    found = culprit.find(steps_for(s, script), signature=series.SIGNATURE, good=s.good, bad=s.shas["planted"],
                         crash=CRASH, settings=SETTINGS, torch_dir=series.TORCH_DIR, work=overlay_root)
    assert found.status == "flaky" and found.bisection.culprit is None
    assert "the reproducer is flaky" in found.reason and "no culprit is named" in found.reason
