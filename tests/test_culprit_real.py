"""The overlay bisection for real: git over a slice of the installed torch, the reproducer run in fresh interpreters.

The planted series is searched once, by the night's culprit step over two stored nightlies (4 probes of 3 runs: the
last Python commit, one probe between, the culprit and its parent re-tested), stored, and published in a dry run;
the cache then answers a second ask. The overlay of the installed torch (Python copied, the rest linked) the night
made beside its store serves the other tests too, as it serves later nights: the package is copied once.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot.builds import checkout
from bot.github import publish
from bot.github.dryrun import DryRunPublisher
from bot.issues.keys import tracking_key
from bot.pipeline import culprit as pipeline_culprit
from bot.ranges import culprit, overlay
from bot.settings import CulpritSettings, IssueSettings, Settings, VerifySettings
from bot.verify import overlay_run
from harness.core.commits import Person
from harness.core.suspects import Crash
from state import db, ranges, verdicts
from state.ranges import Build, Range
from tests import culprit_series as series
from tests import historydata as hd

PYTHON = str(Path(__import__("sys").executable))
SETTINGS = CulpritSettings(runs=3, max_minutes=10)




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
    overlay.lay(overlay_root, {series.BUILTIN: "# replaced\n", "torch/_dynamo/new_module.py": "x = 1\n"})
    built = (series.TORCH_DIR / series.BUILTIN[len("torch/"):]).read_text()
    assert "replaced" not in built and not (series.TORCH_DIR / "_dynamo/new_module.py").exists()
    # made again for the next bisection: every laid file is the build's again (or gone)
    overlay.make(series.TORCH_DIR, overlay_root)
    assert (overlay_root / series.BUILTIN).read_text() == built
    assert not (overlay_root / "torch/_dynamo/new_module.py").exists()


CONFIG = "capture_scalar_outputs"
TRACEBACK = ("Traceback (most recent call last):\n"
             '  File "/venv/site-packages/torch/_dynamo/symbolic_convert.py", line 10, in step\n'
             '  File "/venv/site-packages/torch/_dynamo/variables/builtin.py", line 20, in call_function\n'
             "NotImplementedError: abs() of a traced value\n")


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    """Two stored nightlies over the planted series (the second crashes), its regression range and verified
    reproducer, and the night's culprit step run for real on them: git, an overlay, the reproducer in fresh
    interpreters."""
    tmp = tmp_path_factory.mktemp("night")
    s = series.build(tmp / "repo", ["harmless1", "planted", "cpp", "harmless2"])
    good_nightly, bad_nightly = s.nightly, series.nightly_of(s, s.shas["harmless2"], "2026-11-28")
    settings = Settings(state_path=tmp / "state.sqlite", issues=IssueSettings(min_models=1),
                        verify=VerifySettings(enabled=False, timeout=120),
                        culprit=CulpritSettings(checkout=str(s.repo), runs=3, max_minutes=10))
    conn = db.connect(settings.state_path)
    env = lambda git, day: {**hd.ENV, "torch_git": git, "torch_version": f"2.14.0.dev{day}+cpu"}  # noqa: E731
    hd.store_run(conn, [hd.ok("GPT2Model", "baseline", 1), hd.ok("GPT2Model", CONFIG, 1)], kind="nightly",
                 nightly="2026-11-27", env=env(good_nightly, "20261127"))
    crash = dataclasses.replace(hd.crash("GPT2Model", CONFIG, sig=series.SIGNATURE), traceback=TRACEBACK, attempts=3,
                                error_type="InternalTorchDynamoError")
    run_id = hd.store_run(conn, [hd.ok("GPT2Model", "baseline", 1), crash], kind="nightly", nightly="2026-11-28",
                          env=env(bad_nightly, "20261128"))
    ranges.record(conn, Range(run_id=run_id, config=CONFIG, signature=series.SIGNATURE, kind="new_crash",
                              status="found", good=Build("2026-11-27", "2.14.0.dev20261127+cpu", good_nightly),
                              bad=Build("2026-11-28", "2.14.0.dev20261128+cpu", bad_nightly), models=["GPT2Model"]))
    verdict = verdicts.Verdict(CONFIG, series.SIGNATURE, "GPT2Model", "fp", "2.14.0.dev20261128+cpu", bad_nightly,
                               "confirmed", script=series.REPRO)
    verdicts.put(conn, verdict)
    verdicts.record_run(conn, run_id, [verdicts.RunVerdict(CONFIG, series.SIGNATURE, verdict)])
    found = pipeline_culprit.search_night(conn, run_id, settings, source=pipeline_culprit.Checkout(s.repo),
                                          good_build=lambda settings, r: PYTHON)
    yield settings, conn, s, run_id, found, tmp
    conn.close()


@pytest.fixture(scope="module")
def overlay_root(night) -> Path:
    """The overlay the night made beside its store (one per build, reused: each bisection puts back what the last
    one laid), shared by the other tests so that the package is copied once."""
    root = pipeline_culprit.overlay_dir(night[0], pipeline_culprit.torch_dir(PYTHON))
    assert (root / "torch/__init__.py").is_file() and (root / "torch/lib").is_dir()
    return root


def test_the_night_bisects_the_planted_commit_on_an_overlay(night):
    settings, conn, s, run_id, found, _ = night
    (r,) = found
    assert r.status == "found", r.reason
    assert r.bisection.culprit == s.shas["planted"] and r.bisection.parent == s.shas["harmless1"]
    named = r.culprit
    assert (named.pr, named.author, named.coauthors, named.approvers) == (1002, "bob", (Person("Carol", "carol"),),
                                                                           ("reviewer2", "reviewer3"))
    # the cut after the culprit is said, with why
    assert f"stops between {s.shas['planted'][:12]} and {s.shas['cpp'][:12]}" in r.reason
    assert "torch/csrc/dynamo/eval_frame.cpp" in r.reason and "the culprit lies before it" in r.reason
    # evidence: the culprit failed every re-test run with the signature, its parent passed every one
    retest = {p.sha: p for p in r.bisection.probes if p.phase == "retest"}
    assert retest[s.shas["planted"]].runs == [series.SIGNATURE] * 3 and retest[s.shas["harmless1"]].runs == ["ok"] * 3
    assert r.bisection.runs == 12 and len(r.bisection.probes) == 4
    # ranked against the crash: the commits touching the innermost frame's file first, then the flag's module
    assert [x.sha for x in r.suspects] == [s.shas["harmless2"], s.shas["planted"], s.shas["harmless1"]]
    # cached per (signature, range): the night asked again runs nothing
    again = pipeline_culprit.search_night(conn, run_id, settings, source=pipeline_culprit.Checkout(s.repo),
                                          good_build=lambda settings, r: pytest.fail("a cached range installs nothing"))
    assert again[0].bisection.culprit == s.shas["planted"]


def test_the_culprit_command_on_a_stored_signature_answers_from_the_store(night, capsys):
    import json

    from bot.cli.main import main
    settings, _, s, _, _, _ = night
    argv = ["--state", str(settings.state_path), "culprit", "--config", CONFIG, "--signature", series.SIGNATURE,
            "--checkout", str(s.repo)]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bisection"]["culprit"] == s.shas["planted"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"culprit: {s.shas['planted'][:12]} (#1002) by bob with carol, approved by reviewer2, reviewer3" in out
    assert "bisection: 4 probes, 12 reproducer runs" in out
    assert main([*argv[:4], "other_config", *argv[5:]]) == 2
    assert "no stored regression range with both builds' commits for other_config" in capsys.readouterr().err


def test_the_dry_run_tracking_issue_names_the_culprit_with_its_proof_and_ccs_its_authors(night):
    settings, conn, s, run_id, _, tmp = night
    out = tmp / "out"
    publish.publish_run(conn, settings, run_id, publisher=DryRunPublisher(out), dry_run=True, out_dir=str(out))
    (path,) = out.glob(f"*-create-{tracking_key(CONFIG, series.SIGNATURE)}.md")
    body = path.read_text()
    sha = s.shas["planted"]
    assert (f"Bisected to [`{sha[:12]}`](https://github.com/pytorch/pytorch/commit/{sha}) "
            "([#1002](https://github.com/pytorch/pytorch/pull/1002)) by @bob with @carol, approved by `reviewer2`, "
            "`reviewer3`: `[dynamo] planted`.") in body
    assert f"| `{sha[:12]}` (the culprit) | 3 | 3 | 0 |" in body
    assert f"| `{s.shas['harmless1'][:12]}` (its parent) | 3 | 0 | 3 |" in body
    assert "4 probes, 12 reproducer runs" in body
    assert "\ncc @bob @carol\n" in body


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


# A reproducer that never imports torch: it finds the package `import torch` would load (the overlay, first on
# sys.path) and fails when its builtin.py holds the planted change. Real processes and a real overlay, a tenth of a
# second a run.
PEEK = '''import importlib.util, json, pathlib
spec = importlib.util.find_spec("torch")
text = (pathlib.Path(spec.submodule_search_locations[0]) / "_dynamo/variables/builtin.py").read_text()
bad = "abs() of a traced value" in text
print("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", "signature": %r} if bad else {"v": 1, "status": "ok"}))
''' % series.SIGNATURE


def test_python_commits_before_a_cpp_one_that_do_not_reproduce_say_where_the_change_lies(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["harmless1", "cpp", "planted"])
    found = culprit.find(steps_for(s, PEEK), signature=series.SIGNATURE, good=s.good, bad=s.shas["planted"],
                         crash=CRASH, settings=SETTINGS, torch_dir=series.TORCH_DIR, work=overlay_root)
    assert found.status == "cut" and found.bisection.runs == 3       # the stretch's last commit passes: no search
    assert found.reason.endswith(f"the Python commits before it do not reproduce, so the change lies from "
                                 f"{s.shas['cpp'][:12]} on (the bad build's wheel can test the Python-only stretch "
                                 f"after it)")


def test_the_culprit_command_on_a_reproducer_and_two_builds(tmp_path, capsys, night, overlay_root):
    import json

    from bot.cli.main import main
    s = series.build(tmp_path / "repo", ["harmless1", "planted", "harmless2"])
    repro = tmp_path / "repro.py"
    repro.write_text(PEEK)
    argv = ["--state", str(night[0].state_path), "culprit", "--repro", str(repro), "--good", s.nightly[:10],
            "--bad", s.shas["harmless2"], "--signature", series.SIGNATURE, "--checkout", str(s.repo), "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "found" and data["bisection"]["culprit"] == s.shas["planted"]
    assert data["good_git"] == s.good            # the nightly commit's message named the main commit
    assert data["commits"][1]["pr"] == 1002 and data["commits"][1]["approvers"] == ["reviewer2", "reviewer3"]
    # a commit the checkout lacks: one line, exit 2, nothing run
    assert main([*argv[:7], "--bad", "f" * 40, *argv[9:]]) == 2
    assert capsys.readouterr().err.strip() == ("flagsweep culprit: the checkout lacks commit ffffffffffff (fetch it, "
                                               "or the checkout is behind)")
