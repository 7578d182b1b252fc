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
from bot.pipeline.culprit import run_step
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


def _installed() -> dict[str, tuple[int, int]]:
    """The installed torch's whole tree: every path with its size and mtime (links not followed)."""
    return {str(p.relative_to(series.TORCH_DIR)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in series.TORCH_DIR.rglob("*")}


@pytest.fixture(scope="module", autouse=True)
def untouched():
    """No bisection of this file writes into the build: its tree is the same after every test as before the first."""
    before = _installed()
    yield
    after = _installed()
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:5]




def steps_for(s: series.Series, script: str, work: Path, run=None) -> culprit.CulpritSteps:
    """The search's steps over the series, both builds the installed torch (the bad one's overlay beside the good's)."""
    run = run or run_step(script, PYTHON, timeout=120)
    return culprit.CulpritSteps(commits=lambda good, bad: checkout.commits(s.repo, good, bad),
                                file_at=lambda sha, path: checkout.file_at(s.repo, sha, path),
                                good=culprit.Build(series.TORCH_DIR, work, run),
                                bad=culprit.Build(series.TORCH_DIR, work.parent / (work.name + "-bad"), run))


CRASH = Crash(frames=(series.BUILTIN, "torch/_dynamo/symbolic_convert.py"), flag_modules=("torch/_dynamo/config.py",),
              component="dynamo")


def test_import_torch_loads_the_overlay_and_writes_never_reach_the_build(overlay_root):
    probe = ('import json, torch\nprint("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", '
             '"signature": torch.__file__}))\n')
    answer, loaded, _ = overlay_run.answer(probe, overlay_root, PYTHON, 120)
    assert answer == str(overlay_root / "torch" / "__init__.py") and "torch/__init__.py" in loaded
    assert (overlay_root / "torch/lib").is_dir() and any(p.is_symlink() for p in (overlay_root / "torch/lib").iterdir())
    overlay.lay(overlay_root, {series.BUILTIN: b"# replaced\n", "torch/_dynamo/new_module.py": b"x = 1\n"})
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


def test_the_night_bisects_the_planted_commit_past_a_cpp_commit_on_both_builds(night):
    settings, conn, s, run_id, found, _ = night
    (r,) = found
    assert r.status == "found", r.reason
    assert r.bisection.culprit == s.shas["planted"] and r.bisection.parent == s.shas["harmless1"]
    named = r.culprit
    assert (named.pr, named.author, named.coauthors, named.approvers) == (1002, "bob", (Person("Carol", "carol"),),
                                                                           ("reviewer2", "reviewer3"))
    assert r.reason is None and not r.bisection.likely_wrong      # the runs imported the file the culprit changes
    # the last commit (after the C++ one) on the bad build; the commits before the C++ one on the good build
    probes = [(p.sha, p.build, p.verdict, p.phase) for p in r.bisection.probes]
    assert probes[0] == (s.shas["harmless2"], "bad", "new", "ends")
    assert {p.build for p in r.bisection.probes[1:]} == {"good"}
    # evidence: the culprit failed every re-test run with the signature, its parent passed every one
    retest = {p.sha: p.runs for p in r.bisection.probes if p.phase == "retest"}
    assert retest == {s.shas["planted"]: [series.SIGNATURE] * 3, s.shas["harmless1"]: ["ok"] * 3}
    assert r.bisection.runs == 15 and len(r.bisection.probes) == 5
    # ranked against the crash: the commits touching the innermost frame's file first, then the flag's module
    assert [x.sha for x in r.suspects] == [s.shas["harmless2"], s.shas["planted"], s.shas["harmless1"]]
    # cached per (config, signature, range): the night asked again runs nothing
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
    assert "bisection: 5 probes, 15 reproducer runs" in out
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
    assert f"| `{sha[:12]}` (the culprit) | good | 3 | 3 | 0 |" in body
    assert f"| `{s.shas['harmless1'][:12]}` (its parent) | good | 3 | 0 | 3 |" in body
    assert "on the good and the bad build" in body and "5 probes, 15 reproducer runs" in body
    assert "\ncc @bob @carol\n" in body


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
    found = culprit.find(steps_for(s, script, overlay_root), culprit.Search(series.SIGNATURE, s.good, s.shas["planted"],
                                                                            CRASH), SETTINGS)
    assert found.status == "flaky" and found.bisection.culprit is None
    assert "the reproducer is flaky" in found.reason and "no culprit is named" in found.reason


# A reproducer that never imports torch: it finds the package `import torch` would load (the overlay, first on
# sys.path) and reads what a build's code would do: it fails when builtin.py holds the planted change; with
# `native_fails`, when the build's compiled part (a non-Python file only the bad build has) is there too; code that
# needs that part (series.NEEDS) fails to import without it. Real processes and real overlays, a tenth of a second
# a run.
PEEK = '''import importlib.util, json, pathlib
pkg = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0])
text = (pkg / "_dynamo/variables/builtin.py").read_text()
native = (pkg / "_dynamo/flagsweep_native.txt").exists()
if "FLAGSWEEP_NEEDS_NATIVE" in text and not native:
    line = {"v": 1, "status": "error", "signature": "ImportError: cannot import name 'native'"}
elif "abs() of a traced value" in text or (%r and native):
    line = {"v": 1, "status": "error", "signature": %r}
else:
    line = {"v": 1, "status": "ok"}
print("FLAGSWEEP_RESULT " + json.dumps(line))
'''


def peek(native_fails: bool = False) -> str:
    return PEEK % (native_fails, series.SIGNATURE)


@pytest.fixture(scope="module")
def bad_build(tmp_path_factory) -> Path:
    """The bad build: a linked copy of the installed torch with one non-Python file its compiled part added."""
    root = overlay.make(series.TORCH_DIR, tmp_path_factory.mktemp("badbuild"))
    (root / "torch/_dynamo/flagsweep_native.txt").write_text("native\n")
    return root / "torch"


def two_builds(s: series.Series, script: str, overlay_root: Path, bad_torch: Path) -> culprit.CulpritSteps:
    run = run_step(script, PYTHON, timeout=120)
    return dataclasses.replace(steps_for(s, script, overlay_root, run),
                               bad=culprit.Build(bad_torch, overlay_root.parent / "bad-build-overlay", run))


def test_a_cpp_commit_before_the_planted_one_is_stepped_over_on_the_bad_build(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["harmless1", "cpp", "planted"])
    found = culprit.find(steps_for(s, peek(), overlay_root), culprit.Search(series.SIGNATURE, s.good,
                                                                            s.shas["planted"], CRASH), SETTINGS)
    assert found.status == "found" and found.bisection.culprit == s.shas["planted"], found.reason
    assert found.bisection.parent == s.shas["cpp"]
    assert {p.build for p in found.bisection.probes if p.sha == s.shas["planted"]} == {"bad"}
    assert found.bisection.likely_wrong          # the reproducer imported no torch file: "most likely wrong"


def test_the_planted_commit_between_two_cpp_commits_is_probed_on_both_builds_and_named(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["cpp", "harmless1", "planted", "cpp2", "harmless2"])
    found = culprit.find(steps_for(s, peek(), overlay_root), culprit.Search(series.SIGNATURE, s.good,
                                                                            s.shas["harmless2"], CRASH), SETTINGS)
    assert found.status == "found" and found.bisection.culprit == s.shas["planted"], found.reason
    retest = sorted((p.sha, p.build, p.verdict) for p in found.bisection.probes if p.phase == "retest")
    assert retest == sorted([(s.shas["planted"], "good", "new"), (s.shas["planted"], "bad", "new"),
                             (s.shas["harmless1"], "good", "old"), (s.shas["harmless1"], "bad", "old")])


def test_builds_that_disagree_are_a_skip_and_leave_one_of_two(tmp_path, overlay_root, bad_build):
    s = series.build(tmp_path / "repo", ["harmless1", "cpp", "planted", "cpp2"])
    found = culprit.find(two_builds(s, peek(native_fails=True), overlay_root, bad_build),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["cpp2"], CRASH), SETTINGS)
    cpp = [(p.build, p.verdict) for p in found.bisection.probes if p.sha == s.shas["cpp"]]
    assert cpp == [("good", "old"), ("bad", "new")]                   # probed on both, not counted
    assert found.status == "one_of" and found.bisection.culprit is None
    assert [(c.sha, c.why) for c in found.bisection.candidates] == [
        (s.shas["cpp"], "not testable: the builds disagree (the good build passes, the bad build fails with the "
                        "signature)"),
        (s.shas["planted"], "the first that fails")]
    assert found.reason == (f"the skipped commits leave 2 candidates: the change is one of {s.shas['cpp'][:12]}, "
                            f"{s.shas['planted'][:12]}")


def test_python_that_needs_the_bad_builds_compiled_part_is_probed_on_the_bad_build(tmp_path, overlay_root, bad_build):
    s = series.build(tmp_path / "repo", ["cpp", "needs", "planted"])
    found = culprit.find(two_builds(s, peek(), overlay_root, bad_build),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["planted"], CRASH), SETTINGS)
    assert found.status == "found" and found.bisection.culprit == s.shas["planted"], found.reason
    assert found.bisection.parent == s.shas["needs"]
    assert {p.build for p in found.bisection.probes if p.sha == s.shas["needs"]} == {"bad"}
    assert "ImportError" not in str(found.bisection.probes)


def test_a_change_outside_python_names_no_python_commit_and_ranks_the_native_ones(tmp_path, overlay_root, bad_build):
    s = series.build(tmp_path / "repo", ["cpp", "harmless1", "cpp2", "harmless2"])
    dynamo = Crash(frames=(series.BUILTIN,), component="dynamo")
    found = culprit.find(two_builds(s, peek(native_fails=True), overlay_root, bad_build),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["harmless2"], dynamo), SETTINGS)
    assert found.status == "outside" and found.bisection.culprit is None and found.culprit is None
    assert found.reason == ("every Python state between passes on the good build and fails on the bad one: the change "
                            f"is outside Python, in one of {s.shas['cpp'][:12]}, {s.shas['cpp2'][:12]}")
    # the non-Python commits are the suspects: torch/csrc/dynamo first for a Dynamo crash
    assert [x.sha for x in found.suspects] == [s.shas["cpp"]]
    assert found.suspects[0].why == ["changes torch/csrc/dynamo/, the component the isolation found (dynamo)"]


def test_the_culprit_command_on_a_reproducer_and_two_builds(tmp_path, capsys, night, overlay_root):
    import json

    from bot.cli.main import main
    s = series.build(tmp_path / "repo", ["harmless1", "planted", "harmless2"])
    repro = tmp_path / "repro.py"
    repro.write_text(peek())
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


# A wrong result's accuracy reproducer (run under the verify step's driver): the output is scaled where the planted
# config says so, and its assert_close fails.
WRONG_REPRO = """import torch
from torch._dynamo import config
x = torch.ones(3)
torch.testing.assert_close(x * getattr(config, "flagsweep_scale", 1.0), x)
"""
WRONG = "wrong_result: first: output"


def test_a_wrong_result_is_bisected_with_its_accuracy_reproducer(tmp_path, overlay_root):
    s = series.build(tmp_path / "repo", ["harmless1", "wrong"])
    run = run_step(WRONG_REPRO, PYTHON, 120, WRONG)
    found = culprit.find(steps_for(s, WRONG_REPRO, overlay_root, run),
                         culprit.Search(WRONG, s.shas["harmless1"], s.shas["wrong"]), SETTINGS)
    assert found.status == "found" and found.bisection.culprit == s.shas["wrong"], found.reason
    retest = {p.sha: p.runs for p in found.bisection.probes if p.phase == "retest"}
    assert retest == {s.shas["wrong"]: [WRONG] * 3, s.shas["harmless1"]: ["ok"] * 3}
    assert not found.bisection.likely_wrong          # the reproducer imported torch/_dynamo/config.py


def test_the_culprit_command_finds_the_commit_that_fixed_it(tmp_path, capsys, night):
    import json

    from bot.cli.main import main
    s = series.build(tmp_path / "repo", ["planted", "harmless2", "fix"])
    repro = tmp_path / "repro.py"
    repro.write_text(peek())
    argv = ["--state", str(night[0].state_path), "culprit", "--repro", str(repro), "--old", s.shas["planted"],
            "--new", s.shas["fix"], "--signature", series.SIGNATURE, "--checkout", str(s.repo), "--fix", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "found" and data["bisection"]["fix"] is True
    assert (data["bisection"]["culprit"], data["bisection"]["parent"]) == (s.shas["fix"], s.shas["harmless2"])
    # every probe with its build, its runs and its verdict: the fix passes, its parent still fails
    assert [(p["sha"], p["build"], p["verdict"], p["phase"]) for p in data["bisection"]["probes"]][-2:] == [
        (s.shas["fix"], "good", "new", "retest"), (s.shas["harmless2"], "good", "old", "retest")]
    assert data["bisection"]["probes"][-1]["runs"] == [series.SIGNATURE] * 3


def test_a_nightly_that_verifies_the_fix_names_the_fixing_commit_in_its_close_comment(night):
    from state import links
    settings, conn, s, run_id, _, tmp = night
    series._write(s.repo, "fix")                                     # the planted change taken back, by ivan
    series._git(s.repo, "add", "-A")
    series._git(s.repo, "commit", "-q", "-m", series.message("[dynamo] fix abs", 1008, ("reviewer3",)), author="ivan")
    fix = series._git(s.repo, "rev-parse", "HEAD")
    bad_nightly = ranges.for_run(conn, [run_id])[0].bad.git
    fixed_nightly = series.nightly_of(s, fix, "2026-11-29")
    env = {**hd.ENV, "torch_git": fixed_nightly, "torch_version": "2.14.0.dev20261129+cpu"}
    fixed_run = hd.store_run(conn, [hd.ok("GPT2Model", "baseline", 1), hd.ok("GPT2Model", CONFIG, 1)],
                             kind="nightly", nightly="2026-11-29", env=env)
    ranges.record(conn, Range(run_id=fixed_run, config=CONFIG, signature=series.SIGNATURE, kind="fixed",
                              status="found", good=Build("2026-11-28", "2.14.0.dev20261128+cpu", bad_nightly),
                              bad=Build("2026-11-29", "2.14.0.dev20261129+cpu", fixed_nightly), models=["GPT2Model"]))
    (found,) = pipeline_culprit.search_night(conn, fixed_run, settings, source=pipeline_culprit.Checkout(s.repo),
                                             good_build=lambda settings, r: PYTHON)
    assert (found.status, found.bisection.fix, found.bisection.culprit) == ("found", True, fix), found.reason
    links.upsert(conn, links.Link(key=tracking_key(CONFIG, series.SIGNATURE), repo=publish.DRY_RUN_REPO, number=1,
                                  kind="tracking", config=CONFIG, signature=series.SIGNATURE))
    out = tmp / "out-fixed"
    closing = dataclasses.replace(settings, issues=dataclasses.replace(settings.issues, verify_nightlies=1))
    publish.publish_run(conn, closing, fixed_run, publisher=DryRunPublisher(out), dry_run=True, out_dir=str(out))
    (comment,) = [p.read_text() for p in out.glob("*.md") if "Closing: verified fixed" in p.read_text()]
    assert (f"Fixed by [`{fix[:12]}`](https://github.com/pytorch/pytorch/commit/{fix}) "
            "([#1008](https://github.com/pytorch/pytorch/pull/1008)) by `ivan`") in comment
    assert "@ivan" not in comment
