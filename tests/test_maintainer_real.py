"""The maintainer's script on a real crash: MimiModel under capture_scalar_outputs (PendingUnbackedSymbolNotFound
on torch 2.13). One real sweep of the model into a real SQLite file, then the pipeline's verify step (shrink off;
the session's `real_mimi_crash`, tests/real_mimi_crash.py, shared with tests/test_isolate_real.py):
the verdict carries the maintainer's script, judged in fresh interpreters (it runs with torch.compile made the
identity, fails compiled with the run's signature) and its dynamic ablation; the script, run on its own as a file
(`python repro.py`), fails with the same exception; a second verify step and a publish start no process; the dry-run
issue embeds it. About nine real runs of the model (~20 s each on an idle core): the eager run through the driver is
the verify step's own (the session fixture keeps its driver runs)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.github import publish
from bot.pipeline import steps
from state import db
from tests.helpers_verify import ProcessStarts


@pytest.fixture
def verified(real_mimi_crash):
    """(settings, run id, the group's run verdict) after the session's real sweep and verify step."""
    (group, rv), = real_mimi_crash.found.items()
    return real_mimi_crash.settings, real_mimi_crash.run_id, rv


@pytest.mark.compile
def test_the_real_crash_gets_a_short_maintainers_script_that_fails_the_same_way(verified, real_mimi_crash, tmp_path):
    _, _, rv = verified
    v, m = rv.verdict, rv.verdict.maintainer
    assert v.status == "confirmed" and v.signature.startswith("PendingUnbackedSymbolNotFound"), v.reason
    assert m is not None and m.status == "confirmed" and m.backend == "eager", m.reason
    assert len(m.script.splitlines()) <= 40 and "torch._dynamo.config.capture_scalar_outputs = True" in m.script
    assert [r.dynamic for r in m.runs] == ["None", "False", "True"] and m.runs[0].result == "fails"
    assert all(r.result in ("fails", "passes", "other") for r in m.runs)
    # The same script through the driver: the identity for torch.compile runs, compiled fails the same way (the
    # verify step's own driver runs, in fresh interpreters: the script, its mode, its result).
    assert [(script, mode) for script, mode, _ in real_mimi_crash.drives] == [
        (m.script, "eager"), (m.script, "None"), (m.script, "False"), (m.script, "True")]
    eager = real_mimi_crash.drives[0][2]
    assert eager.status == "ok" and eager.returncode == 0, eager
    # Run on its own as a file, as a maintainer does: it fails with the same exception (and its message).
    path = tmp_path / "repro.py"
    path.write_text(m.script)
    proc = subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode != 0 and "PendingUnbackedSymbolNotFound: Pending unbacked symbols" in proc.stderr, \
        proc.stderr[-2000:]


@pytest.mark.compile
def test_the_dynamic_ablation_is_cached_and_published_without_running_anything(verified, tmp_path, monkeypatch):
    settings, run_id, rv = verified
    conn = db.connect(settings.state_path)
    starts = ProcessStarts(monkeypatch)
    again = steps.verify(conn, run_id, settings)
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(tmp_path / "out"),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(tmp_path / "out")))
    assert starts.seen == []                                       # a quiet re-publish runs 0 scripts
    assert next(iter(again.values())).verdict.maintainer == rv.verdict.maintainer
    # One model, no flake re-runs: the evidence rule holds it as watching; the dry run writes its would-be body.
    body = next(p.read_text() for p in Path(tmp_path / "out" / "pending").iterdir() if p.name.startswith("watching-t"))
    assert "```python\n" + rv.verdict.maintainer.script.rstrip("\n") + "\n```" in body
    said = {"fails": "fails", "passes": "passes", "other": "other signature"}
    row = " | ".join(said[r.result] for r in rv.verdict.maintainer.runs)
    assert f"| `eager` | {row} |" in body and "TORCH_TRACE=./trace python repro.py" in body
    conn.close()
