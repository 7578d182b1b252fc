"""Reproducers rendered from what a run stored, run on the run's own interpreter, see what the engine saw.

One real sweep (module fixture) of one model under a crashing flag and a nested
inductor key, stored in a real SQLite file through a wrapper interpreter that
logs each start: the scripts rendered from the store must match the stored
outcomes, run under that same interpreter, and carry no settings as code. The publish path's own test asserts on
the session's real crash (tests/real_mimi_crash.py), verified and published the same way in a fresh bot process.
"""
from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.verify.script import NotRenderable, render_script
from harness.engine import engine
from harness.core.model_build import ModelBuild
from harness.engine.engine import SweepRequest
from harness.engine.script_runner import ScriptResult, run_script
from state import db, runs

MODEL = "Qwen2VLForConditionalGeneration"
DYN = {"torch._dynamo.config.capture_dynamic_output_shape_ops": True}
NESTED = {"torch._inductor.config.triton.cudagraphs": True}   # a setting of a nested config object


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """(store path, run id, wrapper interpreter, its log) after one real sweep through the wrapper."""
    tmp = tmp_path_factory.mktemp("repro")
    log = tmp / "python-starts.log"
    wrapper = tmp / "run-python"
    # Not sys.executable itself: the run's interpreter is whatever the sweep was started with.
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    conn = db.connect(tmp / "state.sqlite")
    options = engine.SweepOptions(workers=1, timeout=300, python=str(wrapper))
    run_id = engine.sweep(conn, SweepRequest(models=[MODEL], configs={"dyn": DYN, "nested": NESTED}, base_settings={},
                          options=options, progress=False)).run.id
    conn.close()
    return tmp / "state.sqlite", run_id, str(wrapper), log


def _stored(path: Path, run_id: int):
    conn = db.connect(path)
    try:
        return (runs.get_run(conn, run_id), {(o.model, o.config): o for o in runs.outcomes(conn, run_id)},
                runs.model_data(conn, run_id))
    finally:
        conn.close()


@pytest.mark.compile
def test_reproducer_from_the_store_matches_the_engine_on_a_real_crash(swept):
    path, run_id, wrapper, log = swept
    run, outs, builds = _stored(path, run_id)
    assert run.environment.python == wrapper                  # the run records its interpreter
    data = builds[MODEL]
    assert data.config_class == "Qwen2VLConfig" and data.spec and data.transformers_version
    engine_out = outs[(MODEL, "dyn")]
    assert engine_out.status == "error" and engine_out.signature   # a real crash, so the match says something
    script = render_script(data, DYN)
    ast.parse(script)
    assert "import harness" not in script and "from harness" not in script and "flagsweep import" not in script
    # The oracle's checks: eager, baseline, then the flag, in one interpreter, each reported. The flag's line is the
    # script's plain mode (`python repro.py`, the same function; tests/test_shrink_real.py runs that mode on its own).
    before = log.read_text().count("repro.py")
    checks = run_script(script, run.environment.python, timeout=300, args=("checks",))
    assert log.read_text().count("repro.py") == before + 1       # it ran under the run's interpreter
    assert [m.mode for m in checks.modes.values()] == ["eager", "baseline", "flag"]
    assert checks.modes["eager"].status == checks.modes["baseline"].status == "ok"
    result = checks.modes["flag"]
    assert checks.status == result.status == "error" and checks.returncode == 1   # non-zero: the crash reproduced
    assert checks.signature == result.signature == engine_out.signature
    assert result.error_type == engine_out.error_type
    assert "Dynamo" not in result.error_type and "BackendCompilerFailed" not in result.exception
    import torch

    assert (result.torch_version, result.torch_git) == (torch.__version__, torch.version.git_version)


@pytest.mark.compile
def test_nested_key_end_to_end_sweep_then_reproducer(swept):
    path, run_id, wrapper, _ = swept
    run, outs, builds = _stored(path, run_id)
    swept_out = outs[(MODEL, "nested")]
    assert swept_out.status == "ok", swept_out.error_message
    result = run_script(render_script(builds[MODEL], NESTED), wrapper, timeout=300)
    assert result.status == "ok" and result.returncode == 0, result
    assert result.graphs == swept_out.graphs


@pytest.mark.compile
def test_code_in_a_key_or_value_runs_nowhere(swept, tmp_path):
    path, run_id, wrapper, _ = swept
    _, _, builds = _stored(path, run_id)
    pwned = tmp_path / "pwned"
    payload = f'import os; os.system("touch {pwned}")'
    settings = {f"torch._dynamo.config.verbose\n{payload}\n#": True,
                f"torch._dynamo.config.verbose'''\n{payload}\n'''": True,
                "torch._dynamo.config.verbose": f'"""\n{payload}\n"""'}
    script = render_script(builds[MODEL], settings)
    tree = ast.parse(script)
    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert "system" not in called                                 # the payload is data, never code
    assert all(line.startswith("#") or payload not in line for line in script.splitlines())
    result = run_script(script, wrapper, timeout=300)
    assert not pwned.exists()
    assert result.status == "error" and "not a torch config key" in (result.signature or ""), result


def test_a_model_without_stored_build_data_is_not_renderable():
    with pytest.raises(NotRenderable):
        render_script(None, {})
    with pytest.raises(NotRenderable):
        render_script(ModelBuild("TinyItemModel", "", {}, {}, 0), {})


@pytest.mark.compile
def test_publish_verifies_on_the_runs_python_and_never_imports_torch(real_mimi_crash):
    """The whole publish path (the verify step, then plan and render) in a fresh bot process: torch stays out of it.

    The session's real crash (tests/real_mimi_crash.py: MimiModel swept through a wrapper interpreter that logs each
    start, then verified and published in a fresh bot process) is the one this asserts on: this file's own crash
    took another five real runs of its model to verify and judge the maintainer's script."""
    done = real_mimi_crash
    assert done.imported == ()
    runs = [line.split("repro.py")[1].strip() for line in done.first_runs if "repro.py" in line]
    # Under the run's interpreter: the oracle (eager, baseline, flag in one), then the isolation's one stage (the
    # script's plain mode under `eager`; a crash swept under `count` has none).
    assert runs == ["checks", ""], runs
    drives = [line.split("drive.py")[1].strip() for line in done.first_runs if "drive.py" in line]
    assert drives == ["eager", "None", "False", "True"]          # the maintainer's script, on the run's interpreter
    plan = json.loads((done.out / "plan.json").read_text())
    # One model, no flake re-runs: the evidence rule holds it as watching; the dry run writes its would-be body.
    held = sorted((done.out / "pending").glob("watching-t*.md"))
    assert len(held) == 1 and not [a for a in plan["actions"] if a["key"].startswith("t")], plan["actions"]
    body = held[0].read_text()
    import torch

    assert f"Verified in fresh interpreters of torch `{torch.__version__}` (git `{torch.version.git_version}`)" in body
    # The maintainer's script is the reproducer shown; the harness script stays in the store (one line says so).
    assert 'torch.compile(model, backend="eager")' in body and "FLAGSWEEP_RESULT" not in body
    assert "left out of this issue to keep it to one screen" in body


def _printing(*lines: dict) -> str:
    """A script that prints each of `lines` as a FLAGSWEEP_RESULT line."""
    return "import json\n" + "".join(f"print('FLAGSWEEP_RESULT ' + json.dumps({line!r}), flush=True)\n" for line in lines)


def test_run_script_reports_a_script_that_dies_without_a_result():
    result = run_script("import sys\nprint('no result line', file=sys.stderr)\nsys.exit(3)\n", timeout=60)
    assert (result.status, result.returncode, result.reported) == ("killed", 3, True)
    assert result.stderr_tail.strip() == "no result line" and result.said == "killed"


def test_run_script_reports_an_interpreter_that_cannot_start(tmp_path):
    result = run_script("print(1)\n", str(tmp_path / "no-such-python"), timeout=60)
    assert (result.status, result.returncode, result.reported, result.said) == ("not_started", None, False, None)
    assert "cannot run no-such-python" in result.error


def test_run_script_reports_a_script_that_hangs_without_a_result():
    result = run_script("import time\ntime.sleep(60)\n", timeout=3)
    assert (result.status, result.returncode, result.modes, result.reported) == ("timeout", None, {}, True)


def test_result_line_is_the_last_stdout_line_and_parses():
    text = "print('noise')\n" + _printing({"v": 1, "status": "ok", "graphs": 2, "signature": None, "error_type": None})
    result = run_script(text, timeout=60)
    assert result == ScriptResult("ok", graphs=2, returncode=0)
    assert json.loads(json.dumps(result.to_dict()))["graphs"] == 2


@pytest.mark.parametrize("line, named", [
    ({"status": "ok"}, "version None"),                                   # a script rendered before the version
    ({"v": 2, "status": "ok"}, "version 2"),                              # one from a newer flagsweep
    ({"v": 1, "status": "ok", "graphz": 2}, "unknown field 'graphz'"),    # a misspelt field is not dropped
    ({"v": 1, "graphs": 2}, "missing field 'status'"),
    ({"v": 1, "status": "timeout"}, "status 'timeout'"),                  # the runner's statuses are not the script's
])
def test_a_result_line_this_flagsweep_cannot_read_is_bad_output_naming_why(line, named):
    result = run_script(_printing(line), timeout=60)
    assert (result.status, result.reported, result.said) == ("bad_output", False, None)
    assert result.error.startswith("FLAGSWEEP_RESULT: ") and named in result.error, result.error


def test_a_result_line_that_is_not_json_is_bad_output():
    result = run_script("print('FLAGSWEEP_RESULT {oops')\n", timeout=60)
    assert result.status == "bad_output" and result.error == "FLAGSWEEP_RESULT: not JSON: '{oops'"


def test_a_script_that_reports_several_modes_gives_each_and_a_hang_keeps_what_it_said():
    text = _printing(*({"v": 1, "status": "ok", "mode": mode, "signature": None} for mode in ("eager", "baseline")))
    both = run_script(text, timeout=60)
    assert both.mode == "baseline" and set(both.modes) == {"eager", "baseline"}
    hung = run_script("import time\n" + text + "time.sleep(60)\n", timeout=8)   # ample for two lines on a loaded machine
    assert hung.status == "timeout" and set(hung.modes) == {"eager", "baseline"}
    assert hung.modes["eager"] == ScriptResult("ok", mode="eager")


def test_the_reproducer_module_is_only_a_runner():
    """harness/engine/script_runner.py runs scripts; rendering is the bot's (it imported bot.text.render before: an arrow pointing up)."""
    source = (Path(__file__).parent.parent / "harness" / "engine" / "script_runner.py").read_text()
    imported = {n.names[0].name.split(".")[0] for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import)} | \
               {(n.module or "").split(".")[0] for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"bot", "torch", "transformers", "jinja2"}


@pytest.mark.compile
def test_repro_cli_with_code_in_a_base_setting_key_runs_no_code(tmp_path):
    """The issue's attack through the CLI: `repro --base-setting $'key\\nimport os; os.system(...)\\n#=true' --run`."""
    pwned = tmp_path / "pwned"
    key = f'torch._dynamo.config.verbose\nimport os; os.system("touch {pwned}")\n#'
    proc = subprocess.run([sys.executable, "-m", "bot.cli.main", "--state", str(tmp_path / "s.sqlite"), "repro", "BertModel",
                           "--config", "baseline", "--base-setting", f"{key}=true", "--run",
                           "-o", str(tmp_path / "repro.py")], capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert not pwned.exists()
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if proc.returncode == 0:     # accepted as data: the script names the bad key instead of running it
        assert json.loads(proc.stdout.strip().splitlines()[-1])["status"] == "error"
    else:                        # refused before anything ran (key syntax checked): one clear line
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
