"""The overlay's faults and the culprit search's ways of ending, without torch: a small package laid over for real
(files, links, bytecode), real git, real reproducer processes that never import torch (a tenth of a second each)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.builds import checkout
from bot.pipeline.culprit import run_step
from bot.ranges import culprit, overlay
from bot.settings import CulpritSettings
from bot.verify import overlay_run
from harness.engine import script_runner
from tests import culprit_series as series

PYTHON = sys.executable
SETTINGS = CulpritSettings(runs=3, max_minutes=10)


def tree(root: Path) -> dict[str, tuple[bool, int, int]]:
    """Every entry under `root`: (a link, its size, its mtime in ns), links not followed."""
    return {str(p.relative_to(root)): (p.is_symlink(), p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def overlaid(root: Path) -> dict[str, object]:
    """What an overlay holds: each link's target, each file's (size, mtime in ns), each folder."""
    return {str(p.relative_to(root)): (str(p.readlink()) if p.is_symlink() else
                                       (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else "folder")
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def build(tmp_path) -> Path:
    """A small build's `torch` package: Python, a compiled library, bytecode compiled from its source."""
    pkg = tmp_path / "build/torch"
    (pkg / "_dynamo").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (pkg / "__init__.py").write_text("from torch._dynamo import config\n")
    (pkg / "_dynamo/__init__.py").write_text("")
    (pkg / "_dynamo/config.py").write_text("value = 1\n")
    (pkg / "lib/libtorch.so").write_bytes(b"\x7fELF not really")
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(pkg)], check=True)
    return pkg


def test_a_refused_path_is_never_recorded_so_the_next_make_restores(build, tmp_path):
    root = overlay.make(build, tmp_path / "overlay")
    with pytest.raises(overlay.OverlayError, match="'torch/../escape.py' is not a file of the torch package"):
        overlay.lay(root, {"torch/_dynamo/config.py": b"value = 2\n", "torch/../escape.py": b"x"})
    assert not (root / overlay.LAID).exists() and (root / "torch/_dynamo/config.py").read_text() == "value = 1\n"
    overlay.lay(root, {"torch/_dynamo/config.py": b"value = 3\n"})
    overlay.make(build, root)                 # the next bisection's make puts the build's file back
    assert (root / "torch/_dynamo/config.py").read_text() == "value = 1\n"


def test_a_restore_that_fails_makes_the_overlay_again(build, tmp_path):
    root = overlay.make(build, tmp_path / "overlay")
    made = tree(root / "torch")
    overlay.lay(root, {"torch/_dynamo/config.py": b"value = 2\n", "torch/_dynamo/new.py": b"y = 1\n"})
    (root / overlay.LAID).write_text("torch/_dynamo/config.py\ntorch/../../etc/passwd\n")   # written by no lay
    overlay.make(build, root)
    assert (root / "torch/_dynamo/config.py").read_text() == "value = 1\n"
    assert not (root / "torch/_dynamo/new.py").exists() and tree(root / "torch").keys() == made.keys()


def test_an_interrupted_copy_is_never_taken_for_the_overlay(build, tmp_path):
    root = tmp_path / "overlay"
    (root / "torch.partial/_dynamo").mkdir(parents=True)    # a copy killed half-way: __init__.py never copied
    (root / "torch.partial/_dynamo/config.py").write_text("value = 1\n")
    overlay.make(build, root)
    assert (root / "torch/__init__.py").is_file() and (root / "torch/lib/libtorch.so").is_symlink()
    assert not (root / "torch.partial").exists()


def test_a_restore_puts_the_builds_file_and_bytecode_back_as_made(build, tmp_path):
    root = overlay.make(build, tmp_path / "overlay")
    made, built = overlaid(root / "torch"), tree(build)
    overlay.lay(root, {"torch/_dynamo/config.py": b"value = 2\n"})
    overlay.make(build, root)
    assert overlaid(root / "torch") == made and tree(build) == built


def test_a_latin1_module_is_laid_as_its_bytes_and_imported(build, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    series._git(repo, "init", "-q", "-b", "main")
    source = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n".encode("latin-1")
    (repo / "torch/_dynamo").mkdir(parents=True)
    (repo / "torch/_dynamo/config.py").write_bytes(source)
    series._git(repo, "add", "-A")
    series._git(repo, "commit", "-q", "-m", "latin-1")
    sha = series._git(repo, "rev-parse", "HEAD")
    assert checkout.file_at(repo, sha, "torch/_dynamo/config.py") == source
    root = overlay.make(build, tmp_path / "overlay")
    overlay.lay(root, {"torch/_dynamo/config.py": checkout.file_at(repo, sha, "torch/_dynamo/config.py")})
    script = ('import json, torch\nprint("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", '
              '"signature": torch._dynamo.config.name}))\n')
    assert overlay_run.answer(script, root, PYTHON, 60) == ("caf\xe9", ("torch/__init__.py", "torch/_dynamo/__init__.py",
                                                                    "torch/_dynamo/config.py"), "")


def _steps(s: series.Series, run, build: Path, work: Path) -> culprit.CulpritSteps:
    return culprit.CulpritSteps(commits=lambda good, bad: checkout.commits(s.repo, good, bad),
                                file_at=lambda sha, path: checkout.file_at(s.repo, sha, path),
                                good=culprit.Build(build, work, run))


def test_an_error_inside_a_probe_ends_the_search_failed_in_one_line(build, tmp_path):
    s = series.build(tmp_path / "repo", ["harmless1", "planted"])

    def broken(root: Path) -> culprit.Ran:
        raise OSError("No space left on device\nsecond line")

    found = culprit.find(_steps(s, broken, build, tmp_path / "overlay"),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["planted"], config="c"), SETTINGS)
    assert (found.status, found.reason) == ("failed", "the search failed: OSError: No space left on device")
    assert [c.sha for c in found.commits] == [s.shas["harmless1"], s.shas["planted"]]   # the suspects are kept


def test_a_range_whose_search_breaks_is_stored_failed_and_the_night_goes_on(tmp_path):
    import dataclasses

    from bot.pipeline import culprit as step
    from bot.settings import IssueSettings, Settings, VerifySettings
    from state import culprits, db, ranges, verdicts
    from state.ranges import Build, Range
    from tests import historydata as hd
    s = series.build(tmp_path / "repo", ["harmless1", "planted"])
    bad_nightly = series.nightly_of(s, s.shas["planted"], "2026-11-28")
    settings = Settings(state_path=tmp_path / "state.sqlite", issues=IssueSettings(min_models=1),
                        verify=VerifySettings(enabled=False), culprit=CulpritSettings(checkout=str(s.repo), runs=3))
    conn = db.connect(settings.state_path)
    env = {**hd.ENV, "torch_git": bad_nightly}
    crashes = [dataclasses.replace(hd.crash("GPT2Model", c, sig=series.SIGNATURE), attempts=3) for c in ("a", "b")]
    run_id = hd.store_run(conn, [hd.ok("GPT2Model", "baseline", 1), *crashes], kind="nightly", nightly="2026-11-28",
                          env=env)
    for config in ("a", "b"):
        ranges.record(conn, Range(run_id=run_id, config=config, signature=series.SIGNATURE, kind="new_crash",
                                  status="found", good=Build("2026-11-27", "2.14.0.dev20261127+cpu", s.nightly),
                                  bad=Build("2026-11-28", "2.14.0.dev20261128+cpu", bad_nightly), models=["GPT2Model"]))
    verdict = verdicts.Verdict("a", series.SIGNATURE, "GPT2Model", "fp", "v", bad_nightly, "confirmed",
                               script=series.REPRO)
    verdicts.put(conn, verdict)
    verdicts.record_run(conn, run_id, [verdicts.RunVerdict("a", series.SIGNATURE, verdict)])
    missing = str(tmp_path / "no-such-python")          # config a's good build cannot be asked for its torch
    found = step.search_night(conn, run_id, settings, source=step.Checkout(s.repo),
                              good_build=lambda settings, r: missing)
    assert [(r.config, r.status) for r in found] == [("a", "failed"), ("b", "suspects")]
    stored = culprits.get(conn, series.SIGNATURE, s.nightly, bad_nightly, "a")
    assert stored.status == "failed" and stored.reason.startswith("the search failed: ") and "\n" not in stored.reason


def test_without_a_bad_build_no_commit_after_a_cpp_one_is_probed_on_the_good_build(build, tmp_path):
    s = series.build(tmp_path / "repo", ["cpp", "planted"])
    never = lambda root: pytest.fail("an unfaithful good build is never run")      # noqa: E731
    found = culprit.find(_steps(s, never, build, tmp_path / "overlay"),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["planted"]), SETTINGS)
    assert (found.status, found.reason) == ("cut", f"a non-Python commit lies before the last commit "
                                                   f"({s.shas['planted'][:12]}) and no bad build was given: the good "
                                                   "build cannot stand in for it")


def test_a_reproducer_that_hangs_in_every_run_is_said_to_never_run_to_a_result(build, tmp_path):
    s = series.build(tmp_path / "repo", ["harmless1", "planted"])
    hang = run_step("import time\ntime.sleep(60)\n", PYTHON, timeout=1)
    found = culprit.find(_steps(s, hang, build, tmp_path / "overlay"),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["planted"]), SETTINGS)
    assert found.status == "not_reproduced" and "does not fail" not in found.reason
    assert found.reason == (f"the reproducer never ran to a result at the last commit ({s.shas['planted'][:12]}): "
                            "timeout in every run; no culprit can be judged")


def test_a_script_printing_much_is_read_in_bounded_memory():
    import tracemalloc
    script = ('import sys\nfor _ in range(48):\n    sys.stdout.write(("x" * 1023 + "\\n") * 1024)\n'
              'print(\'FLAGSWEEP_RESULT {"v": 1, "status": "ok"}\')\n')
    tracemalloc.start()
    try:
        result = script_runner.run_script(script, PYTHON, timeout=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "ok"
    assert peak < 24 << 20, f"reading 48 MiB of output took {peak >> 20} MiB"


def test_a_script_writing_many_short_lines_to_stderr_keeps_its_last_lines():
    """stderr's tail is kept by whole lines (a deque, not a 64 KiB copy of the tail per line: bench/script_output.py):
    the last line is there, the first is gone."""
    script = 'import sys\nfor i in range(200_000):\n    sys.stderr.write(f"line {i}\\n")\nsys.exit(3)\n'
    result = script_runner.run_script(script, PYTHON, timeout=60)     # no result line: its stderr's end is kept
    assert (result.status, result.returncode) == ("killed", 3)
    assert result.stderr_tail.endswith("line 199999\n") and "line 0\n" not in result.stderr_tail


SEARCH = '''import json, sys
from pathlib import Path
from bot.builds import checkout
from bot.ranges import culprit
from bot.settings import CulpritSettings
from bot.pipeline.culprit import run_step
repo, good, bad, build, work, script, sig = sys.argv[1:8]
run = run_step(open(script).read(), sys.executable, 60)
steps = culprit.CulpritSteps(commits=lambda g, b: checkout.commits(Path(repo), g, b),
                             file_at=lambda sha, p: checkout.file_at(Path(repo), sha, p),
                             good=culprit.Build(Path(build), Path(work), run))
found = culprit.find(steps, culprit.Search(sig, good, bad), CulpritSettings(runs=3))
print(json.dumps([found.status, found.bisection.culprit if found.bisection else None]))
'''
SLOW_PEEK = '''import importlib.util, json, pathlib, time
time.sleep(0.2)
pkg = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0])
path = pkg / "_dynamo/variables/builtin.py"
bad = path.exists() and "abs() of a traced value" in path.read_text()
print("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", "signature": %r} if bad else {"v": 1, "status": "ok"}))
''' % series.SIGNATURE


def test_a_search_killed_midway_leaves_an_overlay_the_next_one_waiting_on_it_uses(build, tmp_path):
    import json
    import signal
    import time
    s = series.build(tmp_path / "repo", ["harmless1", "planted", "harmless2"])
    (tmp_path / "peek.py").write_text(SLOW_PEEK)
    work = tmp_path / "overlay"
    argv = [PYTHON, "-c", SEARCH, str(s.repo), s.good, s.shas["harmless2"], str(build), str(work),
            str(tmp_path / "peek.py"), series.SIGNATURE]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (work / overlay.LAID).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)   # waits on the overlay's lock
    first.send_signal(signal.SIGTERM)                    # killed in the middle of its bisection, files laid
    assert first.wait(60) == -signal.SIGTERM and (work / overlay.LAID).exists()
    out, err = second.communicate(timeout=300)
    assert json.loads(out) == ["found", s.shas["planted"]], err.decode()[-2000:]
    overlay.make(build, work)                            # the next bisection's overlay is the build's again
    assert not (work / "torch/_dynamo/variables/builtin.py").exists()
    assert (work / "torch/_dynamo/config.py").read_text() == "value = 1\n"


TRACED = '''import importlib.util, json, pathlib, sys
pkg = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0])
path = pkg / "_dynamo/variables/builtin.py"
if path.exists() and "abs() of a traced value" in path.read_text():
    sys.stderr.write('Traceback (most recent call last):\\n  File "/venv/site-packages/torch/_dynamo/variables/'
                     'builtin.py", line 20, in call_function\\nNotImplementedError: abs() of a traced value\\n')
    print("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", "signature": %r}))
else:
    print("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "ok"}))
''' % series.SIGNATURE


def test_a_reproducer_by_hand_ranks_the_suspects_by_its_own_traceback(build, tmp_path):
    s = series.build(tmp_path / "repo", ["harmless1", "planted"])
    found = culprit.find(_steps(s, run_step(TRACED, PYTHON, 60), build, tmp_path / "overlay"),
                         culprit.Search(series.SIGNATURE, s.good, s.shas["planted"]), SETTINGS)
    assert found.status == "found" and [x.sha for x in found.suspects] == [s.shas["planted"]]
    assert found.suspects[0].why == ["changes torch/_dynamo/variables/builtin.py, the innermost torch frame of the crash"]
