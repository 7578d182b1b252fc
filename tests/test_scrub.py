"""No machine paths leave: real tracebacks from transformers and torch, scrubbed at storage and at the edge."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.github import publish
from bot.settings import IssueSettings, Settings, VerifySettings
from harness.core.outcome import Outcome
from harness.engine.pool import PROJECT_ROOT
from harness.core.scrub import scrub
from harness.core.signature import signature
from state import db
from tests.fakegithub import FakeGitHub
from tests.historydata import ok, store_run

# A real exception inside transformers, and one inside torch, raised in a fresh interpreter of this venv.
PROVOKE = """
import traceback
import torch, transformers
for provoke in (lambda: transformers.AutoConfig.for_model("no_such_model_type"),
                lambda: torch.nn.Linear(3, 4)(torch.ones(2, 5))):
    try:
        provoke()
    except Exception as exc:
        print(f"{type(exc).__module__}.{type(exc).__qualname__}")
        print(str(exc).splitlines()[0])
        print(traceback.format_exc())
        print("=====")
"""


@pytest.fixture(scope="module")
def tracebacks() -> list[tuple[str, str, str]]:
    out = subprocess.run([sys.executable, "-c", PROVOKE], capture_output=True, text=True, check=True,
                         cwd=str(PROJECT_ROOT)).stdout
    blocks = [b.strip("\n") for b in out.split("=====") if b.strip()]
    parsed = [tuple(b.split("\n", 2)) for b in blocks]
    assert len(parsed) == 2
    # The precondition: the raw text really carries this machine's absolute paths.
    tb = parsed[0][2]
    assert "/site-packages/transformers/" in tb and tb.count(sys.prefix) >= 1
    return parsed


def machine_paths(text: str) -> list[str]:
    """Absolute paths of this machine (or any runner's home) left in `text`."""
    roots = {sys.prefix, sys.base_prefix, str(PROJECT_ROOT), os.path.expanduser("~"), "/tmp/"}
    found = [r for r in roots if r in text]
    found += re.findall(r"(?<![\w.])/(?:home|root|usr|opt|work|Users)/[\w./-]+", text)
    found += re.findall(r"[\w./-]*/(?:site|dist)-packages/", text)
    return found


def test_real_tracebacks_become_package_relative_with_signatures_unchanged(tracebacks):
    (etype, message, tb), (t_etype, t_message, t_tb) = tracebacks
    clean = scrub(tb)
    assert machine_paths(clean) == []
    assert re.search(r'File "transformers/models/auto/configuration_auto\.py", line \d+, in for_model', clean)
    t_clean = scrub(t_tb)
    assert machine_paths(t_clean) == [] and re.search(r'File "torch/nn/modules/linear\.py", line \d+', t_clean)
    for et, msg, raw in tracebacks:
        assert signature(et, scrub(msg), scrub(raw)) == signature(et, msg, raw)


def test_home_venv_and_checkout_paths_disappear():
    text = (f"{PROJECT_ROOT}/harness/engine/worker.py:12 {sys.prefix}/bin/python "
            "/home/runner/.cache/flagsweep/venvs/2026-11-01/bin/python3.11 /root/x.py "
            "/tmp/flagsweep-repro-abc/repro.py https://github.com/pytorch/pytorch/blob/main/x.py")
    clean = scrub(text)
    assert machine_paths(clean) == []
    assert "harness/engine/worker.py:12" in clean and "python3.11" in clean
    assert "https://github.com/pytorch/pytorch/blob/main/x.py" in clean   # not a machine path


def test_issue_bodies_and_reports_carry_no_machine_path(tracebacks, fake_github: FakeGitHub, tmp_path: Path):
    """Even an outcome stored with raw paths (an older store) is scrubbed where text leaves for GitHub."""
    from bot.report import report

    etype, message, tb = tracebacks[0]
    path_message = f"{message} (while loading {sys.prefix}/lib/python3.11/site-packages/transformers/x.py)"
    crashed = Outcome(model="BertModel", config="capture_scalar_outputs", status="error", stratum="encoder_decoder",
                      error_type=etype, error_message=path_message, signature=signature(etype, message, tb),
                      torch_frame=None, traceback=tb, attempts=3)
    settings = Settings(state_path=tmp_path / "state.sqlite", github=fake_github.settings(retry_backoff=0.0),
                        verify=VerifySettings(enabled=False),
                        issues=IssueSettings(min_models=1))   # a confirmed one-model crash, filed at once
    conn = db.connect(settings.state_path)
    run_id = store_run(conn, [ok("BertModel", "baseline", 2, stratum="encoder_decoder"), crashed],
                       kind="nightly", nightly="2026-11-01")
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    issues = fake_github.state.issues(fake_github.repo)
    tracking = [i for i in issues if "crashes" in i.title and "summary" not in i.title]
    assert tracking and "transformers/models/auto/configuration_auto.py" in tracking[0].body
    for issue in issues:
        assert machine_paths(issue.title + issue.body) == [], issue.title
    ctx = report.build_context(conn, run_id)
    for text in (report.render_html(ctx), report.render_md(ctx)):
        assert machine_paths(text) == []
